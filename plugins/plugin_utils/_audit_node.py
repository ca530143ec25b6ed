# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit on the node itself (docs/drift.md): its report as Prometheus metrics in node_exporter's textfile
collector format, and the Kubernetes objects of the DaemonSet that runs it on every GPU node.  Pure: no I/O.

Both consume what the fleet audit already produces (``_audit.audit``'s report, ``_audit.node_labels``): the node
runs the same playbook and judges (``playbooks/audit_node.yml`` imports the ``rdma_audit`` role), only the output
differs.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import math
import re
from collections.abc import Mapping

import yaml

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._audit import DESIRED_VARS, LAYERS, NO_CHECKS, STATUSES

PREFIX = "rdma_k8s_node_audit_"
#: the value of a status in the metrics: the audit's own order of badness (``_audit.worst``: fail > unknown > drift
#: > ok), so ``max()`` over series is the worst status and ``> 0`` is "not ok"
STATUS_VALUE = {"ok": 0, "drift": 1, "unknown": 2, "fail": 3}
DEFAULT_TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
DEFAULT_TEXTFILE_NAME = "rdma_k8s_node.prom"

_HELP = {
    "check_status": "Status of one audit check of this node (docs/audit.md): 0 ok, 1 drift, 2 unknown, 3 fail; "
                    "the status label says the same in words.",
    "status": "Status of this node, its worst check: 0 ok, 1 drift, 2 unknown, 3 fail.",
    "checks": "Number of this node's checks in each status.",
    "node_labels": "The Kubernetes node labels the audit defines for this node (rdma.k8s-node.io/*), always 1.",
    "last_run_timestamp_seconds": "When this audit run finished, in seconds since the epoch.",
    "run_duration_seconds": "How long this audit run took, from its first task to these metrics, in seconds.",
}


def _escape_label(value):
    """A label value as the text format wants it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _escape_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError("%s must be a finite number of seconds, not negative, got %r" % (what, value))
    return "%.3f" % value


def _series(name, labels, value):
    inner = ",".join('%s="%s"' % (key, _escape_label(val)) for key, val in labels)
    return "%s%s%s %s" % (PREFIX, name, "{%s}" % inner if inner else "", value)


def _family(name, lines):
    return ["# HELP %s%s %s" % (PREFIX, name, _escape_help(_HELP[name])), "# TYPE %s%s gauge" % (PREFIX, name)] + lines


def _host_of(report, host):
    if not isinstance(report, Mapping) or not isinstance(report.get("hosts"), Mapping):
        raise ValueError("expected an rdma_audit report (the rdma_audit filter's result)")
    hosts = report["hosts"]
    if host is None:
        if len(hosts) != 1:
            raise ValueError("the report has %d hosts (%s): name the host whose metrics to write"
                             % (len(hosts), ", ".join(sorted(hosts)) or "none"))
        host = next(iter(hosts))
    if host not in hosts:
        raise ValueError("host %r is not in the report (it has %s)" % (host, ", ".join(sorted(hosts)) or "none"))
    if isinstance(hosts[host], Mapping) and "checks" not in hosts[host]:
        raise ValueError(NO_CHECKS)
    return hosts[host]


def textfile(report, host=None, duration=None, finished=None):
    """The metrics of one host of an audit report, in the Prometheus text format node_exporter's textfile collector
    reads (one ``.prom`` file).  ``host``: which host of the report (default: its only one); ``duration`` and
    ``finished`` (seconds, and seconds since the epoch) add the run's duration and time.

    One ``check_status`` series per check, labelled ``layer``, ``check`` (the check id), ``subject`` (empty when the
    check has none) and ``status``; two checks with the same layer, id and subject (one series) keep the worse
    status, since the text format forbids a series twice.
    """
    data = _host_of(report, host)
    checks = {}
    for check in data.get("checks") or []:
        key = (check["layer"], check["id"], check.get("subject") or "")
        if check["status"] not in STATUS_VALUE:
            raise ValueError("check %s has an unknown status %r" % (key[1], check["status"]))
        if key not in checks or STATUS_VALUE[check["status"]] > STATUS_VALUE[checks[key]]:
            checks[key] = check["status"]
    lines = _family("check_status", [
        _series("check_status", (("layer", layer), ("check", check_id), ("subject", subject), ("status", status)),
                STATUS_VALUE[status])
        for (layer, check_id, subject), status in checks.items()])
    status = data["status"]
    lines += _family("status", [_series("status", (("status", status), ("audit", data.get("audit") or "desired")),
                                        STATUS_VALUE[status])])
    counts = data.get("counts") or {}
    lines += _family("checks", [_series("checks", (("status", s),), int(counts.get(s, 0))) for s in STATUSES])
    labels = data.get("labels") or {}
    if labels:
        lines += _family("node_labels", [_series("node_labels", sorted(
            (re.sub(r"[^a-zA-Z0-9_]", "_", key.rsplit("/", 1)[-1]), value) for key, value in labels.items()), 1)])
    if finished is not None:
        lines += _family("last_run_timestamp_seconds",
                         [_series("last_run_timestamp_seconds", (), _number(finished, "finished"))])
    if duration is not None:
        lines += _family("run_duration_seconds", [_series("run_duration_seconds", (), _number(duration, "duration"))])
    return "\n".join(lines) + "\n"


# -- the DaemonSet ---------------------------------------------------------------------------------------------------
APP = "rdma-k8s-node-audit"
#: what the container runs: the collection's node audit playbook, every ``RDMA_AUDIT_INTERVAL`` seconds, ending at
#: once on SIGTERM (a shell that is PID 1 ignores it otherwise, and the pod would wait for its grace period)
RUN_LOOP = (
    'trap "exit 0" TERM INT; '
    'while :; do '
    'ansible-playbook --inventory localhost, --connection local rdma.k8s_node.audit_node '
    '--extra-vars @/etc/rdma-k8s-node/audit-node.yml || echo "rdma.k8s_node audit run failed: $?" >&2; '
    'sleep "$RDMA_AUDIT_INTERVAL" & wait $!; '
    'done')
#: where the pod sees things (the audit's host root, the textfile directory, the options file, a scratch home)
HOST_MOUNT = "/host"
TEXTFILE_MOUNT = "/textfile"
CONFIG_MOUNT = "/etc/rdma-k8s-node"
HOME = "/var/lib/rdma-k8s-node"
DEFAULT_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
DEFAULT_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
DEFAULT_RESOURCES = {"requests": {"cpu": "50m", "memory": "192Mi"}, "limits": {"memory": "512Mi"}}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _require(condition, message):
    if not condition:
        raise ValueError(message)


def _string_map(value, what):
    _require(isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
             "%s must map strings to strings, got %r" % (what, value))
    return dict(value)


def daemonset(image, namespace="rdma-k8s-node", name=APP, interval=900, textfile_dir=DEFAULT_TEXTFILE_DIR,
              textfile_name=DEFAULT_TEXTFILE_NAME, node_selector=None, tolerations=None, mode="desired", layers=None,
              desired=None, publish_labels=False, create_namespace=True, resources=None, image_pull_policy="IfNotPresent",
              priority_class_name=None):
    """The objects that run the node audit on every selected node: ``[Namespace], ConfigMap (the audit's options and
    desired state), [ServiceAccount, ClusterRole, ClusterRoleBinding] (only to publish node labels), DaemonSet``.

    The pod is privileged (PCI configuration space past its first 64 bytes needs CAP_SYS_ADMIN), on the host's
    network (``ip``/``rdma`` run in the pod and must see the host's links), with the host's ``/`` mounted read-only
    at ``/host`` (recursively where the runtime can) as the audit's ``host_root``, and the host's textfile directory
    mounted read-write at ``/textfile``.  ``desired`` is the desired state (the provisioning roles' variables, as in
    the inventory; only the audit's desired-state variables are taken).
    """
    _require(isinstance(image, str) and image.strip() and not any(c.isspace() for c in image),
             "image must be the execution environment image reference (no spaces), got %r" % (image,))
    _require(isinstance(namespace, str) and _DNS_LABEL.match(namespace),
             "namespace must be a DNS-1123 label (lower case letters, digits, '-'), got %r" % (namespace,))
    _require(isinstance(name, str) and _DNS_LABEL.match(name),
             "name must be a DNS-1123 label (lower case letters, digits, '-'), got %r" % (name,))
    _require(isinstance(interval, int) and not isinstance(interval, bool) and interval >= 60,
             "interval must be a whole number of seconds, 60 or more, got %r" % (interval,))
    _require(isinstance(textfile_dir, str) and textfile_dir.startswith("/") and textfile_dir.rstrip("/"),
             "textfile_dir must be an absolute directory on the node (not /), got %r" % (textfile_dir,))
    _require(isinstance(textfile_name, str) and textfile_name.endswith(".prom") and "/" not in textfile_name
             and not textfile_name.startswith("."),
             "textfile_name must be a file name ending in .prom (node_exporter reads only those), got %r"
             % (textfile_name,))
    node_selector = _string_map(DEFAULT_NODE_SELECTOR if node_selector is None else node_selector, "node_selector")
    tolerations = DEFAULT_TOLERATIONS if tolerations is None else tolerations
    _require(isinstance(tolerations, list) and all(isinstance(t, Mapping) for t in tolerations),
             "tolerations must be a list of Kubernetes tolerations, got %r" % (tolerations,))
    _require(mode in ("desired", "facts_only"), "mode must be desired or facts_only, got %r" % (mode,))
    layers = list(layers or [])
    _require(all(layer in LAYERS for layer in layers),
             "layers must be a list of %s, got %r" % (", ".join(LAYERS), layers))
    desired = dict(desired or {})
    _require(all(isinstance(k, str) for k in desired), "desired must map variable names to values")
    _require(isinstance(publish_labels, bool), "publish_labels must be a boolean, got %r" % (publish_labels,))
    _require(isinstance(create_namespace, bool), "create_namespace must be a boolean, got %r" % (create_namespace,))
    resources = DEFAULT_RESOURCES if resources is None else resources
    _require(isinstance(resources, Mapping), "resources must be a Kubernetes ResourceRequirements, got %r" % (resources,))
    _require(image_pull_policy in ("Always", "IfNotPresent", "Never"),
             "image_pull_policy must be Always, IfNotPresent or Never, got %r" % (image_pull_policy,))
    _require(priority_class_name is None or (isinstance(priority_class_name, str)
                                             and _DNS_SUBDOMAIN.match(priority_class_name)),
             "priority_class_name must be a PriorityClass name, got %r" % (priority_class_name,))

    labels = {"app.kubernetes.io/name": APP, "app.kubernetes.io/instance": name, "app.kubernetes.io/part-of": "rdma.k8s_node"}
    options = dict((k, v) for k, v in sorted(desired.items()) if k in DESIRED_VARS)
    options.update({
        "rdma_audit_mode": mode,
        "rdma_audit_layers": layers,
        "rdma_audit_host_root": HOST_MOUNT,
        "rdma_audit_dir": HOME + "/audit",
        "rdma_audit_node_textfile": "%s/%s" % (TEXTFILE_MOUNT, textfile_name),
        "rdma_audit_publish_labels": publish_labels,
    })
    objects = []
    if create_namespace:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": dict(labels)}})
    objects.append({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        # the options file of playbooks/audit_node.yml (its extra vars)
        "data": {"audit-node.yml": yaml.safe_dump(options, default_flow_style=False, sort_keys=True)},
    })
    if publish_labels:
        objects += [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}},
            # kubectl label reads the node, then patches it
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": name, "labels": dict(labels)},
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": name, "labels": dict(labels)},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        ]
    container = {
        "name": "audit",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "command": ["/bin/sh", "-c", RUN_LOOP],
        "env": [
            # the Kubernetes node name, for the node labels (the pod's own host name is the node's only with
            # hostNetwork, and a kubelet --hostname-override differs from it anyway)
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "RDMA_AUDIT_INTERVAL", "value": str(interval)},
            {"name": "HOME", "value": HOME},
            {"name": "ANSIBLE_NOCOLOR", "value": "1"},
            {"name": "ANSIBLE_RETRY_FILES_ENABLED", "value": "false"},
        ],
        "securityContext": {"privileged": True, "readOnlyRootFilesystem": True, "runAsUser": 0},
        "resources": dict(resources),
        "volumeMounts": [
            {"name": "host", "mountPath": HOST_MOUNT, "readOnly": True, "recursiveReadOnly": "IfPossible"},
            {"name": "textfile", "mountPath": TEXTFILE_MOUNT},
            {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "home", "mountPath": HOME},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod = {
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "nodeSelector": node_selector,
        "tolerations": [dict(t) for t in tolerations],
        "automountServiceAccountToken": publish_labels,
        "containers": [container],
        "volumes": [
            {"name": "host", "hostPath": {"path": "/", "type": "Directory"}},
            {"name": "textfile", "hostPath": {"path": textfile_dir.rstrip("/"), "type": "DirectoryOrCreate"}},
            {"name": "config", "configMap": {"name": name}},
            {"name": "home", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if publish_labels:
        pod["serviceAccountName"] = name
    if priority_class_name:
        pod["priorityClassName"] = priority_class_name
    objects.append({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": APP, "app.kubernetes.io/instance": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        },
    })
    return objects


def desired_of(hostvars):
    """The desired-state variables a host sets (from its ``hostvars``), for :func:`daemonset`'s ``desired``."""
    _require(isinstance(hostvars, Mapping), "expected a host's variables (hostvars[host]), got %r" % (type(hostvars),))
    return dict((name, hostvars[name]) for name in DESIRED_VARS if name in hostvars)
