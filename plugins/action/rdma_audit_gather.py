# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_audit_gather: one task per audited host -- rdma_facts on the node, the desired state on the controller.

The audit needs, per host, the node's facts and the variables that say what the node should be, read with the
play's variables in scope (play vars are not in ``hostvars``).  Done as two tasks (the module, then a per-host
``set_fact``) that costs a second worker fork, variable set and callback round per host: about 50 ms of
controller CPU each at 300 hosts (docs/benchmarks.md).  This action resolves the variables from the task's own
variables in the same worker, then runs ``rdma_facts``: the node still gets exactly one module call.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers

UNSET = "__unset__"
_SPEC = {
    "host_root": {"type": "path", "default": "/"},
    "desired_state": {"type": "bool", "default": False},
    "desired_vars": {"type": "list", "elements": "str", "default": []},
    "counters_interval": {"type": "float", "default": 0},
}


class ActionModule(ActionBase):
    """Run rdma.k8s_node.rdma_facts and return it with ``rdma_audit_desired`` (the named variables, resolved)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        validated = ArgumentSpecValidator(_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("rdma_audit_gather: %s" % "; ".join(validated.error_messages))
        params = validated.validated_parameters
        # exactly what `query('ansible.builtin.vars', *names, default='__unset__')` returned in the set_fact
        desired = {}
        names = list(_layers.desired_vars()) if params["desired_state"] else []
        names.extend(name for name in params["desired_vars"] if name not in names)
        for name in names:
            desired[name] = self._templar.template(task_vars[name]) if name in task_vars else UNSET
        try:
            module = self._execute_module(module_name="rdma.k8s_node.rdma_facts",
                                          module_args={"host_root": params["host_root"],
                                                       "counters_interval": params["counters_interval"]},
                                          task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            # keep the desired state of a host that cannot be reached: the report still says what it should be
            return dict(result, unreachable=True, msg=str(exc), rdma_audit_desired=desired)
        result.update(module)
        result["rdma_audit_desired"] = desired
        if not result.get("failed") and not result.get("unreachable"):
            # the callbacks get a censored copy instead of a deep copy of the facts' ~4,600 values, which the stdout
            # callback does not print (about 7 ms of controller CPU per host, docs/benchmarks.md); the registered
            # result keeps everything, and a failure keeps its message
            result["_ansible_no_log"] = True
        return result
