# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's input from Ansible's host variables: each host's registered rdma_facts result and desired state, as
the plain ``{host: {"facts", "desired", "layers", "error"}}`` that ``_audit.audit`` takes.  Shared by the
``rdma_audit`` filter and the ``rdma_audit_report`` action."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain as _plain

# what the role's vars lookup (and rdma_audit_gather) gives for a variable that is not set
UNSET = "__unset__"
# rdma_audit_gather's keys of the node's facts: as JSON text, and compressed (compress: true, what the role asks for)
FACTS_KEY = _facts_text.FACTS_KEY
ZLIB_KEY = _facts_text.ZLIB_KEY
# each as the audit's host entry names it (_audit.audit), the compressed text first
_TEXT_KEYS = ((ZLIB_KEY, "facts_json_zlib"), (FACTS_KEY, "facts_json"))
MODES = ("desired", "facts_only")


def _failure(registered):
    """Why a registered result holds no facts at all (not a result, unreachable, skipped, failed), or None."""
    if not isinstance(registered, Mapping):
        return "rdma_facts did not run on this host (it failed or was unreachable before the audit)"
    if registered.get("unreachable"):
        return "unreachable: %s" % registered.get("msg", "")
    if registered.get("skipped"):
        return "rdma_facts was skipped on this host: %s" % registered.get("skip_reason", registered.get("msg", ""))
    if registered.get("failed"):
        return "rdma_facts failed: %s" % registered.get("msg", "")
    return None


def facts_of(registered):
    """``(facts, error)`` from the registered result of one host: ``rdma_audit_gather``'s (the facts as the JSON
    text ``rdma_facts_json``, or that text compressed, ``rdma_facts_json_zlib``), or ``rdma_facts``' own
    (``ansible_facts.rdma``, where ``rdma_audit_gather`` returned them too before it returned ``rdma_facts_json``).
    The facts decoded from text are a new object: the caller may keep them as they are."""
    error = _failure(registered)
    if error is not None:
        return None, error
    blob = registered.get(ZLIB_KEY)
    if blob is not None:
        return _audit.decode_facts_zlib(blob)
    text = registered.get(FACTS_KEY)
    if text is not None:
        return _audit.decode_facts(text)
    facts = (registered.get("ansible_facts") or {}).get("rdma")
    if not isinstance(facts, Mapping):
        # failed_when: false keeps the host in the play; the module's message says why
        return None, "rdma_facts failed: %s" % registered.get("msg", "no facts returned")
    return facts, None


def check_arguments(hosts, mode, layers):
    """The error message of bad audit arguments, or None."""
    if mode not in MODES:
        return "mode must be desired or facts_only, got %r" % (mode,)
    if isinstance(hosts, (str, bytes)) or not all(isinstance(h, str) for h in hosts or []):
        return "hosts must be a list of inventory host names, got %r" % (hosts,)
    bad = [layer for layer in layers or [] if layer not in _audit.LAYERS]
    if bad:
        return "unknown layers %s (known: %s)" % (bad, ", ".join(_audit.LAYERS))
    return None


_FROM_VARS = object()


def host_spec(hvars, mode, layers, defaults, result_var="rdma_audit__facts", desired_var="rdma_audit__desired",
              registered=_FROM_VARS):
    """One host's entry of ``_audit.audit``'s input from its variables (a mapping: ``hostvars[name]``).

    ``registered``: the host's registered result when the caller has it as stored (a module result holds no template,
    so it needs no template pass: the ``rdma_audit_report`` action reads it from ``HostVars.raw_get``); its facts
    are then used as they are, not copied."""
    copy = registered is _FROM_VARS
    if copy:
        registered = hvars.get(result_var)
    spec_key, text = None, None
    if _failure(registered) is None:
        spec_key, text = next(((spec_key, registered[key]) for key, spec_key in _TEXT_KEYS
                               if registered.get(key) is not None), (None, None))
    # rdma_audit_gather's text is decoded by the audit itself, one host at a time (_audit.audit: "facts_json" and
    # "facts_json_zlib")
    facts, error = facts_of(registered) if text is None else (None, None)
    desired = None
    if mode == "desired":
        # rdma_audit_gather (or a per-host set_fact) saw play vars and role params too; hostvars alone see
        # inventory and -e
        given = registered.get("rdma_audit_desired") if isinstance(registered, Mapping) else None
        if not isinstance(given, Mapping):
            given = hvars.get(desired_var)
        if not isinstance(given, Mapping):
            given = dict((var, hvars[var]) for var in _audit.DESIRED_VARS if var in hvars)
        desired = dict((var, _plain(given[var]) if given.get(var, UNSET) not in (None, UNSET) else defaults.get(var))
                       for var in _audit.DESIRED_VARS)
    # a per-host value the role's run_once option check did not see is checked per host (_audit.host_layers)
    spec = {"facts": _plain(facts) if copy and facts is not None else facts, "desired": desired,
            "layers": _plain(hvars.get("rdma_audit_layers")) or layers, "error": error}
    if text is not None:
        spec[spec_key] = text
    return spec
