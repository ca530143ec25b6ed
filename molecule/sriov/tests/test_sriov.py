"""Verify the sriov scenario (testinfra, connection podman): after converge, drift repair and a simulated reboot.

Expectations come from vars/<archetype>.yml; GUIDs are recomputed here from the PF's node GUID with the documented
scheme (docs/sriov.md), independently of the collection's code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

SCENARIO = Path(__file__).resolve().parent.parent
SYS = "/opt/hostroot/sys"
UNIT = "rdma-k8s-node-sriov.service"


@pytest.fixture(scope="module")
def expect(host):
    name = os.path.basename(host.run("printenv HWSIM_SPEC").stdout.strip())
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    with (SCENARIO / "vars" / f"{name}.yml").open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def scheme(pf_guid: int, index: int, prefix: int = 0x02) -> str:
    oui = pf_guid >> 40
    fold = (oui >> 16) ^ ((oui >> 8) & 0xFF) ^ (oui & 0xFF)
    value = (prefix << 56) | (fold << 48) | ((pf_guid & ((1 << 40) - 1)) << 8) | index
    raw = f"{value:016x}"
    return ":".join(raw[i:i + 4] for i in range(0, 16, 4))


def test_boot_unit_installed_enabled_and_ran(host):
    unit = host.service(UNIT)
    assert unit.is_enabled
    assert host.run(f"systemctl is-active {UNIT}").stdout.strip() == "active"
    text = host.file(f"/etc/systemd/system/{UNIT}").content_string
    assert "Type=oneshot" in text and "Before=network-pre.target network.target kubelet.service" in text
    assert host.run(f"systemctl show -p Result --value {UNIT}").stdout.strip() == "success"


def test_state_file_holds_every_pf(host, expect):
    state = json.loads(host.file("/etc/rdma-k8s-node/sriov.json").content_string)
    assert state["version"] == 1
    assert [entry["num_vfs"] for entry in state["sriov_vfs"]] == [pf["num_vfs"] for pf in expect["sriov_pfs"]]
    ib = sorted(entry["pci_address"] for entry in state["ib_vf_guids"])
    assert ib == (sorted(expect["expect_vfs"]) if expect["expect_link_layer"] == "InfiniBand" else [])


def test_vf_counts(host, expect):
    for pci, count in expect["expect_vfs"].items():
        assert host.file(f"{SYS}/bus/pci/devices/{pci}/sriov_numvfs").content_string.strip() == str(count)


def test_ib_vf_guids_nonzero_deterministic_unique_and_ports_active(host, expect):
    if expect["expect_link_layer"] != "InfiniBand":
        pytest.skip("Ethernet archetype: VFs have no GUIDs")
    seen = []
    for pci, count in expect["expect_vfs"].items():
        pf_rdma = host.run(f"ls {SYS}/bus/pci/devices/{pci}/infiniband").stdout.split()[0]
        pf_guid = int(host.file(f"{SYS}/class/infiniband/{pf_rdma}/node_guid").content_string.strip().replace(":", ""), 16)
        for index in range(count):
            vf = f"{SYS}/bus/pci/devices/{pci}/virtfn{index}"
            rdma = host.run(f"ls {vf}/infiniband").stdout.split()[0]
            node_guid = host.file(f"{vf}/infiniband/{rdma}/node_guid").content_string.strip()
            assert node_guid == scheme(pf_guid, index)
            assert host.file(f"{vf}/infiniband/{rdma}/ports/1/state").content_string.strip() == "4: ACTIVE"
            seen.append(node_guid)
    assert len(seen) == len(set(seen)) == sum(expect["expect_vfs"].values())


def test_roce_vf_attributes(host, expect):
    if expect["expect_link_layer"] != "Ethernet":
        pytest.skip("InfiniBand archetype")
    vfs = json.loads(host.run("ip -j link show ens1f0np0").stdout)[0]["vfinfo_list"]
    assert [vf["trust"] for vf in vfs] == [True] * 4
    assert vfs[0]["vlan_list"] == [{"vlan": 100, "qos": 3}]


def test_boot_applier_reports_no_drift(host):
    out = host.run("python3 /usr/local/lib/rdma-k8s-node/sriov_apply.py --check")
    assert out.rc == 0, out.stdout + out.stderr
    assert all(not json.loads(line)["changed"] for line in out.stdout.splitlines())
