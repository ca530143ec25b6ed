#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pcie_tuning
short_description: Set the PCIe Max_Read_Request_Size of the RDMA NICs, live and at every boot
version_added: 0.2.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Sets Max_Read_Request_Size (the Device Control register of the PCI Express capability, C(CAP_EXP+8.w) bits 14:12)
    of each RDMA NIC's physical function. NVIDIA recommends 4096 bytes for ConnectX NICs doing GPUDirect RDMA; the
    platform's default is often 512.
  - The live value is written through the function's C(config) file in sysfs (one 16-bit write, read back). The
    register does not survive a reboot, so a systemd unit the module owns sets it again at every boot with C(setpci),
    ordered before the RDMA stack (C(openibd), C(rdma-hw.target)), the SR-IOV unit and the kubelet.
  - Virtual functions are left alone (their field is reserved; the physical function's setting applies).
  - All or nothing - when a write fails or does not stick, the functions already changed and the unit file are put back.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  max_read_request:
    description: Max_Read_Request_Size in bytes.
    type: int
    required: true
    choices: [128, 256, 512, 1024, 2048, 4096]
  devices:
    description:
      - PCI addresses (V(0000:18:00.0)) or RDMA device names (V(mlx5_0)) of the functions to set; empty means every
        RDMA NIC's physical function on the node.
    type: list
    elements: str
    default: []
  boot_unit:
    description:
      - Install (or update) the boot unit that sets the value at every boot. It needs C(setpci) (pciutils) on the node.
      - V(false) sets the live value only; it is lost at the next reboot.
    type: bool
    default: true
  unit:
    description: The systemd unit file the module owns.
    type: path
    default: /etc/systemd/system/rdma-k8s-node-pcie.service
  backup:
    description: Keep a timestamped copy of the previous unit file.
    type: bool
    default: false
notes:
  - Writing C(config) needs C(CAP_SYS_ADMIN) (root on the node, a privileged pod with C(/sys) of the host).
  - The unit is written, not enabled - the C(pcie_tuning) role runs C(systemctl daemon-reload) and enables it.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - name: The layer, its sources and its audit
    description: docs/pcie.md in the collection.
    link: https://github.com/rdma-k8s-node/rdma.k8s_node/blob/main/docs/pcie.md
"""

EXAMPLES = r"""
- name: 4096-byte read requests on every RDMA NIC, now and at every boot
  rdma.k8s_node.pcie_tuning:
    max_read_request: 4096
  register: pcie

- name: Only two NICs, live only
  rdma.k8s_node.pcie_tuning:
    max_read_request: 4096
    devices: [mlx5_0, "0000:29:00.0"]
    boot_unit: false
"""

RETURN = r"""
changed:
  description: Whether a register or the unit file was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: The planned steps, applied exactly (C(set_max_read_request) per function, C(write_unit)).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_max_read_request", "target": "0000:18:00.0", "before": 512, "after": 4096, "cap": "0x60",
            "devctl": "0x5937"},
           {"action": "write_unit", "target": "/etc/systemd/system/rdma-k8s-node-pcie.service",
            "values": {"0000:18:00.0": 4096}}]
reboot_required:
  description: Always false; the value applies at once.
  returned: always
  type: bool
restart_required:
  description: Always empty.
  returned: always
  type: list
  elements: str
unit_changed:
  description: Whether the unit file changed (the role then reloads systemd and enables the unit).
  returned: always
  type: bool
observed:
  description: What the module read - per function its RDMA devices, C(max_read_request), C(devctl) and C(cap) (or C(error)), the unit's values.
  returned: always
  type: dict
  sample: {"devices": {"0000:18:00.0": {"rdma_devices": ["mlx5_0"], "max_read_request": 512, "devctl": "0x2937",
                                        "cap": "0x60"}},
           "unit": {"path": "/etc/systemd/system/rdma-k8s-node-pcie.service", "exists": false, "values": {}},
           "setpci": "/usr/bin/setpci"}
diff:
  description: Before and after of the unit file, and of each register (with C(--diff)).
  returned: when diff mode is on and something changes
  type: list
  elements: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)); the only file this module edits is the boot unit
      (O(unit)), and its copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, only registers changed, or a new
      unit).
  returned: always
  type: dict
  sample: {"/etc/systemd/system/rdma-k8s-node-pcie.service": "/etc/systemd/system/rdma-k8s-node-pcie.service.12345.2026-01-01@10:00:00~"}
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import plan as _plan

# a PCI address without its domain (18:00.0), as sriov_vfs also takes it
_UNIT = re.compile(r"^/etc/systemd/system/[A-Za-z0-9:_.@-]+\.service$")


def run_module(module):
    params = module.params
    if not _UNIT.match(params["unit"]):
        raise InputError("unit must be a .service file directly in /etc/systemd/system, got %r" % (params["unit"],))
    host = HostRoot(params["host_root"])
    pfs = _observe.rdma_pfs(host)
    devices = _observe.resolve_devices(params["devices"], pfs) if params["devices"] else list(pfs)
    observed = _observe.observe(host, unit=params["unit"], devices=devices)
    planned = _plan.plan(params["max_read_request"], devices, observed, boot_unit=params["boot_unit"])
    result = Result()
    result.observed = dict(observed, unit=dict((k, v) for k, v in observed["unit"].items() if k != "text"))
    result.extra["backup_files"] = {}
    if planned["problems"]:
        raise HostReadError("nothing was changed: %s" % "; ".join(planned["problems"]),
                            {"problems": planned["problems"]}, dict(result.as_dict(with_diff=False), changed=False))
    unit_plan = _apply.file_plan(host, planned)
    result.add_plan(planned["actions"], [unit_plan] if unit_plan is not None else [],
                    label=lambda step: "%s Max_Read_Request_Size" % step["target"], with_diff=module._diff)
    result.extra["unit_changed"] = unit_plan is not None and unit_plan.changed
    if not devices:
        module.warn("no RDMA NIC on this node: nothing to set")
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    result.extra["backup_files"] = _apply.apply(host, planned, backup=params["backup"])
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            max_read_request=dict(type="int", required=True, choices=[128, 256, 512, 1024, 2048, 4096]),
            devices=dict(type="list", elements="str", default=[]),
            boot_unit=dict(type="bool", default=True),
            unit=dict(type="path", default=_observe.UNIT),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
