# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``health`` layer's observer (``rdma_facts``' ``layers.health``): raw values, read through HostRoot only.

What it reads, and the kernel code that serves it:

* GPUs, RDMA devices and the GPU-NIC PCIe distance: the discovery ``rdma_facts`` itself uses
  (``_rdma_discovery``: NVIDIA vendor 0x10de with class 0x0300/0x0302; ``gpu_nic_affinity``'s classes);
* for every GPU, every RDMA physical function and every bridge on their paths to the root port:
  ``current_link_speed``, ``current_link_width``, ``max_link_speed``, ``max_link_width``
  (drivers/pci/pci-sysfs.c: ``pci_speed_string()`` "32.0 GT/s PCIe" / "Unknown", widths "%u"), kept as text;
* for every bridge on those paths, its ``config``: the PCI Express port type (Flags, ``PCI_EXP_FLAGS_TYPE``) and the
  ACS extended capability's Capability and Control registers (include/uapi/linux/pci_regs.h ``PCI_EXT_CAP_ID_ACS``,
  ``PCI_ACS_CAP``, ``PCI_ACS_CTRL``);
* each GPU's nearest RDMA NIC (best distance class, then the name, as the topology check picks it) and the bridges
  between them: the ports below their lowest common ancestor, plus that ancestor when it is a root or downstream port;
* each RDMA physical function's ``fw_ver``, ``board_id``, ``hca_type`` (else the PCI vendor:device), and per port
  ``state``, ``phys_state``, ``rate``, ``link_layer`` and the PMA error counters ``counters/<name>``
  (drivers/infiniband/core/sysfs.c ``PORT_PMA_ATTR``, ``"%u\\n"``; old kernels print "N/A (no PMA)").

Nothing is judged here: unreadable values are None with the reason in the item's ``problems``, odd text is kept as
it is, and :mod:`.judge` decides.  Virtual functions are left out (they share their PF's port and link).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import SYS_IB, SYS_PCI, _Discovery
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config

LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
#: the PMA PortCounters error counters the layer reads (names of drivers/infiniband/core/sysfs.c)
COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "excessive_buffer_overrun_errors")
#: PCI Express Flags (capability + 2): ``PCI_EXP_FLAGS_TYPE`` bits 7:4
EXP_FLAGS = 2
PORT_TYPES = {0x0: "endpoint", 0x1: "legacy endpoint", 0x4: "root port", 0x5: "upstream port",
              0x6: "downstream port", 0x7: "PCI Express to PCI bridge", 0x8: "PCI to PCI Express bridge",
              0x9: "root complex integrated endpoint", 0xA: "root complex event collector"}


def _attr(host, path, problems):
    try:
        return host.read_attr(path)
    except HostReadError as exc:
        problems.append(exc.msg)
        return None


def read_link(host, bdf):
    """``{current_link_speed, current_link_width, max_link_speed, max_link_width, problems}`` as text (None: absent
    or unreadable)."""
    problems = []
    item = dict((name, _attr(host, "%s/%s/%s" % (SYS_PCI, bdf, name), problems)) for name in LINK_FILES)
    item["problems"] = problems
    return item


def _word(data, offset):
    if offset + 2 > len(data):
        raise ParseError("configuration space too short: %d bytes, need offset 0x%x" % (len(data), offset + 2))
    return data[offset] | (data[offset + 1] << 8)


def read_bridge(host, bdf):
    """``{port_type, acs_cap, acs_ctrl, problems}`` of a bridge from its ``config``: ``port_type`` the PCIe
    Flags' type (4 root port, 5 upstream, 6 downstream), ``acs_cap``/``acs_ctrl`` the ACS registers as ``0x%04x``
    (both None when the port has no ACS capability; ``acs`` False then)."""
    item = {"port_type": None, "acs": None, "acs_cap": None, "acs_ctrl": None, "problems": []}
    path = "%s/%s/config" % (SYS_PCI, bdf)
    try:
        data = host.read_bytes(path)
        if data is None:
            item["problems"].append("%s is missing" % path)
            return item
        if len(data) <= 0x40:
            item["problems"].append("%s: only the %d-byte header is readable (rdma_facts must run as root)"
                                    % (path, len(data)))
            return item
        cap = config.find_capability(data)
        if cap is not None:
            item["port_type"] = (_word(data, cap + EXP_FLAGS) >> 4) & 0xF
        acs = config.find_ext_capability(data, config.EXT_CAP_ID_ACS)
    except (HostReadError, ParseError) as exc:
        item["problems"].append("%s: %s" % (path, exc.msg))
        return item
    item["acs"] = acs is not None
    if acs is not None:
        try:
            item["acs_cap"] = "0x%04x" % _word(data, acs + config.ACS_CAP)
            item["acs_ctrl"] = "0x%04x" % _word(data, acs + config.ACS_CTRL)
        except ParseError as exc:
            item["acs"] = None
            item["problems"].append("%s: %s" % (path, exc.msg))
    return item


def _ports(host, ib_path, ports):
    out = []
    for port in ports:
        base = "%s/ports/%s" % (ib_path, port["port"])
        problems = []
        counters = None
        try:
            present = host.listdir(base + "/counters")
        except HostReadError as exc:
            present = []
            problems.append(exc.msg)
            counters = {}
        if present:
            counters = dict((name, _attr(host, "%s/counters/%s" % (base, name), problems) if name in present else None)
                            for name in COUNTERS)
        out.append({"port": port["port"], "link_layer": port["link_layer"], "state": port["state"],
                    "phys_state": port["phys_state"], "rate": port["rate"], "counters": counters, "problems": problems})
    return out


def nearest_nic(row, nics):
    """The nearest NIC name of one ``gpu_nic_affinity`` row among ``nics``: best class, then the name; None if none."""
    known = [(topo.LEVELS.index(cls) if cls in topo.LEVELS else len(topo.LEVELS), name)
             for name, cls in row.items() if name in nics]
    return min(known)[1] if known else None


def between(pos_a, pos_b):
    """``(lowest common ancestor or None, [bridges below it on either path])`` of two PCI positions."""
    common = 0
    if pos_a["host_bridge"] == pos_b["host_bridge"]:
        for bdf_a, bdf_b in zip(pos_a["bridges"], pos_b["bridges"]):
            if bdf_a != bdf_b:
                break
            common += 1
    lca = pos_a["bridges"][common - 1] if common else None
    return lca, list(pos_a["bridges"][common:]) + list(pos_b["bridges"][common:])


def facts(host, discovery=None):
    """``layers.health``: ``{gpus, nics, links, paths, bridges, pairs}`` (see the module docstring).

    ``discovery``: the one rdma_facts' gather() used (``_rdma_discovery.discover``), whose devices, GPUs and
    GPU-NIC classes this reuses instead of reading them again; without it the observer makes its own."""
    disc = discovery if discovery is not None else _Discovery(host)
    found = disc.found()
    devices, gpus, matrix = found["devices"], found["gpus"], found["gpu_nic_affinity"]
    nics, positions = [], {}
    for device in devices:
        if device["is_vf"]:
            continue
        ib_path = host.follow(SYS_IB + "/" + device["name"])
        problems = []
        hca_type = _attr(host, ib_path + "/hca_type", problems)
        pci_id = None
        pci = disc.pci.get(device["pci_address"]) if device["pci_address"] else None
        if pci is not None and pci.path:
            positions[device["pci_address"]] = pci.position
            vendor = _attr(host, pci.path + "/vendor", problems)
            product = _attr(host, pci.path + "/device", problems)
            pci_id = "%s:%s" % (vendor, product) if vendor and product else None
        nics.append({"name": device["name"], "pci_address": device["pci_address"], "fw_ver": device["fw_ver"],
                     "board_id": device["board_id"], "hca_type": hca_type, "pci_id": pci_id,
                     "ports": _ports(host, ib_path, device["ports"]), "problems": problems})
    for gpu in gpus:
        positions[gpu["pci_address"]] = disc.pci[gpu["pci_address"]].position
    paths = dict((bdf, list(pos["bridges"]) if pos else None) for bdf, pos in positions.items())
    links = {}
    bridges = {}
    for bdf in sorted(paths, key=topo.bdf_key):
        for item in [bdf] + (paths[bdf] or []):
            if item not in links:
                links[item] = read_link(host, item)
        for bridge in paths[bdf] or []:
            if bridge not in bridges:
                bridges[bridge] = read_bridge(host, bridge)
    pf_names = dict((nic["name"], nic["pci_address"]) for nic in nics if nic["pci_address"])
    pairs = []
    for gpu in gpus:
        nic = nearest_nic(matrix.get(gpu["pci_address"]) or {}, pf_names)
        gpu_pos, nic_pos = positions.get(gpu["pci_address"]), positions.get(pf_names.get(nic))
        if nic is None or gpu_pos is None or nic_pos is None:
            continue
        lca, below = between(gpu_pos, nic_pos)
        if lca is not None and bridges.get(lca, {}).get("port_type") in (0x4, 0x6):
            below.append(lca)
        pairs.append({"gpu": gpu["pci_address"], "nic": nic, "nic_pci": pf_names[nic],
                      "class": (matrix.get(gpu["pci_address"]) or {}).get(nic), "bridges": sorted(below, key=topo.bdf_key)})
    return {"gpus": [{"pci_address": gpu["pci_address"], "device": gpu["device"]} for gpu in gpus],
            "nics": nics, "paths": paths, "links": links, "bridges": bridges, "pairs": pairs}
