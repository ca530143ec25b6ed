# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kubelet`` layer's planner, pure: kubelet_topology's options + what :func:`observe.collect` read -> the file
writes (the collection's drop-in, or the config file), the environment-file flag edits, the stale state files, the
restart decision, the warnings, what changes, the conflicts, and the refusals (typed errors).

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts
(judge.py): a plan with work is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from urllib.parse import urlsplit

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import conf_name_pattern, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub

# a drop-in the kubelet reads from --config-dir: *.conf, not hidden
DROPIN_NAME_RE = conf_name_pattern(".conf")
ON_CONFLICT = ("fail", "override", "ignore")


def argument_spec():
    """kubelet_topology's argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        topology_manager_policy=dict(type="str", choices=list(kub.TOPOLOGY_POLICIES)),
        topology_manager_scope=dict(type="str", choices=list(kub.TOPOLOGY_SCOPES)),
        topology_manager_policy_options=dict(type="dict"),
        topology_manager_default_options=dict(type="dict"),
        cpu_manager_policy=dict(type="str", choices=list(kub.CPU_POLICIES)),
        reserved_system_cpus=dict(type="str"),
        memory_manager_policy=dict(type="str", choices=list(kub.MEMORY_POLICIES)),
        reserved_memory=dict(type="list", elements="dict", options=dict(
            numa_node=dict(type="int", required=True),
            limits=dict(type="dict", required=True),
        )),
        mode=dict(type="str", default="auto", choices=["auto", "dropin", "config"]),
        dropin_name=dict(type="str", default="50-rdma-k8s-node-topology.conf"),
        config=dict(type="path", default="/var/lib/kubelet/config.yaml"),
        restart=dict(type="bool", default=False),
        restart_timeout=dict(type="int", default=60),
        settle_time=dict(type="int", default=15),
        healthz_url=dict(type="str", default="http://127.0.0.1:10248/healthz"),
        on_conflict=dict(type="str", default="fail", choices=list(ON_CONFLICT)),
        backup=dict(type="bool", default=False),
        host_root=dict(type="path", default="/"),
    )


def validate(params):
    """Strict checks of the options the argument spec cannot express; each message names the option and value.
    Returns the wanted KubeletConfiguration fields (``rules.desired_settings``)."""
    if params["reserved_system_cpus"] is not None:
        kub.parse_cpuset(params["reserved_system_cpus"], "reserved_system_cpus")
    name = params["dropin_name"]
    if not DROPIN_NAME_RE.match(name):
        raise InputError("dropin_name must be a file name ending in .conf, of letters, digits and _ . @ + - and not "
                         "starting with a dot (the kubelet reads nothing else), got %r" % (name,))
    if params["restart_timeout"] < 1:
        raise InputError("restart_timeout must be at least 1 second, got %d" % params["restart_timeout"])
    if params["settle_time"] < 0:
        raise InputError("settle_time must be 0 or more seconds, got %d" % params["settle_time"])
    scheme = urlsplit(params["healthz_url"]).scheme
    if scheme not in ("http", "https"):
        # open_url also opens file:// and ftp:// URLs, and the body ends up in the failure message
        raise InputError("healthz_url must be an http:// or https:// URL (the kubelet's healthz endpoint), got %r"
                         % (params["healthz_url"],))
    want = kub.desired_settings(params)
    if not want:
        raise InputError("nothing to do: set at least one of topology_manager_policy, topology_manager_scope, "
                         "topology_manager_policy_options, cpu_manager_policy, reserved_system_cpus, memory_manager_policy, "
                         "reserved_memory")
    return want


def resolve_target(params, version, line):
    """``(target dict for rules.plan, config path)`` from the mode and the kubelet's command line."""
    config = line["config"]
    if config is None and line["source"] in (None, "env files"):
        config = params["config"]  # nothing says how the kubelet starts: the documented default
    flags = dict((k, v) for k, v in (("config", config), ("config-dir", line["config_dir"])) if v)
    mode, where = kub.choose_target(params["mode"], version, flags, params["config"])
    if mode == "dropin":
        return {"mode": "dropin", "dir": where, "name": params["dropin_name"]}, config
    if config is None:
        raise ApplyError("the kubelet runs without --config (its command line from %s): it reads no config file to edit; "
                         "use mode=dropin with --config-dir (kubelet 1.30 or later), or start it with --config"
                         % (line["unit"] or "its process"))
    return {"mode": "config", "path": where}, config


def rancher_target(params, version, line):
    """The drop-in target in k3s's/rke2's ``kubelet.conf.d`` (the directory k3s passes as ``--config-dir`` and its
    documentation tells users to put drop-ins in), or a refusal that says how to do it by hand."""
    info = line["rancher"]
    if params["mode"] == "config":
        raise InputError("mode=config: %s passes the kubelet no config file (--config), only --config-dir=%s; use "
                         "mode=auto or mode=dropin" % (info["tool"], info["dropin_dir"]))
    refusal = kr.dropin_refusal(line, version)
    if refusal:
        raise ApplyError(refusal, {"tool": info["tool"], "version": ".".join(str(p) for p in version)})
    return {"mode": "dropin", "dir": info["dropin_dir"], "name": params["dropin_name"]}


def flag_edits(files, remove_flags):
    """FilePlans that take the ``remove_flags`` (from rules.plan) out of the environment files that set them
    (``files``: {path: FileState}, :func:`observe.collect`)."""
    by_file = {}
    for flag in remove_flags:
        origin = flag["origin"]
        by_file.setdefault(origin["file"], {}).setdefault(origin["var"], set()).add(flag["name"])
    plans = []
    for path in sorted(by_file):
        state = files[path]
        text = state.content or ""
        for var, names in sorted(by_file[path].items()):
            text = kub.remove_flags_from_env(text, var, names, path)
        plans.append(plan_file(state, text, state.mode, state.uid, state.gid))
    return plans


def _stale_flags(line, planned, want, warn):
    """A flag only the running kubelet still has (its unit no longer sets it): a restart clears it."""
    stale = []
    if line["live_flags"] is not None and line["flags_from"] != "/proc/%s/cmdline" % line["pid"]:
        live_layers = planned["layers"][:-1] + [kub.flags_layer(line["live_flags"], "/proc/%d/cmdline" % line["pid"])]
        persistent = set(f["flag"] for f in line["flags"])
        for conflict in kub.find_conflicts(live_layers, want, planned["ours"]):
            if any(f["flag"] not in persistent for f in conflict["flags"]):
                stale.append(conflict)
                warn("the running kubelet: %s; its unit no longer sets that flag, a restart clears it"
                     % kub.conflict_text(conflict))
    return stale


def _file_plans(target, planned, documents, files, want, config_path):
    path = planned["layers"][planned["ours"]]["path"]
    if target["mode"] == "dropin":
        plans = [plan_file(files[path], kub.render_own_dropin(planned["content"]), 0o644)]
        plans += [plan_file(files[gone], None, 0o644) for gone in planned["delete"]]
        return plans
    doc = documents[config_path]
    updates = dict((k, v) for k, v in kub.config_update(doc["data"], want).items()
                   if k not in doc["data"] or doc["data"][k] != v)
    text = kub.edit_document(doc["text"], doc["fmt"], updates, config_path) if updates else doc["text"]
    state = files[config_path]
    return [plan_file(state, text, state.mode, state.uid, state.gid)]


def plan(params, want, observed, warn=None):  # pylint: disable=too-many-locals,too-many-statements
    """The plan for ``want`` (:func:`validate`) with the module's ``params`` (``mode``, ``dropin_name``, ``config``,
    ``on_conflict``, ``restart``, ``topology_manager_default_options``) on ``observed`` (:func:`observe.collect`;
    the judge builds the same from the facts).  ``warn(message)`` receives the warnings, in the module's order.

    Returns ``{"actions", "plans" ([FilePlan] in the order they are applied), "diffs", "report" (the module's
    ``observed``), "extra" (the module's other keys: ``changes``, ``target``, ``conflicts``, ``overridden``,
    ``removed_state_files``, ``backup_files``, ``default_options``, ``stale_state_files``), "stale_states" (the
    checkpoints moved aside), "needs_restart", "restarting" (``needs_restart`` and ``restart``), "service"}``;
    ``actions``: each file's write, then with ``restart`` each stale checkpoint's ``delete_file`` and the
    ``restart``.  Refusals raise InputError, ApplyError or ConflictError (``rules.plan``)."""
    warn = warn or (lambda message: None)
    want = dict(want)
    line, version = observed["line"], observed["version"]
    if line.get("rancher"):
        target, config_path = rancher_target(params, version, line), None
    else:
        target, config_path = resolve_target(params, version, line)
    if observed.get("layers_error") is not None:
        raise observed["layers_error"]
    layers, documents, files = list(observed["layers"]), observed["documents"], observed["files"]
    for problem in line["problems"]:
        warn("%s: %s" % (problem["what"], problem["error"]))
    layers.append(kub.flags_layer(line["flags"], line["flags_from"] or "the kubelet's command line"))
    own = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    for layer in layers:
        if layer.get("ours"):
            own.update(documents[layer["path"]]["data"])
    others = kub.effective([layer for layer in layers if not layer.get("ours")])
    added, left_out = kub.default_options(params["topology_manager_default_options"], want, others, version)
    if added:
        want["topologyManagerPolicyOptions"] = dict(want.get("topologyManagerPolicyOptions") or {}, **added)
    for reason in left_out.values():
        warn("topology_manager_default_options: left out: %s" % reason)
    planned = kub.plan(layers, want, target, params["on_conflict"], own)
    after = planned["after"]
    for warning in kub.validate(want, after, version, observed["cpus_online"], observed["numa_nodes"]):
        warn(warning)
    for conflict in planned["conflicts"]:
        warn("on_conflict=ignore: " + kub.conflict_text(conflict))
    stale_flags = _stale_flags(line, planned, want, warn)
    changes = kub.changes(planned["before"], after, want)
    path = planned["layers"][planned["ours"]]["path"]
    report = {
        "kubelet_version": ".".join(str(p) for p in version),
        "persisted": dict((k, planned["before"][k]) for k in kub.MANAGED_KEYS if k in planned["before"]),
        "state_files": dict((p, _observe.state_policy(observed["state_files"].get(p))) for p in kub.STATE_FILES.values()),
        "command_line": {"source": line["source"], "unit": line["unit"], "pid": line["pid"], "config": config_path,
                         "config_dir": line["config_dir"], "flags": ["%s (%s)" % (f["flag"], f["source"])
                                                                     for f in line["flags"]]},
        "config_format": documents[config_path]["fmt"] if config_path in documents else None,
        "dropins": [layer["path"] for layer in layers if layer["kind"] == "dropin"],
    }
    extra = {"changes": changes, "target": {"mode": target["mode"], "path": path},
             "conflicts": planned["conflicts"], "overridden": planned["overridden"],
             "removed_state_files": [], "backup_files": {},
             "default_options": {"applied": added, "left_out": left_out}}
    env_plans = flag_edits(files, planned["remove_flags"])
    plans = [p for p in _file_plans(target, planned, documents, files, want, config_path) + env_plans if p.changed]
    diffs = []
    if changes:
        diffs.append({"before": dict((k, v["before"]) for k, v in changes.items()),
                      "after": dict((k, v["after"]) for k, v in changes.items()),
                      "before_header": "KubeletConfiguration (%s)" % path,
                      "after_header": "KubeletConfiguration (%s)" % path})
    diffs.extend(p.diff() for p in env_plans if p.changed)  # another tool's file: every line that changes
    actions = [p.action() for p in plans]
    reasons = kub.stale_state_reasons(changes, after)
    # a checkpoint the kubelet would refuse as it is (written under another policy or reservation: by hand, or by a
    # kubelet that ran with other settings)
    for state_path in kub.STATE_FILES.values():
        text = observed["state_files"].get(state_path) if state_path not in reasons else None
        refusal = kub.checkpoint_refusal(state_path, text, after, observed["cpus_online"]) if text is not None else None
        if refusal:
            reasons[state_path] = "the kubelet would refuse %s: %s" % (state_path, refusal)
    stale_states = [p for p in kub.STATE_FILES.values() if p in reasons]
    extra["stale_state_files"] = dict((p, reasons[p]) for p in stale_states)
    if stale_states and not params["restart"]:
        raise InputError("%s: the kubelet checks this against its checkpoint at start; it needs restart=true (drain "
                         "the node first): the kubelet must be stopped while %s is removed, or it crash-loops on the "
                         "next start" % ("; ".join(reasons[p] for p in stale_states), ", ".join(stale_states)))
    needs_restart = bool(plans) or bool(stale_states) or bool(stale_flags)
    restarting = bool(needs_restart and params["restart"])
    service = observed["service"]
    if restarting:
        actions.extend(action("delete_file", p) for p in stale_states if observed["state_exists"].get(p))
        actions.append(action("restart", service))
    return {"actions": actions, "plans": plans, "diffs": diffs, "report": report, "extra": extra,
            "stale_states": stale_states, "needs_restart": needs_restart, "restarting": restarting,
            "service": service}
