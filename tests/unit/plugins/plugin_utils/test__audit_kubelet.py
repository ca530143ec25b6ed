"""The audit's kubelet checks on facts gathered from real-node trees: an override found by the module's planner is a
``kubelet.override`` check naming the overriding file or flag; a drifting key names the source that sets it."""

import json

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.kubelet_nodes import build_tree, scenario, write


def kubelet_facts(host, **kwargs):
    """``runtime.kubelet`` as rdma_facts returns it: the kubelet room's facts without the planner's input."""
    return kubelet_observe.report_of(kubelet_observe.facts(host, **kwargs))


OWN = "# Managed by rdma.k8s_node.kubelet_topology\n"


def desired(**overrides):
    out = dict(role_defaults())
    out.update(overrides)
    return out


def audit(root, **overrides):
    facts = {"runtime": {"kubelet": kubelet_facts(HostRoot(str(root)))}}
    facts["runtime"]["kubelet"]["version"] = "1.31.3"
    return [c for c in _audit.audit_host(facts, desired(**overrides), ["kubelet"]) if c["layer"] == "kubelet"]


def test_a_provisioned_al2023_node_is_ok(tmp_path):
    build_tree(tmp_path, scenario("eks-al2023"))
    write(tmp_path, "/etc/kubernetes/kubelet/config.json.d/50-rdma-k8s-node-topology.conf",
          OWN + json.dumps({"topologyManagerPolicy": "restricted", "topologyManagerScope": "container"}))
    assert [(c["id"], c["status"]) for c in audit(tmp_path)] == [("kubelet.topology", "ok")]


def test_a_later_drop_in_is_named_as_the_override(tmp_path):
    build_tree(tmp_path, scenario("eks-al2023"))
    write(tmp_path, "/etc/kubernetes/kubelet/config.json.d/50-rdma-k8s-node-topology.conf",
          OWN + json.dumps({"topologyManagerPolicy": "restricted", "topologyManagerScope": "container"}))
    write(tmp_path, "/etc/kubernetes/kubelet/config.json.d/60-user.conf",
          json.dumps({"kind": "KubeletConfiguration", "topologyManagerPolicy": "best-effort"}))
    checks = dict((c["id"], c) for c in audit(tmp_path))
    assert checks["kubelet.topology"]["status"] == "drift"
    assert checks["kubelet.topology"]["detail"] == \
        "set by topologyManagerPolicy from /etc/kubernetes/kubelet/config.json.d/60-user.conf"
    override = checks["kubelet.override"]
    assert override["status"] == "fail" and override["subject"] == "topologyManagerPolicy"
    assert override["persisted"] == "/etc/kubernetes/kubelet/config.json.d/60-user.conf"
    assert (override["desired"], override["live"]) == ("restricted", "best-effort")
    assert "kubelet_topology_on_conflict=override" in override["remedy"]


def test_a_flag_in_an_environment_file_is_named_with_its_variable(tmp_path):
    build_tree(tmp_path, scenario("kubeadm-deb"))
    write(tmp_path, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--topology-manager-policy=none\n")
    checks = [c for c in audit(tmp_path) if c["id"] == "kubelet.override"]
    assert [c["persisted"] for c in checks] == ["--topology-manager-policy=none ($KUBELET_EXTRA_ARGS from "
                                                "/etc/default/kubelet)"]
    assert "takes the flag out of /etc/default/kubelet" in checks[0]["remedy"]


def test_a_flag_in_a_unit_gets_a_remedy_for_the_unit(tmp_path):
    build_tree(tmp_path, scenario("eks-al2"))
    path = "/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf"
    write(tmp_path, path, (tmp_path / path.lstrip("/")).read_text().replace(
        "--node-labels", "--topology-manager-policy=best-effort --node-labels"))
    override = [c for c in audit(tmp_path, kubelet_topology_mode="config") if c["id"] == "kubelet.override"][0]
    assert path in override["persisted"] and "daemon-reload" in override["remedy"]


def test_a_flag_only_the_running_kubelet_has_is_drift_a_restart_fixes(tmp_path):
    spec = scenario("kubeadm-deb")
    build_tree(tmp_path, spec)
    write(tmp_path, "/proc/41/comm", "kubelet\n")
    write(tmp_path, "/proc/41/cmdline", "\0".join(spec["cmdline"] + ["--topology-manager-policy=none"]) + "\0")
    write(tmp_path, "/var/lib/kubelet/config.yaml",
          (tmp_path / "var/lib/kubelet/config.yaml").read_text() + "topologyManagerPolicy: single-numa-node\n")
    checks = [c for c in audit(tmp_path) if c["id"] == "kubelet.override"]
    assert [(c["status"], c["persisted"]) for c in checks] == [("drift", "--topology-manager-policy=none")]
    assert "restart the kubelet" in checks[0]["remedy"]


def test_no_config_file_and_no_drop_in_directory_is_unknown_not_ok(tmp_path):
    write(tmp_path, "/usr/lib/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet --v=2\n")
    checks = dict((c["id"], c) for c in audit(tmp_path))
    assert checks["kubelet.override"]["status"] == "unknown"
