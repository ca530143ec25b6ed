"""layers/kubelet/rules.py: every combination the kubelet refuses at start is refused here, with the reason (pure)."""

import json
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError

CPUS = set(range(16))
NODES = {0, 1}


@pytest.mark.parametrize("want,current,version,message", [
    ({"topologyManagerPolicy": "numa"}, {}, (1, 30, 0), "topology_manager_policy: 'numa' is not one of"),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}}, {}, (1, 27, 3),
     "prefer-closest-numa-nodes needs kubelet 1.28 or later or featureGates TopologyManagerPolicyOptions and "
     "TopologyManagerPolicyBetaOptions: true"),
    # the alpha gate does not open a beta option (CheckPolicyOptionAvailable, policy_options.go)
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}},
     {"featureGates": {"TopologyManagerPolicyAlphaOptions": True}}, (1, 26, 0), "needs kubelet 1.28 or later"),
    # 1.28-1.31: beta, refused when the beta gate is turned off; 1.32: stable, the beta gate no longer matters
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}},
     {"featureGates": {"TopologyManagerPolicyBetaOptions": False}}, (1, 31, 0), "featureGates TopologyManagerPolicyBetaOptions"),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}},
     {"featureGates": {"TopologyManagerPolicyOptions": False}}, (1, 32, 0), "featureGates TopologyManagerPolicyOptions"),
    ({"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"}}, {}, (1, 30, 0), "needs kubelet 1.31"),
    ({"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "4"}}, {}, (1, 31, 0), "integer above 8"),
    ({"topologyManagerPolicyOptions": {"numa-allocation-strategy": "most-allocated"}}, {}, (1, 38, 0), "featureGates"),
    ({"topologyManagerPolicyOptions": {"bogus": "1"}}, {}, (1, 38, 0), "unknown option 'bogus'"),
    ({"cpuManagerPolicy": "static"}, {}, (1, 30, 0), "static needs reserved CPUs"),
    ({"cpuManagerPolicy": "static"}, {"kubeReserved": {"cpu": "0"}}, (1, 30, 0), "static needs reserved CPUs"),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1,16"}, {}, (1, 30, 0), "CPUs 16 are not online"),
    ({"memoryManagerPolicy": "static"}, {}, (1, 30, 0), "case matters"),
    ({"memoryManagerPolicy": "Static"}, {}, (1, 30, 0), "needs reserved_memory"),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
     {"kubeReserved": {"memory": "512Mi"}, "systemReserved": {"memory": "512Mi"}}, (1, 30, 0), "must equal"),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 3, "limits": {"memory": "100Mi"}}]},
     {}, (1, 30, 0), "NUMA node 3 does not exist"),
])
def test_refused_with_reason(want, current, version, message):
    with pytest.raises(InputError) as info:
        kub.validate(want, current, version, CPUS, NODES)
    assert message in info.value.msg


@pytest.mark.parametrize("want,current,version", [
    ({"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod"}, {}, (1, 27, 0)),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}}, {}, (1, 28, 0)),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}},
     {"featureGates": {"TopologyManagerPolicyOptions": True, "TopologyManagerPolicyBetaOptions": True}}, (1, 26, 0)),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}},
     {"featureGates": {"TopologyManagerPolicyBetaOptions": False}}, (1, 32, 0)),
    ({"cpuManagerPolicy": "static"}, {"kubeReserved": {"cpu": "500m"}}, (1, 30, 0)),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1,8"}, {}, (1, 30, 0)),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]},
     {"kubeReserved": {"memory": "512Mi"}, "systemReserved": {"memory": "512Mi"}}, (1, 30, 0)),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "562Mi"}},
                                                          {"numaNode": 1, "limits": {"memory": "562Mi"}}]},
     {"kubeReserved": {"memory": "512Mi"}, "systemReserved": {"memory": "512Mi"}}, (1, 30, 0)),
])
def test_accepted(want, current, version):
    kub.validate(want, current, version, CPUS, NODES)


def test_more_than_8_numa_nodes_needs_the_option():
    with pytest.raises(InputError) as info:
        kub.validate({"topologyManagerPolicy": "restricted"}, {}, (1, 31, 0), CPUS, set(range(16)))
    assert "max-allowable-numa-nodes" in info.value.msg
    kub.validate({"topologyManagerPolicy": "restricted", "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"}},
                 {}, (1, 31, 0), CPUS, set(range(16)))


def test_changes_and_state_files():
    current = {"cpuManagerPolicy": "none", "topologyManagerPolicy": "none"}
    want = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1", "topologyManagerPolicy": "none"}
    changes = kub.key_changes(current, want)
    assert changes == {"cpuManagerPolicy": {"before": "none", "after": "static"},
                       "reservedSystemCPUs": {"before": None, "after": "0-1"}}
    assert kub.state_files_to_remove(changes) == ["/var/lib/kubelet/cpu_manager_state"]


def test_dropin_merge_semantics():
    merged = kub.merge({"topologyManagerPolicyOptions": {"a": "1"}, "reservedMemory": [1, 2]},
                       {"topologyManagerPolicyOptions": {"b": "2"}, "reservedMemory": [3]})
    assert merged == {"topologyManagerPolicyOptions": {"a": "1", "b": "2"}, "reservedMemory": [3]}


@pytest.mark.parametrize("version,flags,mode,expected", [
    ((1, 31, 0), {"config-dir": "/etc/kubernetes/kubelet.conf.d"}, "auto", ("dropin", "/etc/kubernetes/kubelet.conf.d")),
    ((1, 29, 0), {"config-dir": "/etc/kubernetes/kubelet.conf.d"}, "auto", ("config", "/var/lib/kubelet/config.yaml")),
    ((1, 31, 0), {}, "auto", ("config", "/var/lib/kubelet/config.yaml")),
    ((1, 31, 0), {"config": "/etc/kubelet.yaml"}, "config", ("config", "/etc/kubelet.yaml")),
])
def test_choose_target(version, flags, mode, expected):
    assert kub.choose_target(mode, version, flags, "/var/lib/kubelet/config.yaml") == expected


def test_choose_target_dropin_refused_without_flag():
    with pytest.raises(InputError):
        kub.choose_target("dropin", (1, 31, 0), {}, "/var/lib/kubelet/config.yaml")


def test_parse_flags_from_kubeadm_env_and_cmdline():
    env = '"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"'
    assert kub.parse_flags(env)["container-runtime-endpoint"] == "unix:///var/run/containerd/containerd.sock"
    cmd = "/usr/bin/kubelet --config /var/lib/kubelet/config.yaml --config-dir=/etc/kubernetes/kubelet.conf.d --v=2"
    assert kub.parse_flags(cmd) == {"config": "/var/lib/kubelet/config.yaml", "config-dir": "/etc/kubernetes/kubelet.conf.d",
                                    "v": "2"}


def test_replace_top_level_keeps_everything_else():
    text = "# kubeadm\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreservedMemory:\n" \
           "- numaNode: 0\n  limits:\n    memory: 1Gi\n\n# tail comment\nstaticPodPath: /etc/kubernetes/manifests\n"
    new = kub.replace_top_level(text, "reservedMemory", "reservedMemory:\n- numaNode: 1\n")
    assert new == "# kubeadm\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreservedMemory:\n" \
                  "- numaNode: 1\n\n# tail comment\nstaticPodPath: /etc/kubernetes/manifests\n"
    assert kub.replace_top_level("a: 1\n", "b", "b: 2\n") == "a: 1\nb: 2\n"


def test_cpuset_and_quantities():
    assert kub.parse_cpuset("0-2,8", "x") == {0, 1, 2, 8}
    assert kub.format_cpuset({0, 1, 2, 8, 10, 11}) == "0-2,8,10-11"
    assert kub.parse_quantity("1124Mi", "x") == 1124 << 20
    assert kub.parse_quantity("1G", "x") == 10 ** 9
    with pytest.raises(InputError):
        kub.parse_cpuset("0-a", "reserved_system_cpus")


# -- found by the fuzz suite (tests/unit/fuzz/test_kubelet.py) -----------------------------------------------------
@pytest.mark.parametrize("text", ["0-4294967295", "0-" + "9" * 40, "65536", "1" * 5000])
def test_cpuset_refuses_cpus_no_machine_has(text):
    """reserved_system_cpus 0-4294967295 built a set of 2^32 ints (the fuzz run was OOM-killed at 20 GB); 5,000
    digits was a ValueError from int()."""
    with pytest.raises(InputError, match="names a CPU above 65535"):
        kub.parse_cpuset(text, "reserved_system_cpus")
    assert max(kub.parse_cpuset("0-65535", "x")) == 65535


@pytest.mark.parametrize("value", ["1" * 400 + "Gi", "9" * 5000])
def test_quantity_too_large(value):
    """float('1' * 400) is inf: int() of it raised OverflowError."""
    with pytest.raises(InputError, match="larger than any memory quantity"):
        kub.parse_quantity(value, "reserved_memory limits.memory")


def test_numbers_int_refuses_are_input_or_parse_errors():
    """'²'.isdigit() is true and int('²') a ValueError; so is int() of 5,000 digits."""
    with pytest.raises(ParseError, match="a number is too long"):
        kub.parse_kubelet_version("Kubernetes v1.30." + "1" * 5000)
    with pytest.raises(ParseError, match="is not numaNode:type=quantity"):
        kub.flag_settings([{"name": "reserved-memory", "value": "\u00b2:memory=1Gi"}])
    for value in ("\u00b2", "9" * 5000):
        with pytest.raises(InputError, match="must be an integer above 8"):
            kub.validate({"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": value}}, {}, (1, 31, 0), [], [])


def test_version_search_is_linear():
    """The version regex was tried at every digit of a long run and backtracked through the rest: quadratic."""
    start = time.monotonic()
    with pytest.raises(ParseError):
        kub.parse_kubelet_version("1" * 100_000)
    assert kub.parse_kubelet_version("1v2.3.4") == (2, 3, 4)
    assert time.monotonic() - start < 1


# -- state files: every change the kubelet checks against its checkpoint ----------------------------------------------
CPU_STATE, MEMORY_STATE = kub.STATE_FILES["cpuManagerPolicy"], kub.STATE_FILES["memoryManagerPolicy"]
RES_A = [{"numaNode": 0, "limits": {"memory": "1Gi"}}, {"numaNode": 1, "limits": {"memory": "100Mi"}}]
RES_B = [{"numaNode": 0, "limits": {"memory": "562Mi"}}, {"numaNode": 1, "limits": {"memory": "562Mi"}}]
RES_A_SAME = [{"numaNode": 1, "limits": {"memory": "100Mi", "hugepages-1Gi": "0"}},
              {"numaNode": 0, "limits": {"memory": "1024Mi"}}]


@pytest.mark.parametrize("before,after,expected", [
    ({"cpuManagerPolicy": "none"}, {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}, [CPU_STATE]),
    ({"memoryManagerPolicy": "None"}, {"memoryManagerPolicy": "Static", "reservedMemory": RES_A}, [MEMORY_STATE]),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}, {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"},
     [CPU_STATE]),
    ({"cpuManagerPolicy": "none", "reservedSystemCPUs": "0"}, {"cpuManagerPolicy": "none", "reservedSystemCPUs": "0-1"}, []),
    ({"memoryManagerPolicy": "Static", "reservedMemory": RES_A}, {"memoryManagerPolicy": "Static", "reservedMemory": RES_B},
     [MEMORY_STATE]),
    ({"memoryManagerPolicy": "Static", "reservedMemory": RES_A},
     {"memoryManagerPolicy": "Static", "reservedMemory": RES_A_SAME}, []),
    ({"memoryManagerPolicy": "None", "reservedMemory": RES_A}, {"memoryManagerPolicy": "None", "reservedMemory": RES_B}, []),
    ({"topologyManagerPolicy": "none"}, {"topologyManagerPolicy": "restricted"}, []),
])
def test_state_files_every_checked_change(before, after, expected):
    want = dict((k, v) for k, v in after.items() if before.get(k) != v)
    assert kub.state_files_to_remove(kub.changes(before, after, want), after) == expected


def test_state_files_without_after_count_policy_changes_only():
    changes = {"reservedSystemCPUs": {"before": "0", "after": "0-1"}, "memoryManagerPolicy": {"before": "None", "after": "Static"}}
    assert kub.state_files_to_remove(changes) == [MEMORY_STATE]


def memory_state(reserved, policy="Static", entries=None):
    machine = dict((str(n), {"numberOfAssignments": 0, "cells": [n], "memoryMap": {"memory": {
        "total": 1 << 36, "systemReserved": b, "allocatable": (1 << 36) - b, "reserved": 0, "free": (1 << 36) - b}}})
        for n, b in reserved.items())
    return json.dumps({"policyName": policy, "machineState": machine, "entries": entries or {}, "checksum": 1})


@pytest.mark.parametrize("path,text,settings,online,expected", [
    (CPU_STATE, '{"policyName": "none"}', {"cpuManagerPolicy": "static"}, None, "written under policy 'none'"),
    (CPU_STATE, '{"policyName": "none"}', {}, None, None),
    (CPU_STATE, '{"policyName": "static", "defaultCpuSet": ""}', {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"},
     CPUS, None),                                                            # empty: the kubelet initialises it
    (CPU_STATE, '{"policyName": "static", "defaultCpuSet": "0-15"}', {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"},
     CPUS, None),
    (CPU_STATE, '{"policyName": "static", "defaultCpuSet": "0,2-15", "entries": {"pod": {"c": "1"}}}',
     {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}, CPUS, "are not all in its defaultCpuSet"),
    (CPU_STATE, '{"policyName": "static", "defaultCpuSet": "0-15"}',
     {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1", "cpuManagerPolicyOptions": {"strict-cpu-reservation": "true"}},
     CPUS, "strict-cpu-reservation"),
    (CPU_STATE, '{"policyName": "static", "defaultCpuSet": "0-7"}', {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"},
     CPUS, "are not the node's"),
    (CPU_STATE, "{", {}, None, "not JSON"),
    (MEMORY_STATE, memory_state({0: 1 << 30, 1: 100 << 20}), {"memoryManagerPolicy": "Static", "reservedMemory": RES_A}, None, None),
    (MEMORY_STATE, memory_state({0: 1 << 30, 1: 100 << 20}), {"memoryManagerPolicy": "Static", "reservedMemory": RES_B}, None,
     "systemReserved"),
    (MEMORY_STATE, memory_state({}), {"memoryManagerPolicy": "Static", "reservedMemory": RES_B}, None, None),
    (MEMORY_STATE, memory_state({}, entries={"pod": {}}), {"memoryManagerPolicy": "Static", "reservedMemory": RES_B}, None,
     "can not be empty"),
    (MEMORY_STATE, memory_state({0: 1}, policy="None"), {"memoryManagerPolicy": "None", "reservedMemory": RES_B}, None, None),
])
def test_checkpoint_refusal(path, text, settings, online, expected):
    refusal = kub.checkpoint_refusal(path, text, settings, online)
    assert refusal is None if expected is None else expected in refusal


# -- default policy options ---------------------------------------------------------------------------------------------
PREFER = {"prefer-closest-numa-nodes": "true"}


@pytest.mark.parametrize("want,others,version,added,left", [
    ({"topologyManagerPolicy": "restricted"}, {}, (1, 28, 0), PREFER, {}),
    ({"topologyManagerPolicy": "restricted"}, {}, (1, 27, 0), {}, "needs kubelet 1.28 or later"),
    ({"topologyManagerPolicy": "restricted"}, {"featureGates": {"TopologyManagerPolicyOptions": True,
                                                                "TopologyManagerPolicyBetaOptions": True}}, (1, 27, 0), PREFER, {}),
    ({"topologyManagerPolicy": "restricted"}, {"featureGates": {"TopologyManagerPolicyBetaOptions": False}}, (1, 30, 0), {},
     "TopologyManagerPolicyBetaOptions"),
    ({"topologyManagerPolicy": "restricted"}, {"featureGates": {"TopologyManagerPolicyBetaOptions": False}}, (1, 32, 0), PREFER, {}),
    ({}, {"topologyManagerPolicy": "best-effort"}, (1, 31, 0), PREFER, {}),
    ({}, {}, (1, 31, 0), {}, "not none"),
    ({"topologyManagerPolicy": "single-numa-node"}, {}, (1, 31, 0), {}, "not single-numa-node"),
    ({"topologyManagerPolicy": "restricted"}, {"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "false"}},
     (1, 31, 0), {}, "kept"),
    ({"topologyManagerPolicy": "restricted", "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "false"}}, {},
     (1, 31, 0), {}, {}),
])
def test_default_options(want, others, version, added, left):
    got, left_out = kub.default_options(PREFER, want, others, version)
    assert got == added
    if isinstance(left, dict):
        assert left_out == left
    else:
        assert left in left_out["prefer-closest-numa-nodes"]


def test_default_options_refuse_unknown_names_and_values():
    with pytest.raises(InputError):
        kub.default_options({"bogus": "1"}, {}, {}, (1, 31, 0))
    with pytest.raises(InputError):
        kub.default_options({"prefer-closest-numa-nodes": "yes"}, {}, {}, (1, 31, 0))
    assert kub.default_options({"prefer-closest-numa-nodes": True}, {"topologyManagerPolicy": "restricted"}, {},
                               (1, 31, 0))[0] == PREFER
