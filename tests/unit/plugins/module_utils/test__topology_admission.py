"""Topology Manager admission of a pod asking for every GPU and NIC of a node, modelled on the kubelet (pure).

The model follows pkg/kubelet/cm/topologymanager/policy.go (filterProvidersHints, mergePermutation: the AND of the
affinities, preferred only when every hint is preferred and all affinities are equal; HintMerger.compare: a
preferred hint always beats a non-preferred one), policy_restricted.go / policy_single_numa_node.go
(canAdmitPodResult: admit only a preferred hint; single-numa-node first drops every hint wider than one node) and
pkg/kubelet/cm/devicemanager/topology_hints.go (generateDeviceTopologyHints: a hint per NUMA set holding enough
devices, preferred when it is as small as the smallest such set).
"""

import pathlib

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "kubelet_topology"
#: an HGX-style two-socket node: 4 GPUs and 4 rail NICs per socket
HGX = {"gpu": [0, 0, 0, 0, 1, 1, 1, 1], "rdma": [0, 0, 0, 0, 1, 1, 1, 1]}


def role_default(name):
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())[name]


def test_the_role_default_admits_a_whole_node_pod_on_a_two_socket_node():
    """Fails on the old default (single-numa-node): an 8-GPU pod on a two-socket node is refused."""
    policy = role_default("kubelet_topology_topology_manager_policy")
    options = dict(role_default("kubelet_topology_topology_manager_policy_options") or {},
                   **role_default("kubelet_topology_topology_manager_default_options"))
    scope = role_default("kubelet_topology_topology_manager_scope")
    assert topo.whole_node_admission(policy, options, scope, HGX, numa_nodes=[0, 1]) is None
    assert options == {"prefer-closest-numa-nodes": "true"}


def test_the_old_default_refuses_it():
    message = topo.whole_node_admission("single-numa-node", {}, "container", HGX)
    assert message.startswith("single-numa-node refuses a pod asking for every GPU and NIC")
    assert "gpu on NUMA 0,1" in message and "use restricted" in message


@pytest.mark.parametrize("policy", ["none", "best-effort"])
def test_policies_that_admit_everything(policy):
    assert topo.whole_node_admission(policy, {}, "pod", {"gpu": [0, 1], "rdma": [0]}) is None


@pytest.mark.parametrize("devices,numa_nodes,expected", [
    (HGX, [0, 1], None),
    ({"gpu": [0, 0, 1, 1], "rdma": [0, 0]}, [0, 1], "their smallest NUMA sets differ"),   # NICs on one socket only
    ({"gpu": [0, 0, 1, None], "rdma": [0, 1]}, [0, 1], "some of those devices report no NUMA node"),
    ({"gpu": [None] * 4, "rdma": [0, 1]}, [0, 1], None),       # no GPU reports a node: no preference
    ({"gpu": [-1] * 4, "rdma": [-1, -1]}, [0, 1], None),
    ({"gpu": [0, 0], "rdma": [0]}, [0, 1], None),
    ({"gpu": [0, 0, 1, 1], "rdma": [0, 1]}, [0, 1, 2, 3], None),  # NPS: four nodes, devices on two
    ({"gpu": [0, 1, 2, 3], "rdma": [0, 1, 2, 3]}, range(8), None),
    ({"gpu": [0, 1, 2, 3], "rdma": [0, 1, 2]}, range(4), "their smallest NUMA sets differ"),
    ({}, [0, 1], None),
])
def test_restricted(devices, numa_nodes, expected):
    message = topo.whole_node_admission("restricted", {"prefer-closest-numa-nodes": "true"}, "pod", devices, numa_nodes)
    assert message is None if expected is None else expected in message


@pytest.mark.parametrize("devices,expected", [
    ({"gpu": [0, 0, 0, 0], "rdma": [0, 0]}, None),
    ({"gpu": [1, 1], "rdma": [1]}, None),
    ({"gpu": [0, 0], "rdma": [1]}, "keeps only hints on one NUMA node"),
    (HGX, "keeps only hints on one NUMA node"),
])
def test_single_numa_node(devices, expected):
    message = topo.whole_node_admission("single-numa-node", None, "container", devices, [0, 1])
    assert message is None if expected is None else expected in message


@pytest.mark.parametrize("cpu,memory,expected", [
    ("static", "None", "the static CPU manager"),
    ("none", "Static", "the Static memory manager"),
    ("static", "Static", "the static CPU manager and the Static memory manager"),
    ("none", "None", None),
])
def test_exclusive_cpus_and_memory_narrow_the_preferred_hint(cpu, memory, expected):
    message = topo.whole_node_admission("restricted", {}, "pod", HGX, [0, 1], cpu, memory)
    assert message is None if expected is None else expected in message
    # devices on a single node: a CPU/memory hint on that node merges into a preferred one
    assert topo.whole_node_admission("restricted", {}, "pod", {"gpu": [0, 0]}, [0, 1], cpu, memory) is None


def test_bad_inputs_are_named():
    assert "is not one of" in topo.whole_node_admission("strict", {}, "pod", HGX)
    assert "topologyManagerScope" in topo.whole_node_admission("restricted", {}, "node", HGX)
    assert "mapping" in topo.whole_node_admission("restricted", ["x"], "pod", HGX)


def test_merge_follows_the_kubelet_rules():
    """Cases written from the kubelet's own merge: equal preferred affinities stay preferred, a narrower preferred
    CPU hint against a wide device hint is not preferred (mergePermutation), no preference is 'any node'."""
    both, one, zero = frozenset({0, 1}), frozenset({1}), frozenset({0})
    assert topo.merge_hints("restricted", [[(both, True)], [(both, True)]], {0, 1}) == ((both, True), True)
    best, admitted = topo.merge_hints("restricted", [[(both, True)], [(zero, True), (one, True), (both, False)]], {0, 1})
    assert not admitted and not best[1]
    assert topo.merge_hints("best-effort", [[(both, True)], [(zero, True), (both, False)]], {0, 1})[1] is True
    assert topo.merge_hints("restricted", [None, [(one, True)]], {0, 1}) == ((one, True), True)
    assert topo.merge_hints("restricted", [[]], {0, 1}) == ((both, False), False)
    assert topo.merge_hints("single-numa-node", [[(zero, True), (both, False)]], {0, 1}) == ((zero, True), True)


def test_device_hints_as_the_device_manager_builds_them():
    hints = dict(topo.device_hints([0, 0, 1, 1], [0, 1, 2]))
    assert hints == {frozenset({0, 1}): True, frozenset({0, 1, 2}): False}
    assert topo.device_hints([None, None], [0, 1]) is None
    assert topo.device_hints([0, None], [0, 1]) == []
