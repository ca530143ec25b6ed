# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's applier: runs exactly the actions of :func:`plan.plan`.

The file goes first, through the file transaction (atomic, backup, rollback); then every ``set_live`` in one
``sysctl -w`` call, read back.  A live write that fails or does not stick puts the live values already changed and
the file back, so nothing is half-applied.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl.observe import read_live


def sysctl_write(commands, pairs):
    """One ``sysctl -q -w k=v ...`` call; returns (rc, stderr)."""
    rc, dummy_out, err = commands.run_kernel(["sysctl", "-q", "-w"] + ["%s=%s" % (k, v.replace("\t", " ")) for k, v in pairs])
    return rc, err


def apply(host, commands, planned, backup=False):
    """Apply ``planned``; returns the backup files, ``{edited path: backup path}`` as every module returns them
    (empty without ``backup``).  ApplyError / VerifyError after putting the file and the live values back."""
    file_plan = planned["file"]
    steps = [step["action"] for step in planned["actions"]]
    if steps.count("set_live") != len(planned["to_set"]) or len(steps) - len(planned["to_set"]) != int(file_plan.changed):
        raise ApplyError("no applier for the planned steps %r" % (planned["actions"],))  # pragma: no cover
    backups = FileTransaction(host, backup=backup).apply_all([file_plan])
    to_set = planned["to_set"]
    if not to_set:
        return backups
    live = planned["live"]
    rc, err = sysctl_write(commands, to_set)
    now = read_live(host, [key for key, dummy in to_set])
    wrong = [key for key, value in to_set if rules.differs(now[key], value)]
    if rc != 0 or wrong:
        reverted = [(key, live[key]) for key, dummy in to_set if now[key] != live[key]]
        restore_rc = sysctl_write(commands, reverted)[0] if reverted else 0
        revert(host, [file_plan], cause="setting %s live failed (rc=%s: %s); the live values %s" % (
            ", ".join(wrong) or "the values", rc, err.strip() or "value did not stick",
            "were put back" if restore_rc == 0 else "could NOT all be put back"))
        raise (ApplyError if rc != 0 else VerifyError)(
            "setting %s live failed (rc=%s: %s); the file was restored and %s" % (
                ", ".join(wrong) or "the values", rc, err.strip() or "value did not stick",
                "the live values put back" if restore_rc == 0 else "putting the live values back FAILED too"),
            {"failed": wrong, "restored_live": [k for k, dummy in reverted] if restore_rc == 0 else []})
    return backups
