"""``kubelet.whole_node``: the audit says when the Topology Manager policy would refuse a pod asking for every GPU and
RDMA NIC of the node, on the simulator's archetypes as rdma_facts gathers them (kubelet hint merge in _topology)."""

import json

import pytest

import hwsim
from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    out = {}
    for name in ("dgx-h100", "numa-split", "roce-cx6dx"):
        root = hwsim.render(name, tmp_path_factory.mktemp(name))
        out[name] = json.loads(json.dumps(gather(HostRoot(str(root)))))
    return out


def whole_node(facts, desired):
    return [c for c in _audit.audit_host(facts, desired, ["kubelet"]) if c["id"] == "kubelet.whole_node"]


def test_the_role_default_admits_a_whole_node_pod_on_a_two_socket_dgx(facts):
    dgx = facts["dgx-h100"]
    assert len(set(g["numa_node"] for g in dgx["gpus"])) == 2
    checks = whole_node(dgx, role_defaults())
    assert [(c["status"], c["subject"]) for c in checks] == [("ok", "restricted")]
    assert checks[0]["live"]["numa_nodes"] == [0, 1]


def test_single_numa_node_is_named_with_the_fix(facts):
    checks = whole_node(facts["dgx-h100"], dict(role_defaults(), kubelet_topology_topology_manager_policy="single-numa-node"))
    assert checks[0]["status"] == "fail"
    assert "single-numa-node refuses" in checks[0]["detail"] and "restricted" in checks[0]["remedy"]
    # the operator who never runs whole-node pods turns it off
    assert whole_node(facts["dgx-h100"], dict(role_defaults(), kubelet_topology_topology_manager_policy="single-numa-node",
                                              rdma_audit_whole_node_pods=False)) == []


def test_facts_only_mode_judges_the_kubelets_own_policy(facts):
    dgx = json.loads(json.dumps(facts["dgx-h100"]))
    dgx.setdefault("runtime", {})["kubelet"] = {"settings": {"topologyManagerPolicy": "single-numa-node"}}
    assert whole_node(dgx, None)[0]["status"] == "fail"
    dgx["runtime"]["kubelet"]["settings"]["topologyManagerPolicy"] = "best-effort"
    assert whole_node(dgx, None)[0]["status"] == "ok"


def test_a_bad_value_is_an_option_problem(facts):
    checks = _audit.audit_host(facts["dgx-h100"], dict(role_defaults(), rdma_audit_whole_node_pods="maybe"), ["kubelet"])
    assert any(c["id"] == "facts.options" and "rdma_audit_whole_node_pods" in c["detail"] for c in checks)
