# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_audit_report: the audit's comparison and its report files in one controller-side task.

Done as a ``set_fact`` with the ``rdma_audit`` filter and a ``copy`` loop over the report filters, ansible-core
2.19 finalizes the filter's report value by value through the template engine (about 4 us a value, some 1,000
values per host), and each report filter reads it back through lazy containers; this action builds the report as
plain data, writes report.json, report.md, report.html and junit.xml itself (atomically) and returns the report as
its result (``register: rdma_audit_report``), which Ansible deep-copies once.  See docs/benchmarks.md.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_hosts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_report
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _defaults
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _hostvars

FORMATS = ("json", "md", "html", "junit")
FILE_NAMES = {"json": "report.json", "md": "report.md", "html": "report.html", "junit": "junit.xml"}
_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "mode": {"type": "str", "default": "desired", "choices": list(_audit_hosts.MODES)},
    "layers": {"type": "list", "elements": "str", "default": []},
    "dest": {"type": "path"},
    "formats": {"type": "list", "elements": "str", "default": list(FORMATS), "choices": list(FORMATS)},
    "summary_lines": {"type": "int", "default": 20},
    "checks": {"type": "bool", "default": True},
    "result_var": {"type": "str", "default": "rdma_audit__facts"},
    "desired_var": {"type": "str", "default": "rdma_audit__desired"},
}


def write_file(path, text, mode=0o644):
    """Write ``text`` (a string, or the strings to write one after the other) to ``path`` atomically (a temporary
    file in the same directory, then rename)."""
    directory = os.path.dirname(path) or "."
    handle, temp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            if isinstance(text, str):
                out.write(text)
            else:
                out.writelines(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def write_reports(report, directory, formats=FORMATS):
    """``{format: path}`` of the report files written into ``directory`` (created when missing)."""
    os.makedirs(directory, mode=0o755, exist_ok=True)
    written = {}
    shared = {}  # the structures' JSON text, made once for report.md, report.html and junit.xml
    blocks = _audit_report.report_blocks(report, shared) if {"md", "html"} & set(formats) else None
    for kind in formats:
        # each file written in pieces: at 10,000 hosts a file's text and its UTF-8 bytes, whole, are 0.1 to 0.5 GB
        # each, and the memory they take is a third of the time the files take to write (the kernel's page faults)
        if kind == "json":
            parts = _audit_report.json_parts(report) + ["\n"]
        elif kind == "md":
            parts = _audit_report.text_parts(_audit_report.markdown_lines(blocks))
        elif kind == "html":
            parts = _audit_report.text_parts(_audit_report.html_lines(blocks, _audit_report.html_title(report)))
        else:
            parts = _audit_report.text_parts(_audit_report.junit_lines(report, shared=shared))
        path = os.path.join(directory, FILE_NAMES[kind])
        write_file(path, parts)
        written[kind] = path
    return written


def frozen_checks(hosts):
    """``hosts`` (the report's) with each host's checks as a tuple: what the action returns and Ansible registers.

    ``register`` deep-copies the result in the main process (``strip_internal_keys(module_response_deepcopy(...))``
    in ``StrategyBase._process_pending_results``), a Python call per dict and list: at 115 checks a host, about
    300 containers, and more time than the comparison itself (``scripts/bench report``, docs/benchmarks.md).  That
    copy copies dicts and lists only: a tuple is kept as it is, so each host's checks cost one reference.  Templates
    read a tuple as they read a list (``rdma_audit_report.hosts[h].checks | rejectattr(...)``, ``[0].id``,
    ``| length``; ``to_json`` and ``set_fact`` make it a list); the checks are the result's own objects, which
    nothing else holds once the result is registered.  The report files are written from the lists before."""
    return dict((name, dict(host, checks=tuple(host["checks"]))) for name, host in hosts.items())


def without_checks(hosts):
    """``hosts`` (the report's) without their checks (``checks: false``): each host's status, counts, summary,
    labels, ``audit`` (its mode) and layers.  At 10,000 hosts the checks are 1.15 million dicts that ansible-core pickles from the
    report's worker to its main process (8.6 s, docs/benchmarks.md) and keeps there for the rest of the play."""
    return dict((name, dict((key, value) for key, value in host.items() if key != "checks"))
                for name, host in hosts.items())


class _HostView(Mapping):
    """One host's variables: ``HostVars.raw_get`` (as stored), a value rendered by ``hostvars[name]`` (that host's
    templar) only when it holds a template.  ``hostvars[name].get(var)`` of the registered rdma_facts result would
    put its ~4,600 values through the template engine (about two thirds of this action's time at 200 hosts)."""

    def __init__(self, hostvars, name):
        self.raw = hostvars.raw_get(name)
        self._hostvars = hostvars
        self._name = name
        self._rendered = None

    def __getitem__(self, key):
        value = self.raw[key]
        if _hostvars.stored(value) is _hostvars.RENDER:
            if self._rendered is None:
                self._rendered = self._hostvars[self._name]
            return self._rendered[key]
        return value

    def __iter__(self):
        return iter(self.raw)

    def __len__(self):
        return len(self.raw)


class ActionModule(ActionBase):
    """Audit ``hosts`` from their registered rdma_facts results; write the reports; return the report."""

    TRANSFERS_FILES = False
    _supports_check_mode = True  # it reads registered results and writes controller-side files only
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        validated = ArgumentSpecValidator(_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("rdma_audit_report: %s" % "; ".join(validated.error_messages))
        params = validated.validated_parameters
        problem = _audit_hosts.check_arguments(params["hosts"], params["mode"], params["layers"])
        if problem:
            raise AnsibleActionFail("rdma_audit_report: %s" % problem)
        hostvars = task_vars.get("hostvars")
        if hostvars is None:
            raise AnsibleActionFail("rdma_audit_report: no hostvars in the task's variables")
        defaults = _defaults.role_defaults()
        spec = {}
        for name in params["hosts"]:
            view = _HostView(hostvars, name)
            spec[name] = _audit_hosts.host_spec(view, params["mode"], params["layers"], defaults, params["result_var"],
                                                params["desired_var"], registered=view.raw.get(params["result_var"]))
        generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            report = _audit.audit(spec, generated=generated)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise AnsibleActionFail("rdma_audit_report: %s" % exc) from exc
        del spec
        files = {}
        if params["dest"]:
            try:
                files = write_reports(report, params["dest"], params["formats"])
            except OSError as exc:
                raise AnsibleActionFail("rdma_audit_report: cannot write the reports into %s: %s"
                                        % (params["dest"], exc)) from exc
        result.update(report)
        hosts = frozen_checks(report["hosts"]) if params["checks"] else without_checks(report["hosts"])
        result.update(changed=False, files=files, hosts=hosts,
                      summary_lines=_audit_report.short_summary(report, params["summary_lines"]),
                      # the callbacks get a censored copy instead of a deep copy of every value (the report is in
                      # the files and in the registered variable); a failure above keeps its message
                      _ansible_no_log=True)
        return result
