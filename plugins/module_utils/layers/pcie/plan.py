# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie`` layer's planner, pure: desired + observed -> the actions, the boot unit's text, the problems.

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts:
a plan with work is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config

HEADER = "# Managed by rdma.k8s_node.pcie_tuning: change the role's variables, not this file.\n"


def render_unit(setpci, sizes):
    """The boot unit: one setpci call per function, before the RDMA consumers start.

    Config space is there as soon as the kernel enumerated the bus (no driver needed), so the unit only orders itself
    before what uses the NICs: the RDMA stack (openibd, rdma-hw.target), the SR-IOV unit and the kubelet.
    """
    lines = [HEADER,
             "[Unit]\n",
             "Description=rdma.k8s_node: PCIe Max_Read_Request_Size of the RDMA NICs\n",
             "DefaultDependencies=no\n",
             "After=local-fs.target\n",
             "Before=openibd.service rdma-hw.target rdma-k8s-node-sriov.service kubelet.service\n",
             "Conflicts=shutdown.target\n",
             "Before=shutdown.target\n",
             "\n[Service]\n",
             "Type=oneshot\n",
             "RemainAfterExit=yes\n"]
    for bdf in sorted(sizes):
        lines.append("ExecStart=%s -s %s CAP_EXP+8.w=%s\n" % (setpci, bdf, config.setpci_value(sizes[bdf])))
    lines.append("\n[Install]\nWantedBy=multi-user.target\n")
    return "".join(lines)


def plan(desired_size, devices, observed, boot_unit=True, setpci=None):
    """``{"actions", "unit", "problems"}`` for ``devices`` (PCI addresses) at ``desired_size`` bytes.

    ``observed`` is :func:`observe.observe`'s result.  ``actions``: ``set_max_read_request`` per function whose live
    value differs (with ``before``/``after`` and the new Device Control), then ``write_unit`` when the boot unit's
    text differs (``unit`` holds the wanted text; None when no unit is wanted).  ``problems``: functions that cannot
    be read or are not PCI Express, and a missing setpci when the unit is wanted: the module refuses on any.
    """
    actions, problems, sizes = [], [], {}
    for bdf in sorted(devices):
        item = (observed.get("devices") or {}).get(bdf) or {"error": "not an RDMA NIC's physical function here"}
        if "error" in item:
            problems.append("%s: %s" % (bdf, item["error"]))
            continue
        sizes[bdf] = desired_size
        if item["max_read_request"] != desired_size:
            devctl = int(item["devctl"], 16)
            actions.append({"action": "set_max_read_request", "target": bdf, "before": item["max_read_request"],
                            "after": desired_size, "cap": item["cap"],
                            "devctl": "0x%04x" % config.with_size(devctl, desired_size)})
    unit = None
    if boot_unit:
        tool = setpci or observed.get("setpci")
        if not tool:
            problems.append("setpci (pciutils) is not installed on the node: the boot unit needs it (install pciutils, or "
                            "boot_unit=false to set the live value only, lost at the next reboot)")
        else:
            unit = render_unit(tool, sizes)
            observed_unit = observed.get("unit") or {}
            if observed_unit.get("text") != unit:
                actions.append({"action": "write_unit", "target": observed_unit.get("path"), "values": dict(sizes)})
    return {"actions": actions, "unit": unit, "problems": problems}
