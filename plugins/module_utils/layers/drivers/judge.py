# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``drivers`` layer's audit judgement, on ``layers.drivers`` (DOCA-OFED and the GPUDirect RDMA path).

Moved from ``_audit`` and judged as before:

* ``drivers.modules``: ``mlx5_core``, ``mlx5_ib`` (ConnectX), ``ib_uverbs``, ``rdma_ucm`` loaded when RDMA devices
  exist; ``drivers.ofed_version`` (``rdma_audit_ofed_version``); ``drivers.doca_version`` (with
  ``rdma_k8s_node_doca_ofed``: the profile package at ``doca_ofed_version``); ``drivers.ofed_running`` (the loaded
  modules are the installed OFED's build); ``drivers.dkms`` (every DKMS module built for the running kernel);
* ``gpudirect.path`` (GPUs have an active, persisted GPUDirect path) and ``gpudirect.override`` (what keeps the
  persisted nvidia_peermem from loading at boot, by :func:`_gpudirect.peermem_overrides`).

New with the room:

* ``gpudirect.config`` (when GPUs exist and ``rdma_k8s_node_gpudirect`` puts the role in provisioning):
  nvidia_peermem's planner (:func:`plan.plan`) on ``layers.drivers.observed``
  with the options roles/nvidia_peermem passes it (``nvidia_peermem_method``, ``_persist``, ``_openibd_dropin``,
  ``_on_conflict``; the module's own files): ``ok`` when it has nothing to do, ``drift`` with its actions as the
  evidence (``planned: [...]``), ``fail`` where the module refuses (no GPUDirect path, DMA-BUF impossible, an override
  with ``on_conflict=fail``: its message), ``unknown`` where the facts lack what the plan reads.

Facts gathered before the layer was a room (no ``layers.drivers``) are judged through :func:`section_of`, from the
keys the audit read before (``modules``, ``drivers``, ``gpus``, ``devices``, ``kernel_cmdline``, ``persisted``), as
before (no ``gpudirect.config``).  A section or facts of another shape give ``unknown`` checks, never an exception.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect, _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import Checks, FactFiles, MissingFacts, check, role_params
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers.observe import DROPIN_FILE

RDMA_USER_MODULES = ("ib_uverbs", "rdma_ucm")
#: the file the nvidia_peermem module owns by default (the role does not change it)
PEERMEM_DROPIN = DROPIN_FILE
#: roles/nvidia_peermem's variables -> the module's options its task passes (the role's defaults fill the rest)
ROLE_OPTIONS = (("nvidia_peermem_method", "method"), ("nvidia_peermem_persist", "persist"),
                ("nvidia_peermem_openibd_dropin", "openibd_dropin"), ("nvidia_peermem_on_conflict", "on_conflict"))
REMEDY = "run the nvidia_peermem role (rdma_k8s_node_gpudirect=true)"
# what facts or variables of another shape raise in the judgement: that host's check is unknown, never a crash of
# the whole audit
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


def _malformed(exc):
    return "the facts or the variables are not what the audit reads (%s: %s)" % (type(exc).__name__, exc)


def section_of(facts):
    """The section from facts without ``layers.drivers`` (an older collection, or its observer failed): the keys the
    audit judged the layer on before the room, judged as then."""
    return {"older_facts": dict((key, facts.get(key)) for key in
                                ("modules", "drivers", "gpus", "devices", "kernel_cmdline", "persisted"))}


def _older_view(section):
    """The room's section in the shape of the older keys the moved checks read."""
    observed = section.get("observed")
    view = {"modules": section.get("modules"), "devices": section.get("devices"), "gpus": section.get("gpus"),
            "drivers": {"ofed": section.get("ofed"), "gpudirect": section.get("gpudirect")},
            "persisted": {"modprobe": None}, "kernel_cmdline": None}
    if isinstance(observed, dict) and observed.get("modprobe") is not None:
        view["persisted"]["modprobe"] = [{"path": path, "directives": directives}
                                         for path, directives in observed["modprobe"]]
        view["kernel_cmdline"] = {"args": (observed.get("cmdline") or "").split()}
    return view


# -- moved from _audit: drivers.modules, ofed_version, doca_version, ofed_running, dkms, gpudirect.path, override ---
def _modules(checks, facts):
    modules = facts.get("modules")
    devices = facts.get("devices") or []
    if devices:
        if modules is None:
            checks.add("drivers.modules", "unknown", detail="/proc/modules could not be read")
        else:
            wanted = list(RDMA_USER_MODULES)
            if any(d.get("driver") == "mlx5_core" for d in devices):
                wanted = ["mlx5_core", "mlx5_ib"] + wanted
            missing = [m for m in wanted if m not in modules]
            checks.add("drivers.modules", "drift" if missing else "ok", desired=wanted,
                       live=[m for m in wanted if m in modules], persisted=None,
                       remedy="load %s (doca_ofed role verifies them)" % ", ".join(missing) if missing else None,
                       detail="RDMA user-space access needs these modules")


def _ofed(checks, facts, desired):
    drivers = facts.get("drivers") or {}
    ofed = drivers.get("ofed") or {}
    want_version = (desired or {}).get("rdma_audit_ofed_version")
    if want_version:
        live = ofed.get("version")
        if not drivers:
            checks.add("drivers.ofed_version", "unknown", desired=want_version,
                       detail="the node's rdma_facts has no drivers section")
        else:
            checks.add("drivers.ofed_version", "ok" if live and str(live).startswith(str(want_version)) else "drift",
                       desired=want_version, live=ofed.get("running_version"), persisted=live,
                       remedy="run the doca_ofed role with the DOCA release that ships this OFED (doca_ofed_version)")
    if (desired or {}).get("rdma_k8s_node_doca_ofed"):
        profile = desired.get("doca_ofed_profile") or "doca-ofed"
        want = str(desired.get("doca_ofed_version") or "")
        packages = ofed.get("packages")
        package = (packages or {}).get(profile) or {}
        if packages is None:
            checks.add("drivers.doca_version", "unknown", subject=profile, desired=want,
                       detail="no dpkg package database on this node (EL nodes: compare with rdma_audit_ofed_version)")
        else:
            installed = package.get("version") if package.get("state") == "installed" else None
            good = bool(installed) and (installed == want or installed.startswith(want + "-")
                                        or installed.startswith(want + "."))
            checks.add("drivers.doca_version", "ok" if good else "drift", subject=profile, desired=want,
                       live=ofed.get("running_version"), persisted=installed,
                       remedy="run the doca_ofed role (doca_ofed_version, doca_ofed_profile)")
    if ofed.get("installed") and (ofed.get("stale_modules") or ofed.get("restart_required")):
        checks.add("drivers.ofed_running", "drift", desired=ofed.get("version"), live=ofed.get("running_version"),
                   persisted=ofed.get("version"),
                   remedy="restart openibd in a maintenance window (doca_ofed_restart_ok=true) or reboot",
                   detail="loaded modules are not the installed OFED's build: %s" % (ofed.get("stale_modules") or []))
    for failed in ofed.get("dkms_failed") or []:
        checks.add("drivers.dkms", "fail", subject=failed.get("module"), desired="built for the running kernel",
                   live=failed.get("state"), persisted=failed.get("make_log"),
                   remedy="install the kernel headers of the running kernel and rebuild (dkms autoinstall)",
                   detail=(failed.get("excerpt") or "")[-300:] or None)


def _gpudirect_path(checks, facts, desired):
    drivers = facts.get("drivers") or {}
    modules = facts.get("modules")
    gpudirect = drivers.get("gpudirect") or {}
    method = (desired or {}).get("nvidia_peermem_method") or "auto"
    if gpudirect:
        active = gpudirect.get("active")
        persisted = "peermem" if gpudirect.get("peermem_persisted") else (
            "dmabuf" if gpudirect.get("dmabuf_capable") else None)
    else:  # facts of an older collection version: only the module list
        active = "peermem" if "nvidia_peermem" in (modules or []) else None
        persisted = "peermem" if "nvidia_peermem" in (facts.get("persisted") or {}).get("modules_load", []) else None
    if active is None and modules is None:
        checks.add("gpudirect.path", "unknown", desired=method, detail="loaded modules could not be read")
    elif active in ("peermem", "dmabuf") and method in ("auto", active) and persisted == active:
        checks.add("gpudirect.path", "ok", desired=method, live=active, persisted=persisted)
    else:
        remedy = "run the nvidia_peermem role (nvidia_peermem_method=%s)" % method
        detail = "GPUs without an active GPUDirect RDMA path: NCCL copies through host memory"
        if active in ("peermem", "dmabuf"):
            detail = "the GPUDirect path %s is not the desired one or not persisted for the next boot" % active
        checks.add("gpudirect.path", "drift", desired=method, live=active, persisted=persisted, remedy=remedy,
                   detail=detail)


def _peermem_overrides(checks, facts, desired):
    """``gpudirect.override``: what keeps nvidia_peermem from loading at boot, by the module's own planner
    (:func:`_gpudirect.peermem_overrides`) on the modprobe.d lines and openibd drop-ins rdma_facts read."""
    gpudirect = (facts.get("drivers") or {}).get("gpudirect") or {}
    modprobe = (facts.get("persisted") or {}).get("modprobe")
    if desired is None or modprobe is None or "openibd_dropins" not in gpudirect:
        return  # facts of an older collection version
    method = desired.get("nvidia_peermem_method") or "auto"
    if method == "auto":
        method = "dmabuf" if gpudirect.get("dmabuf_capable") else "peermem"
    if method != "peermem":
        return
    layers = [(f["path"], [tuple(d) for d in f["directives"]]) for f in modprobe]
    cmdline = ("/proc/cmdline", " ".join((facts.get("kernel_cmdline") or {}).get("args") or []))
    dropins, text = None, None
    if gpudirect.get("openibd"):
        existing = [(d["path"], [tuple(e) for e in d["entries"]]) for d in gpudirect["openibd_dropins"]]
        mine = dict(existing).get(PEERMEM_DROPIN) or _systemd.parse_unit(_gpudirect.render_openibd_dropin("/sbin/modprobe"))
        text = "[Service]\n" + "".join("%s=%s\n" % (key, value) for dummy, key, value, dummy_line in mine)
        dropins = _gpudirect.with_our_dropin(existing, PEERMEM_DROPIN, list(mine))
    for item in _gpudirect.peermem_overrides(layers, cmdline, dropins, PEERMEM_DROPIN, text):
        checks.add("gpudirect.override", "fail", subject=item["what"], desired="nvidia_peermem loaded at boot",
                   live=item["kind"], persisted="%s%s" % (item["file"], ":%s" % item["line"] if item["line"] else ""),
                   remedy="remove that line or drop-in (it is another tool's file), or use DMA-BUF "
                          "(nvidia_peermem_method=dmabuf, open GPU kernel modules)",
                   detail=_gpudirect.describe_peermem_override(item, PEERMEM_DROPIN))


# -- gpudirect.config: nvidia_peermem's planner on the facts ----------------------------------------------------------
class _Observed(dict):
    """The planner's input from the facts: a key they do not hold raises MissingFacts."""

    def __missing__(self, key):
        raise MissingFacts("the facts do not hold %s (rdma_facts finds it with its node tools): the plan is unknown"
                           % {"modprobe_path": "the modprobe the openibd drop-in runs"}.get(key, key))


def _file_state(path, item):
    if "error" in item:
        return MissingFacts("%s could not be read: %s" % (path, item["error"]))
    return FileState(path, bool(item["exists"]), item.get("content"), item.get("mode"), item.get("uid"),
                     item.get("gid"), item.get("link"))


def observed_of(facts_observed):
    """:func:`observe.collect`'s shape from ``layers.drivers.observed``; a read that failed is a MissingFacts the
    planner raises where it needs the value."""
    out = _Observed((key, value) for key, value in facts_observed.items() if key not in ("files", "errors"))
    for key, error in (facts_observed.get("errors") or {}).items():
        out[key] = MissingFacts("rdma_facts could not read %s: %s" % (
            {"nvidia": "the NVIDIA driver banner", "release": "the kernel release",
             "dropins": "openibd.service's drop-ins"}.get(key, key), error))
    out["files"] = FactFiles(((path, _file_state(path, item)) for path, item in facts_observed["files"].items()),
                             "nvidia_peermem's default files")
    return out


def role_options(desired):
    """nvidia_peermem's options as roles/nvidia_peermem/tasks passes them (the role's defaults where ``desired`` has
    none: the module's), checked by the module's argument spec (InputError)."""
    params = dict((option, desired.get(var)) for var, option in ROLE_OPTIONS)
    params["host_root"] = "/"
    return role_params(_plan.argument_spec(), params, "nvidia_peermem_")


def config_check(section, desired):
    """``gpudirect.config``: nvidia_peermem's plan on the section's planner input, or None when not judged: no GPUs,
    or the nvidia_peermem role is not part of this node's provisioning (``rdma_k8s_node_gpudirect``, opt-in as in
    playbooks/provision.yml; ``gpudirect.path`` still says whether the GPUs have a GPUDirect path)."""
    if desired is None or not section.get("gpus") or "observed" not in section:
        return None
    if not check_type_bool(desired.get("rdma_k8s_node_gpudirect") or False):  # a value of another kind: TypeError
        return None
    try:
        params = role_options(desired)
        _plan.paths(params)
    except InputError as exc:
        return check("gpudirect.config", "fail", remedy="correct the nvidia_peermem role's variables: the role fails "
                     "on them before any change", detail=exc.msg)
    want = params["method"]
    if section["observed"] is None:
        return check("gpudirect.config", "unknown", desired=want, detail="the facts hold no planner input: the plan "
                     "is unknown")
    try:
        planned = _plan.plan(params, observed_of(section["observed"]))
    except (MissingFacts, HostReadError) as exc:
        return check("gpudirect.config", "unknown", desired=want, detail=exc.msg)
    except RdmaNodeError as exc:
        return check("gpudirect.config", "fail", desired=want, remedy="see docs/drivers.md: nvidia_peermem refuses "
                     "this node with the role's variables", detail=exc.msg)
    actions = planned["result"].actions
    live = _gpudirect.active_path(planned["method"], planned["capable"], planned["gpudirect"]["peermem_loaded"])
    return check("gpudirect.config", "drift" if actions else "ok", desired=want,
                 live={"method": planned["method"], "active": live}, remedy=REMEDY if actions else None,
                 detail="planned: %s" % actions if actions else None)


# -- the judgement --------------------------------------------------------------------------------------------------
def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    if not isinstance(section, dict):
        return [check("drivers.facts", "unknown", detail="layers.drivers is not a mapping (%s): the layer is not "
                      "judged" % type(section).__name__)]
    try:
        facts = section["older_facts"] if "older_facts" in section else _older_view(section)
    except _MALFORMED as exc:
        return [check("drivers.facts", "unknown", detail=_malformed(exc))]
    if not isinstance(facts, dict):
        return [check("drivers.facts", "unknown", detail="the facts are not a mapping")]
    checks = Checks()
    for check_id, judged in (("drivers.modules", lambda: _modules(checks, facts)),
                             ("drivers.ofed_version", lambda: _ofed(checks, facts, desired))):
        _guarded(checks, check_id, judged)
    if _truthy(checks, "gpudirect.path", lambda: facts.get("gpus")):
        _guarded(checks, "gpudirect.path", lambda: _gpudirect_path(checks, facts, desired))
        _guarded(checks, "gpudirect.override", lambda: _peermem_overrides(checks, facts, desired))
        if "older_facts" not in section:
            found = _guarded(checks, "gpudirect.config", lambda: config_check(section, desired))
            if found is not None:
                checks.items.append(found)
    return checks.items


def _guarded(checks, check_id, judged):
    """``judged()``; facts of another shape give one ``unknown`` ``check_id`` instead of an exception."""
    try:
        return judged()
    except _MALFORMED as exc:
        checks.add(check_id, "unknown", detail=_malformed(exc))
        return None


def _truthy(checks, check_id, value):
    try:
        return bool(value())
    except _MALFORMED as exc:
        checks.add(check_id, "unknown", detail=_malformed(exc))
        return False
