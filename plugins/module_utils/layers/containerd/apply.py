# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``containerd`` layer's applier: runs exactly the file writes of :func:`plan.plan`, then checks them.

The files go through the file transaction (atomic, backup, rollback); then ``systemctl daemon-reload`` when the unit
drop-in changed, ``containerd config dump`` must show the new settings and nothing else changed, systemd must report
the new ``LimitMEMLOCK``; with ``restart``, containerd is restarted and must come back active with the new limit.
Any failure puts every file back (and reloads / restarts again when they had reached systemd / containerd), so
nothing is half-applied.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ParseError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd


def restore(node, plans, unit_changed, restart):
    """Put the files back; reload and restart when they had reached systemd / containerd.  Returns details."""
    details = {}
    try:
        details["restored"] = revert(node.host, plans)
        details["files"] = "the files were restored"
    except ApplyError as exc:  # keep going: systemd and containerd must still get the files as they are now
        details["restored"] = []
        details["files"] = exc.msg
    if unit_changed and node.systemd:
        node.systemctl("daemon-reload")
    if restart:
        node.systemctl("restart", node.service)
        active, state = node.wait_active(node.params["restart_timeout"])
        details["active_after_rollback"] = active
        details["state_after_rollback"] = state
    return details


def apply(node, planned, result, backup=False, restart=False):
    """Apply ``planned`` (:func:`plan.plan`, checked against its ``want``): its files, reload, the checks, the restart
    with ``restart``.  ``result.extra["backup_files"]`` gets ``{edited path: backup path}`` (empty without
    ``backup``).  ApplyError / VerifyError after putting everything back; ``result`` is the partial result the error
    carries."""
    want, plans, unit_changed = planned["want"], planned["plans"], planned["unit_changed"]
    steps = [step for step in planned["actions"] if step["action"] not in ("run", "restart")]
    if steps != [file_plan.action() for file_plan in plans]:
        raise ApplyError("no applier for the planned steps %r" % (planned["actions"],))  # pragma: no cover
    backups = FileTransaction(node.host, backup=backup).apply_all(plans)
    result.extra["backup_files"] = backups

    def rollback(problem, error=ApplyError, extra=None):
        details = restore(node, plans, unit_changed, False)
        details.update(extra or {})
        raise error("%s; %s and %s was not restarted" % (problem, details["files"], node.service), details,
                    result.as_dict())

    if unit_changed and node.systemd:
        rc, dummy_out, err = node.systemctl("daemon-reload")
        if rc != 0:
            rollback("systemctl daemon-reload failed: %s" % err.strip())
    try:
        eff = node.dump(True)
    except (ApplyError, ParseError) as exc:
        rollback("checking the edited configuration with `containerd config dump` failed: %s" % exc.msg)
    drift = ctd.runtime_drift(planned["effective"], eff)
    if drift:
        rollback("the edit would change more than base_runtime_spec: %s" % "; ".join(drift), VerifyError,
                 {"runtime_drift": drift})
    missing = ctd.verify_effective(eff, want, node.version)
    if missing:
        rollback("after editing, `containerd config dump` still does not show %s (another file overrides it, or a key "
                 "is misplaced)" % ", ".join(missing), VerifyError, {"not_effective": missing})
    if node.systemd:
        rc, out, dummy_err = node.systemctl("show", node.service, "-p", "LimitMEMLOCK")
        shown = out.strip().split("=", 1)[-1] if rc == 0 else ""
        if shown and ctd.parse_systemd_limit(shown) != want["memlock"]:
            rollback("systemd reports LimitMEMLOCK=%s for %s after the change, not %s"
                     % (shown, node.service, ctd.render_limit(want["memlock"])), VerifyError)
    if restart:
        restart_and_check(node, want, plans, unit_changed, result)


def restart_and_check(node, want, plans, unit_changed, result):
    """Restart, then: active, answering, running with the wanted memlock.  Any failure rolls everything back."""
    rc, dummy_out, err = node.systemctl("restart", node.service)
    problem = None
    if rc != 0:
        problem = "systemctl restart %s failed: %s" % (node.service, err.strip())
    else:
        active, state = node.wait_active(node.params["restart_timeout"])
        if not active:
            problem = "%s is %s after the restart" % (node.service, state or "not active")
        else:
            running = node.running()
            memlock = running["memlock"] if running else None
            if not running:
                problem = "%s has no main process after the restart" % node.service
            elif memlock and memlock["hard"] != want["memlock"]:
                problem = "%s runs with memlock %s, not %s" % (node.service, ctd.render_limit(memlock["hard"]),
                                                               ctd.render_limit(want["memlock"]))
            else:
                result.observed["restarted"] = {"pid": running["pid"],
                                                "memlock": dict((k, ctd.render_limit(v)) for k, v in memlock.items())
                                                if memlock else None}
    if problem is None:
        return
    journal = node.journal()
    details = restore(node, plans, unit_changed, True)
    details["journal"] = journal
    raise ApplyError("%s; %s and %s restarted again (%s)"
                     % (problem, details["files"], node.service, "active" if details.get("active_after_rollback") else
                        "NOT active: %s" % details.get("state_after_rollback")), details, result.as_dict())
