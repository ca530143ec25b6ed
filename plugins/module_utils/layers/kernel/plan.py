# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kernel`` layer's planner, pure: kernel_cmdline's options + what :func:`observe.collect` read -> the file
writes (the GRUB drop-in, ``GRUB_CMDLINE_LINUX`` of /etc/default/grub, /etc/kernel/cmdline), the grubby calls, the
GRUB regeneration, what the next boot gets before and after, what the running kernel lacks (``reboot_required``),
and the refusals (typed errors).

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts
(judge.py): a plan with work is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import os
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import conf_name_pattern, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _observe

# what grub-mkconfig's `for i in /etc/default/grub.d/*.cfg` picks up (the shell's * skips dot files)
DROPIN_NAME_RE = conf_name_pattern(".cfg")
# the shell's field splitting of an unquoted ${VAR} with the default IFS
_IFS_RE = re.compile(r"[ \t\n]+")


def argument_spec():
    """kernel_cmdline's argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        present=dict(type="list", elements="str", default=[]),
        absent=dict(type="list", elements="str", default=[]),
        vendor_iommu=dict(type="bool", default=False),
        bootloader=dict(type="str", default="auto", choices=list(_observe.MODES)),
        dropin=dict(type="path", default=_observe.DEFAULT_DROPIN),
        update=dict(type="bool", default=True),
        backup=dict(type="bool", default=False),
        host_root=dict(type="path", default="/"),
    )


def validate(params):
    """Checks before any I/O (the drop-in's path, the request's shapes and characters); InputError names the option."""
    dropin = params["dropin"]
    if os.path.dirname(dropin) != _observe.GRUB_DEFAULTS_DIR or not DROPIN_NAME_RE.match(os.path.basename(dropin)):
        raise InputError("dropin must be a .cfg file directly in %s, named with letters, digits and _ . @ + - and not "
                         "starting with a dot (GRUB sources nothing else), got %r" % (_observe.GRUB_DEFAULTS_DIR, dropin))
    _cmdline.validate_request(params["present"], params["absent"])


def wanted_args(params, vendor):
    """``(present, absent)``: ``present`` plus the vendor IOMMU switch when asked, validated."""
    present = list(params["present"])
    if params["vendor_iommu"]:
        arg = _cmdline.iommu_vendor_arg(vendor)
        if arg is None:
            raise InputError("vendor_iommu: no IOMMU switch known for CPU vendor %r (from /proc/cpuinfo)" % (vendor,))
        if not any(_cmdline.same_arg(arg, other) for other in present):
            present.append(arg)
    return _cmdline.validate_request(present, params["absent"])


def pending_changes(live, present, absent):
    """What the running kernel lacks or has too much, restricted to what this module manages."""
    missing = _cmdline.missing_from(live, present)
    names = set(_cmdline.key_of(arg) for arg in present)
    unwanted = [arg for arg in live
                if any(_cmdline.matches_absent(arg, pattern) for pattern in absent)
                or (_cmdline.key_of(arg) in names and not any(_cmdline.same_arg(arg, want) for want in present))]
    return {"missing": missing, "unwanted": unwanted}


def dropin_effect(values, present, absent):
    """What the drop-in :func:`grub.render_dropin` renders does to ``[GRUB_CMDLINE_LINUX, ..._DEFAULT]`` when
    /bin/sh sources it: the words matching its ``case`` patterns dropped (with ``set -f``, split at blanks, joined by
    one space), then the wanted arguments appended to ``GRUB_CMDLINE_LINUX``."""
    patterns = _grub.removal_patterns(present, absent)
    out = list(values)
    if patterns:
        out = [" ".join(word for word in _IFS_RE.split(value)
                        if word and not any(fnmatch.fnmatchcase(word, pattern) for pattern in patterns))
               for value in values]
    if present:
        out[0] = (out[0] + " " if out[0] else "") + " ".join(present)
    return out


def through_template(probes, values, what):
    """``values`` through the files a probe evaluation stood for (:data:`observe.PROBES`): the first probe's output
    with the sentinels replaced by ``values``; ConflictError when the two probes disagree (the files compute the
    command line from its words, so no substitution predicts them)."""
    def fill(template, probe, new):
        return template[0].replace(probe[0], new[0]).replace(probe[1], new[1]), \
            template[1].replace(probe[0], new[0]).replace(probe[1], new[1])

    first, second = _observe.PROBES
    if list(fill(probes[0], first, second)) != list(probes[1]):
        raise ConflictError("%s compute GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT from its words: what the next "
                            "boot would get cannot be predicted; move that logic elsewhere or use another mode" % what,
                            {"files": what})
    return list(fill(probes[0], first, values))


def _grub_dropin(params, observed, present, absent):
    grub = observed["grub"]
    observed_file = observed["files"][params["dropin"]]
    file_plan = plan_file(observed_file, _grub.render_dropin(present, absent), 0o644)
    after = dropin_effect(grub["prefix"], present, absent)
    later = grub["suffix"]["files"]
    if grub["suffix"]["probes"] is not None:
        after = through_template(grub["suffix"]["probes"], after, "the GRUB defaults files sourced after ours (%s)"
                                 % ", ".join(later))
    return [file_plan], after, later


def _grub_default(params, observed, present, absent):
    grub = observed["grub"]
    state = observed["files"][_observe.GRUB_DEFAULTS]
    text = state.content or ""
    values = []
    for var in _grub.CMDLINE_VARS:
        dummy_index, value = _grub.find_assignment(text, var, _observe.GRUB_DEFAULTS)
        wanted = present if var == "GRUB_CMDLINE_LINUX" else []
        new_args, changes = _cmdline.plan(_cmdline.split_raw(value or ""), wanted, absent)
        if var == "GRUB_CMDLINE_LINUX_DEFAULT":
            # a wanted name must not come back from the DEFAULT variable either
            names = set(_cmdline.key_of(arg) for arg in present)
            kept = [arg for arg in new_args if _cmdline.key_of(arg) not in names]
            changes = changes or kept != new_args
            new_args = kept
        if changes:
            text = _grub.set_assignment(text, var, " ".join(new_args), _observe.GRUB_DEFAULTS)
            values.append(" ".join(new_args))
        else:
            values.append(value or "")
    file_plan = plan_file(state, text, state.mode if state.exists else 0o644,
                          state.uid if state.exists else 0, state.gid if state.exists else 0)
    after = through_template(grub["defaults_probe"], values, "the GRUB defaults files (%s and %s/*.cfg)"
                             % (_observe.GRUB_DEFAULTS, _observe.GRUB_DEFAULTS_DIR))
    later = [n for n in grub["names"] if n > os.path.basename(params["dropin"])]
    return [file_plan], after, later


def plan_grub(params, observed, mode, present, absent):
    """The GRUB-file modes: the file plans, what the default entry gets before and after, the regeneration."""
    grub = observed["grub"]
    if mode == "grub_dropin":
        plans, after, later = _grub_dropin(params, observed, present, absent)
    else:  # its ParseError (an assignment it cannot rewrite) comes before the probe the observer could not make
        plans, after, later = _grub_default(params, observed, present, absent)
    before_args = _grub.default_entry_args(dict(zip(_grub.CMDLINE_VARS, grub["before"])))
    configured = _grub.default_entry_args(dict(zip(_grub.CMDLINE_VARS, after)))
    overridden = _cmdline.missing_from(configured, present)
    if overridden:
        raise ConflictError(
            "after this change the next boot would still lack %s: another GRUB defaults file overrides it "
            "(files sourced after ours: %s)" % (" ".join(overridden), ", ".join(later) or "none"),
            {"overridden": overridden, "later_files": later})
    actions, diffs = [], []
    for file_plan in plans:
        if file_plan.changed:
            actions.append(file_plan.action())
            diffs.append(file_plan.diff())
    stale = observed["grub_cfg"] is not None and bool(_cmdline.missing_from(observed["grub_cfg"], configured))
    update_argv = None
    if params["update"] and (any(p.changed for p in plans) or stale):
        if observed["tools"]["update-grub"]:
            update_argv = ["update-grub"]
        elif observed["tools"]["grub-mkconfig"]:
            update_argv = ["grub-mkconfig", "-o", _observe.GRUB_CFG]
        else:
            raise ApplyError("neither update-grub nor grub-mkconfig is installed; cannot regenerate %s"
                             % _observe.GRUB_CFG)
        actions.append(action("run", " ".join(update_argv)))
    return {"plans": plans, "actions": actions, "diffs": diffs, "before": before_args, "configured": configured,
            "update_argv": update_argv, "grubby_steps": []}


def plan_grubby(observed, present, absent):
    """EL: every BLS entry through grubby, and GRUB_CMDLINE_LINUX / /etc/kernel/cmdline for future kernels."""
    entries = observed["grubby"]
    if not entries:
        raise ApplyError("grubby --info=ALL lists no boot entries")
    removes, adds = [], []
    for entry in entries:
        dummy_new, changes = _cmdline.plan(entry["args"], present, absent)
        for change in changes:
            bucket = adds if change["op"] == "add" else removes
            if change["arg"] not in bucket:
                bucket.append(change["arg"])
    before = entries[0]["args"]
    configured = _cmdline.plan(before, present, absent)[0]
    steps = []
    if removes:
        steps.append(["grubby", "--update-kernel=ALL", "--remove-args=%s" % " ".join(removes)])
    if adds:
        steps.append(["grubby", "--update-kernel=ALL", "--args=%s" % " ".join(adds)])
    actions = [action("run", " ".join(argv)) for argv in steps]
    diffs = []
    if steps:
        diffs.append({"before": " ".join(before) + "\n", "after": " ".join(configured) + "\n",
                      "before_header": "boot entries (grubby)", "after_header": "boot entries (grubby)"})
    plans = []
    defaults = observed["files"][_observe.GRUB_DEFAULTS]
    if defaults.exists:
        dummy_index, value = _grub.find_assignment(defaults.content, "GRUB_CMDLINE_LINUX", _observe.GRUB_DEFAULTS)
        new_args, changes = _cmdline.plan(_cmdline.split_raw(value or ""), present, absent)
        if changes:
            plans.append(plan_file(defaults, _grub.set_assignment(defaults.content, "GRUB_CMDLINE_LINUX",
                                                                  " ".join(new_args), _observe.GRUB_DEFAULTS),
                                   defaults.mode, defaults.uid, defaults.gid))
    kernel_file = observed["files"][_observe.KERNEL_CMDLINE_FILE]
    if kernel_file.exists:
        new_args, changes = _cmdline.plan(_cmdline.split_raw(kernel_file.content), present, absent)
        if changes:
            plans.append(plan_file(kernel_file, " ".join(new_args) + "\n", kernel_file.mode, kernel_file.uid,
                                   kernel_file.gid))
    for file_plan in plans:
        actions.append(file_plan.action())
        diffs.append(file_plan.diff())
    return {"plans": plans, "actions": actions, "diffs": diffs, "before": before, "configured": configured,
            "update_argv": None, "grubby_steps": steps}


def plan(params, observed):
    """kernel_cmdline's plan: ``{"bootloader", "present", "absent", "actions", "diffs", "plans" (FilePlans),
    "grubby_steps", "update_argv", "observed" ({live, before, configured}), "pending", "reboot_required"}``.
    ``observed`` is :func:`observe.collect`'s result (files as FileState).  Raises what the module refuses with."""
    validate(params)
    present, absent = wanted_args(params, observed["cpu_vendor"])
    mode = _observe.detect_bootloader(observed, params["bootloader"])
    if mode == "grubby":
        out = plan_grubby(observed, present, absent)
    else:
        out = plan_grub(params, observed, mode, present, absent)
    pending = pending_changes(observed["live"], present, absent)
    out.update(bootloader=mode, present=present, absent=absent, pending=pending,
               reboot_required=bool(pending["missing"] or pending["unwanted"]),
               observed={"live": observed["live"], "before": out.pop("before"), "configured": out.pop("configured")})
    return out
