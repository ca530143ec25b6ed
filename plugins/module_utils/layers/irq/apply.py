# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``irq`` layer's applier: runs exactly the actions of :func:`plan.plan`.

The files (boot script, irqbalance policy script and environment file, boot unit) are written first, all or nothing
(the file transaction).  Then each vector's ``smp_affinity_list`` is written in one ``write()`` and read back.  A
vector the kernel refuses with EPERM (6.x) or EIO (older kernels) has a kernel-managed affinity: it is reported in
``refused`` and left alone, not fought.  Any other error (EINVAL: no online CPU in the list, ERANGE: a CPU past
nr_cpu_ids), or a read-back that differs, puts the vectors already written and the files back before raising.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, observe_file, plan_file, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq.plan import _cpus

FILE_ACTIONS = ("write_script", "write_policy", "edit_irqbalance_env", "write_unit")
_EXECUTABLE = ("write_script", "write_policy")
#: what write_irq_affinity() answers for an interrupt user space may not move (kernel/irq/proc.c)
REFUSED = (errno.EPERM, errno.EIO)


def affinity_path(irq):
    return "/proc/irq/%s/smp_affinity_list" % irq


def file_plans(host, planned):
    """The file plans of the plan's file actions, in order."""
    plans = []
    for step in planned["actions"]:
        if step["action"] not in FILE_ACTIONS:
            continue
        observed = observe_file(host, step["target"])
        if step["action"] in _EXECUTABLE:
            mode = 0o755
        elif step["action"] == "edit_irqbalance_env" and observed.exists and observed.mode is not None:
            mode = observed.mode
        else:
            mode = 0o644
        plans.append(plan_file(observed, planned["files"][step["target"]], mode))
    return plans


def apply(host, planned, backup=False):
    """Apply ``planned``; returns ``(backup files, refused vectors)``, the backups ``{edited path: backup path}`` as
    every module returns them (empty without ``backup``).  ApplyError / VerifyError after putting everything back."""
    plans = file_plans(host, planned)
    backups = FileTransaction(host, backup=backup).apply_all(plans) if plans else {}
    done, refused = [], []
    for step in planned["actions"]:
        if step["action"] != "set_affinity":
            continue
        path = affinity_path(step["target"])
        try:
            host.write_attr(path, step["after"])
        except (OSError, HostReadError) as exc:
            code = getattr(exc, "errno", None)
            if code in REFUSED:
                refused.append(dict(step, errno=errno.errorcode.get(code, str(code))))
                continue
            _undo(host, done, plans, "IRQ %s: %s" % (step["target"], exc))
            raise ApplyError("writing CPUs %s to IRQ %s (%s of %s) failed (%s); %s" % (
                step["after"], step["target"], step.get("name"), step["device"], exc, _undone(done, plans)),
                {"failed": step["target"], "errno": code}) from exc
        now = host.read_attr(path, "")
        if _cpus(now) != _cpus(step["after"]):
            _undo(host, done + [step], plans, "IRQ %s kept %s" % (step["target"], now))
            raise VerifyError("IRQ %s (%s of %s) reads %s after writing %s; %s" % (
                step["target"], step.get("name"), step["device"], now, step["after"], _undone(done, plans)),
                {"failed": step["target"], "read_back": now})
        done.append(step)
    return backups, refused


def _undone(done, plans):
    parts = []
    if done:
        parts.append("IRQ %s put back" % ", ".join(s["target"] for s in done))
    if any(p.changed for p in plans):
        parts.append("the files restored")
    return " and ".join(parts) if parts else "nothing was changed"


def _undo(host, done, plans, cause):
    for step in reversed(done):
        try:
            host.write_attr(affinity_path(step["target"]), step["before"])
        except (OSError, HostReadError):
            pass
    changed = [p for p in plans if p.changed]
    if changed:
        revert(host, changed, cause=cause)
