# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift audit: ``rdma_facts`` of every host + the desired state -> a report.  Pure: no I/O, no Ansible.

A check is ``{id, layer, subject, status, desired, live, persisted, remedy, detail}``:

* ``ok``      -- the node matches the desired state (or, without one, no known-bad condition was found);
* ``drift``   -- it differs from the desired state and the collection's provisioning fixes it (``remedy`` says how);
* ``fail``    -- a known-bad condition provisioning cannot fix by itself (topology, a conflict, missing software);
* ``unknown`` -- it could not be read.  Unknown is never ok.

``desired`` per host is the provisioning roles' variables (same names, same defaults) or ``None`` for a
facts-only audit, which reports facts and known-bad conditions only.  See docs/audit.md for the report schema.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import gc
from collections import Counter
from functools import wraps

from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._summary import rdma_topo_matrix

SCHEMA_VERSION = 1
STATUSES = ("ok", "drift", "fail", "unknown")
# the worst status of a host or an inventory: fail > unknown > drift > ok (unknown may hide a failure)
_RANK = {"ok": 0, "drift": 1, "unknown": 2, "fail": 3}
# the facts pseudo-layer, then every layer of the registry (module_utils/layers/_registry.py), in its order
LAYERS = (_layers.FACTS_LAYER,) + _layers.names()
# PCIe distance classes of nvidia-smi topo, best first
AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")


# The inventory variables the audit reads as the desired state: the layers' own (the provisioning roles' variables,
# same names, same defaults; registry order).  A host that does not set one gets the role default
# (see plugins/filter/rdma_audit.py).
DESIRED_VARS = _layers.desired_vars()


def gc_paused(func):
    """Run ``func`` with Python's cyclic garbage collector paused (restored after; nested calls leave it alone).

    A report is a tree of plain dicts and lists, about 2 GB of them at 10,000 hosts: building it (and its texts)
    creates containers that survive, so the collector keeps running full collections, each walking every live
    container, for nothing to collect (a quarter to a third of the comparison's and the writers' time at 3,000
    hosts, docs/benchmarks.md).  Cycles made meanwhile are collected by the next collection after it."""
    @wraps(func)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()
    return paused


def worst(statuses):
    """The worst of ``statuses`` (``ok`` for none)."""
    found = "ok"
    for status in statuses:
        if _RANK[status] > _RANK[found]:
            found = status
    return found


# check id prefixes that belong to another layer (``gpudirect`` -> drivers), from the registry
_PREFIX_LAYER = _layers.prefix_layers()


_LAYER_OF = {}  # check id -> layer: a few hundred ids, asked for about 110 times a host


def layer_of(check_id):
    """The layer of a check id (``gpudirect.path`` -> ``drivers``)."""
    layer = _LAYER_OF.get(check_id)
    if layer is None:
        prefix = check_id.split(".", 1)[0]
        layer = _PREFIX_LAYER.get(prefix, prefix)
        if len(_LAYER_OF) < 4096:
            _LAYER_OF[check_id] = layer
    return layer


class _Checks(object):
    """Collects the checks of one host."""

    def __init__(self, layers):
        self.layers = layers
        self.items = []

    def add(self, check_id, status, desired=None, live=None, persisted=None, remedy=None, detail=None, subject=None):
        layer = layer_of(check_id)
        if layer not in self.layers:
            return
        if status not in _RANK:
            raise ValueError("unknown status %r" % (status,))
        self.items.append({
            "id": check_id, "layer": layer, "subject": subject, "status": status, "desired": desired,
            "live": live, "persisted": persisted, "remedy": remedy if status != "ok" else None, "detail": detail,
        })


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


# the judge of each layer of the registry that is not yet a room (a test holds them to the registry)
_JUDGES = {
    "topology": _topology_layer,
}


def option_problems(desired):
    """The audit's own per-host options (inventory values the role's run_once check does not see) that are not
    what the role's argument spec allows: ``(problems, desired without them)``; pure."""
    if not desired:
        return [], desired
    problems, clean = [], dict(desired)
    value = desired.get("rdma_audit_gpu_nic_max_class")
    if value is not None and value not in AFFINITY_ORDER:
        problems.append("rdma_audit_gpu_nic_max_class must be one of %s, got %r" % (", ".join(AFFINITY_ORDER), value))
        clean.pop("rdma_audit_gpu_nic_max_class")
    value = desired.get("rdma_audit_gpu_nic_map")
    if value is not None and (not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
        problems.append("rdma_audit_gpu_nic_map must map GPU PCI addresses to RDMA device names (strings), got %r"
                        % (value,))
        clean.pop("rdma_audit_gpu_nic_map")
    value = desired.get("rdma_audit_ofed_version")
    if value is not None and not isinstance(value, str):
        problems.append("rdma_audit_ofed_version must be a string such as '24.10-1.1.4', got %r" % (value,))
        clean.pop("rdma_audit_ofed_version")
    value = desired.get("rdma_audit_mtu")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 68):
        problems.append("rdma_audit_mtu must be an integer MTU (68 or more), got %r" % (value,))
        clean.pop("rdma_audit_mtu")
    value = desired.get("rdma_audit_whole_node_pods")
    if value is not None:
        try:
            clean["rdma_audit_whole_node_pods"] = check_type_bool(value)
        except TypeError:
            problems.append("rdma_audit_whole_node_pods must be a boolean, got %r" % (value,))
            clean.pop("rdma_audit_whole_node_pods")
    return problems, clean


def audit_host(facts, desired=None, layers=None, error=None, option_errors=()):
    """The checks of one host: a list of check dicts (see the module docstring)."""
    layers = set(layers or LAYERS) | {"facts"}
    checks = _Checks(layers)
    problems, desired = option_problems(desired)
    for problem in list(option_errors) + problems:
        checks.add("facts.options", "fail", detail=problem,
                   remedy="fix this host's audit option in the inventory (roles/rdma_audit/meta/argument_specs.yml)")
    if facts is None:
        for layer in LAYERS:
            if layer in layers:
                checks.add(layer + ".facts" if layer != "facts" else "facts.gathered", "unknown",
                           detail=error or "rdma_facts did not run on this host")
        return checks.items
    for problem in facts.get("problems") or []:
        checks.add("facts.read", "unknown", subject=problem.get("path"), detail=problem.get("error"))
    for section in ("persisted", "drivers"):
        for problem in (facts.get(section) or {}).get("problems") or []:
            checks.add("facts.read", "unknown", subject=problem.get("path"), detail=problem.get("error"))
    for layer in _layers.LAYERS:
        if layer.name not in layers:
            continue
        if layer.judge is None:
            _JUDGES[layer.name](checks, facts, desired)
            continue
        # a room: its own judgement of its own facts (the module's planner run on them)
        section = _section(layer, facts)  # facts without the room's section: from their other keys
        if section is None:
            continue  # facts of an older collection version, or its observer failed (a facts.read problem)
        for check in layer.judge(section, desired):
            check = dict(check)
            checks.add(check.pop("id"), check.pop("status"), **check)
    return checks.items


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
    _room_inventory_checks(hosts)


def _section(layer, facts):
    """A room's section of one host's facts: ``layers.<name>``, else (facts without it) from their older keys."""
    section = (facts.get("layers") or {}).get(layer.name)
    if section is None and layer.legacy_ref is not None:
        section = layer.legacy_section(facts)
    return section


def _room_inventory_checks(hosts):
    """Each room's judgement across the inventory (``inventory_judge``: the health layer's firmware consistency).
    Every host with facts takes part (a VF GUID is unique on the fabric whether or not its host audits SR-IOV: a
    host that leaves the layer out of ``rdma_audit_layers`` still owns its GUIDs and its firmware); only the hosts
    that audit the layer get its checks."""
    for layer in _layers.LAYERS:
        if layer.inventory_judge is None:
            continue
        sections = dict((name, _section(layer, host["facts"])) for name, host in hosts.items() if host["facts"] is not None)
        for name, found in sorted(layer.inventory_judge(sections).items()):
            if layer.name not in hosts[name]["layers"]:
                continue
            for check in found:
                hosts[name]["checks"].append({
                    "id": check["id"], "layer": layer_of(check["id"]), "subject": check.get("subject"),
                    "status": check["status"], "desired": check.get("desired"), "live": check.get("live"),
                    "persisted": check.get("persisted"), "remedy": check.get("remedy") if check["status"] != "ok" else None,
                    "detail": check.get("detail")})


def _inventory_check(check_id, status, desired, live, remedy, subject=None):
    return {"id": check_id, "layer": layer_of(check_id), "subject": subject, "status": status, "desired": desired,
            "live": live, "persisted": None, "remedy": remedy if status != "ok" else None, "detail": None}


def host_layers(value):
    """``(layers, option errors)`` of one host's ``rdma_audit_layers``: every layer when unset; a value that is not
    a list of layer names fails that host (``facts.options``) and audits every layer."""
    if not value:
        return list(LAYERS), []
    if isinstance(value, (str, bytes)) or not all(layer in LAYERS for layer in value):
        return list(LAYERS), ["rdma_audit_layers of this host must be a list of %s, got %r" % (", ".join(LAYERS), value)]
    return list(value), []


# what facts of another shape raise in a judgement outside the rooms (the rooms guard their own): that host is
# unknown, the others are judged
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


@gc_paused
def audit(hosts, generated=None):
    """The inventory report.  ``hosts`` = ``{name: {"facts": dict|None, "desired": dict|None,
    "layers": [..]|None, "error": str|None}}``; returns the ``report.json`` document (schema version 1)."""
    work = {}
    for name in sorted(hosts):
        spec = hosts[name]
        layers, option_errors = host_layers(spec.get("layers"))
        facts, error = spec.get("facts"), spec.get("error")
        try:
            checks = audit_host(facts, spec.get("desired"), layers, error, option_errors)
            summary = _host_summary(facts)
            _mtu_groups(facts or {})  # the inventory's MTU comparison reads them
        except _MALFORMED as exc:  # facts of another shape (a stale or edited facts cache): this host is unknown
            facts, error = None, "its rdma_facts result has another shape (%s: %s)" % (type(exc).__name__, exc)
            checks, summary = audit_host(None, spec.get("desired"), layers, error, option_errors), None
        work[name] = {"facts": facts, "layers": layers, "checks": checks, "summary": summary,
                      "desired_mode": "facts_only" if spec.get("desired") is None else "desired"}
    _inventory_checks(work)
    out_hosts = {}
    totals = Counter()
    for name, host in work.items():
        counts = Counter(c["status"] for c in host["checks"])
        totals.update(counts)
        status = worst(c["status"] for c in host["checks"])
        summary = host["summary"]
        out_hosts[name] = {
            "status": status, "counts": dict((s, counts.get(s, 0)) for s in STATUSES),
            "audit": host["desired_mode"], "layers": host["layers"], "summary": summary,
            "labels": node_labels(status, summary), "checks": host["checks"],
        }
    by_status = Counter(h["status"] for h in out_hosts.values())
    return dict([
        ("schema_version", SCHEMA_VERSION),
        ("generated", generated),
        ("summary", dict([
            ("hosts", len(out_hosts)), ("status", worst(h["status"] for h in out_hosts.values())),
            ("hosts_by_status", dict((s, by_status.get(s, 0)) for s in STATUSES)),
            ("checks_by_status", dict((s, totals.get(s, 0)) for s in STATUSES)),
        ])),
        ("hosts", out_hosts),
    ])


LABEL_PREFIX = "rdma.k8s-node.io/"


def node_labels(status, summary):
    """Kubernetes node labels for schedulers: the audit status, the netns mode and the GPUDirect path."""
    summary = summary or {}
    return {LABEL_PREFIX + "audit": status,
            LABEL_PREFIX + "netns-mode": summary.get("netns_mode") or "unknown",
            LABEL_PREFIX + "gpudirect": summary.get("gpudirect") or ("none" if summary.get("gpus") else "no-gpu")}


def _host_summary(facts):
    """A few facts a reader of the report wants next to the checks (and the GPU-NIC matrix for report.md)."""
    if facts is None:
        return None
    devices = facts.get("devices") or []
    gpudirect = ((facts.get("drivers") or {}).get("gpudirect") or {}).get("active")
    if gpudirect is None and "nvidia_peermem" in (facts.get("modules") or []):
        gpudirect = "peermem"
    return dict([
        ("rdma_devices", len([d for d in devices if not d.get("is_vf")])),
        ("vfs", sum(len(d.get("vfs") or []) for d in devices)),
        ("gpus", len(facts.get("gpus") or [])),
        ("netns_mode", facts.get("netns_mode")),
        ("gpudirect", gpudirect),
        ("gpu_nic_affinity", facts.get("gpu_nic_affinity") or {}),
        ("topo_matrix", rdma_topo_matrix(facts) if facts.get("gpus") else None),
    ])
