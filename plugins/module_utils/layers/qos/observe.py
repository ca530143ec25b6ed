# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` layer's observer: written once, used by the module and by ``rdma_facts`` (``layers.qos``).

The RoCE ports are the Ethernet ports of the RDMA NICs' physical functions (``/sys/class/infiniband``, as the
``pcie`` layer finds them), each with its netdev (``gid_attrs/ndevs/0``, else the function's only netdev).  Per port:

* trust, DSCP -> priority entries and PFC from the tool (``mlnx_qos -i IF``, or ``dcb`` app/pfc show);
* ECN per priority ``/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>`` and the CNP marking
  ``ecn/roce_np/cnp_dscp``, ``cnp_802p_prio`` (MLNX/DOCA-OFED mlx5 only; absent = None);
* the RDMA-CM default ToS ``/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`` (the group exists only
  after ``mkdir``; without it the kernel's default, 0, applies);
* the OFED mlx5_ib traffic class ``/sys/class/infiniband/<dev>/tc/<port>/traffic_class`` (empty = unset, -1);
* the boot script and unit the layer installs.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie.observe import IB_CLASS, PCI_DEVICES, rdma_pfs
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import tools

NET_CLASS = "/sys/class/net"
CONFIGFS = "/sys/kernel/config"
CMA = CONFIGFS + "/rdma_cm"
UNIT = "/etc/systemd/system/rdma-k8s-node-roce-qos.service"
SCRIPT = "/etc/rdma-k8s-node/roce-qos.sh"
ECN_PROTOCOLS = ("roce_np", "roce_rp")
CNP_ATTRS = ("cnp_dscp", "cnp_802p_prio")
_TCLASS = re.compile(r"^Global tclass=(-?\d+)$")


def _netdev_of(host, device, port, bdf):
    """The netdev of a RoCE port: its GID table's netdev, else the function's only netdev."""
    name = host.try_attr("%s/%s/ports/%s/gid_attrs/ndevs/0" % (IB_CLASS, device, port))
    if name:
        return name
    netdevs = sorted(host.listdir(PCI_DEVICES + "/" + bdf + "/net"))
    return netdevs[0] if len(netdevs) == 1 else None


def roce_ports(host):
    """``({ifname: {"rdma_device", "port", "pci"}}, [InfiniBand "dev/port"], [problems])`` of the RDMA PFs."""
    ports, ib_ports, problems = {}, [], []
    for bdf, devices in rdma_pfs(host).items():
        for device in devices:
            for port in sorted(host.listdir(IB_CLASS + "/" + device + "/ports")):
                layer = host.read_attr("%s/%s/ports/%s/link_layer" % (IB_CLASS, device, port))
                if layer != "Ethernet":
                    ib_ports.append("%s/%s" % (device, port))
                    continue
                ifname = _netdev_of(host, device, port, bdf)
                if ifname is None:
                    problems.append("%s port %s (%s): no netdev found" % (device, port, bdf))
                    continue
                ports[ifname] = {"rdma_device": device, "port": int(port), "pci": bdf}
    return dict(sorted(ports.items())), ib_ports, problems


def find_tool(host, commands):
    """``{"ofed", "paths": {"mlnx_qos": path or None, "dcb": ...}}``: whether the running mlx5_core is MLNX/DOCA-OFED's
    build (it has a ``version``), and where each tool is (:func:`tools.choose` picks one)."""
    paths = dict((name, commands.module.get_bin_path(name) if commands is not None else None) for name in tools.TOOLS)
    return {"ofed": host.exists("/sys/module/mlx5_core/version"), "paths": paths}


def read_tool(commands, tool, ifname):
    """``{"trust", "dscp2prio", "pfc"}`` of one port from the tool, or ``{"error": ...}``."""
    if not tool.get("path"):
        return {"error": "%s is not installed on the node" % (tool.get("name") or "neither mlnx_qos nor dcb")}
    outputs = []
    for argv in tools.show_argv(tool["name"], tool["path"], ifname):
        rc, out, err = commands.run_kernel(argv)
        if rc != 0:
            reason = (err or out or "").strip()[-300:]
            return {"error": "%s failed (rc=%s): %s" % (" ".join([tool["name"]] + argv[1:]), rc, reason)}
        outputs.append(out)
    try:
        if tool["name"] == "mlnx_qos":
            parsed = tools.parse_mlnx_qos(outputs[0])
            return {"trust": parsed["trust"], "dscp2prio": parsed["dscp2prio"], "pfc": parsed["pfc"]}
        mapping = tools.parse_dcb_app(outputs[0])
        return {"trust": "dscp" if mapping else "pcp", "dscp2prio": mapping, "pfc": tools.parse_dcb_pfc(outputs[1])}
    except ParseError as exc:
        return {"error": exc.msg}


def read_sysfs(host, ifname, device, port):
    """The sysfs and configfs values of one port (each None where the file does not exist)."""
    base = NET_CLASS + "/" + ifname + "/ecn"
    ecn = {}
    for proto in ECN_PROTOCOLS:
        if host.isdir(base + "/" + proto + "/enable"):
            ecn[proto] = [host.read_int_strict("%s/%s/enable/%d" % (base, proto, prio)) for prio in range(8)]
        else:
            ecn[proto] = None
    cnp = None
    if host.exists(base + "/roce_np/cnp_dscp"):
        cnp = dict((attr, host.read_int_strict(base + "/roce_np/" + attr)) for attr in CNP_ATTRS)
    group = "%s/%s" % (CMA, device)
    tos = host.read_int_strict("%s/ports/%d/default_roce_tos" % (group, port)) if host.isdir(group) else None
    tclass_path = "%s/%s/tc/%d/traffic_class" % (IB_CLASS, device, port)
    tclass = None
    if host.exists(tclass_path):
        text = (host.read_text(tclass_path) or "").strip()
        match = _TCLASS.match(text.splitlines()[0]) if text else None
        tclass = int(match.group(1)) if match else -1
    return {"ecn": ecn, "cnp": cnp, "roce_tos": tos, "roce_tos_group": host.isdir(group), "traffic_class": tclass}


def _file(host, path):
    try:
        text = host.read_text(path)
    except HostReadError as exc:
        return {"path": path, "exists": None, "text": None, "error": exc.msg}
    return {"path": path, "exists": text is not None, "text": text}


def observe(host, commands, tool="auto", interfaces=None, unit=UNIT, script=SCRIPT):
    """The layer's observed state: ``{"tool", "configfs", "ports": {ifname: {...}}, "ib_ports", "problems", "unit",
    "script"}``; ``interfaces`` limits the ports read (unknown names are left to the planner)."""
    try:
        ports, ib_ports, problems = roce_ports(host)
    except HostReadError as exc:
        return {"tool": find_tool(host, None), "used": None, "configfs": None, "ports": {}, "ib_ports": [], "problems": [exc.msg],
                "unit": _file(host, unit), "script": _file(host, script)}
    found = find_tool(host, commands)
    chosen = tools.choose(found, tool)
    observed = {}
    for ifname, item in ports.items():
        if interfaces and ifname not in interfaces:
            continue
        entry = dict(item)
        if commands is not None:
            entry.update(read_tool(commands, chosen, ifname))
        try:
            entry.update(read_sysfs(host, ifname, item["rdma_device"], item["port"]))
        except HostReadError as exc:
            entry["sysfs_error"] = exc.msg
        observed[ifname] = entry
    return {"tool": found, "used": chosen["name"], "configfs": {"path": CMA, "exists": host.isdir(CMA), "mounted": host.isdir(CONFIGFS)},
            "ports": observed, "ib_ports": ib_ports, "problems": problems,
            "unit": _file(host, unit), "script": _file(host, script)}


def facts(host, commands=None):
    """``rdma_facts``' ``layers.qos``: every RoCE port's live QoS state with the tool the module would choose."""
    return observe(host, commands)
