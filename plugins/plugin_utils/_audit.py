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
import json
from collections import Counter
from collections.abc import Mapping
from functools import wraps

from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _layers_check
# the topology room's PCIe classes (the choices of rdma_audit_gpu_nic_max_class, checked below)
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.topology.judge import AFFINITY_ORDER
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._summary import listed, topo_matrix

SCHEMA_VERSION = 1
#: what a reader of checks says of a registered rdma_audit_report without them (rdma_audit_register_checks: false)
NO_CHECKS = ("the report has no checks (registered with rdma_audit_register_checks: false): read report.json, or "
             "register the checks")
STATUSES = ("ok", "drift", "fail", "unknown")
# the worst status of a host or an inventory: fail > unknown > drift > ok (unknown may hide a failure)
_RANK = {"ok": 0, "drift": 1, "unknown": 2, "fail": 3}
# the facts pseudo-layer, then every layer of the registry (module_utils/layers/_registry.py), in its order
LAYERS = (_layers.FACTS_LAYER,) + _layers.names()


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
        self.extend((_layers_check(check_id, status, subject, desired, live, persisted=persisted, remedy=remedy,
                                   detail=detail),))

    def extend(self, judged):
        """Add a room's checks (``layers.check`` dicts) as :meth:`add` would, without a call per check: a room's
        check with a key ``layers.check`` does not make is refused as :meth:`add` refuses an unknown argument."""
        layers, items = self.layers, self.items
        for check in judged:
            check_id, status = check["id"], check["status"]
            if not _CHECK_KEYS.issuperset(check):
                raise TypeError("a check of %s has unknown keys: %s" % (check_id, sorted(set(check) - _CHECK_KEYS)))
            layer = layer_of(check_id)
            if layer not in layers:
                continue
            if status not in _RANK:
                raise ValueError("unknown status %r" % (status,))
            get = check.get
            items.append({
                "id": check_id, "layer": layer, "subject": get("subject"), "status": status, "desired": get("desired"),
                "live": get("live"), "persisted": get("persisted"),
                "remedy": get("remedy") if status != "ok" else None, "detail": get("detail"),
            })


# the keys of a room's check (layers.check); a room may leave out all but id and status
_CHECK_KEYS = frozenset(("id", "status", "subject", "desired", "live", "persisted", "remedy", "detail"))


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
        # every layer is a room: its own judgement of its own section of the facts
        section = _section(layer, facts)  # facts without the room's section: from their other keys
        if section is None:
            continue  # facts of an older collection version, or its observer failed (a facts.read problem)
        checks.extend(layer.judge(section, desired))
    return checks.items


def _section(layer, facts):
    """A room's section of one host's facts: ``layers.<name>``, else (facts without it) from their older keys; a room
    without an observer (topology) has no ``layers.<name>``: always from the keys it judges."""
    section = (facts.get("layers") or {}).get(layer.name) if layer.observe is not None else None
    if section is None and layer.legacy_ref is not None:
        section = layer.legacy_section(facts)
    return section


# the rooms with an inventory judgement, in the order their checks join a host's: the registry's, except that the
# topology room's mtu.inventory comes first, where the audit put it before topology was a room
_INVENTORY_ROOMS = tuple(sorted((layer for layer in _layers.LAYERS if layer.inventory_judge_ref is not None),
                                key=lambda layer: layer.name != "topology"))


def _inventory_checks(hosts):
    """Each room's judgement across the inventory (``inventory_judge``: one RDMA MTU per link layer, VF GUIDs
    unique, one firmware per NIC model, ...).  Every host with facts takes part (a VF GUID is unique on the fabric
    whether or not its host audits SR-IOV: a host that leaves the layer out of ``rdma_audit_layers`` still owns its
    GUIDs, its MTUs and its firmware); only the hosts that audit the layer get its checks.  ``hosts[name]["sections"]``
    is what :func:`_judge_alone` kept of the host's facts (None without facts)."""
    for layer in _INVENTORY_ROOMS:
        sections = dict((name, host["sections"][layer.name]) for name, host in hosts.items()
                        if host["sections"] is not None)
        for name, found in sorted(layer.inventory_judge(sections).items()):
            if layer.name not in hosts[name]["layers"]:
                continue
            for check in found:
                hosts[name]["checks"].append({
                    "id": check["id"], "layer": layer_of(check["id"]), "subject": check.get("subject"),
                    "status": check["status"], "desired": check.get("desired"), "live": check.get("live"),
                    "persisted": check.get("persisted"), "remedy": check.get("remedy") if check["status"] != "ok" else None,
                    "detail": check.get("detail")})


def decode_facts_zlib(blob):
    """``(facts, error)`` of one host's facts as ``rdma_audit_gather``'s compressed text (``rdma_facts_json_zlib``:
    ``_facts_text``, at most ``_facts_text.MAX_TEXT`` bytes of JSON once inflated)."""
    text, error = _facts_text.inflate(blob)
    return decode_facts(text) if error is None else (None, "rdma_audit_gather returned %s" % error)


def decode_facts(text):
    """``(facts, error)`` of one host's facts as ``rdma_audit_gather``'s JSON text (``rdma_facts_json``)."""
    try:
        facts = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError as exc:
        return None, "rdma_audit_gather returned facts that are not JSON: %s" % exc
    except RecursionError:
        return None, "rdma_audit_gather returned facts nested too deeply to be decoded"
    if not isinstance(facts, dict):
        return None, "rdma_audit_gather returned facts that are not a JSON object: %s" % type(facts).__name__
    return facts, None


def host_layers(value):
    """``(layers, option errors)`` of one host's ``rdma_audit_layers``: every layer when unset; a value that is not
    a list of layer names fails that host (``facts.options``) and audits every layer."""
    if not value:
        return list(LAYERS), []
    if isinstance(value, (str, bytes)) or not all(layer in LAYERS for layer in value):
        return list(LAYERS), ["rdma_audit_layers of this host must be a list of %s, got %r" % (", ".join(LAYERS), value)]
    return list(value), []


# what facts of another shape raise in audit_host, in a judgement that does not turn them into unknown checks itself
# (the topology room's, which judges the discovery's keys as the audit did before it was a room) or in an inventory
# judgement of the host alone (the topology room's mtu_groups: an MTU that is not an integer raises TypeError): that
# host is unknown, the others are judged.  The summary raises nothing (it shows what it can read).
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


def _judge_alone(name, facts):
    """``{room: its section}`` of the rooms with an inventory judgement, each judged for this host alone first, for
    what it raises: the inventory's reads every host's section, whatever the host's layers, so a section it cannot
    judge (an MTU that is not an integer, VFs that are not a list, ...) makes this host unknown instead of failing the
    whole report.  About 2% of a host's audit.  The sections are all the inventory run keeps of a host's facts (the
    whole facts are dropped once the host is judged: about 0.7 MB decoded on a DGX H100)."""
    if facts is None:
        return None
    sections = {}
    for layer in _INVENTORY_ROOMS:
        sections[layer.name] = _section(layer, facts)
        layer.inventory_judge({name: sections[layer.name]})
    return sections


@gc_paused
def audit(hosts, generated=None):
    """The inventory report.  ``hosts`` = ``{name: {"facts": dict|None, "desired": dict|None,
    "layers": [..]|None, "error": str|None}}``; returns the ``report.json`` document (schema version 1).

    A host's facts may come as ``"facts_json"`` (``rdma_audit_gather``'s text) or ``"facts_json_zlib"`` (that text
    compressed, ``compress: true``) instead of ``"facts"``: they are then
    decoded here, one host at a time, and dropped once that host is judged, so the audit never holds every host's
    decoded facts at once (the controller's peak memory at N hosts)."""
    work = {}
    for name in sorted(hosts):
        spec = hosts[name]
        layers, option_errors = host_layers(spec.get("layers"))
        facts, error = spec.get("facts"), spec.get("error")
        if facts is None and spec.get("facts_json_zlib") is not None:
            facts, error = decode_facts_zlib(spec["facts_json_zlib"])
        elif facts is None and spec.get("facts_json") is not None:
            facts, error = decode_facts(spec["facts_json"])
        try:
            checks = audit_host(facts, spec.get("desired"), layers, error, option_errors)
            summary = _host_summary(facts)
            sections = _judge_alone(name, facts)
        except _MALFORMED as exc:  # facts of another shape (a stale or edited facts cache): this host is unknown
            error = "its rdma_facts result has another shape (%s: %s)" % (type(exc).__name__, exc)
            checks, summary, sections = audit_host(None, spec.get("desired"), layers, error, option_errors), None, None
        work[name] = {"sections": sections, "layers": layers, "checks": checks, "summary": summary,
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


def _mapping(value):
    return value if isinstance(value, Mapping) else {}


def _named(value):
    return value if isinstance(value, str) else None


def _host_summary(facts):
    """A few facts a reader of the report wants next to the checks (and the GPU-NIC matrix for report.md).

    A view, not a judgement: it never raises on facts of another shape (the judges report those, per layer, or the
    audit makes the host unknown).  A list, a mapping or a name (the netns mode, the GPUDirect path: node labels) of
    another type reads as absent, a device or GPU that is not a mapping is not counted, and the matrix is drawn from
    what can be read (``_summary.topo_matrix``: a GPU without an affinity row is a row of ``?``)."""
    if facts is None:
        return None
    devices = [d for d in listed(facts.get("devices")) if isinstance(d, Mapping)]
    gpus = [g for g in listed(facts.get("gpus")) if isinstance(g, Mapping)]
    gpudirect = _mapping(_mapping(facts.get("drivers")).get("gpudirect")).get("active")
    if gpudirect is None and "nvidia_peermem" in listed(facts.get("modules")):
        gpudirect = "peermem"
    affinity = _mapping(facts.get("gpu_nic_affinity"))
    return dict([
        ("rdma_devices", len([d for d in devices if not d.get("is_vf")])),
        ("vfs", sum(len(listed(d.get("vfs"))) for d in devices)),
        ("gpus", len(gpus)),
        ("netns_mode", _named(facts.get("netns_mode"))),
        ("gpudirect", _named(gpudirect)),
        ("gpu_nic_affinity", affinity),
        ("topo_matrix", topo_matrix(gpus, devices, affinity) if gpus else None),
    ])
