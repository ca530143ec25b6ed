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
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_report
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain as _plain

# the roles whose defaults are the desired state when the inventory says nothing (from the layer registry)
DEFAULTS_ROLES = _layers.default_roles()
# what the role's vars lookup gives for a variable that is not set
UNSET = "__unset__"


def role_defaults():
    """``{variable: default}`` of the audit's desired-state variables, from the roles' defaults (plugin_utils/_defaults)."""
    return _defaults.role_defaults()


def _facts_of(registered):
    """``(facts, error)`` from the registered rdma_facts result of one host."""
    if not isinstance(registered, Mapping):
        return None, "rdma_facts did not run on this host (it failed or was unreachable before the audit)"
    if registered.get("unreachable"):
        return None, "unreachable: %s" % registered.get("msg", "")
    if registered.get("failed"):
        return None, "rdma_facts failed: %s" % registered.get("msg", "")
    facts = (registered.get("ansible_facts") or {}).get("rdma")
    if not isinstance(facts, Mapping):
        # failed_when: false keeps the host in the play; the module's message says why
        return None, "rdma_facts failed: %s" % registered.get("msg", "no facts returned")
    return facts, None


def rdma_audit(hosts, hostvars, mode="desired", layers=None, generated=None, result_var="rdma_audit__facts",
               desired_var="rdma_audit__desired"):
    """The audit report (report.json's document) of ``hosts`` from their registered rdma_facts results."""
    if mode not in ("desired", "facts_only"):
        raise AnsibleFilterError("rdma_audit: mode must be desired or facts_only, got %r" % (mode,))
    if isinstance(hosts, (str, bytes)) or not all(isinstance(h, str) for h in hosts or []):
        raise AnsibleFilterError("rdma_audit: hosts must be a list of inventory host names, got %r" % (hosts,))
    bad = [layer for layer in layers or [] if layer not in _audit.LAYERS]
    if bad:
        raise AnsibleFilterError("rdma_audit: unknown layers %s (known: %s)" % (bad, ", ".join(_audit.LAYERS)))
    defaults = role_defaults()
    spec = {}
    for name in hosts:
        hvars = hostvars[name]
        facts, error = _facts_of(hvars.get(result_var))
        desired = None
        if mode == "desired":
            # rdma_audit_gather (or a per-host set_fact) saw play vars and role params too; hostvars alone see
            # inventory and -e
            registered = hvars.get(result_var)
            given = registered.get("rdma_audit_desired") if isinstance(registered, Mapping) else None
            if not isinstance(given, Mapping):
                given = hvars.get(desired_var)
            if not isinstance(given, Mapping):
                given = dict((var, hvars[var]) for var in _audit.DESIRED_VARS if var in hvars)
            desired = dict((var, _plain(given[var]) if given.get(var, UNSET) not in (None, UNSET) else defaults.get(var))
                           for var in _audit.DESIRED_VARS)
        # a per-host value the role's run_once option check did not see is checked per host (_audit.host_layers)
        spec[name] = {"facts": _plain(facts) if facts is not None else None, "desired": desired,
                      "layers": _plain(hvars.get("rdma_audit_layers")) or layers, "error": error}
    try:
        return _audit.audit(spec, generated=generated)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise AnsibleFilterError("rdma_audit: %s" % exc) from exc


def _report(report, name):
    if not isinstance(report, Mapping) or report.get("schema_version") != _audit.SCHEMA_VERSION:
        raise AnsibleFilterError("%s: expected an rdma_audit report (schema_version %d)" % (name, _audit.SCHEMA_VERSION))
    return _plain(report)


def rdma_audit_json(report):
    """report.json of an audit report: sorted keys, two-space indent, like ``to_nice_json(indent=2)``.

    ``to_nice_json`` walks the report through Ansible's lazy containers and costs about 2 s per 100 hosts;
    the plain copy and ``json.dumps`` take a tenth of that, and ``_audit_report.json_document`` (the same text as
    ``json.dumps(indent=2, sort_keys=True)``) 40 % of that."""
    return _audit_report.json_document(_report(report, "rdma_audit_json")) + "\n"


def rdma_audit_markdown(report):
    """report.md of an audit report."""
    return _audit_report.markdown(_report(report, "rdma_audit_markdown"))


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
                "rdma_audit_junit": rdma_audit_junit, "rdma_audit_summary": rdma_audit_summary}
