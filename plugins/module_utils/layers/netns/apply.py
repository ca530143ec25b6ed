# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's applier: runs exactly the actions of :func:`plan.plan`, in their order.

The modprobe.d file goes first, through the file transaction (atomic, backup, rollback); a failed initramfs
regeneration puts the file back, so nothing is half-applied.  The live switch comes last: a kernel that refuses it
because network namespaces exist (EBUSY) leaves the persisted mode for the next boot (``refused_busy``), any other
failure is an error that says the persistent setting is in place.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, revert
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.observe import NETNS_PARAM, read_live


def is_busy(rc, stderr):
    """True when ``rdma system set`` failed because namespaces exist (EBUSY), the expected refusal on a busy node."""
    return rc != 0 and ("busy" in stderr.lower() or "ebusy" in stderr.lower())


def apply(host, commands, planned, mode, backup=False):
    """Apply ``planned`` (for ``mode``): ``{"backup_files", "live_switch", "reboot_required", "warnings"}``;
    ``backup_files`` is ``{edited path: backup path}`` as every module returns it (empty without ``backup``).

    ApplyError / VerifyError when a step fails (the file is put back when the initramfs step fails)."""
    file_plan = planned["file"]
    regen = " ".join(planned["regenerate"]) if planned["regenerate"] else None
    switch = " ".join(planned["switch"]) if planned["switch"] else None
    out = {"backup_files": {}, "live_switch": "not_needed" if planned["live_decision"] == "none" else "skipped",
           "reboot_required": planned["reboot_required"], "warnings": []}
    for step in planned["actions"]:
        if step["action"] != "run" and step["target"] == file_plan.path:
            out["backup_files"] = FileTransaction(host, backup=backup).apply_all([file_plan])
        elif step["target"] == regen:
            rc, stdout, err = commands.run(planned["regenerate"])
            if rc != 0:
                revert(host, [file_plan])
                raise ApplyError("%s failed (rc=%s): %s; %s was restored" % (regen, rc, err.strip(), file_plan.path),
                                 {"rc": rc, "stdout": stdout, "stderr": err})
        elif step["target"] == switch:
            _switch(host, commands, planned["switch"], mode, file_plan.path, out)
        else:  # pragma: no cover - the planner makes no other step
            raise ApplyError("no applier for the planned step %r" % (step,))
    return out


def _switch(host, commands, argv, mode, conf, out):
    rc, dummy_out, err = commands.run_kernel(argv)
    if rc == 0:
        dummy_loaded, now = read_live(host)
        if now != mode:
            raise VerifyError("rdma system set netns %s succeeded but %s reads %s" % (mode, NETNS_PARAM, now))
        out["live_switch"] = "switched"
        out["reboot_required"] = False
    elif is_busy(rc, err):
        out["live_switch"] = "refused_busy"
        out["warnings"].append("the kernel refused to switch the RDMA netns mode now because non-init network "
                               "namespaces exist (pods, containers); %s is persisted and applies at the next boot" % mode)
    else:
        raise ApplyError("rdma system set netns %s failed (rc=%s): %s; the persistent setting in %s is in place"
                         % (mode, rc, err.strip(), conf), {"rc": rc, "stderr": err})
