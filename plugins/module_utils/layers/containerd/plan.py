# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``containerd`` layer's planner, pure: the module's options + what :func:`observe.observe_node` read -> the
file writes (unit drop-in, base specs, config keys), what they change, the refusals.

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts
(judge.py): a plan with work is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import posixpath
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import conf_name_pattern, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml

# a unit name as systemd accepts it (unit_name_is_valid(); no escapes needed for containerd's), never an option
UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9_@:][A-Za-z0-9_.@:-]*\Z")
# a drop-in systemd reads (*.conf, not hidden)
DROPIN_NAME_RE = conf_name_pattern(".conf")
# a CRI runtime name that is a bare TOML key (no quoting, no dots that would split it)
RUNTIME_NAME_RE = re.compile(r"^[A-Za-z0-9_+-]+\Z")


def argument_spec():
    """containerd_rdma's argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        memlock=dict(type="str", default="unlimited"),
        nofile=dict(type="int"),
        config=dict(type="path", default="/etc/containerd/config.toml"),
        base_runtime_spec=dict(type="path", default="/etc/containerd/rdma-k8s-node-base-spec.json"),
        runtimes=dict(type="list", elements="str", default=[]),
        cdi=dict(type="bool", default=True),
        cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
        edit_imports=dict(type="bool", default=False),
        edit_generated=dict(type="bool", default=False),
        unit_dropin=dict(type="path"),
        service=dict(type="str", default="containerd"),
        restart=dict(type="bool", default=False),
        restart_timeout=dict(type="int", default=60),
        backup=dict(type="bool", default=False),
        host_root=dict(type="path", default="/"),
    )


def validate(params):
    """Everything that can be checked before reading the node; raises InputError naming the option.  Fills
    ``params["unit_dropin"]`` when unset.  Returns ``want``."""
    want = {
        "memlock": ctd.parse_limit(params["memlock"], "memlock"),
        "base_runtime_spec": params["base_runtime_spec"],
        "runtimes": list(params["runtimes"]),
        "cdi": params["cdi"],
        "cdi_spec_dirs": list(params["cdi_spec_dirs"]),
    }
    if params["nofile"] is not None and not 64 <= params["nofile"] <= 1 << 30:
        raise InputError("nofile must be between 64 and 1073741824 (the kernel's nr_open ceiling), got %d" % params["nofile"])
    want["nofile"] = params["nofile"]
    service = params["service"]
    if service.endswith(".service") or not UNIT_NAME_RE.match(service):
        raise InputError("service must be a systemd unit name without .service (letters, digits and : _ . @ -, not "
                         "starting with - or .), got %r" % (service,))
    dropin_dir = "/etc/systemd/system/%s.service.d" % service
    if params["unit_dropin"] is None:
        params["unit_dropin"] = "%s/%s" % (dropin_dir, ctdh.UNIT_DROPIN_NAME)
    for option in ("config", "base_runtime_spec", "unit_dropin"):
        if not params[option].startswith("/"):
            raise InputError("%s must be an absolute path, got %s" % (option, params[option]))
    if not params["base_runtime_spec"].endswith(".json"):
        raise InputError("base_runtime_spec must be a .json file, got %s" % params["base_runtime_spec"])
    if posixpath.basename(params["base_runtime_spec"]).startswith(ctd.DERIVED_PREFIX):
        raise InputError("base_runtime_spec must not be named %s*: that name marks the derived copies of other "
                         "tools' specs, got %s" % (ctd.DERIVED_PREFIX, params["base_runtime_spec"]))
    for path in want["cdi_spec_dirs"]:
        if not path.startswith("/"):
            raise InputError("cdi_spec_dirs entries must be absolute paths, got %s" % path)
    if params["cdi"] and not want["cdi_spec_dirs"]:
        raise InputError("cdi_spec_dirs must not be empty with cdi=true")
    for name in want["runtimes"]:
        if not RUNTIME_NAME_RE.match(name or ""):
            raise InputError("runtimes: %r is not a valid runtime name (letters, digits, _ + -)" % (name,))
    if posixpath.dirname(params["unit_dropin"]) != dropin_dir or not DROPIN_NAME_RE.match(posixpath.basename(params["unit_dropin"])):
        raise InputError("unit_dropin must be a .conf file directly in %s, named with letters, digits and _ . @ + - and "
                         "not starting with a dot, got %r" % (dropin_dir, params["unit_dropin"]))
    if params["restart_timeout"] < 1:
        raise InputError("restart_timeout must be at least 1 second")
    return want


def _partial(report):
    """The result a refusal carries: what was observed, no actions, and no backups (``backup_files`` is returned
    always)."""
    result = Result()
    result.observed = report
    result.extra["backup_files"] = {}
    return result.as_dict()


def _info(base):
    info = base["generated_config"]
    return dict((k, v) for k, v in info.items() if k != "path") if info is not None else None


def refuse_service(base, service):
    """k3s's/rke2's config with service=containerd: their containerd runs inside their own unit."""
    info = _info(base)
    if info is not None and info.get("tool") in ("k3s", "rke2") and service == "containerd":
        units = ctdh.RANCHER_UNITS[info["tool"]]
        raise ConflictError("%s is %s's containerd config: containerd runs inside %s's own service here, not "
                            "containerd.service, so its memlock comes from that unit; set service to %s (server) or %s "
                            "(agent), whichever runs on this node"
                            % (base["files"][0][0], info["tool"], info["tool"], units[0], units[1]),
                            {"generated": dict(info, path=base["files"][0][0])})


def choose_target(options, observed, changes, report, warn):
    """Which file the collection writes its keys into: ``(files, target index, config_dropin or None)``.  The main
    config, or under a generated one the collection's drop-in in the directory it imports (then ``files`` has that
    drop-in at its place in the load order).  Refuses when neither can work (ConflictError saying what to do)."""
    base = observed["base"]
    files, version, info = base["files"], base["version"], _info(base)
    main_path = files[0][0]
    if info is None or not changes:
        return files, 0, None
    if info.get("tool") not in ("k3s", "rke2"):
        if not options["edit_generated"]:
            raise ConflictError(ctd.generated_refusal(main_path, info, version, changes),
                                {"generated": dict(info, path=main_path)}, _partial(report))
        warn("%s says it is regenerated (%s): edited because edit_generated=true; the edit is lost when its "
             "generator runs again" % (main_path, info.get("header")))
        return files, 0, None
    # k3s/rke2 render config.toml again at every start: editing it is pointless even with edit_generated
    dropin = ctd.rancher_dropin(info, files[0][2], main_path, version)
    if dropin is None or observed["planned_files"] is None:
        raise ConflictError(ctd.generated_refusal(main_path, info, version, changes),
                            {"generated": dict(info, path=main_path)}, _partial(report))
    planned = observed["planned_files"]
    return planned, [p for p, dummy_s, dummy_d in planned].index(dropin), dropin


def _json_safe(value):
    return value if value is None or isinstance(value, (str, bool, int, list)) else str(value)


def _spec_diff(planned, path, before, after, want, version_text):
    if planned["kind"] == "generated":
        note = {"generated_from": "ctr oci spec (containerd %s)" % version_text, "owner": "rdma.k8s_node"}
    else:
        note = {"derived_from": planned["source"], "owner": "rdma.k8s_node (a copy)",
                "source_owner": ctd.KNOWN_SPEC_WRITERS.get(planned["source"]) or "not this collection",
                "source_written": False, "changed_in_copy": "process.rlimits %s only"
                % "/".join(kind for kind, dummy in ctd._owned_rlimits(want["memlock"], want.get("nofile")))}
    header = path if planned["kind"] == "generated" else "%s (derived copy of %s, which is not written)" % (
        path, planned["source"])
    return {"before": {"rlimits": before} if before else {}, "after": dict(note, rlimits=after),
            "before_header": header, "after_header": header}


def plan(want, options, observed, warn=None):  # pylint: disable=too-many-locals,too-many-statements,too-many-branches
    """The plan for ``want`` (:func:`validate`) with ``options`` (``edit_imports``, ``edit_generated``,
    ``unit_dropin``, ``restart``) on ``observed`` (:func:`observe.observe_node`; the judge builds the same from the
    facts).  ``warn(message)`` receives the warnings.

    Returns ``{"actions", "plans" ([FilePlan] in the order they are applied), "unit_changed", "restart" (a change
    or a previous run's change has not reached the running daemon), "report" (the module's ``observed``), "changes"
    (per key before/after), "diffs", "effective", "want" (with ``spec_paths``: the spec each runtime points at)}``;
    ``actions``: each file's write, ``systemctl daemon-reload`` when
    the unit drop-in changes (and systemd answers), ``restart`` with ``options["restart"]``.  Refusals raise
    ConflictError (or the rules' ParseError/InputError)."""
    warn = warn or (lambda message: None)
    base = observed["base"]
    version, files = base["version"], base["files"]
    main_path = files[0][0]
    info = _info(base)
    eff = observed["effective"]
    report = {}
    targets = ctd.target_runtimes(eff, want["runtimes"])
    current = dict((name, eff["runtimes"][name]["base_runtime_spec"]) for name in targets)
    texts = observed["texts"]
    oci = observed["oci_spec"] if ctd.needs_generated(current, want["base_runtime_spec"]) else None
    want = dict(want)
    spec_files, dummy_pointers, spec_report, spec_warnings = ctd.plan_specs(current, texts, want, oci)
    want["spec_paths"] = dict((name, entry["spec"]) for name, entry in spec_report.items())
    changes, warnings = ctd.desired_keys(eff, want, version)
    for message in spec_warnings + warnings:
        warn(message)
    version_text = ".".join(str(p) for p in version)
    report.update({
        "containerd_version": version_text,
        "config_version": eff["config_version"],
        "config_files": [p for p, dummy_s, dummy_d in files],
        "config_generated": dict(info, path=main_path) if info else None,
        "runtimes": eff["runtimes"],
        "base_specs": spec_report,
        "enable_cdi": eff["enable_cdi"],
        "cdi_spec_dirs": eff["cdi_spec_dirs"],
        "key_sources": base["key_sources"],
    })
    files, target, config_dropin = choose_target(options, observed, changes, report, warn)
    if config_dropin is not None:
        report["config_dropin"] = config_dropin
    main_version = ctd.file_versions([(files[0][0], files[0][2])], version)[0]
    edits, versions, overrides = ctd.choose_files([(p, d) for p, dummy_s, d in files], changes, version, eff, target,
                                                  options["edit_imports"], new_version=main_version)
    report["imported_overrides"] = overrides
    if overrides and not options["edit_imports"]:
        raise ConflictError(ctd.override_message(overrides, files[target][0]), {"imported_overrides": overrides},
                            _partial(report))
    for entry in overrides:
        warn("%s overrides %s (%s): the key is written there because edit_imports=true; the tool that owns "
             "that file may write it again" % (entry["file"], entry["key"], entry["why"]))
    per_key = ctd.key_diff(changes, eff)
    plans, diffs = [], []

    unit_dropin = options["unit_dropin"]
    dropin_plan = plan_file(observed["dropin"], ctd.render_unit_dropin(want["memlock"]), 0o644)
    before_limit, dummy_source = ctd.unit_limit(ctdh.order_units(observed["unit"]))
    after_limit, after_source = ctd.unit_limit(ctdh.order_units(observed["unit"], (unit_dropin, dropin_plan.content)))
    if after_limit != want["memlock"]:
        raise ConflictError("%s sets LimitMEMLOCK=%s and is read after %s, so containerd would not get %s; remove it "
                            "or name unit_dropin so that it sorts last"
                            % (after_source, ctd.render_limit(after_limit) if after_limit else "(empty)",
                               unit_dropin, ctd.render_limit(want["memlock"])),
                            {"overriding_file": after_source})
    report["unit_memlock"] = ctd.render_limit(before_limit) if before_limit is not None else None
    if dropin_plan.changed:
        plans.append(dropin_plan)
        per_key["LimitMEMLOCK"] = {"before": report["unit_memlock"], "after": ctd.render_limit(want["memlock"])}
        diffs.append({"before": {"LimitMEMLOCK": report["unit_memlock"]},
                      "after": {"LimitMEMLOCK": ctd.render_limit(want["memlock"])},
                      "before_header": unit_dropin, "after_header": unit_dropin})

    for path in sorted(spec_files):
        planned = spec_files[path]
        state = observed["specs"][path]
        source_state = observed["specs"][planned["source"]] if planned["source"] else None
        mode = 0o644
        if state.exists:
            mode = state.mode
        elif source_state is not None and source_state.exists:
            mode = source_state.mode   # a derived copy is as readable as the owner's file
        spec_plan = plan_file(state, planned["content"], mode)
        if not spec_plan.changed:
            continue
        plans.append(spec_plan)
        kinds = ("RLIMIT_MEMLOCK", "RLIMIT_NOFILE")
        before = dict((kind, ctd.spec_rlimit(state.content if state.exists else texts.get(planned["source"]), kind))
                      for kind in kinds) if state.exists or planned["source"] else None
        after = dict((kind, ctd.spec_rlimit(planned["content"], kind)) for kind in kinds)
        per_key["%s.rlimits" % path] = {"before": before, "after": after}
        diffs.append(_spec_diff(planned, path, before, after, want, version_text))

    for index in sorted(edits):
        path, state, doc = files[index]
        version_of_file = versions[index] or ctd.native_version(version)
        new_text = ctd.apply_edits(state.content if state.exists else "", version_of_file, edits[index], path)
        file_plan = plan_file(state, new_text, state.mode if state.exists else 0o644,
                              state.uid if state.exists else 0, state.gid if state.exists else 0)
        plans.append(file_plan)
        header = path
        if index == target and index > 0:
            header += " (the collection's drop-in: %s is regenerated by %s)" % (main_path, (info or {}).get("tool"))
        elif index > 0:
            header += " (an imported file, edited because edit_imports=true)"
        diffs.append({
            "before": dict((_toml.render_path(table + (key,)), _json_safe(doc.get(table + (key,))))
                           for table, key, dummy_value in edits[index]),
            "after": dict((_toml.render_path(table + (key,)), value) for table, key, value in edits[index]),
            "before_header": header, "after_header": header})

    running = observed["running"]
    stale = False
    if running is not None:
        memlock = running["memlock"]
        started = running["started"]
        watched = [unit_dropin] + sorted(spec_files) + [p for p, dummy_s, dummy_d in files]
        mtimes = [observed["mtimes"].get(p) for p in watched]
        # the start time is exact to within a second (btime is whole seconds): only a file written more
        # than a second after the computed start is certainly newer than the daemon
        stale = bool(memlock and memlock["hard"] != want["memlock"] and after_limit == want["memlock"]) or \
            bool(started and any(m and m > started + 1.0 for m in mtimes))
        report["running"] = {"pid": running["pid"], "stale": stale,
                             "memlock": dict((k, ctd.render_limit(v)) for k, v in memlock.items()) if memlock else None}
    else:
        report["running"] = None
    restart = bool(plans) or stale
    actions = [file_plan.action() for file_plan in plans]
    if dropin_plan.changed and observed["systemd"]:
        actions.append(action("run", "systemctl daemon-reload"))
    if restart and options.get("restart") and observed["systemd"]:
        actions.append(action("restart", base["service"]))
    return {"actions": actions, "plans": plans, "unit_changed": dropin_plan.changed, "restart": restart,
            "report": report, "changes": per_key, "diffs": diffs, "effective": eff, "want": want}
