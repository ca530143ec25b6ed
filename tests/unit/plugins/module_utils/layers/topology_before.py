"""The oracle of the topology room's differential test (test_topology_room.py): the layer's judgement as
``plugins/plugin_utils/_audit.py`` made it before the layer was a room (commit 5533e76), copied verbatim: the
functions below, ``_inventory_checks`` without its last line (the rooms' inventory judgements) and
``_inventory_check``.  Only the collector (``_Checks``, without the audit's layer filter), ``layer_of`` and
``host_checks`` are the test's; do not edit the copied code: it is what the room is held to."""

from collections import Counter

# PCIe distance classes of nvidia-smi topo, best first
AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")


def layer_of(check_id):
    return "topology"


class _Checks(object):
    """Collects the checks of one host (``_audit._Checks`` without its layer filter: every check here is topology's)."""

    def __init__(self):
        self.items = []

    def add(self, check_id, status, desired=None, live=None, persisted=None, remedy=None, detail=None, subject=None):
        self.items.append({
            "id": check_id, "layer": layer_of(check_id), "subject": subject, "status": status, "desired": desired,
            "live": live, "persisted": persisted, "remedy": remedy if status != "ok" else None, "detail": detail,
        })


def host_checks(facts, desired):
    """The layer's checks of one host, as ``_audit.audit_host`` made them (``desired`` after ``option_problems``)."""
    checks = _Checks()
    _topology_layer(checks, facts, desired)
    return checks.items


# -- topology, MTU, cgroup ------------------------------------------------------------------------------------------
def _closest_first(item):
    """Sort key of ``(nic, class)`` pairs: the best PCIe class first (unknown classes last), then the NIC name."""
    nic, cls = item
    return (AFFINITY_ORDER.index(cls) if cls in AFFINITY_ORDER else len(AFFINITY_ORDER), nic)


def _topology(checks, facts, desired):
    devices = dict((d["name"], d) for d in facts.get("devices") or [])
    matrix = facts.get("gpu_nic_affinity") or {}
    limit = (desired or {}).get("rdma_audit_gpu_nic_max_class", "PXB")
    expected = (desired or {}).get("rdma_audit_gpu_nic_map") or {}
    for gpu in facts.get("gpus") or []:
        row = matrix.get(gpu["pci_address"]) or {}
        row = dict((nic, cls) for nic, cls in row.items() if not (devices.get(nic) or {}).get("is_vf"))
        if not row:
            continue
        nic = expected.get(gpu["pci_address"])
        if nic:
            cls = row.get(nic)
        else:
            nic, cls = min(row.items(), key=_closest_first)
        if cls is None:
            checks.add("topology.gpu_nic", "unknown", subject=gpu["pci_address"], desired=limit, live={nic: None},
                       detail="no affinity for the expected NIC %s" % nic)
            continue
        good = cls in AFFINITY_ORDER and AFFINITY_ORDER.index(cls) <= AFFINITY_ORDER.index(limit)
        checks.add("topology.gpu_nic", "ok" if good else "fail", subject=gpu["pci_address"],
                   desired="%s or better" % limit, live={nic: cls},
                   remedy="put the GPU and its NIC behind one PCIe switch, map the GPU to a closer NIC "
                          "(rdma_audit_gpu_nic_map), or accept %s with rdma_audit_gpu_nic_max_class" % cls,
                   detail=None if good else "NCCL uses GPUDirect RDMA only up to NCCL_NET_GDR_LEVEL (default PXB); "
                                            "across %s it copies through host memory" % cls)
        gpu_numa = gpu.get("numa_node")
        nic_numa = (devices.get(nic) or {}).get("numa_node")
        online = (facts.get("numa_nodes") or {}).get("online") or []
        if len(online) > 1:
            if gpu_numa is None or nic_numa is None:
                checks.add("topology.numa", "unknown", subject=gpu["pci_address"], live={"gpu": gpu_numa, nic: nic_numa},
                           detail="the firmware reports no NUMA node (numa_node = -1)")
            else:
                checks.add("topology.numa", "ok" if gpu_numa == nic_numa else "fail", subject=gpu["pci_address"],
                           desired="same NUMA node", live={"gpu": gpu_numa, nic: nic_numa},
                           remedy="use a NIC on NUMA node %s for this GPU" % gpu_numa)


def _link_layers(device):
    return set(p.get("link_layer") for p in device.get("ports") or [])


def _mtu_groups(facts):
    """``{link_layer: {netdev: mtu}}`` of the RDMA PFs' netdevs."""
    out = {}
    mtu = facts.get("mtu") or {}
    for device in facts.get("devices") or []:
        if device.get("is_vf"):
            continue
        layer = sorted(_link_layers(device) - {None}) or ["unknown"]
        for netdev in device.get("netdevs") or []:
            if netdev in mtu:
                out.setdefault(layer[0], {})[netdev] = mtu[netdev]
    return out


def _mtu(checks, facts, desired):
    want = (desired or {}).get("rdma_audit_mtu")
    for layer, values in sorted(_mtu_groups(facts).items()):
        if any(v is None for v in values.values()):
            checks.add("mtu.node", "unknown", subject=layer, live=values, detail="an MTU could not be read")
            continue
        distinct = sorted(set(values.values()))
        if want and layer == "Ethernet":
            status = "ok" if distinct == [int(want)] else "drift"
            checks.add("mtu.node", status, subject=layer, desired=int(want), live=values,
                       remedy="set the MTU of the RDMA netdevs to %s (network configuration)" % want)
        else:
            checks.add("mtu.node", "ok" if len(distinct) == 1 else "drift", subject=layer, desired="one MTU",
                       live=values, remedy="give every %s RDMA netdev the same MTU" % layer,
                       detail=None if len(distinct) == 1 else "RDMA netdevs of one node with MTUs %s" % distinct)


def _cgroup(checks, facts):
    limited = {}
    for cgroup, devices in sorted((facts.get("rdma_cgroup") or {}).items()):
        for device, limits in sorted(devices.items()):
            small = dict((k, v) for k, v in limits.items() if v != "max")
            if small:
                limited.setdefault(cgroup, {})[device] = small
    checks.add("cgroup.rdma", "ok" if not limited else "drift", desired="max", live=limited or "max",
               remedy="remove the rdma.max limits (echo '<dev> hca_handle=max hca_object=max' > rdma.max)",
               detail=None if not limited else "RDMA cgroup limits cap the verbs objects of the pods below them")


# -- driver ---------------------------------------------------------------------------------------------------------
def _topology_layer(checks, facts, desired):
    _topology(checks, facts, desired)
    _mtu(checks, facts, desired)
    _cgroup(checks, facts)


def _inventory_checks(hosts):
    """Checks that need every host: one RDMA MTU per link layer; then the rooms' (VF GUIDs unique across the
    inventory: the sriov room's)."""
    by_layer = {}
    for name, host in hosts.items():
        if host["facts"] is None:
            continue
        for layer, values in _mtu_groups(host["facts"]).items():
            for mtu in values.values():
                if mtu is not None:
                    by_layer.setdefault(layer, Counter())[mtu] += 1
    for name, host in hosts.items():
        if host["facts"] is None or "topology" not in host["layers"]:
            continue
        for layer, values in sorted(_mtu_groups(host["facts"]).items()):
            common = by_layer.get(layer)
            if not common or len(common) < 2:
                continue
            majority = common.most_common(1)[0][0]
            odd = dict((n, m) for n, m in values.items() if m is not None and m != majority)
            host["checks"].append(_inventory_check(
                "mtu.inventory", "drift" if odd else "ok", majority, odd or values,
                "give the RDMA netdevs the inventory's MTU %s" % majority, subject=layer))


def _inventory_check(check_id, status, desired, live, remedy, subject=None):
    return {"id": check_id, "layer": layer_of(check_id), "subject": subject, "status": status, "desired": desired,
            "live": live, "persisted": None, "remedy": remedy if status != "ok" else None, "detail": None}
