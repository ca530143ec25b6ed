# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``containerd`` layer's audit judgement: the module's planner run on the facts (``layers.containerd``).

* ``containerd.config`` (the config file containerd reads): ``containerd_rdma``'s plan for the role's variables, as
  the role calls the module: ``ok`` when it has nothing to do, else ``drift`` with the plan's actions as the evidence
  (``detail``: ``planned: [...]``); ``fail`` when the module would refuse (its message), ``unknown`` when the facts do
  not hold what the plan reads.  Not judged on facts without ``layers.containerd.observed``.
* ``containerd.installed``, ``containerd.memlock`` (the unit's LimitMEMLOCK and the running daemon's),
  ``containerd.base_spec`` per runc runtime, ``containerd.runtime_type``, ``containerd.cdi`` (1.6 has none: provisioning
  cannot fix it) and ``containerd.override`` (a file read after the collection's own, another tool's, sets a key the
  collection needs to another value: the module's rule, ``rules.containerd_override_checks``).

Facts gathered before the layer was a room (no ``layers.containerd``) are judged through :func:`section_of`, from
``runtime.containerd``; they get no ``containerd.config`` check.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _check, _registry, omitted, role_params
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml

REMEDY = "run the containerd_rdma role"


def section_of(facts):
    """The ``layers.containerd`` section from facts without it (an older collection, or its observer failed): the
    ``runtime.containerd`` report, without the planner's input."""
    return (facts.get("runtime") or {}).get("containerd")


def _limit(value):
    """A resource limit as the report shows it: ``unlimited`` or bytes (``4M``, ``infinity``, ``"4194304"`` as
    containerd_rdma reads them); None stays None and what cannot be read is returned as it is."""
    if value is None or value == "":
        return None
    try:
        number = ctd.parse_limit(value)
    except RdmaNodeError:
        return value
    return "unlimited" if number == ctd.RLIM_INFINITY else number


def params_of(desired):
    """containerd_rdma's options exactly as the role passes them (roles/containerd_rdma/tasks/main.yml; the role's
    defaults where ``desired`` has none), checked and converted by the module's own argument spec (InputError, naming
    the variable, where the module would refuse them): its ``config`` and ``service`` too, which the facts may not
    describe (:func:`plan_check` says so)."""
    spec_dirs = desired.get("containerd_rdma_cdi_spec_dirs")
    return role_params(_plan.argument_spec(), {
        "memlock": desired.get("containerd_rdma_memlock", "unlimited"),
        "nofile": omitted(desired.get("containerd_rdma_nofile")),
        "config": desired.get("containerd_rdma_config") or ctdh.DEFAULT_CONFIG,
        "base_runtime_spec": desired.get("containerd_rdma_base_runtime_spec") or ctdh.DEFAULT_BASE_SPEC,
        "runtimes": desired.get("containerd_rdma_runtimes") or [],
        "cdi": desired.get("containerd_rdma_cdi", True),
        "cdi_spec_dirs": spec_dirs if spec_dirs is not None else list(ctd.DEFAULT_CDI_DIRS),
        "edit_imports": desired.get("containerd_rdma_edit_imports", False),
        "edit_generated": desired.get("containerd_rdma_edit_generated", False),
        "service": desired.get("containerd_rdma_service") or ctdh.DEFAULT_SERVICE, "restart": False},
        "containerd_rdma_")


def _files(items):
    return [(item["path"], ctdh.file_state(item), _toml.parse(item["content"] if item["exists"] else "", item["path"]))
            for item in items]


class _Specs(dict):
    """The base specs the facts hold; a plan that reads another one cannot be judged from them."""

    def __missing__(self, path):
        raise ParseError("the facts do not hold %s (rdma_facts reads the specs the runc runtimes name, their sources "
                         "and derived copies, and the default generated spec): the plan for it is unknown" % path)


def observed_of(observed, section):
    """What :func:`plan.plan` reads, from the facts' ``observed`` (:func:`observe._planner_input`)."""
    files = _files(observed["config_files"])
    base = {"version": tuple(observed["version"]), "files": files, "generated_config": section.get("generated_config"),
            "key_sources": section.get("key_sources") or {}, "service": observed["service"]}
    return {"base": base, "effective": observed["effective"], "texts": observed["texts"],
            "oci_spec": observed["oci_spec"],
            "planned_files": _files(observed["planned_files"]) if observed["planned_files"] is not None else None,
            "unit": dict(observed["unit"], service=observed["service"]), "dropin": ctdh.file_state(observed["dropin"]),
            "specs": _Specs((path, ctdh.file_state(item)) for path, item in observed["specs"].items()),
            "running": None, "systemd": observed["systemd"], "mtimes": {}}


def _module_config(observed, section, params):
    """The config file containerd_rdma works on for the role's ``config`` on this node, decided as
    :meth:`observe.Node.observe` does (ConflictError when the module would refuse), and None when the facts do not
    hold it (they read the config containerd reads: the unit's ``--config``, k3s's/rke2's, else the default)."""
    read = section.get("config_path")
    line = observed.get("command")
    if line is None and "command" not in observed:  # facts of an older collection: only the default is decided
        return read if params["config"] == ctdh.DEFAULT_CONFIG else None
    path, how = ctdh.choose_config(params["config"], params["service"], line or {})
    ctdh.check_config({"config_path": path, "config_from": how, "command": line, "unit": section.get("unit"),
                       "service": params["service"]}, params["config"])
    return path if path == read else None


def plan_check(section, params, want):
    """``containerd.config``: containerd_rdma's plan on the facts (None without the planner's input), for the role's
    options as its task passes them (:func:`params_of`) and what they ask for (``plan.validate``)."""
    observed = section.get("observed")
    if not observed:
        return None
    subject = section.get("config_path")
    if observed.get("error"):
        return _check("containerd.config", "unknown", subject, detail="containerd_rdma's plan cannot be made from the "
                      "facts: %s" % observed["error"])
    try:
        if params["service"] != observed["service"]:
            return _check("containerd.config", "unknown", subject, detail=(
                "the role configures the service %s (containerd_rdma_service), and rdma_facts read containerd as %s "
                "runs it (the first of containerd, k3s, k3s-agent, rke2-server, rke2-agent with a unit file): the "
                "plan for %s cannot be made from these facts; set containerd_rdma_service to the unit that runs "
                "containerd here" % (params["service"], observed["service"], params["service"])))
        if _module_config(observed, section, params) is None:
            return _check("containerd.config", "unknown", subject, detail=(
                "the role configures %s (containerd_rdma_config), and rdma_facts read %s, the config containerd "
                "reads here: the plan for %s cannot be made from these facts" % (params["config"], subject,
                                                                                 params["config"])))
        planner_input = observed_of(observed, section)
        _plan.refuse_service(planner_input["base"], params["service"])
        planned = _plan.plan(want, params, planner_input)
    except ConflictError as exc:
        return _check("containerd.config", "fail", subject, remedy="see docs/containerd.md: containerd_rdma refuses "
                      "this node", detail=exc.msg)
    except RdmaNodeError as exc:
        detail = exc.msg
        if observed.get("oci_spec_error") and "ctr oci spec" in detail:
            detail = "%s (%s)" % (detail, observed["oci_spec_error"])
        return _check("containerd.config", "unknown", subject, detail=detail)
    work = planned["actions"]
    return _check("containerd.config", "drift" if work else "ok", subject, desired=params["memlock"],
                  live=planned["report"].get("unit_memlock"), remedy=REMEDY if work else None,
                  detail="planned: %s" % work if work else None)


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    if desired is None or section is None:
        return []
    checks = []
    if section.get("installed") is False:
        return [_check("containerd.installed", "fail", desired=True, live=False,
                       remedy="install containerd (not managed by this collection)")]
    try:
        params = params_of(desired)
        want = _plan.validate(params)
    except InputError as exc:  # the role fails on its variables: nothing it would do can be judged
        return [_check("containerd.config", "fail", section.get("config_path"), remedy="correct the containerd_rdma "
                       "role's variables: the role fails on them before any change", detail=exc.msg)]
    planned = plan_check(section, params, want)
    if planned is not None:
        checks.append(planned)
    want = _limit(desired.get("containerd_rdma_memlock", "unlimited"))
    running = section.get("running")
    persisted = _limit(section.get("unit_memlock"))
    if running is None:
        checks.append(_check("containerd.memlock", "ok" if persisted == want else "drift", desired=want,
                             persisted=persisted, remedy=REMEDY, detail="containerd is not running: live limit unknown"))
    else:
        live = _limit((running.get("memlock") or {}).get("soft"))
        status = "ok" if live == want and persisted == want else "drift"
        remedy = None
        if persisted != want:
            remedy = "run the containerd_rdma role (LimitMEMLOCK drop-in)"
        elif live != want:
            remedy = "restart containerd (containerd_rdma_restart_ok=true)"
        checks.append(_check("containerd.memlock", status, desired=want, live=live, persisted=persisted, remedy=remedy,
                             detail="the LimitMEMLOCK of containerd.service caps every container it starts"))
    runtimes = section.get("runtimes") or {}
    if section.get("config_version") is None:
        checks.append(_check("containerd.base_spec", "unknown", desired=want,
                             detail="`containerd config dump` gave no configuration (see runtime.containerd.problems)"))
    for name, runtime in sorted(runtimes.items()):
        if not runtime.get("runtime_type"):
            # containerd starts, and every pod of this runtime fails: "Runtime.Name must be set"
            checks.append(_check(
                "containerd.runtime_type", "fail", subject=name, desired="a runtime_type", live=None,
                remedy='set runtime_type (runc: "io.containerd.runc.v2") in the [...runtimes.%s] table, or remove the '
                       "table" % name,
                detail="on containerd 1.x a runtimes.%s table replaces the built-in runtime of that name, so a table "
                       "without runtime_type leaves the runtime without one" % name))
            continue
        if "runc" not in runtime["runtime_type"]:
            continue
        spec_live = _limit((runtime.get("base_spec_memlock") or {}).get("hard"))
        checks.append(_check("containerd.base_spec", "ok" if spec_live == want else "drift", subject=name, desired=want,
                             live=spec_live, persisted=runtime.get("base_runtime_spec"),
                             remedy="run the containerd_rdma role (base_runtime_spec of runtime %s)" % name,
                             detail="RLIMIT_MEMLOCK of the base runtime spec: what a pod's process gets"))
    want_cdi = params["cdi"]
    version = tuple(int(p) for p in str(section.get("version") or "0.0").split(".")[:2] if p.isdigit())
    if want_cdi and section.get("version") and version < (1, 7):
        checks.append(_check("containerd.cdi", "fail", desired=True, live=None, persisted=section.get("version"),
                             remedy="upgrade containerd to 1.7 or later, or set containerd_rdma_cdi=false",
                             detail="containerd %s has no CDI: devices cannot be injected by CDI spec"
                                    % section.get("version")))
    elif want_cdi and section.get("config_version") is not None:
        live_cdi = section.get("enable_cdi")
        checks.append(_check("containerd.cdi", "ok" if live_cdi else "drift", desired=True, live=live_cdi,
                             persisted=section.get("cdi_spec_dirs"), remedy="run the containerd_rdma role (containerd_rdma_cdi)"))
    return checks + override_checks(section, desired)


def override_checks(section, desired):
    """``containerd.override``: a file read after the collection's own (a unit drop-in, an import) that sets a key the
    collection needs to another value, by the same rule as the module (``rules.containerd_override_checks``)."""
    if section.get("key_sources") is None:
        return []  # facts of an older collection version
    variables = _registry.by_name("containerd").variables
    wanted = dict((var, desired[var]) for var in variables if desired.get(var) is not None)
    return [_check("containerd.override", "fail", subject=item["key"], desired=item["wanted"], live=item["found"],
                   persisted=item["winner"], detail=item.get("detail"),
                   remedy="remove %s from %s, or make it the value the collection needs (%s)"
                          % (item["key"], item["winner"], item["wanted"]))
            for item in ctd.containerd_override_checks(section, wanted)]
