# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``topology`` layer's audit judgement, pure: GPU-NIC affinity, MTUs and the RDMA cgroup (docs/audit.md#checks).

Moved from ``_audit`` and judged as before (same checks, texts and order):

* ``topology.gpu_nic[<gpu>]``: the GPU's NIC (``rdma_audit_gpu_nic_map``, else its closest PF by ``gpu_nic_affinity``:
  best class first, then the name) at ``rdma_audit_gpu_nic_max_class`` (default ``PXB``) or better; ``unknown`` when
  the mapped NIC has no affinity;
* ``topology.numa[<gpu>]`` on nodes with more than one NUMA node online: the GPU and its NIC on the same one;
* ``mtu.node[<link layer>]``: one MTU per link layer among the RDMA PFs' netdevs (``rdma_audit_mtu`` for Ethernet);
* ``cgroup.rdma``: no ``rdma.max`` limit below ``max``;
* across the inventory (:func:`inventory_judge`): ``mtu.inventory[<link layer>]``, the inventory's most common MTU.

The section.  The layer has no observer, so ``rdma_facts`` returns no ``layers.topology``: what it judges is the
discovery's top-level keys, which the report's summary and other rooms' older sections read as well, so they stay
where they are rather than being returned twice.  :func:`section_of` (the registry's ``legacy_ref``) picks those
keys from the facts: the audit forms every room's section with ``legacy_ref`` where the facts hold no
``layers.<name>``, and for a room without an observer always (a ``layers.topology`` in an edited facts cache is not
read), so the audit's code has no case of its own for this room and judges exactly the keys it judged before.

Facts of another shape are not turned into ``unknown`` checks here (only a section that is not a mapping is): what
they raise (TypeError, KeyError, ...) reaches ``_audit.audit``, which makes that host unknown with the reason, as
it did before the room; it also runs :func:`inventory_judge` on every host alone first (whatever the host's layers),
so a host whose MTUs :func:`mtu_groups` cannot group is unknown and the others are judged.  One change from the code
before the room: MTUs of another type (not an integer, an ``mtu`` that is not a mapping, a link layer that is not a
name) raise TypeError with the reason, where a string MTU used to be judged (and counted across the inventory) and a
list to fail the whole report when its host did not audit the layer.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections import Counter
from collections.abc import Mapping

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import Checks, check

#: PCIe distance classes of nvidia-smi topo, best first (also the choices of ``rdma_audit_gpu_nic_max_class``)
AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
#: the keys of ``ansible_facts.rdma`` the layer is judged on (its section)
KEYS = ("gpus", "devices", "gpu_nic_affinity", "numa_nodes", "mtu", "rdma_cgroup")


def section_of(facts):
    """The layer's section of one host's facts: the discovery's top-level keys it judges (see the module docstring)."""
    return dict((key, facts.get(key)) for key in KEYS)


def _closest_first(item):
    """Sort key of ``(nic, class)`` pairs: the best PCIe class first (unknown classes last), then the NIC name."""
    nic, cls = item
    return (AFFINITY_ORDER.index(cls) if cls in AFFINITY_ORDER else len(AFFINITY_ORDER), nic)


def _topology(checks, section, desired):
    devices = dict((d["name"], d) for d in section.get("devices") or [])
    matrix = section.get("gpu_nic_affinity") or {}
    limit = (desired or {}).get("rdma_audit_gpu_nic_max_class", "PXB")
    expected = (desired or {}).get("rdma_audit_gpu_nic_map") or {}
    for gpu in section.get("gpus") or []:
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
        online = (section.get("numa_nodes") or {}).get("online") or []
        if len(online) > 1:
            if gpu_numa is None or nic_numa is None:
                checks.add("topology.numa", "unknown", subject=gpu["pci_address"], live={"gpu": gpu_numa, nic: nic_numa},
                           detail="the firmware reports no NUMA node (numa_node = -1)")
            else:
                checks.add("topology.numa", "ok" if gpu_numa == nic_numa else "fail", subject=gpu["pci_address"],
                           desired="same NUMA node", live={"gpu": gpu_numa, nic: nic_numa},
                           remedy="use a NIC on NUMA node %s for this GPU" % gpu_numa)


def _link_layers(device):
    layers = set()
    for port in device.get("ports") or []:
        layer = port.get("link_layer")
        if layer is not None and not isinstance(layer, str):
            raise TypeError("the link layer of a port of %s is %r, not a name" % (device.get("name"), layer))
        layers.add(layer)
    return layers


def _is_mtu(value):
    """An MTU as rdma_facts reads it: an integer (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def mtu_groups(section):
    """``{link_layer: {netdev: mtu}}`` of the RDMA PFs' netdevs (a section, or facts: the same keys); each MTU an
    integer, or None where it could not be read.

    Facts of another shape raise TypeError: an MTU that is not an integer (a string, a list, a boolean, ...), an
    ``mtu`` that is not a mapping, a link layer that is not a name (what else they raise, they raised before).  The
    audit reads this of every host before the inventory judgement (:func:`inventory_judge` of the host alone), so
    such a host is unknown and left out of it (also when it does not audit the layer), and the room's judgement of
    the host raises the same."""
    out = {}
    mtu = section.get("mtu") or {}
    if not isinstance(mtu, Mapping):
        raise TypeError("mtu is a %s, not a mapping of netdevs to MTUs" % type(mtu).__name__)
    for device in section.get("devices") or []:
        if device.get("is_vf"):
            continue
        layer = sorted(_link_layers(device) - {None}) or ["unknown"]
        for netdev in device.get("netdevs") or []:
            if netdev in mtu:
                value = mtu[netdev]
                if value is not None and not _is_mtu(value):
                    raise TypeError("the MTU of %s is %r, not an integer" % (netdev, value))
                out.setdefault(layer[0], {})[netdev] = value
    return out


def _mtu(checks, section, desired):
    want = (desired or {}).get("rdma_audit_mtu")
    for layer, values in sorted(mtu_groups(section).items()):
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


def _cgroup(checks, section):
    limited = {}
    for cgroup, devices in sorted((section.get("rdma_cgroup") or {}).items()):
        for device, limits in sorted(devices.items()):
            small = dict((k, v) for k, v in limits.items() if v != "max")
            if small:
                limited.setdefault(cgroup, {})[device] = small
    checks.add("cgroup.rdma", "ok" if not limited else "drift", desired="max", live=limited or "max",
               remedy="remove the rdma.max limits (echo '<dev> hca_handle=max hca_object=max' > rdma.max)",
               detail=None if not limited else "RDMA cgroup limits cap the verbs objects of the pods below them")


# -- the judgement --------------------------------------------------------------------------------------------------
def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer, in the order
    the audit made them: GPU-NIC affinity and NUMA per GPU, MTU per link layer, the RDMA cgroup."""
    if not isinstance(section, dict):
        return [check("topology.facts", "unknown", detail="the layer's section is not a mapping (%s): the layer is not "
                      "judged" % type(section).__name__)]
    checks = Checks()
    _topology(checks, section, desired)
    _mtu(checks, section, desired)
    _cgroup(checks, section)
    return checks.items


def inventory_judge(sections):
    """``{host: [mtu.inventory]}``: one RDMA MTU per link layer across the inventory (``sections``: ``{host: its
    section or None}``; every host's MTUs count).  On each host with a link layer whose MTUs differ across the
    inventory, per link layer: ``drift`` with the netdevs off the most common MTU, else ``ok`` with its MTUs.

    Only integer MTUs count (an unreadable one, None, does not): :func:`mtu_groups` raises on any other value, and
    the audit leaves a host whose MTUs it cannot group out of ``sections`` (that host is unknown)."""
    groups = dict((name, mtu_groups(section)) for name, section in sections.items() if section is not None)
    by_layer = {}
    for found in groups.values():
        for layer, values in found.items():
            for mtu in values.values():
                if _is_mtu(mtu):
                    by_layer.setdefault(layer, Counter())[mtu] += 1
    out = {}
    for name, found in groups.items():
        for layer, values in sorted(found.items()):
            common = by_layer.get(layer)
            if not common or len(common) < 2:
                continue
            majority = common.most_common(1)[0][0]
            odd = dict((n, m) for n, m in values.items() if _is_mtu(m) and m != majority)
            out.setdefault(name, []).append(check(
                "mtu.inventory", "drift" if odd else "ok", layer, majority, odd or values,
                remedy="give the RDMA netdevs the inventory's MTU %s" % majority))
    return out
