# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kernel`` layer's apply: exactly the planned actions (:func:`plan.plan`), all or nothing.

GRUB modes: the file transaction, then ``update-grub`` (or ``grub-mkconfig``), then grub.cfg must hold what the
files configure; on a failure the files are restored.  grubby mode: the GRUB defaults and /etc/kernel/cmdline, then
the grubby calls, then every boot entry must have the request; a failed call restores the files (boot entries that
earlier grubby calls changed stay, and the error says so).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _observe


def _apply_grub(host, commands, planned, backup):
    plans = planned["plans"]
    backups = FileTransaction(host, backup=backup).apply_all(plans)
    argv = planned["update_argv"]
    if argv is None:
        return backups
    configured = planned["observed"]["configured"]
    rc, out, err = commands.run(argv)
    if rc != 0:
        restored = revert(host, plans, cause="%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
        raise ApplyError("%s failed (rc=%s); the GRUB files were restored: %s" % (" ".join(argv), rc, err.strip()),
                         {"rc": rc, "stdout": out, "stderr": err, "restored": restored})
    lines = _grub.grub_cfg_linux_lines(host.read_text(_observe.GRUB_CFG) or "")
    if lines and _cmdline.missing_from(lines[0]["args"], configured):
        restored = revert(host, plans, cause="%s ran but %s still lacks the new arguments" % (" ".join(argv),
                                                                                              _observe.GRUB_CFG))
        raise VerifyError("%s ran but %s still lacks %s; the GRUB files were restored"
                          % (" ".join(argv), _observe.GRUB_CFG, _cmdline.missing_from(lines[0]["args"], configured)),
                          {"restored": restored})
    return backups


def _apply_grubby(host, commands, planned, backup):
    plans = planned["plans"]
    backups = FileTransaction(host, backup=backup).apply_all(plans)
    for argv in planned["grubby_steps"]:
        rc, dummy_out, err = commands.run(argv)
        if rc != 0:
            restored = revert(host, plans, cause="%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
            raise ApplyError("%s failed (rc=%s): %s; the GRUB defaults were restored, boot entries changed by earlier "
                             "grubby calls were not" % (" ".join(argv), rc, err.strip()),
                             {"rc": rc, "stderr": err, "restored": restored})
    dummy_rc, out, dummy_err = commands.run(["grubby", "--info=ALL"])
    for entry in _grub.parse_grubby_info(out):
        if entry["kernel"] and _cmdline.plan(entry["args"], planned["present"], planned["absent"])[1]:
            raise VerifyError("after grubby, boot entry %s (%s) still differs: %s"
                              % (entry["index"], entry["kernel"], " ".join(entry["args"])))
    return backups


def apply(host, commands, planned, backup=False):
    """Run ``planned`` (a plan with actions); returns the backups kept (``{path: backup}``)."""
    if planned["bootloader"] == "grubby":
        return _apply_grubby(host, commands, planned, backup)
    return _apply_grub(host, commands, planned, backup)
