"""rdma_facts on a node whose VFs are in pods' network namespaces (issue 17): the SR-IOV CNI moved a VF's netdev into
the pod, the RDMA CNI (exclusive mode) its RDMA device; the host's sysfs no longer lists them (tests/hwsim/README.md
"VFs in pods").  rdma_facts must neither crash nor invent drift: the PF keeps every VF row (virtfnN, driver, admin
attributes), a VF's RDMA device or netdev the host cannot see is absent, and nothing is a problem."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, rdma_facts, sriov_vfs
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.modules.harness import run_module

hwsim = pytest.importorskip("hwsim")


def facts_of(mp, sim):
    return run_module(mp, rdma_facts.main, {"host_root": str(sim.root)})["ansible_facts"]["rdma"]


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_infiniband_vf_in_a_pod(monkeypatch, tmp_path, mode):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    with sim_node("dgx-h100", tmp_path, monkeypatch) as sim:
        sim.call({"cmd": "rdma_system_set", "netns": mode})
        run_module(monkeypatch, sriov_vfs.main, {"host_root": str(sim.root), "netdev": "ibp24s0", "num_vfs": 2})
        run_module(monkeypatch, ib_vf_guids.main, {"host_root": str(sim.root), "netdev": "ibp24s0"})
        before = facts_of(monkeypatch, sim)
        pf_before = next(d for d in before["devices"] if "ibp24s0" in d["netdevs"])
        sim.call({"cmd": "netns_add", "name": "pod-a"})
        vf0 = pf_before["vfs"][0]
        moved = sim.call({"cmd": "vf_set_netns", "bdf": vf0["pci_address"], "netns": "pod-a", "ifname": "net1"})
        assert moved == {"netdev": "net1", "rdma": vf0["name"] if mode == "exclusive" else None}

        facts = facts_of(monkeypatch, sim)
        assert facts["problems"] == [], facts["problems"]
        pf = next(d for d in facts["devices"] if "ibp24s0" in d["netdevs"])
        assert [vf["index"] for vf in pf["vfs"]] == [0, 1]
        assert pf["sriov"]["numvfs"] == 2
        row = pf["vfs"][0]
        assert row["pci_address"] == vf0["pci_address"] and row["driver"] == "mlx5_core"
        assert row["link_state"] == vf0["link_state"]  # the PF's vfinfo_list still has it
        names = [d["name"] for d in facts["devices"]]
        if mode == "exclusive":
            # the host cannot see the RDMA device: no device row, no GUIDs read, but nothing invented either
            assert vf0["name"] not in names
            assert row["name"] is None and row["node_guid"] is None and row["port_guid"] is None
        else:
            assert row == dict(vf0, name=vf0["name"]), (row, vf0)
            vf_dev = next(d for d in facts["devices"] if d["name"] == vf0["name"])
            assert vf_dev["netdevs"] == [] and vf_dev["is_vf"]
        assert "net1" not in facts.get("mtu", {}) and "ibp24s0v0" not in (facts.get("sysctl") or {})
        # the audit of the sriov layer: the VF's GUIDs are the ones its PF holds for it
        guids = [c for c in _audit.audit_host(facts, {"sriov_pfs": [{"netdev": "ibp24s0", "num_vfs": 2}]},
                                              layers=["sriov"]) if c["id"] == "sriov.vf_guids"]
        assert [c["status"] for c in guids] == ["ok"], guids
        if mode == "exclusive":
            assert guids[0]["live"]["in_pods"] == [0]


def test_roce_vf_in_a_pod_shared_mode(monkeypatch, tmp_path):
    """A RoCE VF's netdev in a pod, its RDMA device still the host's (shared mode): the GID's ndev names the pod's
    interface (print_ndev() does not look at namespaces), which the host has no such netdev for."""
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as sim:
        run_module(monkeypatch, sriov_vfs.main, {"host_root": str(sim.root), "netdev": "ens1f0np0", "num_vfs": 2})
        before = facts_of(monkeypatch, sim)
        pf = next(d for d in before["devices"] if "ens1f0np0" in d["netdevs"])
        vf0 = pf["vfs"][0]
        sim.call({"cmd": "netns_add", "name": "pod-a"})
        sim.call({"cmd": "vf_set_netns", "bdf": vf0["pci_address"], "netns": "pod-a", "ifname": "net1"})
        facts = facts_of(monkeypatch, sim)
        assert facts["problems"] == [], facts["problems"]
        vf_dev = next(d for d in facts["devices"] if d["name"] == vf0["name"])
        assert vf_dev["is_vf"]
        pf = next(d for d in facts["devices"] if "ens1f0np0" in d["netdevs"])
        assert [vf["index"] for vf in pf["vfs"]] == [0, 1]
        # the port's GID names the pod's interface (what sysfs says), but the host has no netdev of the VF: the facts
        # attribute no host interface (nor its MTU, nor its sysctls) to it
        assert vf_dev["ports"][0]["netdev"] == "net1"
        assert vf_dev["netdevs"] == [], vf_dev
        assert "net1" not in facts["mtu"] and "net1" not in (facts["sysctl"] or {}), (facts["mtu"], facts["sysctl"])


def test_soft_roce_device_without_a_pci_function_keeps_its_gid_netdevs(tmp_path):
    """The GID-netdev fallback stays for devices with no PCI function of their own (rxe: node_vm's Soft-RoCE)."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather  # pylint: disable=import-outside-toplevel
    base = tmp_path / "sys/devices/virtual/infiniband/rxe0"
    port = base / "ports/1"
    for rel, value in (("node_guid", "5054:00ff:fe12:3456"), ("fw_ver", "0.0.0"), ("board_id", "")):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(value + "\n")
    for rel, value in (("link_layer", "Ethernet"), ("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"),
                       ("rate", "10 Gb/sec (1X QDR)"), ("gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3456"),
                       ("gid_attrs/ndevs/0", "enp1s0")):
        (port / rel).parent.mkdir(parents=True, exist_ok=True)
        (port / rel).write_text(value + "\n")
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband/rxe0").symlink_to("../../devices/virtual/infiniband/rxe0")
    facts = gather(HostRoot(str(tmp_path)))
    [rxe] = facts["devices"]
    assert rxe["pci_address"] is None and rxe["netdevs"] == ["enp1s0"], rxe
