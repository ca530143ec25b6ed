# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kubelet`` layer's applier: runs exactly the plan of :func:`plan.plan`, all or nothing.

With a restart: the kubelet is stopped, the stale checkpoints are moved aside, the files go through the file
transaction (atomic, backup), the kubelet is restarted and must answer ``/healthz`` and stay up for ``settle_time``;
any failure puts the files and the checkpoints back and starts the kubelet again.  Without one: the files only.
:class:`Service` is the kubelet's unit as systemd and its healthz endpoint answer for it.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import time

from ansible.module_utils.urls import open_url

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, revert

# a kubelet whose unit's Restart= brought it back this many times since our restart will not come up: a bad config or
# checkpoint fails every start (kubeadm's unit: Restart=always, RestartSec=10, so about 20 s instead of restart_timeout)
CRASH_LOOP = 2
ROLLBACK_SUFFIX = ".rdma-k8s-node-rollback"


class Service:
    """The kubelet's unit (``kubelet``; k3s/rke2: their unit, which runs the kubelet) as systemd and healthz see it."""

    def __init__(self, commands, service="kubelet"):
        self.commands = commands
        self.service = service

    def main_pid(self):
        rc, out, dummy_err = self.commands.run_kernel(["systemctl", "show", self.service, "-p", "MainPID", "--value"])
        if rc == 0 and out.strip().isdigit() and int(out.strip()):
            return int(out.strip())
        return None

    def systemctl(self, *args):
        return self.commands.run_kernel(["systemctl"] + list(args))

    def answers(self, url):
        """(True, "ok") when the unit is active and healthz says ok, else (False, why)."""
        rc, out, dummy_err = self.systemctl("is-active", self.service)
        if rc != 0:
            return False, out.strip() or "not active"
        try:
            body = open_url(url, timeout=5, validate_certs=False).read()
        except Exception as exc:  # pylint: disable=broad-except
            return False, str(exc)
        if body.strip() == b"ok":
            return True, "ok"
        return False, body.decode("utf-8", "replace")[:200]

    def restarts(self):
        """systemd's NRestarts of the unit (its Restart= retries since the last explicit start), or None."""
        rc, out, dummy_err = self.systemctl("show", self.service, "-p", "NRestarts", "--value")
        value = out.strip()
        return int(value) if rc == 0 and value.isdigit() else None

    def gave_up(self, why, restarts_before):
        """Why waiting longer is pointless, or None: systemd has given up on the unit (``failed``, or ``inactive``
        after the start), or it is crash-looping (Restart= started it again ``CRASH_LOOP`` times since ours)."""
        if why in ("failed", "inactive"):
            return "%s: systemd is not restarting it" % why
        now = self.restarts()
        if restarts_before is not None and now is not None and now - restarts_before >= CRASH_LOOP:
            return "%s: it exited and systemd restarted it %d times" % (why, now - restarts_before)
        return None

    def healthy(self, timeout, url, settle=0):
        """Healthy within ``timeout`` s, then still healthy with the same main process for ``settle`` s.  A unit
        systemd gave up on, or one that keeps exiting (``CRASH_LOOP`` restarts by its Restart=), fails at once."""
        deadline = time.time() + timeout
        first, pid = None, None
        restarts_before = self.restarts()
        while True:
            ok, why = self.answers(url)
            now = time.time()
            if not ok and first is None:
                stuck = self.gave_up(why, restarts_before)
                if stuck:
                    return False, stuck
            if ok:
                current = self.main_pid() if settle else None  # nothing to compare without a settle time
                if first is None:
                    first, pid = now, current
                elif current != pid:
                    return False, ("it answered healthz, then its main process changed (PID %s -> %s) within %d s: the "
                                   "kubelet restarted" % (pid, current, settle))
                if now - first >= settle:
                    return True, "ok"
            elif first is not None:
                return False, "it answered healthz, then stopped (%s) within %d s" % (why, settle)
            elif now >= deadline:
                return False, why
            time.sleep(1)


def apply(node, host, params, planned, result, warn=None):  # pylint: disable=too-many-locals
    """Apply ``planned`` (:func:`plan.plan`): with its restart, stop the kubelet (``node``, a :class:`Service`) and
    move the stale state files aside, write the files, restart and watch it; any failure puts files and state files
    back and starts the kubelet again.  ``result`` (a Result holding the plan) gets ``removed_state_files`` and
    ``backup_files``; ApplyError carries it as the partial result."""
    warn = warn or (lambda message: None)
    plans, stale_states, restarting = planned["plans"], planned["stale_states"], planned["restarting"]
    if planned["actions"][:len(plans)] != [file_plan.action() for file_plan in plans]:
        raise ApplyError("no applier for the planned steps %r" % (planned["actions"],))  # pragma: no cover
    saved_states = []
    if restarting:
        rc, dummy_out, err = node.systemctl("stop", node.service)
        if rc != 0:
            raise ApplyError("systemctl stop " + node.service + " failed (rc=%s): %s; nothing was changed" % (rc, err.strip()),
                             {"rc": rc, "stderr": err}, result.as_dict())
        try:
            for path in stale_states:
                if host.stat(path, follow=False) is not None:
                    host.rename(path, path + ROLLBACK_SUFFIX)
                    saved_states.append(path)
                    result.extra["removed_state_files"].append(path)
        except (IOError, OSError, RdmaNodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise ApplyError("moving %s aside failed (%s); %s" % (
                path, why, _undo_states(node, host, saved_states, "nothing was changed")),  # pylint: disable=undefined-loop-variable
                {"errno": getattr(exc, "errno", None)}, result.as_dict()) from exc
    try:
        backups = FileTransaction(host, backup=params["backup"]).apply_all(plans)
    except ApplyError as exc:
        outcome = _undo_states(node, host, saved_states, "no state file had been moved") if restarting else \
            "the kubelet was not touched"
        raise ApplyError("%s; %s" % (exc.msg, outcome), exc.details, result.as_dict()) from exc
    result.extra["backup_files"] = backups
    if restarting:
        node.systemctl("restart", node.service)
        ok, why = node.healthy(params["restart_timeout"], params["healthz_url"], params["settle_time"])
        if not ok:
            problem = "the kubelet did not become healthy after the change (%s)" % why
            try:
                restored = revert(host, plans)
                files = "the files were restored"
            except ApplyError as exc:
                restored, files = [], exc.msg
            state_failures = _restore_states(host, saved_states)
            node.systemctl("restart", node.service)
            back, dummy_why = node.healthy(params["restart_timeout"], params["healthz_url"], params["settle_time"])
            raise ApplyError("%s; %s%s and the kubelet restarted again (%s)" % (
                problem, files, "; state files NOT restored: %s" % ", ".join(state_failures) if state_failures
                else (", the state files put back" if saved_states else ""), "healthy" if back else "STILL NOT healthy"),
                {"restored": restored + [p for p in saved_states if p not in state_failures],
                 "healthy_after_rollback": back}, result.as_dict())
        for path in saved_states:
            try:
                host.unlink(path + ROLLBACK_SUFFIX)
            except (OSError, RdmaNodeError) as exc:
                warn("could not remove the saved copy %s%s: %s" % (path, ROLLBACK_SUFFIX, getattr(exc, "strerror", None) or exc))


def _restore_states(host, saved):
    """Put moved-aside state files back; returns the ones that could not be."""
    failed = []
    for path in saved:
        try:
            host.rename(path + ROLLBACK_SUFFIX, path)
        except (OSError, RdmaNodeError):
            failed.append(path)
    return failed


def _undo_states(node, host, saved, nothing):
    """After a failure with the kubelet stopped: state files back, kubelet started; a sentence saying so."""
    failed = _restore_states(host, saved)
    rc, dummy_out, err = node.systemctl("start", node.service)
    started = "the kubelet was started again" if rc == 0 else "starting the kubelet again FAILED: %s" % err.strip()
    if failed:
        return "state files NOT restored: %s (they are at <path>%s); %s" % (", ".join(failed), ROLLBACK_SUFFIX, started)
    return "%s; %s" % ("the state files were put back" if saved else nothing, started)
