"""The control interface: one JSON command in, one JSON reply out.

Served at MOUNT/.hwsim/ctl by the FUSE layer and used by the shims, so the shims stay stdlib-only and never
touch the state directly. Replies are {"ok": true, "result": ...} or {"ok": false, "errno": "EBUSY", "error": ...}.
"""

from __future__ import annotations

import errno
import json
from typing import Any, Callable

from . import fmt, nvconfig
from .build import proc_modules
from .state import BLOCKING_DELAYS, IbDev, NetDev, Node, Pf

Handler = Callable[[Node, dict[str, Any]], Any]


def handle(node: Node, request: str | bytes) -> str:
    """Run one command and return the JSON reply text."""
    try:
        command = json.loads(request)
        if not isinstance(command, dict) or "cmd" not in command:
            raise ValueError("a command is a JSON object with a 'cmd' key")
        handler = COMMANDS.get(str(command["cmd"]))
        if handler is None:
            raise ValueError(f"unknown command {command['cmd']!r}; known: {sorted(COMMANDS)}")
        reply: dict[str, Any] = {"ok": True, "result": handler(node, command)}
    except OSError as exc:
        code = exc.errno or errno.EIO
        reply = {"ok": False, "errno": errno.errorcode.get(code, str(code)), "error": exc.strerror,
                 "detail": exc.filename}
    except (ValueError, KeyError, TypeError) as exc:
        reply = {"ok": False, "errno": "EINVAL", "error": str(exc)}
    return json.dumps(reply, sort_keys=True) + "\n"


def _reset(node: Node, cmd: dict[str, Any]) -> Any:
    node.power_on(cmd.get("cmdline"))
    return {"boot_log": node.boot_log}


def _fault_add(node: Node, cmd: dict[str, Any]) -> Any:
    if cmd.get("action") == "retransmit":
        return node.faults.add_retransmit(cmd["path"], cmd.get("per_second", 0), cmd.get("throughput", 1.0),
                                          cmd.get("cnps_per_second", 0)).describe()
    fault = node.faults.add(cmd["path"], cmd.get("op", "any"), cmd.get("action", "errno"), cmd.get("errno"),
                            float(cmd.get("seconds", 0)), cmd.get("count"))
    return fault.describe()


def _fault_clear(node: Node, cmd: dict[str, Any]) -> Any:
    return {"cleared": node.faults.clear(cmd.get("id"))}


def _set_delay(node: Node, cmd: dict[str, Any]) -> Any:
    name = cmd["name"]
    if name not in node.delays:
        raise ValueError(f"unknown delay {name!r}; known: {sorted(node.delays)}")
    seconds = float(cmd["seconds"])
    if seconds > 0 and name in BLOCKING_DELAYS and node.faults.no_blocking:
        raise ValueError(f"a {name} delay {node.faults.no_blocking}")
    node.delays[name] = seconds
    return dict(node.delays)


def _netns_add(node: Node, cmd: dict[str, Any]) -> Any:
    node.netns_add(cmd["name"])
    return list(node.netns)


def _netns_del(node: Node, cmd: dict[str, Any]) -> Any:
    return dict(node.netns_del(cmd["name"]), netns=list(node.netns))


def _ns(value: Any) -> str | None:
    """A namespace argument: a pod's name, or null / "" / "init" for init_net."""
    return None if value in (None, "", "init") else str(value)


def _ip_link_set_netns(node: Node, cmd: dict[str, Any]) -> Any:
    return {"name": node.link_set_netns(cmd["dev"], _ns(cmd.get("netns")), cmd.get("name"), _ns(cmd.get("from")))}


def _rdma_dev_set_netns(node: Node, cmd: dict[str, Any]) -> Any:
    node.rdma_dev_set_netns(cmd["dev"], _ns(cmd.get("netns")), _ns(cmd.get("from")))
    return None


def _vf_set_netns(node: Node, cmd: dict[str, Any]) -> Any:
    return node.vf_set_netns(cmd["bdf"], _ns(cmd.get("netns")), cmd.get("ifname"))


def _ip_link_set_vf(node: Node, cmd: dict[str, Any]) -> Any:
    attrs = {key: value for key, value in cmd.items() if key not in ("cmd", "dev", "vf")}
    node.set_vf(cmd["dev"], int(cmd["vf"]), **attrs)
    return None


def _ip_link_set(node: Node, cmd: dict[str, Any]) -> Any:
    node.set_link(cmd["dev"], cmd.get("mtu"), cmd.get("up"))
    return None


def _ip_link_show(node: Node, cmd: dict[str, Any]) -> Any:
    with node.lock:
        node.advance()
        names = [cmd["dev"]] if cmd.get("dev") else sorted(node.netdevs, key=lambda n: node.netdevs[n].ifindex)
        return [_link_info(node.netdev(name)) for name in names]


def _link_info(netdev: NetDev) -> dict[str, Any]:
    """The fields `ip link show` prints (iproute2 ip/ipaddress.c print_linkinfo/print_vfinfo)."""
    kind = netdev.kind
    broadcast = {"infiniband": fmt.IPOIB_BROADCAST, "ether": "ff:ff:ff:ff:ff:ff"}.get(kind, "00:00:00:00:00:00")
    flags = ["LOOPBACK"] if kind == "loopback" else ["BROADCAST", "MULTICAST"]
    if netdev.up:
        flags += ["UP", "LOWER_UP"]
    info: dict[str, Any] = {
        "ifindex": netdev.ifindex, "ifname": netdev.name, "flags": flags, "mtu": netdev.mtu,
        "qdisc": ("mq" if kind != "loopback" else "noqueue") if netdev.up else "noop",
        "operstate": "UP" if netdev.up else "DOWN", "linkmode": "DEFAULT", "group": "default",
        "txqlen": 256 if kind == "infiniband" else 1000, "link_type": kind, "address": netdev.address,
        "broadcast": broadcast,
    }
    if kind == "loopback":
        info["operstate"] = "UNKNOWN"
    pf = netdev.dev.pf if netdev.dev is not None else None
    if pf is not None and pf.numvfs:
        info["vfinfo_list"] = [_vf_info(pf, idx, netdev, broadcast) for idx in range(pf.numvfs)]
    return info


def _vf_info(pf: Pf, idx: int, netdev: NetDev, broadcast: str) -> dict[str, Any]:
    """One ``vfinfo_list`` entry as iproute2 print_vfinfo() prints the kernel's rtnl_fill_vfinfo() attributes.

    rtnl_fill_vfinfo() always sends IFLA_VF_VLAN_LIST (one entry) and IFLA_VF_RATE, so ``ip -j`` always has
    ``vlan_list`` - ``[{}]`` when vlan and qos are 0, print_vfinfo() printing each only when non-zero - and
    ``rate`` {max_tx, min_tx}; ``tx_rate`` only when non-zero (never here: rates are not modelled).
    spoofchk/trust/query_rss are preset to -1 (not printed) and filled by the driver: mlx5_ib_get_vf_config()
    memsets the whole ifla_vf_info and sets only the link state, so IPoIB VFs print them as false."""
    admin = pf.admin[idx]
    if netdev.kind == "infiniband":
        # IPoIB reports the PF's own 20-byte address for each VF (ipoib_get_vf_config() copies dev_addr).
        vf: dict[str, Any] = {"vf": idx, "link_type": "infiniband", "address": netdev.address, "broadcast": broadcast,
                              "vlan_list": [{}], "rate": {"max_tx": 0, "min_tx": 0},
                              "spoofchk": False, "node guid": fmt.guid_colons(admin.node_guid),
                              "port guid": fmt.guid_colons(admin.port_guid)}
    else:
        vlan: dict[str, Any] = {"vlan": admin.vlan} if admin.vlan else {}
        if admin.qos:
            vlan["qos"] = admin.qos
        vf = {"vf": idx, "link_type": "ether", "address": fmt.mac_colons(admin.mac), "broadcast": broadcast,
              "vlan_list": [vlan], "rate": {"max_tx": 0, "min_tx": 0}, "spoofchk": admin.spoofchk}
    vf.update({"link_state": admin.link_state, "trust": admin.trust, "query_rss_en": False})
    return vf


def _rdma_system_show(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    if "ib_core" not in node.modules:
        raise OSError(errno.EPROTONOSUPPORT, "Protocol not supported")
    return {"netns": "shared" if node.netns_shared else "exclusive", "privileged-qkey": False, "monitor": False,
            "copy-on-fork": True}


def _rdma_system_set(node: Node, cmd: dict[str, Any]) -> Any:
    mode = cmd["netns"]
    if mode not in ("shared", "exclusive"):
        raise ValueError("valid options are: { shared | exclusive }")
    node.set_netns_mode(mode == "shared")
    return None


def _rdma_devs(node: Node) -> list[IbDev]:
    if "ib_core" not in node.modules:
        raise OSError(errno.EPROTONOSUPPORT, "Protocol not supported")
    node.advance()
    # the caller is in init_net: a device in a pod's namespace (exclusive mode) is not listed
    # (nldev.c nldev_get_dumpit() -> ib_enum_all_devs() skips devices rdma_dev_access_netns() refuses)
    return sorted((ib for ib in node.ibdevs.values() if ib.netns is None), key=lambda ib: ib.index)


def _rdma_dev_show(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    with node.lock:
        return [{"ifindex": ib.index, "ifname": ib.name, "node_type": "ca",
                 "fw": (ib.dev.pf or ib.dev.vf.pf).card.spec.fw_ver or ib.dev.model.fw_ver,
                 "node_guid": fmt.guid_sysfs(ib.node_guid), "sys_image_guid": fmt.guid_sysfs(ib.sys_image_guid)}
                for ib in _rdma_devs(node)]


def _rdma_link_show(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    with node.lock:
        out = []
        for ib in _rdma_devs(node):
            state = node.port_state(ib)
            link: dict[str, Any] = {"ifindex": ib.index, "ifname": ib.name, "port": 1, "state": state,
                                    "physical_state": "LINK_UP" if state == "ACTIVE" else "DISABLED"}
            if ib.link_layer == "InfiniBand":
                link.update({"subnet_prefix": "fe80:0000:0000:0000", "lid": ib.lid if state == "ACTIVE" else 0,
                             "sm_lid": ib.sm_lid, "lmc": 0})
            else:
                # fill_port_info(): the netdev only when it is in the caller's namespace (net_eq(dev_net(netdev), net))
                netdev = node.netdev_of_device(ib.dev)
                if netdev is not None and netdev.netns is None:
                    link["netdev"] = netdev.name
            out.append(link)
        return out


def _modprobe(node: Node, cmd: dict[str, Any]) -> Any:
    name = cmd["name"]
    if cmd.get("remove"):
        return {"removed": node.rmmod(name)}
    if cmd.get("dry_run"):
        if not node.on_disk(name):
            raise OSError(errno.ENOENT, "Module not found", name)
        return {"inserted": []}
    return {"inserted": node.modprobe(name, cmd.get("params") or {})}


def _modules(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    return {"kernel_release": node.spec.kernel_release, "loaded": list(node.modules),
            "catalogue": sorted(name for name in node.spec.modules if node.on_disk(name)),
            "proc_modules": proc_modules(node), "ofed": node.ofed,
            "versions": {name: node.module_version(name) for name in node.modules if node.module_version(name)}}


def _mstconfig_query(node: Node, cmd: dict[str, Any]) -> Any:
    """The card's listed parameters with their Default, Current and Next Boot values as the query prints them."""
    with node.lock:
        card = node.card_by_bdf(cmd["bdf"])
        model = card.spec.model
        params = node.fw_params(card)
        defaults = node.fw_defaults(card)
        return {"device_type": model.mlx_name, "description": model.description, "bdf": card.pfs[0].dev.bdf,
                "params": [{"name": key, "default": params[key].show(defaults[key]),
                            "current": params[key].show(card.fw_current[key]),
                            "next": params[key].show(card.fw_next[key])} for key in nvconfig.listed(params, card.fw_next)]}


def _mstconfig_set(node: Node, cmd: dict[str, Any]) -> Any:
    """Validate (``dry_run``) or stage K=V in Next Boot; the values come back as the tool prints them."""
    changes = node.fw_set(cmd["bdf"], dict(cmd["params"]), apply=not cmd.get("dry_run"))
    with node.lock:
        params = node.fw_params(node.card_by_bdf(cmd["bdf"]))
    return {key: {"next": params[key].show(old), "new": params[key].show(new)} for key, (old, new) in changes.items()}


def _fw_reset(node: Node, cmd: dict[str, Any]) -> Any:
    return node.fw_reset(cmd["bdf"], int(cmd.get("level", 3)))


def _devlink_eswitch_show(node: Node, cmd: dict[str, Any]) -> Any:
    with node.lock:
        pf = node.eswitch_pf(cmd["bdf"])
        return {"bdf": pf.dev.bdf, "mode": pf.eswitch, "inline-mode": "none", "encap-mode": "basic"}


def _devlink_eswitch_set(node: Node, cmd: dict[str, Any]) -> Any:
    node.eswitch_set(cmd["bdf"], cmd["mode"])
    return None


def _ofed_info(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    return {"version": node.ofed}


def _ofed_set(node: Node, cmd: dict[str, Any]) -> Any:
    node.set_ofed(cmd.get("version"))
    return {"version": node.ofed}


def _module_set(node: Node, cmd: dict[str, Any]) -> Any:
    node.set_module(cmd["name"], **{key: value for key, value in cmd.items() if key not in ("cmd", "name")})
    return None


def _module_rebuild(node: Node, cmd: dict[str, Any]) -> Any:
    return {"built_against_ofed": node.rebuild_module(cmd["name"])}


def _dump(node: Node, dummy_cmd: dict[str, Any]) -> Any:
    with node.lock:
        node.advance()
        return {
            "spec": node.spec.name, "cmdline": node.cmdline, "netns": list(node.netns),
            "netns_mode": "shared" if node.netns_shared else "exclusive", "modules": list(node.modules),
            "delays": dict(node.delays), "faults": [fault.describe() for fault in node.faults.list()],
            "netdevs": sorted(node.netdevs), "ibdevs": sorted(node.ibdevs), "boot_log": list(node.boot_log),
            "pods": {name: {"netdevs": dict((nd.name, nd.dev.bdf if nd.dev else None)
                                            for nd in node.ns_netdevs.get(name, {}).values()),
                            "rdma": sorted(ib.name for ib in node.ibdevs.values() if ib.netns == name)}
                     for name in node.netns},
            "pfs": {pf.dev.bdf: {"numvfs": pf.numvfs, "totalvfs": pf.totalvfs, "vfs": [vf.dev.bdf for vf in pf.vfs],
                                 "eswitch": pf.eswitch,
                                 "admin": {idx: {"node_guid": fmt.guid_colons(a.node_guid),
                                                 "port_guid": fmt.guid_colons(a.port_guid),
                                                 "link_state": a.link_state} for idx, a in pf.admin.items()}}
                    for card in node.cards for pf in card.pfs},
        }


def _pci_config(node: Node, cmd: dict[str, Any]) -> Any:
    """Read (`size`, default all) or, with `data` (hex), write a function's config space at `offset`."""
    offset = int(cmd.get("offset", 0))
    if cmd.get("data") is not None:
        return {"written": node.pci_config_write(cmd["bdf"], offset, bytes.fromhex(str(cmd["data"])))}
    size = cmd.get("size")
    return {"data": node.pci_config(cmd["bdf"], offset, None if size is None else int(size)).hex()}


def _pci_link_set(node: Node, cmd: dict[str, Any]) -> Any:
    return node.pci_link_set(cmd["bdf"], cmd.get("speed"), cmd.get("width"))


def _port_fault(node: Node, cmd: dict[str, Any]) -> Any:
    return node.port_fault(str(cmd["dev"]), int(cmd.get("port", 1)))


def _traffic(node: Node, cmd: dict[str, Any]) -> Any:
    return node.traffic(str(cmd["dev"]), int(cmd.get("port", 1)), str(cmd["role"]), float(cmd["seconds"]),
                        cmd.get("peer") or {})


def _dcb_show(node: Node, cmd: dict[str, Any]) -> Any:
    return node.dcb_show(cmd["dev"])


def _dcb_set_pfc(node: Node, cmd: dict[str, Any]) -> Any:
    return node.dcb_set_pfc(cmd["dev"], int(cmd["pfc_en"]), cmd.get("delay"))


def _dcb_app(node: Node, cmd: dict[str, Any]) -> Any:
    return node.dcb_app(cmd["dev"], cmd["op"], cmd["apps"])


COMMANDS: dict[str, Handler] = {
    "reset": _reset,
    "fault_add": _fault_add,
    "fault_clear": _fault_clear,
    "set_delay": _set_delay,
    "netns_add": _netns_add,
    "netns_del": _netns_del,
    "ip_link_set_netns": _ip_link_set_netns,
    "rdma_dev_set_netns": _rdma_dev_set_netns,
    "vf_set_netns": _vf_set_netns,
    "ip_link_set_vf": _ip_link_set_vf,
    "ip_link_set": _ip_link_set,
    "ip_link_show": _ip_link_show,
    "rdma_system_show": _rdma_system_show,
    "rdma_system_set": _rdma_system_set,
    "rdma_dev_show": _rdma_dev_show,
    "rdma_link_show": _rdma_link_show,
    "modprobe": _modprobe,
    "modules": _modules,
    "mstconfig_query": _mstconfig_query,
    "mstconfig_set": _mstconfig_set,
    "fw_reset": _fw_reset,
    "ofed_info": _ofed_info,
    "ofed_set": _ofed_set,
    "module_set": _module_set,
    "module_rebuild": _module_rebuild,
    "devlink_eswitch_show": _devlink_eswitch_show,
    "devlink_eswitch_set": _devlink_eswitch_set,
    "pci_config": _pci_config,
    "pci_link_set": _pci_link_set,
    "port_fault": _port_fault,
    "traffic": _traffic,
    "dcb_show": _dcb_show,
    "dcb_set_pfc": _dcb_set_pfc,
    "dcb_app": _dcb_app,
    "dump": _dump,
}
