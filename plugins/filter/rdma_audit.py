# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side audit filters (documented in rdma_audit*.yml): the thin layer between Ansible's host variables
and the pure audit in plugin_utils/_audit.py."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_hosts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_report
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain as _plain

# the roles whose defaults are the desired state when the inventory says nothing (from the layer registry)
DEFAULTS_ROLES = _layers.default_roles()
# what the role's vars lookup gives for a variable that is not set
UNSET = _audit_hosts.UNSET


def role_defaults():
    """``{variable: default}`` of the audit's desired-state variables, from the roles' defaults (plugin_utils/_defaults)."""
    return _defaults.role_defaults()


def rdma_audit(hosts, hostvars, mode="desired", layers=None, generated=None, result_var="rdma_audit__facts",
               desired_var="rdma_audit__desired"):
    """The audit report (report.json's document) of ``hosts`` from their registered rdma_facts results."""
    problem = _audit_hosts.check_arguments(hosts, mode, layers)
    if problem:
        raise AnsibleFilterError("rdma_audit: %s" % problem)
    defaults = role_defaults()
    spec = dict((name, _audit_hosts.host_spec(hostvars[name], mode, layers, defaults, result_var, desired_var))
                for name in hosts)
    try:
        return _audit.audit(spec, generated=generated)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise AnsibleFilterError("rdma_audit: %s" % exc) from exc


def rdma_audit_facts(registered):
    """``ansible_facts.rdma`` of one host from its registered ``rdma_audit_gather`` result (the facts as JSON text,
    compressed or not) or ``rdma_facts`` result."""
    facts, error = _audit_hosts.facts_of(_plain(registered))
    if error is not None:
        raise AnsibleFilterError("rdma_audit_facts: %s" % error)
    return facts


# what Ansible adds to an action's result: rdma_audit_report is the rdma_audit_report action's registered result
_RESULT_KEYS = frozenset(("changed", "failed", "skipped", "msg", "files", "summary_lines", "invocation"))


def _report(report, name):
    if not isinstance(report, Mapping) or report.get("schema_version") != _audit.SCHEMA_VERSION:
        raise AnsibleFilterError("%s: expected an rdma_audit report (schema_version %d)" % (name, _audit.SCHEMA_VERSION))
    hosts = report.get("hosts")
    if isinstance(hosts, Mapping) and any(isinstance(host, Mapping) and "checks" not in host for host in hosts.values()):
        raise AnsibleFilterError("%s: %s" % (name, _audit.NO_CHECKS))
    return dict((key, value) for key, value in _plain(report).items() if key not in _RESULT_KEYS)


def rdma_audit_json(report):
    """report.json of an audit report: sorted keys, two-space indent down to the checks, one line per check
    (``_audit_report.json_document``)."""
    return _audit_report.json_document(_report(report, "rdma_audit_json")) + "\n"


def rdma_audit_markdown(report):
    """report.md of an audit report."""
    return _audit_report.markdown(_report(report, "rdma_audit_markdown"))


def rdma_audit_html(report):
    """report.html of an audit report: report.md as one self-contained HTML page."""
    return _audit_report.html(_report(report, "rdma_audit_html"))


def rdma_audit_junit(report):
    """junit.xml of an audit report."""
    return _audit_report.junit(_report(report, "rdma_audit_junit"))


def rdma_audit_summary(report, limit=20):
    """A few lines for the end of the play."""
    return _audit_report.short_summary(_report(report, "rdma_audit_summary"), limit)


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node audit filters."""

    def filters(self):
        return {"rdma_audit": rdma_audit, "rdma_audit_json": rdma_audit_json, "rdma_audit_markdown": rdma_audit_markdown,
                "rdma_audit_junit": rdma_audit_junit, "rdma_audit_html": rdma_audit_html, "rdma_audit_summary": rdma_audit_summary,
                "rdma_audit_facts": rdma_audit_facts}
