# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's planner, pure: desired mode + observed -> the actions, the overrides, the warnings.

``rdma system set netns`` changes the mode at run time, but ``rdma_compatdev_set()`` refuses with EBUSY as soon as any
non-init network namespace exists, which on a Kubernetes node is always (every pod has one).  So the live switch is
a best effort on a quiet node, and a refusal means "reboot", never a failure and never a retry loop.

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts
(judge.py): the mode it would change is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.mode import mode_of, render_conf

CONF_MODE = 0o644


def switch_argv(mode):
    """The live switch."""
    return ["rdma", "system", "set", "netns", mode]


def live_decision(desired, live, loaded, allow_live):
    """What to do about the running kernel: ``"none"`` (already right, or ib_core not loaded so the option applies
    at load), ``"switch"`` (try ``rdma system set netns``), or ``"reboot"`` (differs, and no live switch allowed)."""
    if not loaded or live == desired:
        return "none"
    return "switch" if allow_live else "reboot"


def overrides(settings, ours, mode):
    """Settings that keep ``mode`` from applying when ib_core loads.

    ``settings``: :func:`_modprobe.settings_of` with our file in place (``[(value, path, line)]`` in the order the
    kernel applies them, the last one wins).  When the winner means ``mode``, nothing; else every setting after our
    last one whose value means another mode (or is a value the kernel refuses, which fails ib_core's load):
    ``[{file, line, value, mode}]``.
    """
    def meaning(value):
        try:
            return mode_of(value if value != "" else "1")  # a bare bool parameter sets it (param_set_bool(NULL))
        except ParseError:
            return None

    if not settings or meaning(settings[-1][0]) == mode:
        return []
    ours_at = max([index for index, item in enumerate(settings) if item[1] == ours] or [-1])
    return [{"file": path, "line": line, "value": value, "mode": meaning(value)}
            for value, path, line in settings[ours_at + 1:] if meaning(value) != mode]


def describe_override(item, mode):
    """One line for a warning or an error."""
    if item["mode"] is None:
        return ("%s%s sets ib_core netns_mode=%s, a value the kernel refuses: ib_core fails to load" % (
            item["file"], ":%s" % item["line"] if item["line"] else "", item["value"]))
    return "%s%s sets ib_core netns_mode=%s (%s) after ours, so ib_core loads in %s mode, not %s" % (
        item["file"], ":%s" % item["line"] if item["line"] else "", item["value"], item["mode"], item["mode"], mode)


def plan(mode, observed, conf, live=True, regenerate=None):
    """The plan for ``mode`` with our modprobe.d file at ``conf``.

    ``observed`` is :func:`observe.observe`'s result (the judge builds the same from the facts).  ``live``: a live
    switch is allowed.  ``regenerate``: the initramfs command to run after a file change (the module probes the image
    when the file changes and plans again; None = none).

    Returns ``{"actions", "file" (the FilePlan), "content", "regenerate", "switch" (argv or None), "live_decision",
    "reboot_required", "overrides" (:func:`overrides`), "warnings", "observed"}``; ``actions``: the file's
    create/update, the initramfs run, the live switch, in that order.
    """
    content = render_conf(mode)
    file_plan = plan_file(observed["conf"], content, CONF_MODE)
    layers = _modprobe.with_ours(observed["modprobe"], conf, _modprobe.directives(content))
    settings = _modprobe.settings_of(layers, "ib_core", "netns_mode")
    found = overrides(settings, conf, mode)
    warnings = [describe_override(item, mode) for item in found]
    if observed.get("cmdline") is not None and observed["cmdline"] != mode:
        warnings.append("the running kernel was booted with ib_core.netns_mode=%s, which kmod applies over modprobe.d; "
                        "unless the boot configuration changes too (rdma.k8s_node.kernel_cmdline), the next boot is %s "
                        "again" % (observed.get("cmdline_value"), observed["cmdline"]))
    if mode == "exclusive" and observed.get("shared_device_plugin"):
        warnings.append("the RDMA shared device plugin runs on this node; in exclusive mode it stops seeing RDMA "
                        "devices in pods, so move those workloads to SR-IOV with the RDMA CNI")
    actions = []
    if file_plan.changed:
        actions.append(file_plan.action())
        if regenerate:
            actions.append(action("run", " ".join(regenerate)))
    decision = live_decision(mode, observed["live"], observed["ib_core_loaded"], live)
    if decision == "switch":
        actions.append(action("run", " ".join(switch_argv(mode))))
    return {
        "actions": actions, "file": file_plan, "content": content,
        "regenerate": list(regenerate) if regenerate and file_plan.changed else None,
        "switch": switch_argv(mode) if decision == "switch" else None,
        "live_decision": decision, "reboot_required": decision != "none",
        "overrides": found, "warnings": warnings,
        "observed": {"ib_core_loaded": observed["ib_core_loaded"], "live": observed["live"],
                     "persisted": mode if not found else found[-1]["mode"],
                     "persisted_by": settings[-1][1] if settings else None, "cmdline": observed.get("cmdline")},
    }
