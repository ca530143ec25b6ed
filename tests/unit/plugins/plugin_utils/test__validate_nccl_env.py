"""The validate role's NCCL job on RoCE rails: NCCL_IB_TC / NCCL_IB_SL from the roce_qos desired state and
NCCL_IB_GID_INDEX from the probe (docs/roce.md "For pod authors")."""

import pathlib
import re

import yaml

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_validate as f
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import plan as qos_plan
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _validate as v

REPO = pathlib.Path(__file__).resolve().parents[4]
BASE = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
ROCE = {"dscp": 26, "priority": 3}


def _port(device, layer="Ethernet", gid=3):
    return {"device": device, "port": 1, "exists": True, "link_layer": layer, "gid_index": gid}


def test_roce_rails_get_tc_sl_and_the_probed_gid_index():
    probe = {"ports": [_port("mlx5_0"), _port("mlx5_1")]}
    env = v.nccl_env(BASE, probe, ROCE)
    assert env == dict(BASE, NCCL_IB_TC="104", NCCL_IB_SL="3", NCCL_IB_GID_INDEX="3")
    assert int(env["NCCL_IB_TC"]) == qos_plan.tos_of(26)  # the ToS the roce_qos role gives RDMA-CM and the device
    other = v.nccl_env(BASE, probe, {"dscp": "40", "priority": "5"})  # role variables arrive templated as strings
    assert (other["NCCL_IB_TC"], other["NCCL_IB_SL"]) == ("160", "5")


def test_gid_index_only_when_every_roce_rail_agrees():
    env = v.nccl_env(BASE, {"ports": [_port("mlx5_0", gid=3), _port("mlx5_1", gid=5)]}, ROCE)
    assert "NCCL_IB_GID_INDEX" not in env and env["NCCL_IB_TC"] == "104"
    env = v.nccl_env(BASE, {"ports": [_port("mlx5_0", gid=3), _port("mlx5_1", gid=None)]}, ROCE)
    assert "NCCL_IB_GID_INDEX" not in env


def test_infiniband_or_no_probe_keeps_the_operators_env():
    assert v.nccl_env(BASE, {"ports": [_port("mlx5_0", "InfiniBand", None)]}, ROCE) == BASE
    assert v.nccl_env(BASE, None, ROCE) == BASE
    assert v.nccl_env(None, {"ports": [_port("mlx5_0")]}, None) == {}


def test_the_operators_values_win():
    env = v.nccl_env(dict(BASE, NCCL_IB_TC="106"), {"ports": [_port("mlx5_0")]}, ROCE)
    assert env["NCCL_IB_TC"] == "106" and env["NCCL_IB_SL"] == "3"


def test_the_filter_and_the_role_use_the_roce_qos_desired_state():
    assert f.FilterModule().filters()["rdma_validate_nccl_env"] is f.rdma_validate_nccl_env
    assert f.rdma_validate_nccl_env({"ports": [_port("mlx5_0")]}, BASE, ROCE)["NCCL_IB_GID_INDEX"] == "3"
    defaults = yaml.safe_load((REPO / "roles/rdma_validate/defaults/main.yml").read_text())
    qos = yaml.safe_load((REPO / "roles/roce_qos/defaults/main.yml").read_text())
    roce = defaults["rdma_validate_nccl_roce"]
    # the same variables, and the same fallbacks as the roce_qos role's defaults (the two cannot drift apart)
    for key, var in (("dscp", "roce_qos_dscp"), ("priority", "roce_qos_priority")):
        match = re.fullmatch(r"\{\{ (\w+) \| default\((\d+)\) \}\}", roce[key])
        assert match and match.group(1) == var and int(match.group(2)) == qos[var] == qos_plan.DEFAULTS[key]
    tasks = yaml.safe_load((REPO / "roles/rdma_validate/tasks/main.yml").read_text())
    nccl = [t for t in tasks if t.get("name") == "Run nccl-tests with NCCL_DEBUG=INFO"][0]
    env = nccl["rdma.k8s_node.rdma_perftest"]["environment"]
    assert "rdma_validate_nccl_env(rdma_validate_nccl_env" in env
    assert "rdma_validate_nccl_roce" in env and "rdma_validate__probe" in env
