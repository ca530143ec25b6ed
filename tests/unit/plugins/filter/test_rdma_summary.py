"""Filters rdma_device_table and rdma_topo_matrix: text from ansible_facts.rdma, checked against the real format."""

import json
import os
import pathlib
import re
import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_summary
from unit.plugins.topo_matrix import gpu_nic_cells, parse_topo

REPO = pathlib.Path(__file__).resolve().parents[4]
ANSIBLE = REPO / ".venv" / "bin" / "ansible"
DELL = "topo/full-matrices/deepep-issue-397_4x8H100-dell_12nic_topo-mp.txt"
A100 = "topo/full-matrices/unknown-repo-pytest-fixture_8xA100-NV12_10nic_topo-m.txt"


def _dev(name, pci, numa=0, vfs=None, is_vf=False, pf=None, sriov=None, guid="a088:c203:0055:1e20", ports=None):
    return {"name": name, "pci_address": pci, "numa_node": numa, "driver": "mlx5_core", "netdevs": ["ib_" + name],
            "ports": ports if ports is not None else [{"port": 1, "link_layer": "InfiniBand", "state": "ACTIVE",
                                                       "phys_state": "LinkUp", "rate": "400 Gb/sec (4X NDR)",
                                                       "port_guid": guid}],
            "node_guid": guid, "is_vf": is_vf, "pf": pf, "sriov": sriov, "vfs": vfs or [], "fw_ver": "28.41.1000",
            "board_id": "MT_0000000838"}


@pytest.fixture
def facts():
    zero = "0000:0000:0000:0000"
    pf = _dev("mlx5_0", "0000:18:00.0", sriov={"totalvfs": 16, "numvfs": 2}, vfs=[
        {"index": 0, "pci_address": "0000:18:00.1", "driver": "mlx5_core", "name": "mlx5_12", "node_guid": zero,
         "port_guid": zero},
        {"index": 1, "pci_address": "0000:18:00.2", "driver": None, "name": None, "node_guid": None, "port_guid": None},
    ])
    vf = _dev("mlx5_12", "0000:18:00.1", is_vf=True, pf="0000:18:00.0", guid=zero)
    other = _dev("mlx5_1", "0000:9a:00.0", numa=1, guid="a088:c203:0055:1e60")
    soft = _dev("rxe0", None, numa=None, ports=[])
    return {
        "devices": [pf, other, vf, soft],
        "gpus": [
            {"pci_address": "0000:1b:00.0", "numa_node": 0, "vendor": "0x10de", "device": "0x2330", "class": "0x030200",
             "driver": "nvidia", "local_cpulist": "0-55,112-167"},
            {"pci_address": "0000:9d:00.0", "numa_node": None, "vendor": "0x10de", "device": "0x2330",
             "class": "0x030200", "driver": "nvidia", "local_cpulist": None},
        ],
        "gpu_nic_affinity": {
            "0000:1b:00.0": {"mlx5_0": "PIX", "mlx5_1": "SYS", "mlx5_12": "PIX"},
            "0000:9d:00.0": {"mlx5_0": None, "mlx5_1": "PHB", "mlx5_12": None},
        },
        "mtu": {"ib_mlx5_0": 4092, "ib_mlx5_12": 4092},
    }


def test_filters_are_registered():
    assert set(rdma_summary.FilterModule().filters()) == {"rdma_device_table", "rdma_topo_matrix"}


def test_every_filter_has_sidecar_docs():
    base = REPO / "plugins" / "filter"
    for name in rdma_summary.FilterModule().filters():
        text = (base / (name + ".yml")).read_text()
        assert "name: %s" % name in text and "RETURN:" in text and "EXAMPLES:" in text


def test_topo_matrix_round_trips_through_the_nvidia_smi_parser(facts):
    text = rdma_summary.rdma_topo_matrix(facts, tabs=True)
    parsed = parse_topo(text)
    assert parsed["gpus"] == ["GPU0", "GPU1"]
    assert parsed["legend"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}  # VFs and non-PCI devices left out
    assert gpu_nic_cells(parsed) == {("GPU0", "mlx5_0"): "PIX", ("GPU0", "mlx5_1"): "SYS",
                                     ("GPU1", "mlx5_0"): "?", ("GPU1", "mlx5_1"): "PHB"}
    assert parsed["cpu_affinity"] == {"GPU0": "0-55,112-167", "GPU1": "N/A"}
    assert parsed["numa_affinity"] == {"GPU0": "0", "GPU1": "N/A"}
    assert "  GPU1: 0000:9d:00.0" in text.splitlines()
    assert any(line.startswith("  ?    = Unknown") for line in text.splitlines())


def test_topo_matrix_with_vfs_and_without_legend(facts):
    text = rdma_summary.rdma_topo_matrix(facts, include_vfs=True, legend=False)
    lines = text.splitlines()
    assert lines[0].split() == ["NIC0", "NIC1", "NIC2", "CPU", "Affinity", "NUMA", "Affinity"]
    assert lines[1].split()[:4] == ["GPU0", "PIX", "SYS", "PIX"]
    assert len(lines) == 3 and "Legend" not in text
    # aligned: every cell starts in the same column on every line
    assert lines[1].index("PIX") == lines[0].index("NIC0")


@pytest.mark.realdata
@pytest.mark.parametrize("matrix", [DELL, A100])
def test_topo_matrix_reproduces_real_nvidia_smi_cells(realdata, matrix):
    """Facts carrying a real matrix's GPU x NIC cells render back to exactly those cells, legend and affinities."""
    real = parse_topo((realdata / matrix).read_text())
    gpus = []
    affinity = {}
    for index, gpu in enumerate(real["gpus"]):
        address = "0000:%02x:00.0" % (0x10 + index)
        gpus.append({"pci_address": address, "numa_node": int(real["numa_affinity"][gpu]), "vendor": "0x10de",
                     "device": "0x2330", "class": "0x030200", "driver": "nvidia",
                     "local_cpulist": real["cpu_affinity"][gpu]})
        affinity[address] = dict((real["legend"][nic], real["cells"][(gpu, nic)]) for nic in real["nics"])
    devices = [_dev(real["legend"][nic], "0000:%02x:00.0" % (0x80 + i)) for i, nic in enumerate(real["nics"])]
    rendered = parse_topo(rdma_summary.rdma_topo_matrix({"devices": devices, "gpus": gpus, "gpu_nic_affinity": affinity},
                                                        tabs=True))
    assert rendered["legend"] == real["legend"]
    assert gpu_nic_cells(rendered) == gpu_nic_cells(real)
    assert rendered["cpu_affinity"] == real["cpu_affinity"]
    assert rendered["numa_affinity"] == real["numa_affinity"]


def test_device_table(facts):
    text = rdma_summary.rdma_device_table(facts)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["DEVICE", "PCI", "NUMA", "DRIVER"]
    rows = [line.split() for line in lines[1:]]
    assert rows[0][:5] == ["mlx5_0", "0000:18:00.0", "0", "mlx5_core", "ib_mlx5_0"]
    assert rows[0][-1] == "2/16" and "1:InfiniBand/ACTIVE/LinkUp" in rows[0]
    # VFs follow their PF, the zero GUID is shown, an unbound VF shows dashes
    assert rows[1][:3] == ["vf0", "mlx5_12", "0000:18:00.1"]
    assert rows[1].count("0000:0000:0000:0000") == 2
    assert rows[2][:3] == ["vf1", "-", "0000:18:00.2"] and rows[2][-3:] == ["-", "-", "-"]
    assert [r[0] for r in rows[3:]] == ["mlx5_1", "rxe0"]  # the VF device is not repeated
    assert rows[4][1] == "-"


def test_device_table_without_vfs_tabs(facts):
    text = rdma_summary.rdma_device_table(facts, include_vfs=False, tabs=True)
    names = [line.split("\t")[0] for line in text.splitlines()[1:]]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_12", "rxe0"]


def test_filters_accept_a_registered_module_result(facts):
    registered = {"changed": False, "ansible_facts": {"rdma": facts}}
    assert rdma_summary.rdma_topo_matrix(registered) == rdma_summary.rdma_topo_matrix(facts)
    assert rdma_summary.rdma_device_table(registered) == rdma_summary.rdma_device_table(facts)


@pytest.mark.parametrize("value, message", [
    ("text", "expects ansible_facts.rdma (a dict), got str"),
    ({"devices": []}, "lacks gpus, gpu_nic_affinity"),
])
def test_filters_reject_other_input(value, message):
    for func in (rdma_summary.rdma_topo_matrix, rdma_summary.rdma_device_table):
        with pytest.raises(AnsibleFilterError, match=re.escape(message)):
            func(value)


def test_empty_facts_render():
    empty = {"devices": [], "gpus": [], "gpu_nic_affinity": {}}
    assert rdma_summary.rdma_device_table(empty).split() == ["DEVICE", "PCI", "NUMA", "DRIVER", "NETDEV", "MTU", "PORTS",
                                                             "NODE", "GUID", "PORT", "GUID", "VFS"]
    assert rdma_summary.rdma_topo_matrix(empty, legend=False).split() == ["CPU", "Affinity", "NUMA", "Affinity"]


@pytest.mark.skipif(not ANSIBLE.exists(), reason=".venv/bin/ansible is not installed")
def test_filters_load_by_fqcn_in_ansible(facts, tmp_path):
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
                "ANSIBLE_PYTHON_INTERPRETER": str(REPO / ".venv" / "bin" / "python")})
    (tmp_path / "facts.json").write_text(json.dumps({"rdma": facts}))
    done = subprocess.run(
        [str(ANSIBLE), "localhost", "-m", "ansible.builtin.debug", "-e", "@%s" % (tmp_path / "facts.json"),
         "-a", "msg={{ rdma | rdma.k8s_node.rdma_topo_matrix(tabs=true) }}"
               "{{ rdma | rdma.k8s_node.rdma_device_table }}", "-t", str(tmp_path / "tree")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    msg = json.loads((tmp_path / "tree" / "localhost").read_text())["msg"]
    assert "NIC Legend:" in msg and "  NIC1: mlx5_1" in msg and "mlx5_12" in msg


def test_gpus_are_numbered_in_numeric_pci_order(facts):
    facts["gpus"].append(dict(facts["gpus"][0], pci_address="0000:43:00.0"))
    facts["gpu_nic_affinity"]["0000:43:00.0"] = {"mlx5_0": "NODE", "mlx5_1": "SYS"}
    text = rdma_summary.rdma_topo_matrix(facts)
    assert [line.strip() for line in text.splitlines() if line.startswith("  GPU")] == [
        "GPU0: 0000:1b:00.0", "GPU1: 0000:43:00.0", "GPU2: 0000:9d:00.0"]
    assert gpu_nic_cells(parse_topo(text))[("GPU1", "mlx5_0")] == "NODE"
