# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kubelet`` layer's audit judgement: the module's planner run on the facts (``layers.kubelet``).

* ``kubelet.config``: ``kubelet_topology``'s plan for the role's variables, as roles/kubelet_topology/tasks calls the
  module: ``ok`` when it has nothing to do, else ``drift`` with the plan's actions as the evidence (``detail``:
  ``planned: [...]``); ``fail`` when the module would refuse (its message), ``unknown`` when the facts do not hold
  what the plan reads.  Not judged on facts without ``layers.kubelet.observed``.
* ``kubelet.topology`` (the effective settings against the role's), ``kubelet.override`` (a later drop-in or a flag
  overrides the role's setting: the planner with on_conflict=ignore; a flag only the running kubelet still has),
  ``kubelet.state_file`` (a checkpoint of another policy) and ``kubelet.whole_node`` (the Topology Manager policy
  admits a pod asking for every GPU and RDMA NIC of the node), as the audit judged them before the room.

Facts gathered before the layer was a room (no ``layers.kubelet``) are judged through :func:`section_of`, from
``runtime.kubelet`` and the node's GPUs and NICs; they get no ``kubelet.config`` check.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as _topo
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import (
    check as _check,
    FactFiles, MissingFacts, desired_bool, omitted, role_params,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub

REMEDY = "run the kubelet_topology role (kubelet_topology_restart_ok=true to restart kubelet)"
_KUBELET_KEYS = (
    ("kubelet_topology_topology_manager_policy", "topologyManagerPolicy"),
    ("kubelet_topology_topology_manager_scope", "topologyManagerScope"),
    ("kubelet_topology_topology_manager_policy_options", "topologyManagerPolicyOptions"),
    ("kubelet_topology_cpu_manager_policy", "cpuManagerPolicy"),
    ("kubelet_topology_memory_manager_policy", "memoryManagerPolicy"),
)
# the role's defaults (roles/kubelet_topology/defaults/main.yml) where the desired state has none
ROLE_DEFAULTS = {
    "kubelet_topology_topology_manager_policy": "restricted",
    "kubelet_topology_topology_manager_scope": "container",
    "kubelet_topology_topology_manager_policy_options": {},
    "kubelet_topology_topology_manager_default_options": {"prefer-closest-numa-nodes": "true"},
    "kubelet_topology_mode": "auto",
    "kubelet_topology_on_conflict": "fail",
}


def section_of(facts):
    """The ``layers.kubelet`` section from facts without it (an older collection, or its observer failed): the
    ``runtime.kubelet`` report (when there is one) without the planner's input, and ``numa`` from the facts' GPUs,
    RDMA NICs and NUMA nodes."""
    kubelet = (facts.get("runtime") or {}).get("kubelet")
    out = dict(kubelet) if kubelet is not None else {}
    out["numa"] = _observe.numa_of(facts)
    return out


def _role(desired, var):
    value = desired.get(var)
    return ROLE_DEFAULTS.get(var) if value is None else value


def params_of(desired):
    """kubelet_topology's options exactly as the role passes them (roles/kubelet_topology/tasks/main.yml; the role's
    defaults where ``desired`` has none), checked and converted by the module's own argument spec (InputError, naming
    the variable, for what the module would refuse); ``dropin_name``, ``config`` and ``healthz_url`` are the module's
    defaults (the role does not pass them)."""
    return role_params(_plan.argument_spec(), {
        "topology_manager_policy": _role(desired, "kubelet_topology_topology_manager_policy"),
        "topology_manager_scope": _role(desired, "kubelet_topology_topology_manager_scope"),
        "topology_manager_policy_options": _role(desired, "kubelet_topology_topology_manager_policy_options"),
        "topology_manager_default_options": _role(desired, "kubelet_topology_topology_manager_default_options"),
        "cpu_manager_policy": omitted(desired.get("kubelet_topology_cpu_manager_policy")),
        "reserved_system_cpus": omitted(desired.get("kubelet_topology_reserved_system_cpus")),
        "memory_manager_policy": omitted(desired.get("kubelet_topology_memory_manager_policy")),
        "reserved_memory": omitted(desired.get("kubelet_topology_reserved_memory")),
        "mode": _role(desired, "kubelet_topology_mode"),
        "on_conflict": _role(desired, "kubelet_topology_on_conflict"),
        "restart": desired_bool(desired, "kubelet_topology_restart_ok", False),
        "backup": False, "host_root": "/"}, "kubelet_topology_")


def observed_of(observed):
    """What :func:`plan.plan` reads, from the facts' ``observed`` (:func:`observe.planner_input`)."""
    documents = {}
    for path, text in observed["documents"].items():
        data, fmt = kub.load_document(text, path)
        documents[path] = {"path": path, "text": text, "fmt": fmt, "data": data}
    cpus = observed["cpus_online"]
    return {"version": tuple(observed["version"]), "service": observed["service"], "line": observed["line"],
            "config_file": observed["config_file"], "layers": observed["layers"], "documents": documents,
            "layers_error": None, "cpus_online": kub.parse_cpuset(cpus, "cpus_online") if cpus else set(),
            "numa_nodes": set(observed["numa_nodes"]), "state_files": observed["state_files"],
            "state_exists": observed["state_exists"],
            "files": FactFiles(((path, _observe.file_state(item)) for path, item in observed["files"].items()),
                               "the collection's drop-in under the names it can take with the default dropin_name, "
                               "the config file and the environment files of the kubelet's flags")}


def role_options(desired):
    """``(params, want)``: kubelet_topology's options for the role's variables and the KubeletConfiguration fields
    they ask for, or InputError (naming the variable) where the module would refuse them before any change."""
    params = params_of(desired)
    return params, _plan.validate(params)


def variables_check(error):
    """``kubelet.config`` ``fail`` for variables the module refuses (InputError of :func:`role_options`)."""
    return _check("kubelet.config", "fail", remedy="correct the kubelet_topology role's variables: the role fails on "
                  "them before any change", detail=error.msg)


def plan_check(section, params, want):
    """``kubelet.config``: kubelet_topology's plan on the facts (None on facts without the planner's input), for
    the role's options (:func:`role_options`)."""
    if "observed" not in section:
        return None  # facts of an older collection version
    observed = section["observed"]
    subject = section.get("config_dir") or section.get("config_file")
    if observed is None:
        why = "; ".join("%s: %s" % (p.get("what"), p.get("error")) for p in section.get("problems") or []) or \
            "the kubelet's configuration could not be read"
        return _check("kubelet.config", "unknown", subject, detail="kubelet_topology's plan cannot be made from the "
                      "facts: %s" % why)
    if observed.get("error"):
        return _check("kubelet.config", "unknown", subject, detail="kubelet_topology's plan cannot be made from the "
                      "facts: %s" % observed["error"])
    if observed["version"] is None and observed.get("version_error"):
        return _check("kubelet.config", "fail", subject, remedy="install the kubelet (not managed by this collection)",
                      detail=observed["version_error"])
    if observed["version"] is None:
        return _check("kubelet.config", "unknown", subject, detail="kubelet_topology's plan cannot be made from the "
                      "facts: rdma_facts could not read the kubelet's version (%s --version)"
                      % ((section.get("rancher") or {}).get("binary") or "kubelet"))
    try:
        planned = _plan.plan(params, want, observed_of(observed))
    except MissingFacts as exc:
        return _check("kubelet.config", "unknown", subject, detail=exc.msg)
    except RdmaNodeError as exc:
        return _check("kubelet.config", "fail", subject, remedy="see docs/kubelet.md: kubelet_topology refuses this "
                      "node with the role's variables", detail=exc.msg)
    work = planned["actions"]
    target = planned["extra"]["target"]["path"]
    return _check("kubelet.config", "drift" if work else "ok", target, desired=want,
                  persisted=planned["report"]["persisted"], remedy=REMEDY if work else None,
                  detail="planned: %s" % work if work else None)


def _want(desired):
    """The KubeletConfiguration fields the role's variables ask for, as the module computes them."""
    params = dict((var[len("kubelet_topology_"):], desired.get(var)) for var, dummy_key in _KUBELET_KEYS)
    if not params.get("topology_manager_policy_options"):
        params["topology_manager_policy_options"] = None
    return kub.desired_settings(params)


def override_remedy(conflict):
    """What removes an override (``rules.find_conflicts``' conflict), for people."""
    if conflict["kind"] == "flags":
        origins = [f.get("origin") or {} for f in conflict["flags"]]
        if origins and all(o.get("how") == "kubelet-arg" and o.get("file") for o in origins):
            # k3s/rke2: the flag comes from a kubelet-arg of their config.yaml(.d), which the collection never edits
            return ("remove %s from the kubelet-arg list of %s, then restart the k3s/rke2 unit" % (
                ", ".join(f["flag"] for f in conflict["flags"]), ", ".join(sorted(set(o["file"] for o in origins)))))
        if all(o.get("how") == "EnvironmentFile" and o.get("var") for o in origins):
            return ("remove %s, or run the kubelet_topology role with kubelet_topology_on_conflict=override (it takes the "
                    "flag out of %s)" % (conflict["source"], ", ".join(sorted(set(o["file"] for o in origins)))))
        return "remove %s from the kubelet's command line (systemd unit: then systemctl daemon-reload)" % conflict["source"]
    return ("remove %s from %s, or run the kubelet_topology role with kubelet_topology_on_conflict=override (its drop-in "
            "then sorts after it)" % (conflict["key"], conflict["source"]))


def settings_checks(kubelet, desired):
    """``kubelet.topology``, ``kubelet.override`` (:func:`override_checks`) and ``kubelet.state_file``
    (:func:`state_file_checks`) of the kubelet's report."""
    checks = []
    settings = kubelet.get("settings") or {}
    if not settings:
        return [_check("kubelet.topology", "unknown", detail="no kubelet configuration could be read (%s)"
                       % kubelet.get("config_file"))]
    want, have = {}, {}
    for var, key in _KUBELET_KEYS:
        value = desired.get(var)
        if value in (None, {}, ""):
            continue
        want[key], have[key] = value, settings.get(key)
    layers = kubelet.get("layers") or []
    if want:
        deciders = []
        for key in sorted(k for k in want if want[k] != have[k]):
            index = kub.decider(layers, key) if layers else None
            if index is not None:
                deciders.append("%s from %s" % (key, kub.describe_layer(layers[index], key)))
        checks.append(_check("kubelet.topology", "ok" if want == have else "drift", desired=want, persisted=have,
                             live="running" if kubelet.get("running") else "not running", remedy=REMEDY,
                             detail="set by " + "; ".join(deciders) if deciders else None))
    if want and layers:
        checks.extend(override_checks(kubelet, layers, desired))
    return checks + state_file_checks(kubelet)


def state_file_checks(kubelet):
    """``kubelet.state_file``: a checkpoint of another policy than the configured one."""
    checks = []
    settings = kubelet.get("settings") or {}
    for key, state in sorted((kubelet.get("state_files") or {}).items()):
        configured = settings.get(key)
        policy = (state or {}).get("policy")
        if policy is not None and configured is not None and str(policy).lower() != str(configured).lower():
            checks.append(_check("kubelet.state_file", "fail", subject=key, desired=configured, live=policy,
                                 persisted=state.get("path"),
                                 remedy="stop kubelet, remove %s, start kubelet (kubelet_topology does this)"
                                 % state.get("path"),
                                 detail="kubelet refuses to start when its state file names another policy"))
    return checks


def override_checks(kubelet, layers, desired):
    """Later drop-ins and flags that override what the role sets, judged by the module's own planner (rules.plan)."""
    want = _want(desired)
    target = kub.audit_target(kubelet, desired.get("kubelet_topology_mode") or "auto")
    if target["mode"] == "config" and not any(layer["kind"] == "config" for layer in layers):
        return [_check("kubelet.override", "unknown", detail="the kubelet reads no config file (%s) and the role would "
                       "not write a drop-in: where its settings would go is unknown"
                       % (kubelet.get("config_file") or "no --config"))]
    try:
        planned = kub.plan(layers, want, target, "ignore")
    except RdmaNodeError as exc:
        return [_check("kubelet.override", "unknown", detail=exc.msg)]
    checks, found = [], set()
    for conflict in planned["conflicts"]:
        subject = conflict["key"] + ("." + conflict["option"] if conflict["option"] else "")
        found.update(f["flag"] for f in conflict["flags"])
        checks.append(_check("kubelet.override", "fail", subject=subject, desired=conflict["want"],
                             live=conflict["value"], persisted=conflict["source"], remedy=override_remedy(conflict),
                             detail="%s: the role's setting cannot take effect" % kub.conflict_text(conflict)))
    live = kubelet.get("live_flags")
    if live is None:
        return checks
    persistent = set(f["flag"] for layer in layers if layer["kind"] == "flags" for f in layer["flags"])
    live_layers = planned["layers"][:-1] + [kub.flags_layer(live, "the running kubelet")]
    for conflict in kub.find_conflicts(live_layers, want, planned["ours"]):
        stale = [f["flag"] for f in conflict["flags"] if f["flag"] not in persistent and f["flag"] not in found]
        if stale:
            checks.append(_check("kubelet.override", "drift", subject=conflict["key"], desired=conflict["want"],
                                 live=conflict["value"], persisted=", ".join(stale),
                                 remedy="restart the kubelet (kubelet_topology_restart_ok=true): its unit no longer "
                                 "sets %s" % ", ".join(stale),
                                 detail="the running kubelet: %s" % kub.conflict_text(conflict)))
    return checks


def whole_node(section, desired):
    """``kubelet.whole_node``: the Topology Manager policy (the desired one, else the kubelet's) admits a pod asking
    for every GPU and RDMA NIC of the node, by the kubelet's hint merge (``_topology.whole_node_admission``)."""
    if desired is not None and desired.get("rdma_audit_whole_node_pods") is False:
        return []
    numa = section.get("numa") or {}
    gpus, nics = numa.get("gpus") or [], numa.get("rdma") or []
    if not gpus or not nics:
        return []
    settings = section.get("settings") or {}
    desired = desired or {}

    def pick(var, key, default):
        value = desired.get(var)
        if value in (None, "", {}):
            value = settings.get(key)
        return default if value in (None, "") else value

    policy = pick("kubelet_topology_topology_manager_policy", "topologyManagerPolicy", "none")
    scope = pick("kubelet_topology_topology_manager_scope", "topologyManagerScope", "container")
    options = pick("kubelet_topology_topology_manager_policy_options", "topologyManagerPolicyOptions", {})
    devices = {"gpu": list(gpus), "rdma": list(nics)}
    why = _topo.whole_node_admission(policy, options if isinstance(options, dict) else None, scope, devices,
                                     numa_nodes=numa.get("online"),
                                     cpu_manager_policy=pick("kubelet_topology_cpu_manager_policy", "cpuManagerPolicy", "none"),
                                     memory_manager_policy=pick("kubelet_topology_memory_manager_policy",
                                                                "memoryManagerPolicy", "None"))
    span = sorted(set(n for n in devices["gpu"] + devices["rdma"] if isinstance(n, int) and n >= 0))
    return [_check("kubelet.whole_node", "fail" if why else "ok", subject=policy,
                   desired="a pod asking for all %d GPUs and %d RDMA NICs is admitted" % (len(gpus), len(nics)),
                   live={"policy": policy, "scope": scope, "numa_nodes": span},
                   remedy="kubelet_topology_topology_manager_policy=restricted (or best-effort), or "
                          "rdma_audit_whole_node_pods=false when no pod asks for the whole node" if why else None,
                   detail=why)]


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    if section is None:
        return []
    checks = []
    if desired is not None and "settings" in section:
        try:
            params, want = role_options(desired)
        except InputError as exc:  # the role fails on its variables: nothing it would do can be judged
            return [variables_check(exc)] + state_file_checks(section)
        planned = plan_check(section, params, want)
        if planned is not None:
            checks.append(planned)
        checks.extend(settings_checks(section, desired))
    return checks + whole_node(section, desired)
