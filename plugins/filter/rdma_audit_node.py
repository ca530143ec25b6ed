# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the audit on the node itself (documented in rdma_audit_textfile.yml and rdma_audit_daemonset.yml): the
thin layer between Ansible and the pure code in plugin_utils/_audit_node.py."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
from collections.abc import Mapping

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_node
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain as _plain


def rdma_audit_textfile(report, host=None, duration=None, finished=None):
    """One host of an audit report as node_exporter textfile metrics."""
    if not isinstance(report, Mapping) or report.get("schema_version") != _audit.SCHEMA_VERSION:
        raise AnsibleFilterError("rdma_audit_textfile: expected an rdma_audit report (schema_version %d)"
                                 % _audit.SCHEMA_VERSION)
    try:
        return _audit_node.textfile(_plain(report), host=host, duration=_plain(duration), finished=_plain(finished))
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("rdma_audit_textfile: %s" % exc) from exc


def _native(value):
    """Plain Python data without Ansible's tagged types (which the YAML dumper of a manifest cannot represent)."""
    return json.loads(json.dumps(_plain(value)))


class _BlockDumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
    """Multi-line strings (the ConfigMap's options file) as literal blocks, the way people write manifests; no
    anchors and aliases."""

    def ignore_aliases(self, data):
        return True


def _str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_BlockDumper.add_representer(str, _str)


def rdma_audit_daemonset(image, output="objects", desired_from=None, **options):
    """The Kubernetes objects of the node audit DaemonSet (``output=objects``), or their multi-document YAML."""
    if output not in ("objects", "yaml"):
        raise AnsibleFilterError("rdma_audit_daemonset: output must be objects or yaml, got %r" % (output,))
    try:
        options = dict((key, _native(value)) for key, value in options.items())
        if desired_from is not None:
            # only the audit's desired-state variables of that host are read (and so templated)
            desired = _native(_audit_node.desired_of(desired_from))
            desired.update(options.get("desired") or {})
            options["desired"] = desired
        objects = _audit_node.daemonset(_native(image), **options)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("rdma_audit_daemonset: %s" % exc) from exc
    if output == "objects":
        return objects
    return "".join("---\n" + yaml.dump(obj, Dumper=_BlockDumper, default_flow_style=False, sort_keys=False)
                   for obj in objects)


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node filters of the audit on the node."""

    def filters(self):
        return {"rdma_audit_textfile": rdma_audit_textfile, "rdma_audit_daemonset": rdma_audit_daemonset}
