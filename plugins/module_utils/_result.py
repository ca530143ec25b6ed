# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result shape every module of the collection returns.

``{changed, diff, actions, reboot_required, restart_required, observed}``: ``actions`` is the
plan (what was done, or in check mode what would be done), ``changed`` follows from it, and
``reboot_required`` / ``restart_required`` say what the change still needs to take effect.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError


def action(kind, target, **detail):
    """One planned step: ``kind`` (a verb such as ``write_file``), ``target`` (path or device) and details."""
    step = {"action": kind, "target": target}
    step.update(detail)
    return step


def value_text(value):
    """A value as a ``--diff`` side shows it: text as it is, anything else as JSON; one line."""
    return (value if isinstance(value, str) else json.dumps(value, sort_keys=True)) + "\n"


def step_diff(step, files=(), label=None, render=value_text):
    """The ``--diff`` of one planned step, derived from the step itself (as community.docker's DifferenceTracker
    derives its diff from the differences it tracked): the file the step writes (the FilePlan among ``files`` whose
    path is the step's target), else the step's own ``before`` -> ``after`` values under the header ``label(step)``
    (default ``"<target> <action>"``), each side ``render(value)``; None for a step with neither."""
    for plan in files:
        if plan.path == step.get("target"):
            return plan.diff()
    if "before" in step and "after" in step:
        header = label(step) if label else "%s %s" % (step["target"], step["action"])
        return {"before_header": header, "before": render(step["before"]), "after_header": header,
                "after": render(step["after"])}
    return None


class Result:
    """Accumulates the outcome of one module run; ``as_dict()`` is what ``exit_json`` receives."""

    def __init__(self):
        self.actions = []
        self.diffs = []
        self.reboot_required = False
        self.restart_required = []
        self.observed = {}
        self.extra = {}

    @property
    def changed(self):
        """A run changed something exactly when its plan had at least one action."""
        return bool(self.actions)

    def add(self, step, diff=None):
        """Record a planned step and, optionally, its before/after diff."""
        self.actions.append(step)
        if diff is not None:
            self.diffs.append(diff)

    def add_plan(self, steps, files=(), label=None, render=value_text, with_diff=True):
        """Record a plan's steps in order, each with its :func:`step_diff` when ``with_diff`` (the module's
        ``_diff``): the one way a module turns its planner's actions into ``actions`` and ``diff``, so check mode
        shows exactly what apply runs."""
        for step in steps:
            self.add(step, step_diff(step, files, label, render) if with_diff else None)

    def need_restart(self, service):
        """Note that ``service`` must be restarted for the change to take effect (kept unique and ordered)."""
        if service not in self.restart_required:
            self.restart_required.append(service)

    def as_dict(self, with_diff=True):
        """The module return value. ``diff`` is a single dict when there is one, a list when several."""
        out = {
            "changed": self.changed,
            "actions": list(self.actions),
            "reboot_required": bool(self.reboot_required),
            "restart_required": list(self.restart_required),
            "observed": self.observed,
        }
        if with_diff and self.diffs:
            out["diff"] = self.diffs[0] if len(self.diffs) == 1 else list(self.diffs)
        out.update(self.extra)
        return out


def exit_module(module, body):
    """The end of every module's main(): exit with ``body(module)``'s result, or fail with the typed error's
    message, details and partial result. Nothing below main() calls exit_json/fail_json itself."""
    try:
        result = body(module)
    except RdmaNodeError as exc:
        module.fail_json(**exc.to_fail_kwargs())
    module.exit_json(**result)
