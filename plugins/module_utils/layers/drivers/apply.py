# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_peermem's applier: runs exactly :func:`plan.plan`'s load and file plans.

The module is test-loaded first (``modprobe nvidia_peermem``; in check mode ``modprobe -n``, which still tells
whether it exists) and verified in ``/sys/module``, and only then are the files written, through the file
transaction (atomic, backup, rollback): a module that cannot load is never persisted.  A failed load is named by
its cause (:func:`_gpudirect.diagnose_load`).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers.observe import MODULE, peermem_loaded


def _failed(planned, rc, err, verb):
    diagnosis = _gpudirect.diagnose_load(rc, err, MODULE, planned["ofed_present"])
    partial = planned["result"].as_dict(with_diff=False)
    partial.update({"changed": False, "actions": [], "diagnosis": diagnosis["kind"]})
    return ApplyError(diagnosis["message"], {"rc": rc, "stderr": err, "command": verb}, partial)


def apply(host, commands, planned, check_mode=False, backup=False, diff=False):
    """The module's result after ``planned`` (:func:`plan.plan`): in check mode, or with nothing to do, the plan
    (after ``modprobe -n`` for a load); else the load, its verification and the file transaction.  ApplyError with
    the diagnosis when modprobe fails, VerifyError when the module is not there after it."""
    result, gpudirect = planned["result"], planned["gpudirect"]
    load, loaded = planned["load"], gpudirect["peermem_loaded"]
    if load and check_mode:
        rc, dummy_out, err = commands.run_kernel(["modprobe", "-n", MODULE])
        if rc != 0:
            raise _failed(planned, rc, err, "modprobe -n %s" % MODULE)
    if check_mode or not result.changed:
        gpudirect["active"] = _gpudirect.active_path(planned["method"], planned["capable"], loaded)
        return result.as_dict(with_diff=diff)

    if load:
        rc, dummy_out, err = commands.run_kernel(["modprobe", MODULE])
        if rc != 0:
            raise _failed(planned, rc, err, "modprobe %s" % MODULE)
        if not peermem_loaded(host):
            raise VerifyError("modprobe %s succeeded but /sys/module/%s does not exist; nothing was persisted"
                              % (MODULE, MODULE))
    try:
        backups = FileTransaction(host, backup=backup).apply_all(planned["files"])
    except ApplyError as exc:
        if load:
            exc.msg += "; %s stays loaded for this boot but is not persisted" % MODULE
        raise
    result.extra["backup_files"] = backups
    loaded = peermem_loaded(host)
    gpudirect["peermem_loaded"] = loaded
    gpudirect["active"] = _gpudirect.active_path(planned["method"], planned["capable"], loaded)
    return result.as_dict(with_diff=diff)
