# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kernel`` layer's audit judgement: the module's planner run on the facts (``layers.kernel``).

* ``kernel.cmdline`` (each wanted argument in the running kernel and the default boot entry) and
  ``kernel.cmdline_absent`` (each ``rdma_kernel_absent_args`` pattern in neither), as the audit judged them before the
  room;
* ``kernel.config``: ``kernel_cmdline``'s plan for the role's variables, as roles/rdma_kernel/tasks calls the module:
  ``ok`` when it has nothing to do, else ``drift`` with the plan's actions as the evidence (``detail``:
  ``planned: [...]``); ``fail`` when the module would refuse (its message) or the role's variables are not what it
  accepts; ``unknown`` when the facts do not hold what the plan reads.  Not judged on facts without
  ``layers.kernel.observed``.

Facts gathered before the layer was a room (no ``layers.kernel``) are judged through :func:`section_of`, from
``kernel_cmdline``, ``persisted.kernel_cmdline`` and ``cpu_vendor``; they get no ``kernel.config`` check.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import (
    check as _check,
    FactFiles, MissingFacts, desired_bool, role_params,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import plan as _plan

REMEDY = "run the rdma_kernel role (rdma_kernel_* variables), then reboot"
# the role's defaults (roles/rdma_kernel/defaults/main.yml) where the desired state has none
ROLE_DEFAULTS = {
    "rdma_kernel_extra_args": [],
    "rdma_kernel_absent_args": [],
    "rdma_kernel_bootloader": "auto",
    "rdma_kernel_dropin": _observe.DEFAULT_DROPIN,
}


def section_of(facts):
    """The ``layers.kernel`` section from facts without it (an older collection, or its observer failed), from
    ``kernel_cmdline``, ``persisted.kernel_cmdline`` and ``cpu_vendor``; without ``observed``."""
    return {"live": (facts.get("kernel_cmdline") or {}).get("args"),
            "persisted": (facts.get("persisted") or {}).get("kernel_cmdline"), "cpu_vendor": facts.get("cpu_vendor")}


# -- kernel.cmdline and kernel.cmdline_absent (moved from _audit) ------------------------------------------------------
def _last_matches(args, wanted):
    """Whether the last occurrence of ``wanted``'s name in ``args`` has ``wanted``'s value (a bare flag: present)."""
    name, sep, value = wanted.partition("=")
    result = False
    for arg in args or []:
        key, asep, avalue = arg.partition("=")
        if key.replace("-", "_") == name.replace("-", "_"):
            result = (not sep) or (bool(asep) and avalue.strip('"') == value)
    return result


def cmdline_checks(section, desired):
    """``kernel.cmdline`` per wanted argument and ``kernel.cmdline_absent`` per pattern, as before the room."""
    checks = []
    wanted = []
    if desired.get("rdma_kernel_iommu_passthrough", True):
        wanted.append("iommu=pt")
    if desired.get("rdma_kernel_vendor_iommu", False):
        arg = _cmdline.iommu_vendor_arg(section.get("cpu_vendor"))
        if arg:
            wanted.append(arg)
        else:
            checks.append(_check("kernel.cmdline", "unknown", subject="vendor IOMMU switch",
                                 desired="intel_iommu=on or amd_iommu=on", live=section.get("cpu_vendor"),
                                 remedy="set rdma_kernel_vendor_iommu=false on this CPU",
                                 detail="no vendor IOMMU switch is known for CPU vendor %r" % (section.get("cpu_vendor"),)))
    wanted.extend(desired.get("rdma_kernel_extra_args") or [])
    live = section.get("live")
    boot = section.get("persisted")
    persisted = boot["args"] if boot else None
    for arg in wanted:
        if live is None:
            checks.append(_check("kernel.cmdline", "unknown", desired=arg, subject=arg,
                                 detail="/proc/cmdline could not be read"))
            continue
        in_live = _last_matches(live, arg)
        in_boot = _last_matches(persisted, arg) if persisted is not None else None
        if in_live and in_boot is not False:
            status, remedy = "ok", None
        elif in_boot:
            status, remedy = "drift", "reboot the node to apply it (provision.yml with node_reboot_ok=true)"
        else:
            status, remedy = "drift", REMEDY
        checks.append(_check("kernel.cmdline", status, desired=arg, subject=arg, live=in_live, persisted=in_boot,
                             remedy=remedy, detail=None if boot else "no GRUB configuration found: persisted state unknown"))
    for pattern in desired.get("rdma_kernel_absent_args") or []:
        name = pattern.partition("=")[0]
        in_live = [a for a in live or [] if a == pattern or a.partition("=")[0] == name and "=" not in pattern]
        in_boot = [a for a in persisted or [] if a == pattern or a.partition("=")[0] == name and "=" not in pattern]
        status = "ok" if not in_live and not in_boot else "drift"
        checks.append(_check("kernel.cmdline_absent", status, desired="absent", subject=pattern, live=in_live,
                             persisted=in_boot, remedy="run the rdma_kernel role (rdma_kernel_absent_args), then reboot"))
    return checks


# -- kernel.config: the module's planner on the facts ------------------------------------------------------------------
def _role(desired, var):
    value = desired.get(var)
    return ROLE_DEFAULTS.get(var) if value is None else value


def params_of(desired):
    """kernel_cmdline's options exactly as the role passes them (roles/rdma_kernel/tasks/main.yml; the role's
    defaults where ``desired`` has none), checked and converted by the module's own argument spec and its checks
    before any I/O (InputError, naming the variable, for what the module would refuse)."""
    extra = _role(desired, "rdma_kernel_extra_args")
    if not isinstance(extra, list):
        raise InputError("rdma_kernel_extra_args must be a list of kernel arguments, got %r (the role adds it to a "
                         "list)" % (extra,))
    present = (["iommu=pt"] if desired_bool(desired, "rdma_kernel_iommu_passthrough", True) else []) + extra
    try:
        params = role_params(_plan.argument_spec(), {
            "present": present,
            "absent": _role(desired, "rdma_kernel_absent_args"),
            "vendor_iommu": desired_bool(desired, "rdma_kernel_vendor_iommu", False),
            "bootloader": _role(desired, "rdma_kernel_bootloader"),
            "dropin": _role(desired, "rdma_kernel_dropin"),
            "update": desired_bool(desired, "rdma_kernel_update_bootloader", True),
            "backup": False, "host_root": "/"}, "rdma_kernel_")
        _plan.validate(params)
    except InputError as exc:
        raise InputError("%s (kernel_cmdline's present is iommu=pt from rdma_kernel_iommu_passthrough plus "
                         "rdma_kernel_extra_args, absent is rdma_kernel_absent_args, update is "
                         "rdma_kernel_update_bootloader)" % exc.msg)
    return params


def observed_of(observed, params):
    """What :func:`plan.plan` reads, from the facts' ``observed`` (:func:`observe.planner_input`)."""
    out = dict(observed)
    out["files"] = FactFiles(((path, _observe.file_state(item)) for path, item in observed["files"].items()),
                             "/etc/default/grub, the collection's drop-in under its default name %s and "
                             "/etc/kernel/cmdline" % _observe.DEFAULT_DROPIN)
    grub = observed.get("grub")
    if grub is not None and grub.get("dropin") != params["dropin"] and params["bootloader"] != "grubby":
        raise MissingFacts("the facts hold what GRUB's files configure around the drop-in %s, not %s: the plan for "
                           "it is unknown" % (grub.get("dropin"), params["dropin"]))
    return out


def _unread(observed, mode):
    """Why the facts lack what the plan reads for ``mode`` (None when they hold it)."""
    if mode == "grubby":
        if observed.get("grubby") is None:
            return observed.get("grubby_error") or "grubby was not found on the node, so its boot entries were not read"
    elif observed.get("grub") is None:
        return observed.get("grub_error") or "the GRUB defaults were not evaluated (no %s)" % _observe.GRUB_DEFAULTS
    elif mode == "grub_default" and observed["grub"].get("defaults_probe") is None \
            and not observed["grub"].get("defaults_error"):
        return "the facts do not hold the evaluation of %s with its assignments replaced" % _observe.GRUB_DEFAULTS
    return None


def config_check(section, params):
    """``kernel.config``: kernel_cmdline's plan on the facts for the role's options (None on facts without the
    planner's input)."""
    if "observed" not in section:
        return None  # facts of an older collection version
    observed = section["observed"]
    if observed is None:
        why = "; ".join("%s: %s" % (p.get("path"), p.get("error")) for p in section.get("problems") or []) or \
            "the boot configuration could not be read"
        return _check("kernel.config", "unknown", detail="kernel_cmdline's plan cannot be made from the facts: %s" % why)
    try:
        mode = _observe.detect_bootloader(observed, params["bootloader"])
        why = _unread(observed, mode)
        if why:
            return _check("kernel.config", "unknown", mode, detail="kernel_cmdline's plan cannot be made from the "
                          "facts: %s" % why)
        planned = _plan.plan(params, observed_of(observed, params))
    except MissingFacts as exc:
        return _check("kernel.config", "unknown", params["bootloader"], detail=exc.msg)
    except RdmaNodeError as exc:
        return _check("kernel.config", "fail", params["bootloader"], remedy="see docs/kernel.md: kernel_cmdline refuses "
                      "this node with the role's variables", detail=exc.msg)
    work = planned["actions"]
    return _check("kernel.config", "drift" if work else "ok", planned["bootloader"],
                  desired={"present": planned["present"], "absent": planned["absent"]},
                  live=planned["observed"]["before"], persisted=planned["observed"]["configured"],
                  remedy=REMEDY if work else None, detail="planned: %s" % work if work else None)


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    if section is None or desired is None:
        return []
    checks = cmdline_checks(section, desired)
    if "observed" in section:
        try:
            params = params_of(desired)
        except InputError as exc:  # the role fails on its variables: nothing it would do can be judged
            return checks + [_check("kernel.config", "fail", remedy="correct the rdma_kernel role's variables: the "
                                    "role fails on them before any change", detail=exc.msg)]
        checks.append(config_check(section, params))
    return checks
