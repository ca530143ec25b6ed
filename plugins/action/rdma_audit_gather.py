# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_audit_gather: one task per audited host -- rdma_facts on the node, the desired state on the controller.

The audit needs, per host, the node's facts and the variables that say what the node should be, read with the
play's variables in scope (play vars are not in ``hostvars``).  Done as two tasks (the module, then a per-host
``set_fact``) that costs a second worker fork, variable set and callback round per host: about 50 ms of
controller CPU each at 300 hosts (docs/benchmarks.md).  This action resolves the variables from the task's own
variables in the same worker, then runs ``rdma_facts``: the node still gets exactly one module call.

The node's facts come back as ``rdma_facts_json``, the JSON text of what ``rdma_facts`` returns as
``ansible_facts.rdma``, not as ``ansible_facts``: ansible-core copies every fact a task returns into the host's fact
cache (a deep copy per host in the worker, ``namespace_facts``, and again each time a later task's variables are made
for that host), and deep-copies and walks every container of every registered result in its main process.  A host's
facts are some 1,500 dicts and lists (6,600 values); as one string they cost those copies nothing, and the main
process holds one string per host instead of the facts twice (docs/benchmarks.md, session 11).  The module
itself prints them as that text (``rdma_facts``' ``facts_json``): ansible-core's module decoder then checks one
string instead of calling a Python hook per object and checking every string of the facts, and the worker has
nothing to encode again (about 4 ms of controller CPU per large host, session 13).  With ``compress`` (the role's
choice) the node compresses that text and the result holds ``rdma_facts_json_zlib`` instead: 12 KB instead of 90 for
a DGX H100, what crosses the connection and what the main process keeps until the report is written (session 19).
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers
from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text

UNSET = "__unset__"
#: the registered result's key holding the node's facts as JSON text (``_audit_hosts.facts_of`` reads it)
FACTS_KEY = _facts_text.FACTS_KEY
#: ... and holding that text compressed (``compress: true``)
ZLIB_KEY = _facts_text.ZLIB_KEY
# compact: what the audit decodes again on the controller; the facts of one node are about 90 KB of it
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_SPEC = {
    "host_root": {"type": "path", "default": "/"},
    "desired_state": {"type": "bool", "default": False},
    "desired_vars": {"type": "list", "elements": "str", "default": []},
    "counters_interval": {"type": "float", "default": 0},
    "role_vars": {"type": "bool", "default": False},
    "compress": {"type": "bool", "default": False},
}
# the options' validator, built when the strategy loads this action in the main process: each host's forked worker
# inherits it instead of building it again
_VALIDATOR = ArgumentSpecValidator(_SPEC)
# role_vars: the option each of the rdma_audit role's variables gives when the task does not set it (the desired
# state is the mode's comparison, as the role's task wrote it: rdma_audit_mode == 'desired')
ROLE_VARS = (("host_root", "rdma_audit_host_root"), ("counters_interval", "rdma_audit_hw_counter_interval"),
             ("desired_state", "rdma_audit_mode"))


def invalid_utf8(text):
    """None when every string of the JSON ``text`` can be encoded as UTF-8, else the first one that cannot (repr).

    ansible-core checks every string of a module's result (``MODULE_STRICT_UTF8_RESPONSE``); inside the facts' text
    only a ``\\uXXXX`` escape can hide a lone surrogate (a JSON string is otherwise the text's own characters, which
    that check saw), so the facts are decoded and walked only when the text holds a surrogate escape.  Facts nested
    too deeply to decode get no verdict here: the audit cannot decode them either, and says so for that host."""
    if "\\ud" not in text and "\\uD" not in text:
        return None
    try:
        text.encode()
        pending = [json.loads(text)]
    except (UnicodeEncodeError, ValueError) as exc:
        return str(exc)
    except RecursionError:
        return None
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            values = (value,)
        elif isinstance(value, dict):
            values = tuple(value)
            pending.extend(value.values())
        else:
            values = ()
            if isinstance(value, list):
                pending.extend(value)
        for item in values:
            try:
                item.encode()
            except UnicodeEncodeError:
                return repr(item)
    return None


class ActionModule(ActionBase):
    """Run rdma.k8s_node.rdma_facts and return its facts as ``rdma_facts_json`` (or ``rdma_facts_json_zlib``, with
    ``compress``) with ``rdma_audit_desired`` (the
    named variables, resolved)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        taken = []
        if boolean(args.get("role_vars", False), strict=False):  # a bad value fails the validation below
            # the role's variable wins over the option (module_defaults included), as when the role's task passed
            # it as "{{ var }}": one template pass per variable that needs one (none for a plain inventory value)
            # instead of a template per option that a forked worker compiles for every host (about 3 ms each)
            for option, var in ROLE_VARS:
                if var in task_vars:
                    value = self._templar.template(task_vars[var])
                    args[option] = value == "desired" if option == "desired_state" else value
                    taken.append("%s from %s" % (option, var))
        validated = _VALIDATOR.validate(args)
        if validated.error_messages:
            raise AnsibleActionFail("rdma_audit_gather: %s%s" % ("; ".join(validated.error_messages),
                                                                 " (%s)" % ", ".join(taken) if taken else ""))
        params = validated.validated_parameters
        # exactly what `query('ansible.builtin.vars', *names, default='__unset__')` returned in the set_fact
        desired = {}
        names = list(_layers.desired_vars()) if params["desired_state"] else []
        names.extend(name for name in params["desired_vars"] if name not in names)
        for name in names:
            desired[name] = self._templar.template(task_vars[name]) if name in task_vars else UNSET
        module_args = {"host_root": params["host_root"], "counters_interval": params["counters_interval"],
                       "facts_json": True}
        if params["compress"]:
            module_args["compress"] = True
        try:
            module = self._execute_module(module_name="rdma.k8s_node.rdma_facts", module_args=module_args,
                                          task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            # keep the desired state of a host that cannot be reached: the report still says what it should be
            return dict(result, unreachable=True, msg=str(exc), rdma_audit_desired=desired)
        facts = module.pop("ansible_facts", None)
        key = ZLIB_KEY if ZLIB_KEY in module else FACTS_KEY
        text, problem = module.get(key), None
        if key == ZLIB_KEY:
            # inflated here only to be checked as below (about 0.2 ms for a DGX H100): what is kept is the compressed
            # text, 12 instead of 90 KB a host in the controller's main process until the report is written
            text, problem = _facts_text.inflate(text)
            problem = "rdma_facts returned %s" % problem if problem else None
        if isinstance(text, str):
            problem = invalid_utf8(text)
            problem = "rdma_facts returned facts with a string that is not valid UTF-8: %s" % problem if problem else None
        if problem:
            # what ansible-core's decoder refused when the facts came back as objects: a host whose facts hold a
            # string that cannot be encoded (a lone surrogate), or cannot be read, fails its gather instead of the
            # report's writing
            module.pop(key)
            module.update(failed=True, msg=problem)
        result.update(module)
        if isinstance(facts, dict):
            if isinstance(facts.get("rdma"), dict):  # an rdma_facts that returned them as facts
                text = _ENCODER.encode(facts["rdma"])
                if params["compress"]:
                    result[ZLIB_KEY] = _facts_text.deflate(text)
                else:
                    result[FACTS_KEY] = text
            # every other fact stays a fact: ansible-core's discovered_interpreter_python, which the host's later
            # module tasks would otherwise discover again (one more round trip each)
            others = dict((name, value) for name, value in facts.items() if name != "rdma")
            if others:
                result["ansible_facts"] = others
        result["rdma_audit_desired"] = desired
        if not result.get("failed") and not result.get("unreachable"):
            # the callbacks get a censored copy instead of a deep copy of the facts' ~4,600 values, which the stdout
            # callback does not print (about 7 ms of controller CPU per host, docs/benchmarks.md); the registered
            # result keeps everything, and a failure keeps its message
            result["_ansible_no_log"] = True
        return result
