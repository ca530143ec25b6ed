# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` layer's applier: runs exactly the actions of :func:`plan.plan`, all or nothing.

The boot script and unit are written first (atomically, through the file transaction).  Then each port's settings,
in the plan's order: the tool's (trust, DSCP map, PFC) with mlnx_qos or dcb, the sysfs/configfs files with one
``write()`` each (the configfs group made with ``mkdir`` first).  Every step is read back; when one fails or does not
stick, the steps already done get their previous values back (a group this run made is removed) and the files are
put back: nothing is left half-applied.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, observe_file, plan_file, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import tools

TOOL_ACTIONS = ("set_trust", "set_dscp2prio", "set_pfc")


def file_plans(host, planned):
    """The file plans of the boot script (0755) and unit (0644), for the plan's ``write_*`` actions."""
    plans = []
    for step in planned["actions"]:
        if step["action"] == "write_script":
            plans.append(plan_file(observe_file(host, step["target"]), planned["script"], 0o755))
        elif step["action"] == "write_unit":
            plans.append(plan_file(observe_file(host, step["target"]), planned["unit"], 0o644))
    return plans


def _run(commands, argv):
    rc, out, err = commands.run_kernel(argv)
    if rc != 0:
        raise OSError(0, "%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out or "").strip()[-300:]))


def _now(host, commands, tool, step):
    """The value the step set, read back from the node."""
    if step["action"] in TOOL_ACTIONS:
        port = _observe.read_tool(commands, tool, step["target"])
        if "error" in port:
            raise OSError(0, port["error"])
        if step["action"] == "set_trust":
            return port["trust"]
        if step["action"] == "set_pfc":
            return port["pfc"]
        return dict((d, port["dscp2prio"].get(d, tools.default_prio(d))) for d in step["after"])
    text = (host.read_text(step["path"]) or "").strip()
    if step["action"] == "set_traffic_class":
        return int(text.split("=", 1)[1]) if text.startswith("Global tclass=") else -1
    return int(text)


def _do(host, commands, tool, step, value):
    """Set ``value`` for the step's setting (the step's ``after``, or its ``before`` when undoing)."""
    name, action = step["target"], step["action"]
    if action == "set_trust":
        if value == "dscp":
            _run(commands, step["argv"])
        elif tool["name"] == "mlnx_qos":
            _run(commands, [tool["path"], "-i", name, "--trust", "pcp"])
        else:
            current = _observe.read_tool(commands, tool, name).get("dscp2prio") or {}
            if current:
                _run(commands, [tool["path"], "app", "del", "dev", name, "dscp-prio"]
                     + ["%s:%s" % (d, p) for d, p in sorted(current.items())])
    elif action == "set_dscp2prio":
        entries = [(int(d), int(p)) for d, p in sorted(value.items())]
        _run(commands, tools.dscp2prio_argv(tool["name"], tool["path"], name, entries))
    elif action == "set_pfc":
        _run(commands, tools.pfc_argv(tool["name"], tool["path"], name, value))
    else:  # set_ecn, set_cnp, set_roce_tos, set_traffic_class: one sysfs/configfs write (-1 clears a traffic class)
        host.write_attr(step["path"], "%d" % value)


def apply(host, commands, planned, backup=False):
    """Apply ``planned``; returns the backup files (``{edited path: backup path}``, empty without ``backup``).
    ApplyError / VerifyError after putting everything back."""
    plans = file_plans(host, planned)
    backups = FileTransaction(host, backup=backup).apply_all(plans) if plans else {}
    tool = planned["tool"]
    done, made = [], []
    for step in planned["actions"]:
        if step["action"] in ("write_script", "write_unit"):
            continue
        try:
            if step["action"] == "set_roce_tos" and step.get("mkdir"):
                host.mkdir(step["mkdir"])
                made.append(step["mkdir"])
            _do(host, commands, tool, step, step["after"])
            now = _now(host, commands, tool, step)
        except (OSError, HostReadError, ValueError) as exc:
            reason = getattr(exc, "msg", None) or exc.strerror or str(exc)
            undone = _undo(host, commands, tool, done, made, plans, "%s %s failed: %s" % (step["action"], step["target"], reason))
            raise ApplyError("%s of %s failed (%s); %s" % (step["action"], step["target"], reason, undone),
                             {"failed": step}) from exc
        if now != step["after"]:
            undone = _undo(host, commands, tool, done, made, plans, "%s %s kept %r" % (step["action"], step["target"], now))
            raise VerifyError("%s: %s is %r after setting %r (the driver or the tool refused it); %s" % (
                step["target"], step["action"], now, step["after"], undone), {"failed": step, "read_back": now})
        done.append(step)
    return backups


def _undo(host, commands, tool, done, made, plans, cause):
    """Put back what the run changed, newest first; says what was put back (and what could not be)."""
    back, failed = [], []
    for step in reversed(done):
        if step["before"] is None:
            continue
        try:
            _do(host, commands, tool, step, step["before"])
            back.append("%s %s" % (step["action"], step["target"]))
        except (OSError, HostReadError) as exc:
            failed.append("%s %s (%s)" % (step["action"], step["target"], getattr(exc, "msg", None) or exc))
    for path in reversed(made):
        try:
            host.rmdir(path)
        except OSError as exc:
            failed.append("rmdir %s (%s)" % (path, exc.strerror))
    changed = [p for p in plans if p.changed]
    if changed:
        revert(host, changed, cause=cause)
    parts = []
    if back:
        parts.append("put back: " + ", ".join(back))
    if changed:
        parts.append("the boot files restored")
    if failed:
        parts.append("COULD NOT put back: " + ", ".join(failed))
    return "; ".join(parts) if parts else "nothing was changed"
