# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text views of ``ansible_facts.rdma`` (from ``rdma.k8s_node.rdma_facts``): the device table and the topology matrix.

Shared by the filters of the same names (plugins/filter/rdma_summary.py, documented in their sidecar files) and the
audit (plugins/plugin_utils/_audit.py), whose report summary draws the matrix with :func:`topo_matrix` (the filter's
input checks are for a filter's input, not for one host's facts of another shape).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

_UNKNOWN = "?"
_TOPO_LEGEND = (
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  ?    = Unknown: a NUMA node is not reported by the kernel (numa_node -1) on a multi-node machine",
)


def _bdf_key(text):
    """PCI addresses in numeric order (``0000:1b:00.0`` before ``0000:43:00.0`` before ``0000:9d:00.0``)."""
    try:
        domain, bus, rest = str(text).split(":")
        device, function = rest.split(".")
        return (0, int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return (1, 0, 0, 0, 0)


def _facts(rdma, filter_name):
    if not isinstance(rdma, Mapping):
        raise AnsibleFilterError("%s expects ansible_facts.rdma (a dict), got %s" % (filter_name, type(rdma).__name__))
    if "ansible_facts" in rdma and isinstance(rdma["ansible_facts"], Mapping):
        rdma = rdma["ansible_facts"].get("rdma", rdma)  # the whole registered module result
    missing = [key for key in ("devices", "gpus", "gpu_nic_affinity") if key not in rdma]
    if missing:
        raise AnsibleFilterError("%s: input is not ansible_facts.rdma, it lacks %s" % (filter_name, ", ".join(missing)))
    return rdma


def _text(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _ports_text(ports):
    """``1:InfiniBand/ACTIVE/LinkUp`` per port, comma separated; ``-`` without ports."""
    texts = []
    for port in ports:
        texts.append("%s:%s/%s/%s" % (port.get("port"), _text(port.get("link_layer")), _text(port.get("state")),
                                      _text(port.get("phys_state"))))
    return ",".join(texts) or "-"


def _table(header, rows, tabs):
    if tabs:
        return "\n".join("\t".join(row) for row in [header] + rows)
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    lines = []
    for row in [header] + rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)


def rdma_device_table(rdma, include_vfs=True, tabs=False):
    """One line per RDMA device (and, indented, per VF of a PF): PCI, NUMA, driver, netdevs, ports, GUIDs, VFs."""
    rdma = _facts(rdma, "rdma_device_table")
    header = ["DEVICE", "PCI", "NUMA", "DRIVER", "NETDEV", "MTU", "PORTS", "NODE GUID", "PORT GUID", "VFS"]
    mtu = rdma.get("mtu") or {}
    by_name = dict((d.get("name"), d) for d in rdma["devices"])
    rows = []
    for dev in rdma["devices"]:
        if dev.get("is_vf") and include_vfs and dev.get("pf"):
            continue  # shown below its PF
        ports = dev.get("ports") or []
        sriov = dev.get("sriov")
        netdevs = dev.get("netdevs") or []
        rows.append([
            _text(dev.get("name")),
            _text(dev.get("pci_address")),
            _text(dev.get("numa_node")),
            _text(dev.get("driver")),
            ",".join(netdevs) or "-",
            ",".join(_text(mtu.get(name)) for name in netdevs) or "-",
            _ports_text(ports),
            _text(dev.get("node_guid")),
            ",".join(_text(p.get("port_guid")) for p in ports) or "-",
            "%s/%s" % (_text(sriov.get("numvfs")), _text(sriov.get("totalvfs"))) if sriov else "-",
        ])
        if not include_vfs:
            continue
        for vf in dev.get("vfs") or []:
            vf_dev = by_name.get(vf.get("name")) or {}
            vf_ports = vf_dev.get("ports") or []
            vf_netdevs = vf_dev.get("netdevs") or []
            rows.append([
                "  vf%s %s" % (vf.get("index"), _text(vf.get("name"))),
                _text(vf.get("pci_address")),
                _text(vf_dev.get("numa_node", dev.get("numa_node"))),
                _text(vf.get("driver")),
                ",".join(vf_netdevs) or "-",
                ",".join(_text(mtu.get(name)) for name in vf_netdevs) or "-",
                _ports_text(vf_ports),
                _text(vf.get("node_guid")),
                _text(vf.get("port_guid")),
                "-",
            ])
    return _table(header, rows, tabs)


def rdma_topo_matrix(rdma, include_vfs=False, tabs=False, legend=True):
    """The GPU x NIC part of ``nvidia-smi topo -m``: GPU rows, NIC columns, CPU and NUMA affinity, legends."""
    rdma = _facts(rdma, "rdma_topo_matrix")
    return topo_matrix(rdma["gpus"], rdma["devices"], rdma["gpu_nic_affinity"], include_vfs, tabs, legend)


def listed(value):
    """``value`` when it is a list (or tuple), else an empty list: a view's read of facts of another shape."""
    return value if isinstance(value, (list, tuple)) else []


def _lookup(mapping, key):
    """``mapping[key]`` or None: also for a key that cannot be one (unhashable)."""
    try:
        return mapping.get(key)
    except TypeError:
        return None


def topo_matrix(gpus, devices, affinity, include_vfs=False, tabs=False, legend=True):
    """:func:`rdma_topo_matrix` of a host's ``gpus``, ``devices`` and ``gpu_nic_affinity`` (the audit's summary).

    A view, not a judgement: it never raises on values of another shape.  A value that is not a list (``devices``,
    ``gpus``) or a mapping (``gpu_nic_affinity``, a GPU's row) reads as empty (a GPU without a row is a row of ``?``),
    a GPU or NIC that is not a mapping is left out, a class or CPU list that is not a string is shown as its text."""
    gpus = sorted((gpu for gpu in listed(gpus) if isinstance(gpu, Mapping)),
                  key=lambda gpu: _bdf_key(gpu.get("pci_address")))
    affinity = affinity if isinstance(affinity, Mapping) else {}
    nics = [dev for dev in listed(devices)
            if isinstance(dev, Mapping) and dev.get("pci_address") and (include_vfs or not dev.get("is_vf"))]
    nic_labels = ["NIC%d" % i for i in range(len(nics))]
    header = [""] + nic_labels + ["CPU Affinity", "NUMA Affinity"]
    rows = []
    for index, gpu in enumerate(gpus):
        cells = _lookup(affinity, gpu.get("pci_address"))
        cells = cells if isinstance(cells, Mapping) else {}
        row = ["GPU%d" % index]
        for nic in nics:
            cell = _lookup(cells, nic.get("name"))
            row.append(str(cell) if cell else _UNKNOWN)
        row.append(str(gpu.get("local_cpulist") or "N/A"))
        row.append("N/A" if gpu.get("numa_node") is None else str(gpu.get("numa_node")))
        rows.append(row)
    out = [_table(header, rows, tabs)]
    if legend:
        out.append("")
        out.append("Legend:")
        out.append("")
        out.extend(_TOPO_LEGEND)
        if gpus:
            out.extend(["", "GPU Legend:", ""])
            out.extend("  GPU%d: %s" % (i, gpu.get("pci_address")) for i, gpu in enumerate(gpus))
        if nics:
            out.extend(["", "NIC Legend:", ""])
            out.extend("  %s: %s" % (label, nic.get("name")) for label, nic in zip(nic_labels, nics))
    return "\n".join(out)
