# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie`` layer's applier: runs exactly the actions of :func:`plan.plan`, all or nothing.

The boot unit is written first (atomically, through the file transaction); then each function's Device Control is
written in one 16-bit write to ``config`` (the kernel's pci_write_config turns an aligned 2-byte write into one config
word write) and read back.  If a write fails or does not stick, the functions already changed get their previous
Device Control back and the unit file is put back: nothing is left half-applied.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import struct

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, ParseError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, observe_file, plan_file, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie.observe import PCI_DEVICES, read_live


def _write_devctl(host, bdf, cap, value):
    host.write_at(PCI_DEVICES + "/" + bdf + "/config", cap + config.EXP_DEVCTL, struct.pack("<H", value))


def file_plan(host, planned):
    """The file plan of the boot unit (None when the plan has no ``write_unit``)."""
    for step in planned["actions"]:
        if step["action"] == "write_unit":
            return plan_file(observe_file(host, step["target"]), planned["unit"], 0o644)
    return None


def apply(host, planned, backup=False):
    """Apply ``planned``; returns the backup files, ``{edited path: backup path}`` as every module returns them (empty
    without ``backup``).  ApplyError / VerifyError after putting everything back."""
    unit_plan = file_plan(host, planned)
    backups = FileTransaction(host, backup=backup).apply_all([unit_plan]) if unit_plan is not None else {}
    done = []
    for step in planned["actions"]:
        if step["action"] != "set_max_read_request":
            continue
        cap = int(step["cap"], 16)
        try:
            _write_devctl(host, step["target"], cap, int(step["devctl"], 16))
            now = read_live(host, step["target"])
        except (OSError, HostReadError, ParseError) as exc:
            _undo(host, done, unit_plan, "writing Device Control of %s failed: %s" % (step["target"], exc))
            raise ApplyError("writing Max_Read_Request_Size of %s failed (%s); %s" % (
                step["target"], exc, _undone(done, unit_plan)), {"failed": step["target"]}) from exc
        if now.get("max_read_request") != step["after"]:
            _undo(host, done, unit_plan, "%s kept %s" % (step["target"], now))
            raise VerifyError("%s: Max_Read_Request_Size is %s after writing %d (the device or a platform rule refused "
                              "it); %s" % (step["target"], now.get("max_read_request", now.get("error")), step["after"],
                                           _undone(done, unit_plan)), {"failed": step["target"], "read_back": now})
        done.append(step)
    return backups


def _undone(done, unit_plan):
    parts = []
    if done:
        parts.append("%s put back" % ", ".join(s["target"] for s in done))
    if unit_plan is not None and unit_plan.changed:
        parts.append("the boot unit restored")
    return " and ".join(parts) if parts else "nothing was changed"


def _undo(host, done, unit_plan, cause):
    for step in reversed(done):
        before = config.with_size(int(step["devctl"], 16), step["before"])
        _write_devctl(host, step["target"], int(step["cap"], 16), before)
    if unit_plan is not None and unit_plan.changed:
        revert(host, [unit_plan], cause=cause)
