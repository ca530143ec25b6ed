"""Lay the node's state out as the sysfs/procfs tree a real kernel would show.

Shapes follow the real captures in realdata/hwloc (bridge chains under sys/devices, relative symlinks computed like
kernfs, attribute formats); values are read live from the Node so a rebuild is only needed when entries come or go.
"""

from __future__ import annotations

import errno
import re
from typing import Callable

from . import fmt, qos
from .models import MODELS
from .pciconf import ConfigSpace
from .spec import PHYS_STATES, PMA_COUNTERS
from .state import IbDev, NetDev, Node, PciDevice, Pf
from .vfs import Tree

PCI_DRIVERS = sorted({model.driver for model in MODELS.values()} | {m.vf_driver for m in MODELS.values() if m.vf_driver})
IB_STATES = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT", "ARMED": "3: ARMED"}
GID_TABLE = 4


def build_tree(node: Node) -> Tree:
    """The whole simulated root: sys/ and proc/."""
    tree = Tree()
    _system(tree, node)
    for dev in node.devices.values():
        _pci_device(tree, node, dev)
    _drivers(tree, node)
    for netdev in node.netdevs.values():
        _netdev(tree, node, netdev)
    for ib in node.ibdevs.values():
        _ibdev(tree, node, ib)
    _uverbs(tree, node)
    _modules(tree, node)
    _cgroup(tree, node)
    _configfs(tree, node)
    _proc(tree, node)
    return tree


def _system(tree: Tree, node: Node) -> None:
    spec = node.spec
    cpus = fmt.format_cpulist(spec.cpus)
    nodes = fmt.format_cpulist(list(spec.numa))
    for name in ("online", "possible", "present"):
        tree.add_value(f"sys/devices/system/cpu/{name}", cpus)
    for name in ("online", "possible", "has_normal_memory", "has_memory"):
        tree.add_value(f"sys/devices/system/node/{name}", nodes)
    tree.add_value("sys/devices/system/node/has_cpu", fmt.format_cpulist([n for n, c in spec.numa.items() if c]))
    nr_cpus = max(spec.cpus) + 1
    for numa_id, node_cpus in spec.numa.items():
        base = f"sys/devices/system/node/node{numa_id}"
        tree.add_value(f"{base}/cpulist", fmt.format_cpulist(node_cpus))
        tree.add_value(f"{base}/cpumap", fmt.format_cpumask(node_cpus, nr_cpus))
        distance = " ".join("10" if other == numa_id else "21" for other in spec.numa)
        tree.add_value(f"{base}/distance", distance)
    tree.mkdir("sys/bus/pci/devices")
    tree.mkdir("sys/class/net")
    tree.mkdir("sys/class/infiniband")
    for host in spec.host_bridges:
        tree.mkdir(f"sys/devices/{host.name}")


def _dev_dir(dev: PciDevice) -> str:
    return "sys/" + "/".join(dev.path)


def _local_cpus(node: Node, numa: int) -> list[int]:
    """cpumask_of_node(); NUMA_NO_NODE (-1) means every CPU, as on the R910 capture."""
    return node.spec.numa.get(numa, node.spec.cpus) if numa >= 0 else node.spec.cpus


def _pci_device(tree: Tree, node: Node, dev: PciDevice) -> None:
    base = _dev_dir(dev)
    model = dev.model
    cpus = _local_cpus(node, dev.numa)
    tree.add_value(f"{base}/vendor", f"0x{model.vendor:04x}")
    tree.add_value(f"{base}/device", f"0x{dev.device_id:04x}")
    tree.add_value(f"{base}/subsystem_vendor", f"0x{model.subsystem_vendor:04x}")
    tree.add_value(f"{base}/subsystem_device", f"0x{model.subsystem_device:04x}")
    tree.add_file(f"{base}/class", lambda: f"0x{dev.klass:06x}\n")
    tree.add_value(f"{base}/revision", "0x00")
    tree.add_value(f"{base}/numa_node", str(dev.numa))
    tree.add_value(f"{base}/local_cpulist", fmt.format_cpulist(cpus))
    tree.add_value(f"{base}/local_cpus", fmt.format_cpumask(cpus, max(node.spec.cpus) + 1))
    tree.add_value(f"{base}/enable", "1")
    tree.add_file(f"{base}/uevent", lambda: _uevent(dev))
    tree.add_file(f"{base}/driver_override", lambda: f"{dev.driver_override or '(null)'}\n",
                  lambda text: node.store_driver_override(dev, text))
    tree.add_link(f"{base}/subsystem", "sys/bus/pci")
    tree.add_link(f"sys/bus/pci/devices/{dev.bdf}", base)
    if dev.config is not None:
        _pci_config(tree, dev.config, base)
    if dev.driver:
        tree.add_link(f"{base}/driver", f"sys/bus/pci/drivers/{dev.driver}")
    for irq in node.irq.of_device(dev.bdf):
        # msi_irqs/<N>: one read-only file per vector, "msix" or "msi" (drivers/pci/msi: msi_mode_show())
        tree.add_value(f"{base}/msi_irqs/{irq.number}", "msix")
    if dev.pf is not None and dev.pf.totalvfs > 0:
        _sriov(tree, node, dev.pf, base)
    if dev.vf is not None:
        tree.add_link(f"{base}/physfn", _dev_dir(dev.vf.pf.dev))
        # a netdev in a pod's namespace: the class directory `net/` stays (its child is there, tagged with the pod's
        # namespace), but init_net's sysfs mount lists nothing in it (net_class has .ns_type, README "VFs in pods")
        netdev = node.netdev_of_device(dev)
        if netdev is not None and netdev.netns is not None:
            tree.mkdir(f"{base}/net")


def _pci_config(tree: Tree, config: ConfigSpace, base: str) -> None:
    """`config` (drivers/pci/pci-sysfs.c: BIN_ATTR(config, 0644), 4096 bytes for PCIe functions) and the
    pcie_dev_attrs read from it: current_link_* from Link Status, max_link_* from Link Capabilities (2)."""
    tree.add_binary(f"{base}/config", config.size, config.read, config.write)
    if config.layout.pcie:
        tree.add_file(f"{base}/current_link_speed", lambda: config.current_link()[0] + "\n")
        tree.add_file(f"{base}/current_link_width", lambda: f"{config.current_link()[1]}\n")
        tree.add_file(f"{base}/max_link_speed", lambda: config.max_link()[0] + "\n")
        tree.add_file(f"{base}/max_link_width", lambda: f"{config.max_link()[1]}\n")


def _uevent(dev: PciDevice) -> str:
    model = dev.model
    lines = [f"DRIVER={dev.driver}"] if dev.driver else []
    lines += [f"PCI_CLASS={dev.klass:X}", f"PCI_ID={model.vendor:04X}:{dev.device_id:04X}",
              f"PCI_SUBSYS_ID={model.subsystem_vendor:04X}:{model.subsystem_device:04X}", f"PCI_SLOT_NAME={dev.bdf}",
              f"MODALIAS=pci:v{model.vendor:08X}d{dev.device_id:08X}sv{model.subsystem_vendor:08X}"
              f"sd{model.subsystem_device:08X}bc{dev.klass >> 16:02X}sc{(dev.klass >> 8) & 0xFF:02X}i{dev.klass & 0xFF:02X}"]
    return "\n".join(lines) + "\n"


def _sriov(tree: Tree, node: Node, pf: Pf, base: str) -> None:
    """The SR-IOV attribute group (drivers/pci/iov.c sriov_pf_dev_attrs), visible only on SR-IOV capable PFs."""
    tree.add_value(f"{base}/sriov_totalvfs", str(pf.totalvfs))
    tree.add_file(f"{base}/sriov_numvfs", lambda: f"{pf.numvfs}\n", lambda text: node.store_sriov_numvfs(pf, text))
    tree.add_file(f"{base}/sriov_drivers_autoprobe", lambda: f"{int(pf.autoprobe)}\n",
                  lambda text: node.store_autoprobe(pf, text))
    tree.add_value(f"{base}/sriov_offset", str(pf.card.vf_offset(pf.index)))
    tree.add_value(f"{base}/sriov_stride", str(pf.card.spec.vf_stride))
    tree.add_value(f"{base}/sriov_vf_device", f"{pf.dev.model.vf_device:x}")
    for vf in pf.vfs:
        tree.add_link(f"{base}/virtfn{vf.index}", _dev_dir(vf.dev))
    if node.mlx5_from_ofed() and pf.card.is_mlx and pf.link_layer == "InfiniBand":
        _ofed_sriov(tree, node, pf, base)


def _ofed_sriov(tree: Tree, node: Node, pf: Pf, base: str) -> None:
    """MLNX/DOCA OFED only (mlnx-ofa_kernel mlx5 sriov_sysfs.c, not mainline): sriov/<vf>/{node,port,policy}."""
    for vf in pf.vfs:
        idx = vf.index
        admin = pf.admin[idx]
        tree.add_file(f"{base}/sriov/{idx}/node", lambda a=admin: fmt.guid_colons(a.node_guid) + "\n",
                      lambda text, i=idx: node.store_ofed_vf(pf, i, "node", text))
        tree.add_file(f"{base}/sriov/{idx}/port", lambda a=admin: fmt.guid_colons(a.port_guid) + "\n",
                      lambda text, i=idx: node.store_ofed_vf(pf, i, "port", text))
        tree.add_file(f"{base}/sriov/{idx}/policy", lambda i=idx: node.ofed_policy(pf, i) + "\n",
                      lambda text, i=idx: node.store_ofed_vf(pf, i, "policy", text))


def _drivers(tree: Tree, node: Node) -> None:
    for driver in PCI_DRIVERS:
        if driver != "pcieport" and driver not in node.modules:
            continue
        base = f"sys/bus/pci/drivers/{driver}"
        tree.add_file(f"{base}/bind", None, _binder(node.store_bind, driver))
        tree.add_file(f"{base}/unbind", None, _binder(node.store_unbind, driver))
        tree.add_file(f"{base}/new_id", None, _rejecter())
        tree.add_file(f"{base}/remove_id", None, _rejecter())
        if driver in node.modules:
            tree.add_link(f"{base}/module", f"sys/module/{driver}")
        for dev in node.devices.values():
            if dev.driver == driver:
                tree.add_link(f"{base}/{dev.bdf}", _dev_dir(dev))


def _binder(store: Callable[[str, str], None], driver: str) -> Callable[[str], None]:
    return lambda text: store(driver, text)


def _rejecter() -> Callable[[str], None]:
    """new_id/remove_id: IDs this simulator's drivers do not know are rejected like a parse error."""
    def reject(dummy_text: str) -> None:
        raise fmt.oserror(errno.EINVAL)
    return reject


def _netdev(tree: Tree, node: Node, netdev: NetDev) -> None:
    if netdev.dev is None:
        base = f"sys/devices/virtual/net/{netdev.name}"
    else:
        base = f"{_dev_dir(netdev.dev)}/net/{netdev.name}"
        tree.add_link(f"{base}/device", _dev_dir(netdev.dev))
    tree.add_link(f"sys/class/net/{netdev.name}", base)
    tree.add_link(f"{base}/subsystem", "sys/class/net")
    arphrd = {"infiniband": 32, "ether": 1, "loopback": 772}[netdev.kind]
    tree.add_value(f"{base}/type", str(arphrd))
    tree.add_value(f"{base}/address", netdev.address)
    broadcast = fmt.IPOIB_BROADCAST if netdev.kind == "infiniband" else "ff:ff:ff:ff:ff:ff"
    tree.add_value(f"{base}/broadcast", broadcast if netdev.kind != "loopback" else "00:00:00:00:00:00")
    tree.add_value(f"{base}/addr_len", str(len(netdev.address.split(":"))))
    tree.add_value(f"{base}/ifindex", str(netdev.ifindex))
    tree.add_value(f"{base}/iflink", str(netdev.ifindex))
    tree.add_value(f"{base}/dev_port", str(netdev.dev_port))
    tree.add_value(f"{base}/dev_id", "0x0")
    if netdev.dev is not None:
        tree.add_file(f"{base}/name_assign_type", lambda: _name_assign_type(netdev))
    tree.add_file(f"{base}/mtu", lambda: f"{netdev.mtu}\n", lambda text: node.store_mtu(netdev, text))
    tree.add_file(f"{base}/operstate", lambda: "up\n" if netdev.up else "down\n")
    tree.add_file(f"{base}/flags", lambda: "0x1003\n" if netdev.up else "0x1002\n")
    tree.add_file(f"{base}/carrier", lambda: _carrier(netdev))
    tree.add_value(f"{base}/tx_queue_len", "256" if netdev.kind == "infiniband" else "1000")
    if netdev.kind == "infiniband":
        tree.add_value(f"{base}/pkey", "0xffff")
        tree.add_value(f"{base}/mode", "datagram")
    if netdev.qos is not None and node.mlx5_from_ofed():
        _ecn(tree, node, netdev, base)


def _name_assign_type(netdev: NetDev) -> str:
    """name_assign_type_show(): EINVAL for NET_NAME_UNKNOWN (IPoIB's "ib%d" until udev renames it), else the number."""
    if netdev.name_assign_type == 0:
        raise fmt.oserror(errno.EINVAL)
    return f"{netdev.name_assign_type}\n"


def _carrier(netdev: NetDev) -> str:
    """carrier_show(): EINVAL while the interface is down (netif_running false)."""
    if not netdev.up:
        raise fmt.oserror(errno.EINVAL)
    return "1\n"


def _ibdev(tree: Tree, node: Node, ib: IbDev) -> None:
    if ib.netns is not None:
        # in a pod's namespace (exclusive mode): ib_class has .ns_type = net_ns_type_operations and .namespace =
        # the device's rdma_net (drivers/infiniband/core/device.c), so the host's sysfs lists neither
        # class/infiniband/<dev> nor <pci>/infiniband/<dev>; the glue directory `infiniband/` stays, empty here
        tree.mkdir(f"{_dev_dir(ib.dev)}/infiniband")
        return
    base = f"{_dev_dir(ib.dev)}/infiniband/{ib.name}"
    model = ib.dev.model
    tree.add_link(f"sys/class/infiniband/{ib.name}", base)
    tree.add_link(f"{base}/device", _dev_dir(ib.dev))
    tree.add_link(f"{base}/subsystem", "sys/class/infiniband")
    tree.add_value(f"{base}/node_guid", fmt.guid_sysfs(ib.node_guid))
    tree.add_value(f"{base}/sys_image_guid", fmt.guid_sysfs(ib.sys_image_guid))
    tree.add_value(f"{base}/fw_ver", _card(ib).fw_ver or model.fw_ver)
    tree.add_value(f"{base}/hca_type", f"MT{ib.dev.device_id}")
    tree.add_value(f"{base}/hw_rev", "0x0")
    tree.add_value(f"{base}/board_id", model.board_id if ib.dev.vf is None else "")
    tree.add_value(f"{base}/node_type", "1: CA")
    tree.add_value(f"{base}/node_desc", f"{node.spec.name} {ib.name}")
    port = f"{base}/ports/1"
    tree.add_file(f"{port}/state", lambda: IB_STATES[node.port_state(ib)] + "\n")
    tree.add_file(f"{port}/phys_state", lambda: _phys_state(node, ib))
    tree.add_value(f"{port}/link_layer", ib.link_layer)
    tree.add_file(f"{port}/rate", lambda: node.port_rate(ib) + "\n")
    tree.add_file(f"{port}/lid", lambda: f"0x{_lid(node, ib):x}\n")
    tree.add_value(f"{port}/sm_lid", f"0x{ib.sm_lid:x}")
    tree.add_value(f"{port}/sm_sl", "0")
    tree.add_value(f"{port}/lid_mask_count", "0")
    tree.add_value(f"{port}/cap_mask", "0xa651e848" if ib.link_layer == "InfiniBand" else "0x00010000")
    tree.add_value(f"{port}/pkeys/0", "0xffff")
    # drivers/infiniband/core/sysfs.c setup_hw_port_stats(): one 0444 file per counter ("%llu\n", the value read
    # from the device at most every `lifespan` ms) and a 0644 `lifespan` (ms, "%d\n", 0..10000); mlx5's default
    # lifespan is RDMA_HW_STATS_DEFAULT_LIFESPAN, 10 ms (not modelled: every read is fresh)
    if model.hw_counters:
        for counter in model.hw_counters:
            tree.add_file(f"{port}/hw_counters/{counter}", _hw_counter(node, ib, counter))
        tree.add_file(f"{port}/hw_counters/lifespan", lambda: "10\n", _lifespan)
    # PMA PortCounters (sysfs.c PORT_PMA_ATTR, "%u\n"): the spec's values on a PF, zero elsewhere
    counters = ib.dev.pf.fspec.counters if ib.dev.pf is not None else {}
    for counter in PMA_COUNTERS:
        tree.add_value(f"{port}/counters/{counter}", str(counters.get(counter, 0)))
    _gids(tree, node, ib, port)
    if node.mlx5_from_ofed() and ib.dev.model.driver == "mlx5_core":
        # OFED mlx5_ib init_tc_sysfs(): tc/<port>/traffic_class (tests/hwsim/qos.py)
        tree.add_file(f"{base}/tc/1/traffic_class", lambda: qos.show_tclass(ib.tclass),
                      lambda text: node.store_tclass(ib, text))


def _uverbs(tree: Tree, node: Node) -> None:
    """``sys/class/infiniband_verbs`` while ib_uverbs is loaded (drivers/infiniband/core/uverbs_main.c): ``abi_version``
    and one ``uverbs<N>`` per RDMA device (``ibdev``, ``abi_version``, ``device``), under the device's PCI function.
    uverbs_class has no ``ns_type``: every namespace lists every uverbs device, also those whose RDMA device is in a
    pod's namespace (the host still sees ``uverbs<N>`` of a device it cannot see in class/infiniband; confirmed on a
    real 7.3 kernel in node_vm, where a pod lists every uverbs).  [inference] N is the device's position in
    registration order (ib_uverbs takes the lowest free minor when a device registers; re-registration order can
    differ on a real node)."""
    if "ib_uverbs" not in node.modules:
        return
    tree.add_value("sys/class/infiniband_verbs/abi_version", "6")
    for number, ib in enumerate(sorted(node.ibdevs.values(), key=lambda ib: ib.index)):
        base = f"{_dev_dir(ib.dev)}/infiniband_verbs/uverbs{number}"
        tree.add_link(f"sys/class/infiniband_verbs/uverbs{number}", base)
        tree.add_value(f"{base}/ibdev", ib.name)
        tree.add_value(f"{base}/abi_version", "1")
        tree.add_link(f"{base}/device", _dev_dir(ib.dev))


def _hw_counter(node: Node, ib: IbDev, name: str) -> Callable[[], str]:
    return lambda: f"{node.hw_counter(ib, name)}\n"


def _lifespan(text: str) -> None:
    """set_stats_lifespan(): kstrtoint base 10, 0..10000 ms, else EINVAL (the value is not kept: reads are fresh)."""
    value = text.strip() if text.endswith("\n") and text.count("\n") == 1 else text
    if not re.fullmatch(r"[+-]?\d+", value) or not 0 <= int(value) <= 10000:
        raise fmt.oserror(errno.EINVAL)


def _card(ib: IbDev):
    """The spec of the NIC card an RDMA device belongs to (a VF's is its PF's)."""
    pf = ib.dev.pf or ib.dev.vf.pf
    return pf.card.spec


def _phys_state(node: Node, ib: IbDev) -> str:
    """``N: Name`` as phys_state_show() prints it: the PF's spec override (a VF shares its PF's physical port), else
    LinkUp for an ACTIVE port and Disabled otherwise."""
    pf = ib.dev.pf or ib.dev.vf.pf
    if pf.fspec.phys_state:
        return f"{PHYS_STATES.index(pf.fspec.phys_state)}: {pf.fspec.phys_state}\n"
    return "5: LinkUp\n" if node.port_state(ib) == "ACTIVE" else "3: Disabled\n"


def _lid(node: Node, ib: IbDev) -> int:
    if ib.link_layer != "InfiniBand" or node.port_state(ib) != "ACTIVE":
        return 0
    if ib.dev.vf is not None:
        return ib.dev.vf.pf.fspec.lid + 1 + ib.dev.vf.index
    return ib.lid


def _gids(tree: Tree, node: Node, ib: IbDev, port: str) -> None:
    """GID table: IB has the port GID at 0 with no ndev (reading ndevs/0 is EINVAL, kernel print_ndev());
    RoCE has v1+v2 link-local GIDs bound to the netdev. Unused entries are zero and their attrs EINVAL.

    A RoCE function's netdev in a pod's namespace while its RDMA device stays in init_net (shared mode):
    [inference] roce_gid_mgmt.c deletes the netdev's GIDs on its NETDEV_UNREGISTER and adds the default ones again on
    its NETDEV_REGISTER in the pod (no namespace check), and print_ndev() prints ``ndev->name`` whatever namespace
    the netdev is in, so ``ndevs/0`` reads the pod's name for it (``net1``)."""
    entries: list[tuple[int, str, str | None]] = []
    netdev = node.netdev_of_device(ib.dev) if ib.link_layer == "Ethernet" else None
    if ib.link_layer == "InfiniBand":
        entries.append((ib.port_guid, "IB/RoCE v1", None))
    elif netdev is not None:
        mac = bytes(int(octet, 16) for octet in netdev.address.split(":"))
        eui = fmt.eui64_from_mac(mac)
        entries += [(eui, "IB/RoCE v1", netdev.name), (eui, "RoCE v2", netdev.name)]
    for idx in range(GID_TABLE):
        if idx < len(entries):
            guid, gid_type, ndev = entries[idx]
            tree.add_value(f"{port}/gids/{idx}", fmt.gid_from_guid(0xFE80000000000000, guid))
            tree.add_value(f"{port}/gid_attrs/types/{idx}", gid_type)
            tree.add_file(f"{port}/gid_attrs/ndevs/{idx}", _value_or_einval(ndev))
        else:
            tree.add_value(f"{port}/gids/{idx}", fmt.gid_from_guid(0, 0))
            tree.add_file(f"{port}/gid_attrs/types/{idx}", _value_or_einval(None))
            tree.add_file(f"{port}/gid_attrs/ndevs/{idx}", _value_or_einval(None))


def _value_or_einval(value: str | None) -> Callable[[], str]:
    def read() -> str:
        if value is None:
            raise fmt.oserror(errno.EINVAL)
        return value + "\n"
    return read


def _modules(tree: Tree, node: Node) -> None:
    for name, module in node.modules.items():
        base = f"sys/module/{name}"
        tree.add_value(f"{base}/initstate", "live")
        tree.add_file(f"{base}/refcnt", lambda n=name: f"{len(node.holders(n))}\n")
        tree.mkdir(f"{base}/holders")
        for holder in node.holders(name):
            tree.add_link(f"{base}/holders/{holder}", f"sys/module/{holder}")
        for param in module.params:
            tree.add_file(f"{base}/parameters/{param}", lambda m=module, p=param: f"{m.params[p]}\n")
        version = node.module_version(name)
        if version:
            tree.add_value(f"{base}/version", version)


def _ecn(tree: Tree, node: Node, netdev: NetDev, base: str) -> None:
    """OFED mlx5e en_sysfs.c: ecn/<roce_np|roce_rp>/enable/<0..7> and roce_np/{cnp_dscp,cnp_802p_prio} (qos.py)."""
    port = netdev.qos
    for proto in qos.ECN_PROTOCOLS:
        for prio in range(8):
            tree.add_file(f"{base}/ecn/{proto}/enable/{prio}", lambda p=proto, q=prio: f"{port.ecn[p][q]}\n",
                          lambda text, p=proto, q=prio: node.store_ecn(netdev, p, q, text))
    for attr in ("cnp_dscp", "cnp_802p_prio"):
        tree.add_file(f"{base}/ecn/roce_np/{attr}", lambda a=attr: f"{getattr(port, a)}\n",
                      lambda text, a=attr: node.store_cnp(netdev, a, text))


def _configfs(tree: Tree, node: Node) -> None:
    """configfs (mounted at sys/kernel/config): the rdma_cm subsystem while rdma_cm is loaded, and the groups made
    with mkdir, each with ports/1/{default_roce_mode,default_roce_tos} (cma_configfs.c; qos.py)."""
    tree.mkdir("sys/kernel/config")
    if "rdma_cm" not in node.modules:
        return
    tree.mkdir("sys/kernel/config/rdma_cm")
    for name in node.cma_groups:
        port = f"sys/kernel/config/rdma_cm/{name}/ports/1"
        tree.add_file(f"{port}/default_roce_tos", lambda n=name: f"{node.cma_device(n).roce_tos}\n",
                      lambda text, n=name: node.store_roce_tos(n, text))
        tree.add_file(f"{port}/default_roce_mode", lambda n=name: f"{node.cma_device(n).roce_mode}\n",
                      lambda text, n=name: node.store_roce_mode(n, text))


def _cgroup(tree: Tree, node: Node) -> None:
    tree.add_value("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc")
    rdma = node.spec.rdma_cgroup
    if not rdma:
        return
    parts = str(rdma["path"]).strip("/").split("/")
    # The kernel creates rdma.max only in children of a cgroup whose cgroup.subtree_control enables "rdma":
    # every ancestor of the configured cgroup delegates the controller, as systemd and the kubelet set it up.
    for depth in range(len(parts)):
        parent = "/".join(["sys/fs/cgroup"] + parts[:depth])
        tree.add_value(f"{parent}/cgroup.subtree_control", "cpuset cpu io memory pids rdma")
        tree.add_value(f"{parent}/{parts[depth]}/cgroup.controllers", "cpuset cpu io memory pids rdma")
    base = "/".join(["sys/fs/cgroup"] + parts)
    tree.add_file(f"{base}/rdma.max", lambda: _rdma_lines(node, True), node.store_rdma_max)
    tree.add_file(f"{base}/rdma.current", lambda: _rdma_lines(node, False))


def _rdma_lines(node: Node, limits: bool) -> str:
    """rdmacg_resource_read(): one line per registered RDMA device, 'max' where no limit is set."""
    lines = []
    for name in node.ibdevs:
        values = node.rdma_limits.get(name, {}) if limits else {}
        default = "max" if limits else "0"
        lines.append(f"{name} hca_handle={values.get('hca_handle', default)} hca_object={values.get('hca_object', default)}")
    return "".join(line + "\n" for line in lines)


def proc_cpuinfo(spec) -> str:
    """/proc/cpuinfo of an x86 node: one block per CPU of the NUMA map (the fields tools read; no flags)."""
    cpu = spec.cpu
    blocks = []
    for number in spec.cpus:
        blocks.append(f"processor\t: {number}\nvendor_id\t: {cpu['vendor_id']}\ncpu family\t: {cpu['family']}\n"
                      f"model\t\t: {cpu['model']}\nmodel name\t: {cpu['model_name']}\n")
    return "\n".join(blocks) + "\n"


def _proc(tree: Tree, node: Node) -> None:
    tree.add_file("proc/cmdline", lambda: node.cmdline + "\n", size=0)
    tree.add_file("proc/cpuinfo", lambda: proc_cpuinfo(node.spec), size=0)
    tree.add_file("proc/modules", lambda: proc_modules(node), size=0)
    tree.add_file("proc/sys/kernel/osrelease", lambda: node.spec.kernel_release + "\n", size=0)
    tree.add_file("proc/net/dev", lambda: proc_net_dev(node), size=0)
    for scope in node.sysctl:
        for key in ("arp_ignore", "arp_announce", "rp_filter"):
            tree.add_file(f"proc/sys/net/ipv4/conf/{scope}/{key}", _sysctl_reader(node, scope, key),
                          _sysctl_writer(node, scope, key), size=0)
    tree.add_file("proc/sys/net/core/devconf_inherit_init_net", lambda: f"{node.devconf_inherit_init_net}\n",
                  node.store_inherit, size=0)
    _proc_irq(tree, node)
    if node.spec.nvidia_driver and "nvidia" in node.modules:
        version = node.spec.nvidia_driver
        # the open GPU kernel modules say so in the banner (real captures: "NVIDIA UNIX Open Kernel Module for
        # x86_64  555.42.02  Release Build ..."); the proprietary ones "NVIDIA UNIX x86_64 Kernel Module  550.54.14"
        flavour = "Open Kernel Module for x86_64" if node.spec.nvidia_open else "x86_64 Kernel Module"
        text = (f"NVRM version: NVIDIA UNIX {flavour}  {version}  Release Build  (dvs-builder@U16-I3-B03-4-3)"
                "  Tue Oct  8 03:22:07 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n")
        tree.add_file("proc/driver/nvidia/version", lambda: text, size=0)


def _proc_irq(tree: Tree, node: Node) -> None:
    """/proc/interrupts and /proc/irq/ (kernel/irq/proc.c register_irq_proc(), register_handler_proc()): per
    interrupt smp_affinity(_list) 0644 (0444 when user space may not set it; root can still open it and gets the
    write's error), affinity_hint, node, effective_affinity(_list), spurious, and a directory named after the
    handler; default_smp_affinity."""
    table = node.irq
    tree.add_file("proc/interrupts", table.proc_interrupts, size=0)
    tree.add_file("proc/irq/default_smp_affinity", lambda: table.cpumask(table.default_affinity),
                  node.store_irq_default, size=0)
    for number, irq in table.irqs.items():
        base = f"proc/irq/{number}"
        mode = 0o644 if table.can_set(irq) else 0o444
        tree.add_file(f"{base}/smp_affinity", lambda irq=irq: table.cpumask(irq.affinity),
                      lambda text, n=number: node.store_irq_affinity(n, text, False), mode=mode, size=0)
        tree.add_file(f"{base}/smp_affinity_list", lambda irq=irq: table.cpulist(irq.affinity),
                      lambda text, n=number: node.store_irq_affinity(n, text, True), mode=mode, size=0)
        tree.add_file(f"{base}/effective_affinity", lambda irq=irq: table.cpumask([irq.effective]), size=0)
        tree.add_file(f"{base}/effective_affinity_list", lambda irq=irq: table.cpulist([irq.effective]), size=0)
        tree.add_file(f"{base}/affinity_hint", lambda irq=irq: table.cpumask(irq.hint), size=0)
        tree.add_file(f"{base}/node", lambda irq=irq: f"{irq.node}\n", size=0)
        tree.add_file(f"{base}/spurious", lambda: "count 0\nunhandled 0\nlast_unhandled 0 ms\n", size=0)
        tree.mkdir(f"{base}/{irq.name}")


def _sysctl_reader(node: Node, scope: str, key: str) -> Callable[[], str]:
    return lambda: f"{node.sysctl[scope][key]}\n"


def _sysctl_writer(node: Node, scope: str, key: str) -> Callable[[str], None]:
    return lambda text: node.store_sysctl(scope, key, text)


def proc_modules(node: Node) -> str:
    """/proc/modules: newest first, 'name size refcnt holders, state address [taint]'."""
    lines = []
    for name in reversed(list(node.modules)):
        holders = node.holders(name)
        used = "".join(holder + "," for holder in holders) or "-"
        taint = " (POE)" if name.startswith("nvidia") else ""
        lines.append(f"{name} {node.spec.modules[name].size} {len(holders)} {used} Live 0x0000000000000000{taint}")
    return "".join(line + "\n" for line in lines)


#: dev_seq_printf_stats()'s field widths ("%6s: %7llu %7llu %4llu %4llu %4llu %5llu %10llu %9llu %8llu %7llu %4llu ...")
NET_DEV_WIDTHS = (7, 7, 4, 4, 4, 5, 10, 9, 8, 7, 4, 4, 4, 5, 7, 10)


def proc_net_dev(node: Node) -> str:
    """/proc/net/dev of init_net (net/core/net-procfs.c dev_seq_show(): the netdevs of the reader's namespace only,
    so a VF's netdev in a pod is not listed): the two header lines, then one row per netdev in ifindex order
    (traffic counters are not modelled: 0)."""
    lines = ["Inter-|   Receive                                                |  Transmit",
             " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
             "carrier compressed"]
    for netdev in sorted(node.netdevs.values(), key=lambda nd: nd.ifindex):
        lines.append(f"{netdev.name:>6}:" + "".join(" " + "0".rjust(width) for width in NET_DEV_WIDTHS))
    return "\n".join(lines) + "\n"
