"""The pre-flight of provision.yml: the rules (pure), the filter with the roles' defaults, and provision.yml refusing
a contradictory inventory before any node is touched (ansible-playbook against hosts nothing can reach)."""

import json
import pathlib
import subprocess

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_preflight import rdma_preflight
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _preflight

REPO = pathlib.Path(__file__).resolve().parents[4]
VFS = [{"netdev": "ibp24s0", "num_vfs": 8}]


def refused(**given):
    return [m.split("]", maxsplit=1)[0][1:] for m in rdma_preflight(given)["refused"]]


def test_the_role_defaults_contradict_nothing():
    assert rdma_preflight({}) == {"refused": [], "ignored": []}


@pytest.mark.parametrize("given,rules", [
    ({"sriov_pfs": VFS}, ["sriov_needs_exclusive"]),                       # netns default: shared
    ({"sriov_pfs": VFS, "rdma_netns_mode": "exclusive"}, []),
    ({"sriov_pfs": [{"netdev": "ibp24s0", "num_vfs": 0}]}, []),            # no VFs: nothing for pods
    ({"sriov_pfs": VFS, "rdma_k8s_node_device_plugin": "shared"}, []),      # VFs used through the shared plugin
    ({"rdma_k8s_node_device_plugin": "shared", "rdma_netns_mode": "exclusive"}, ["shared_plugin_needs_shared"]),
    ({"rdma_k8s_node_device_plugin": "sriov", "rdma_netns_mode": "exclusive", "sriov_pfs": VFS}, []),
    ({"rdma_k8s_node_device_plugin": "rdma-shared"}, ["device_plugin"]),
    ({"kubelet_topology_topology_manager_policy": "single-numa-node"}, ["single_numa_whole_node"]),
    ({"kubelet_topology_topology_manager_policy": "single-numa-node", "rdma_audit_whole_node_pods": False}, []),
    ({"kubelet_topology_topology_manager_policy": "single-numa-node", "rdma_audit_whole_node_pods": "no"}, []),
    ({"rdma_k8s_node_gpudirect": True, "nvidia_peermem_method": "peermem"}, ["gpudirect_without_driver"]),
    ({"rdma_k8s_node_gpudirect": "true", "nvidia_peermem_method": "peermem", "rdma_k8s_node_doca_ofed": True}, []),
    ({"rdma_k8s_node_gpudirect": True, "nvidia_peermem_method": "peermem", "rdma_k8s_node_external_ofed": True}, []),
    ({"rdma_k8s_node_gpudirect": True}, []),                               # auto: the module picks a path it finds
])
def test_rules(given, rules):
    assert refused(**given) == rules


def test_messages_name_the_variables_to_change():
    (message,) = rdma_preflight({"sriov_pfs": VFS})["refused"]
    assert "ibp24s0: 8 VFs" in message and "rdma_netns_mode: exclusive" in message


def test_ignore_turns_a_rule_into_a_warning_and_bad_ignores_are_refused():
    out = rdma_preflight({"sriov_pfs": VFS, "rdma_k8s_node_preflight_ignore": ["sriov_needs_exclusive"]})
    assert out["refused"] == [] and out["ignored"][0].startswith("[sriov_needs_exclusive]")
    assert "must be a list of rule names" in rdma_preflight({"rdma_k8s_node_preflight_ignore": "all"})["refused"][0]
    assert _preflight.check(["not", "a", "mapping"])["refused"]


def test_unset_values_take_role_defaults():
    assert refused(rdma_netns_mode="__unset__", sriov_pfs=VFS) == ["sriov_needs_exclusive"]
    assert refused(rdma_netns_mode=None, sriov_pfs=VFS) == ["sriov_needs_exclusive"]


def _run(tmp_path, host_vars, *extra):
    inventory = {"all": {"hosts": dict((name, dict(values, ansible_connection="ssh", ansible_host="192.0.2.1",
                                                   ansible_port=9, ansible_ssh_common_args="-o ConnectTimeout=2"))
                                       for name, values in host_vars.items())}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    (tmp_path / "none.cfg").write_text("[defaults]\n", encoding="utf-8")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_HOME": str(tmp_path / "home"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_NOCOLOR": "1", "PATH": "/usr/bin:/bin",
           "ANSIBLE_HOST_KEY_CHECKING": "false"}
    done = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(REPO / "playbooks" / "provision.yml")] + list(extra),
                          env=env, capture_output=True, text=True, check=False, cwd=str(tmp_path), timeout=300)
    return done.returncode, json.loads(done.stdout)


def test_provision_refuses_before_touching_any_node(tmp_path):
    """The nodes cannot be reached (ssh to a closed port): a refusal that comes before any connection is the
    pre-flight's; one bad host stops every host (any_errors_fatal), and the provision play never starts."""
    rc, out = _run(tmp_path, {"good": {}, "bad": {"sriov_pfs": VFS}})
    assert rc != 0
    assert [play["play"]["name"] for play in out["plays"]] == ["Pre-flight of the desired state"]
    results = out["plays"][0]["tasks"][0]["hosts"]
    assert results["bad"]["failed"] is True and "[sriov_needs_exclusive]" in results["bad"]["msg"]
    assert results["good"].get("failed") is not True
    assert all(not h.get("unreachable") for task in out["plays"][0]["tasks"] for h in task["hosts"].values())
    assert out["stats"]["good"]["unreachable"] == 0 and out["stats"]["bad"]["unreachable"] == 0
