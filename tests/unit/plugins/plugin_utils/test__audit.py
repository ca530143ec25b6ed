"""The drift audit (pure): facts of simulated nodes + desired state -> checks, inventory checks, report shape."""

import copy
import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._gpudirect import drivers_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import judge as _sriov_judge
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit

hwsim = pytest.importorskip("hwsim")

ZERO = _sriov_judge.ZERO_GUID
HOST_SYSCTL = {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2}
IF_SYSCTL = {"arp_ignore": 2, "arp_announce": 2, "rp_filter": 2}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Facts of the simulator's archetypes as rdma_facts gathers them (power-on state)."""
    out = {}
    for name in ("dgx-h100", "roce-cx6dx", "numa-split", "no-rdma"):
        root = hwsim.render(name, tmp_path_factory.mktemp(name))
        host = HostRoot(str(root))
        facts = gather(host)
        facts["drivers"] = drivers_facts(host)
        facts["persisted"] = persisted_facts(host, [n for n in facts["sysctl"] if n not in ("all", "default")])
        out[name] = json.loads(json.dumps(facts))
    return out


def converge(facts, vendor="GenuineIntel", sriov=None):
    """What provisioning with the role defaults leaves behind, written into the facts (live and persisted)."""
    facts = copy.deepcopy(facts)
    facts["cpu_vendor"] = vendor
    args = ["iommu=pt", "intel_iommu=on" if vendor == "GenuineIntel" else "amd_iommu=on"]
    facts["kernel_cmdline"]["args"] += args
    facts["persisted"]["kernel_cmdline"] = {"source": "/boot/grub/grub.cfg", "kernel": "/boot/vmlinuz",
                                            "args": ["ro"] + args}
    facts["persisted"]["netns_mode"]["effective"] = "shared"
    for name in facts["sysctl"]:
        wanted = HOST_SYSCTL if name in ("all", "default") else IF_SYSCTL
        facts["sysctl"][name] = dict(wanted)
        facts["persisted"]["sysctl"][name] = dict((k, {"value": v, "file": "/etc/sysctl.d/90-rdma-k8s-node.conf"})
                                                  for k, v in wanted.items())
    if facts["gpus"]:
        facts["modules"].append("nvidia_peermem")
        facts["persisted"]["modules_load"].append("nvidia_peermem")
        facts["drivers"]["gpudirect"].update(active="peermem", peermem_loaded=True, peermem_persisted=True)
    for pf, count in (sriov or {}).items():
        device = next(d for d in facts["devices"] if d["name"] == pf)
        device["sriov"]["numvfs"] = count
        base = int(device["node_guid"].replace(":", ""), 16)
        device["vfs"] = [{"index": i, "pci_address": None, "driver": "mlx5_core", "name": None,
                          "node_guid": _guid(0x02 << 56 | (base & 0xFFFFFFFFFF) << 8 | i),
                          "port_guid": _guid(0x02 << 56 | (base & 0xFFFFFFFFFF) << 8 | 0x80 | i)} for i in range(count)]
        facts["persisted"]["sriov"] = {"state_file": "/etc/rdma-k8s-node/sriov.json", "guid_pfs": [],
                                       "pfs": [{"rdma_device": pf, "netdev": None, "pci_address": None,
                                                "num_vfs": count}]}
    return facts


def _guid(value):
    text = "%016x" % value
    return ":".join(text[i:i + 4] for i in range(0, 16, 4))


def desired(**overrides):
    out = dict(role_defaults())
    out.update(overrides)
    return out


def by_key(checks):
    return dict(((c["id"], c["subject"]), c) for c in checks)


NODE_LAYERS = ["facts", "drivers", "kernel", "netns", "sysctl", "sriov", "topology"]


def test_converged_dgx_is_all_ok_and_covers_every_node_layer(rendered):
    facts = converge(rendered["dgx-h100"], sriov={"mlx5_0": 4})
    checks = _audit.audit_host(facts, desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 4}]), NODE_LAYERS)
    bad = [c for c in checks if c["status"] != "ok"]
    assert bad == []
    ids = set(c["id"] for c in checks)
    assert {"drivers.modules", "gpudirect.path", "kernel.cmdline", "netns.mode", "sysctl.arp", "sriov.num_vfs",
            "sriov.vf_guids", "topology.gpu_nic", "topology.numa", "mtu.node", "cgroup.rdma"} <= ids
    # all, default and the 12 PF netdevs of the DGX
    assert len([c for c in checks if c["id"] == "sysctl.arp"]) == 14
    assert all(c["remedy"] is None for c in checks)


def test_power_on_dgx_drifts_exactly_where_provisioning_acts(rendered):
    facts = copy.deepcopy(rendered["dgx-h100"])
    facts["cpu_vendor"] = "GenuineIntel"
    checks = by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))
    assert checks[("kernel.cmdline", "iommu=pt")]["status"] == "drift"
    assert "rdma_kernel" in checks[("kernel.cmdline", "iommu=pt")]["remedy"]
    assert ("kernel.cmdline", "intel_iommu=on") not in checks  # the vendor switch is off by default (ACS)
    assert checks[("sysctl.arp", "all")]["live"] == {"arp_ignore": 0, "arp_announce": 0, "rp_filter": 0}
    assert checks[("sysctl.arp", "ibp24s0")]["status"] == "drift"
    assert checks[("gpudirect.path", None)]["status"] == "drift"
    assert checks[("netns.mode", None)]["status"] == "ok"  # shared is ib_core's default and the role's
    assert checks[("drivers.modules", None)]["status"] == "ok"


def test_pending_reboot_is_drift_with_reboot_remedy(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["kernel_cmdline"]["args"] = [a for a in facts["kernel_cmdline"]["args"] if a != "iommu=pt"]
    check = by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))[("kernel.cmdline", "iommu=pt")]
    assert (check["status"], check["live"], check["persisted"]) == ("drift", False, True)
    assert "reboot" in check["remedy"] and "node_reboot_ok" in check["remedy"]


def test_last_occurrence_of_a_kernel_argument_wins(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["kernel_cmdline"]["args"].append("iommu=off")
    assert by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))[("kernel.cmdline", "iommu=pt")]["live"] is False


def test_unknown_cpu_vendor_is_unknown_not_ok(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["cpu_vendor"] = None
    check = by_key(_audit.audit_host(facts, desired(rdma_kernel_vendor_iommu=True), NODE_LAYERS))[
        ("kernel.cmdline", "vendor IOMMU switch")]
    assert check["status"] == "unknown" and "rdma_kernel_vendor_iommu" in check["remedy"]
    # off by default (ACS redirection would slow GPUDirect RDMA): no vendor check at all
    assert by_key(_audit.audit_host(facts, desired(), NODE_LAYERS)).get(("kernel.cmdline", "vendor IOMMU switch")) is None
    assert by_key(_audit.audit_host(facts, desired(rdma_kernel_vendor_iommu=False), NODE_LAYERS)).get(
        ("kernel.cmdline", "vendor IOMMU switch")) is None


@pytest.mark.parametrize("live,persisted,want,status,remedy", [
    ("shared", "exclusive", "exclusive", "drift", "reboot"),        # persisted, live switch refused (busy node)
    ("shared", None, "exclusive", "drift", "rdma_netns_mode=exclusive"),
    ("exclusive", "exclusive", "exclusive", "ok", None),
    ("exclusive", None, "exclusive", "drift", "rdma_netns"),       # live only: lost at the next boot
    ("exclusive", "exclusive", "shared", "drift", "rdma_netns_mode=shared"),
])
def test_netns_live_persisted_desired(rendered, live, persisted, want, status, remedy):
    facts = converge(rendered["roce-cx6dx"])
    facts["netns_mode"] = live
    facts["persisted"]["netns_mode"]["effective"] = persisted
    check = by_key(_audit.audit_host(facts, desired(rdma_netns_mode=want), NODE_LAYERS))[("netns.mode", None)]
    assert (check["status"], check["live"], check["persisted"]) == (status, live, persisted)
    assert (remedy is None and check["remedy"] is None) or remedy in check["remedy"]


def test_netns_unreadable_with_devices_is_unknown(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["netns_mode"] = None
    assert by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))[("netns.mode", None)]["status"] == "unknown"


def test_exclusive_mode_with_shared_device_plugin_fails_even_without_desired_state(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["netns_mode"] = "exclusive"
    facts["device_plugins"] = ["k8s-rdma-shared"]
    check = by_key(_audit.audit_host(facts, None, NODE_LAYERS))[("netns.shared_device_plugin", None)]
    assert check["status"] == "fail" and "SR-IOV" in check["remedy"]
    facts["netns_mode"] = "shared"
    assert ("netns.shared_device_plugin", None) not in by_key(_audit.audit_host(facts, None, NODE_LAYERS))


def test_sysctl_live_only_change_is_drift_and_host_arp_ignore_2_fails(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["sysctl"]["all"]["arp_ignore"] = 2
    checks = by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))
    assert checks[("sysctl.arp", "all")]["status"] == "drift"
    assert checks[("sysctl.arp", "all")]["persisted"]["arp_ignore"] == 1
    assert checks[("sysctl.host_arp_ignore", None)]["status"] == "fail"


def test_sysctl_of_a_missing_interface_is_unknown(rendered):
    facts = converge(rendered["roce-cx6dx"])
    checks = by_key(_audit.audit_host(facts, desired(rdma_sysctl_interfaces=["nosuch0"]), NODE_LAYERS))
    assert checks[("sysctl.arp", "nosuch0")]["status"] == "unknown"


def test_sriov_count_drift_zero_guid_and_duplicates(rendered):
    want = desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 4}])
    facts = converge(rendered["dgx-h100"], sriov={"mlx5_0": 4})
    pf = next(d for d in facts["devices"] if d["name"] == "mlx5_0")
    pf["sriov"]["numvfs"] = 2  # changed by hand
    pf["vfs"][1]["node_guid"] = ZERO
    checks = by_key(_audit.audit_host(facts, want, NODE_LAYERS))
    count = checks[("sriov.num_vfs", "mlx5_0")]
    assert (count["status"], count["live"], count["persisted"]) == ("drift", 2, 4)
    assert "sriov_allow_vf_reset" in count["remedy"]
    assert checks[("sriov.vf_guids", "mlx5_0")]["status"] == "drift"
    assert checks[("sriov.vf_guids", "mlx5_0")]["live"] == {"zero": [1]}
    pf["vfs"][1]["node_guid"] = pf["vfs"][2]["node_guid"]
    assert by_key(_audit.audit_host(facts, want, NODE_LAYERS))[("sriov.vf_guids", "mlx5_0")]["status"] == "fail"


def test_sriov_unknown_pf_fails_and_boot_state_missing_is_drift(rendered):
    facts = converge(rendered["dgx-h100"], sriov={"mlx5_0": 4})
    facts["persisted"]["sriov"] = None
    checks = by_key(_audit.audit_host(facts, desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 4},
                                                                {"netdev": "nosuch", "num_vfs": 2}]), NODE_LAYERS))
    assert checks[("sriov.num_vfs", "nosuch")]["status"] == "fail"
    assert checks[("sriov.num_vfs", "mlx5_0")]["status"] == "drift"
    assert "boot unit" in checks[("sriov.num_vfs", "mlx5_0")]["remedy"]


def test_ethernet_vfs_are_not_guid_checked(rendered):
    facts = converge(rendered["roce-cx6dx"])
    assert not [c for c in _audit.audit_host(facts, desired(), NODE_LAYERS) if c["id"] == "sriov.vf_guids"]


def test_cross_numa_nic_fails_topology(rendered):
    facts = converge(rendered["numa-split"])
    checks = [c for c in _audit.audit_host(facts, desired(), NODE_LAYERS) if c["layer"] == "topology"]
    affinity = [c for c in checks if c["id"] == "topology.gpu_nic"]
    assert affinity and all(c["status"] == "fail" for c in affinity)
    assert list(affinity[0]["live"].values()) == ["SYS"]
    assert any(c["id"] == "topology.numa" and c["status"] == "fail" for c in checks)


def test_expected_nic_map_and_class_limit(rendered):
    facts = converge(rendered["dgx-h100"])
    gpu = facts["gpus"][0]["pci_address"]
    checks = by_key(_audit.audit_host(facts, desired(rdma_audit_gpu_nic_map={gpu: "mlx5_6"}), NODE_LAYERS))
    assert checks[("topology.gpu_nic", gpu)]["status"] == "fail"
    assert checks[("topology.gpu_nic", gpu)]["live"] == {"mlx5_6": "SYS"}
    checks = by_key(_audit.audit_host(facts, desired(rdma_audit_gpu_nic_max_class="SYS",
                                                     rdma_audit_gpu_nic_map={gpu: "mlx5_6"}), NODE_LAYERS))
    assert checks[("topology.gpu_nic", gpu)]["status"] == "ok"


def test_mtu_mismatch_on_one_node_and_desired_mtu(rendered):
    facts = converge(rendered["roce-cx6dx"])
    names = sorted(facts["mtu"])
    facts["mtu"][names[0]] = 1500
    check = by_key(_audit.audit_host(facts, desired(), NODE_LAYERS))[("mtu.node", "Ethernet")]
    assert check["status"] == "drift" and 1500 in check["live"].values()
    facts["mtu"][names[0]] = 9000
    check = by_key(_audit.audit_host(facts, desired(rdma_audit_mtu=4200), NODE_LAYERS))[("mtu.node", "Ethernet")]
    assert check["status"] == "drift" and check["desired"] == 4200


def test_rdma_cgroup_limit_is_drift(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["rdma_cgroup"] = {"/kubepods.slice": {"mlx5_0": {"hca_handle": 2, "hca_object": "max"}}}
    check = by_key(_audit.audit_host(facts, None, NODE_LAYERS))[("cgroup.rdma", None)]
    assert check["status"] == "drift" and check["live"] == {"/kubepods.slice": {"mlx5_0": {"hca_handle": 2}}}


def test_read_problems_are_unknown(rendered):
    facts = converge(rendered["roce-cx6dx"])
    facts["problems"] = [{"path": "/sys/bus/pci/devices/0000:3b:00.0/numa_node", "error": "Permission denied"}]
    facts["persisted"]["problems"] = [{"path": "/etc/sysctl.d/x.conf", "error": "I/O error"}]
    unknown = [c for c in _audit.audit_host(facts, desired(), NODE_LAYERS) if c["status"] == "unknown"]
    assert [c["subject"] for c in unknown] == ["/sys/bus/pci/devices/0000:3b:00.0/numa_node", "/etc/sysctl.d/x.conf"]


def test_facts_only_audit_reports_known_bad_only(rendered):
    facts = copy.deepcopy(rendered["dgx-h100"])  # power-on: nothing configured
    checks = _audit.audit_host(facts, None, NODE_LAYERS)
    ids = set(c["id"] for c in checks)
    assert not ids & {"kernel.cmdline", "sysctl.arp", "netns.mode", "sriov.num_vfs"}
    assert {"drivers.modules", "topology.gpu_nic", "mtu.node", "cgroup.rdma"} <= ids


def test_no_rdma_node_has_nothing_to_check_but_is_not_failed(rendered):
    checks = _audit.audit_host(converge(rendered["no-rdma"]), desired(), NODE_LAYERS)
    assert _audit.worst(c["status"] for c in checks) == "ok"


def test_unreachable_host_is_unknown_in_every_layer():
    checks = _audit.audit_host(None, desired(), ["kernel", "sysctl"], error="unreachable: ssh timeout")
    assert [(c["id"], c["status"]) for c in checks] == [("facts.gathered", "unknown"), ("kernel.facts", "unknown"),
                                                        ("sysctl.facts", "unknown")]
    assert all(c["detail"] == "unreachable: ssh timeout" for c in checks)


def test_layers_select_checks(rendered):
    checks = _audit.audit_host(converge(rendered["dgx-h100"]), desired(), ["topology"])
    assert set(c["layer"] for c in checks) == {"topology"}


RUNTIME = {
    "containerd": {"installed": True, "version": "1.7.24", "config_version": 2, "enable_cdi": True,
                   "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "unit_memlock": "infinity",
                   "unit_memlock_source": "/etc/systemd/system/containerd.service.d/50-rdma-memlock.conf",
                   "running": {"pid": 812, "memlock": {"soft": "unlimited", "hard": "unlimited"}},
                   "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2",
                                         "base_runtime_spec": "/etc/containerd/cri-base.json",
                                         "base_spec_memlock": {"soft": "unlimited", "hard": "unlimited"}}},
                   "problems": []},
    "kubelet": {"running": True, "version": "1.31.2", "config_file": "/var/lib/kubelet/config.yaml",
                "config_dir": None, "problems": [],
                "settings": {"topologyManagerPolicy": "restricted", "topologyManagerScope": "container",
                             "topologyManagerPolicyOptions": None, "cpuManagerPolicy": "none",
                             "memoryManagerPolicy": "None"},
                "state_files": {"cpuManagerPolicy": {"path": "/var/lib/kubelet/cpu_manager_state", "policy": "none"}}},
}


def runtime_facts(rendered, **changes):
    facts = converge(rendered["roce-cx6dx"])
    facts["runtime"] = copy.deepcopy(RUNTIME)
    for path, value in changes.items():
        node = facts["runtime"]
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return facts


def test_runtime_converged_is_ok(rendered):
    checks = _audit.audit_host(runtime_facts(rendered), desired(), ["containerd", "kubelet"])
    assert [(c["id"], c["status"]) for c in checks] == [("containerd.memlock", "ok"), ("containerd.base_spec", "ok"),
                                                        ("containerd.cdi", "ok"), ("kubelet.topology", "ok"),
                                                        ("kubelet.whole_node", "ok")]


@pytest.mark.parametrize("change,check_id,status,remedy", [
    ({"containerd__running": {"pid": 9, "memlock": {"soft": 8388608, "hard": 8388608}}},
     "containerd.memlock", "drift", "restart containerd"),
    ({"containerd__unit_memlock": None}, "containerd.memlock", "drift", "LimitMEMLOCK"),
    ({"containerd__runtimes__runc__base_spec_memlock": {"soft": 65536, "hard": 65536}},
     "containerd.base_spec", "drift", "base_runtime_spec"),
    ({"containerd__enable_cdi": False}, "containerd.cdi", "drift", "containerd_rdma_cdi"),
    ({"containerd__installed": False}, "containerd.installed", "fail", "install containerd"),
    ({"kubelet__settings__topologyManagerPolicy": "none"}, "kubelet.topology", "drift", "kubelet_topology"),
    ({"kubelet__state_files__cpuManagerPolicy__policy": "static"}, "kubelet.state_file", "fail", "cpu_manager_state"),
    ({"kubelet__settings": {}}, "kubelet.topology", "unknown", None),
    ({"containerd__version": "1.6.20", "containerd__enable_cdi": None}, "containerd.cdi", "fail", "1.7 or later"),
    # a runc table that replaced containerd 1.x's built-in runtime without restating its type: no pod starts
    ({"containerd__runtimes__runc__runtime_type": ""}, "containerd.runtime_type", "fail", "io.containerd.runc.v2"),
])
def test_runtime_drift(rendered, change, check_id, status, remedy):
    checks = _audit.audit_host(runtime_facts(rendered, **change), desired(), ["containerd", "kubelet"])
    found = [c for c in checks if c["id"] == check_id]
    assert found and found[0]["status"] == status
    assert remedy is None or remedy in found[0]["remedy"]


def test_inventory_duplicate_guids_and_odd_mtu(rendered):
    one = converge(rendered["dgx-h100"], sriov={"mlx5_0": 2})
    two = copy.deepcopy(one)  # a cloned node: same GUIDs
    three = converge(rendered["dgx-h100"])
    three["mtu"]["ibp24s0"] = 2044
    want = desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 2}])
    report = _audit.audit({"a": {"facts": one, "desired": want, "layers": NODE_LAYERS},
                           "b": {"facts": two, "desired": want, "layers": NODE_LAYERS},
                           "c": {"facts": three, "desired": desired(), "layers": NODE_LAYERS},
                           "d": {"facts": None, "desired": want, "error": "unreachable"}})
    hosts = report["hosts"]
    dup = by_key(hosts["a"]["checks"])[("sriov.guid_inventory", None)]
    assert dup["status"] == "fail" and dup["live"]["also_on"] == ["b"]
    assert hosts["a"]["status"] == hosts["b"]["status"] == "fail"
    odd = by_key(hosts["c"]["checks"])[("mtu.inventory", "InfiniBand")]
    assert odd["status"] == "drift" and odd["desired"] == 4092 and odd["live"] == {"ibp24s0": 2044}
    assert by_key(hosts["a"]["checks"])[("mtu.inventory", "InfiniBand")]["status"] == "ok"
    assert hosts["d"]["status"] == "unknown"
    assert report["summary"]["status"] == "fail"
    assert report["summary"]["hosts_by_status"] == {"ok": 0, "drift": 1, "fail": 2, "unknown": 1}
    assert report["schema_version"] == 1
    assert sum(report["summary"]["checks_by_status"].values()) == sum(len(h["checks"]) for h in hosts.values())
    json.dumps(report)  # the report is plain JSON


def test_a_host_that_does_not_audit_sriov_still_owns_its_guids(rendered):
    """GUIDs are unique on the fabric: b leaves SR-IOV out of its audit but its VFs carry a's GUIDs (a cloned node),
    so a's sriov.guid_inventory fails naming b, and b gets no SR-IOV check."""
    one = converge(rendered["dgx-h100"], sriov={"mlx5_0": 2})
    want = desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 2}])
    without_sriov = [layer for layer in NODE_LAYERS if layer != "sriov"]
    report = _audit.audit({"a": {"facts": one, "desired": want, "layers": NODE_LAYERS},
                           "b": {"facts": copy.deepcopy(one), "desired": want, "layers": without_sriov}})
    dup = by_key(report["hosts"]["a"]["checks"])[("sriov.guid_inventory", None)]
    assert dup["status"] == "fail" and dup["live"]["also_on"] == ["b"]
    assert not [c for c in report["hosts"]["b"]["checks"] if c["layer"] == "sriov"]


def test_worst_order():
    assert _audit.worst([]) == "ok"
    assert _audit.worst(["ok", "drift"]) == "drift"
    assert _audit.worst(["drift", "unknown"]) == "unknown"
    assert _audit.worst(["unknown", "fail", "ok"]) == "fail"


def test_driver_checks_on_the_simulated_ofed(rendered):
    facts = converge(rendered["dgx-h100"])
    ofed = facts["drivers"]["ofed"]
    assert ofed["running_version"] == "24.10-1.1.4"  # the archetype's loaded modules
    ofed.update(installed=True, flavor="doca", version="24.10-1.1.4.0.200")  # what ofed_info -s would say
    checks = by_key(_audit.audit_host(facts, desired(rdma_audit_ofed_version="24.10-1.1.4"), ["drivers"]))
    assert checks[("drivers.ofed_version", None)]["status"] == "ok"
    checks = by_key(_audit.audit_host(facts, desired(rdma_audit_ofed_version="25.04"), ["drivers"]))
    assert checks[("drivers.ofed_version", None)]["status"] == "drift"
    ofed.update(stale_modules=["mlx5_core"], restart_required=True)
    ofed["dkms_failed"] = [{"module": "mlnx-ofed-kernel", "state": "failed",
                            "make_log": "/var/lib/dkms/mlnx-ofed-kernel/24.10/build/make.log",
                            "excerpt": "error: implicit declaration of function 'foo'"}]
    checks = by_key(_audit.audit_host(facts, desired(), ["drivers"]))
    assert checks[("drivers.ofed_running", None)]["status"] == "drift"
    assert "doca_ofed_restart_ok" in checks[("drivers.ofed_running", None)]["remedy"]
    dkms = checks[("drivers.dkms", "mlnx-ofed-kernel")]
    assert dkms["status"] == "fail" and "implicit declaration" in dkms["detail"]


@pytest.mark.parametrize("gpudirect,method,status", [
    ({"active": "dmabuf", "dmabuf_capable": True, "peermem_persisted": False}, "auto", "ok"),
    ({"active": "dmabuf", "dmabuf_capable": True, "peermem_persisted": False}, "peermem", "drift"),
    ({"active": "peermem", "peermem_loaded": True, "peermem_persisted": False}, "auto", "drift"),  # lost at reboot
    ({"active": "none", "dmabuf_capable": False, "peermem_persisted": False}, "auto", "drift"),
])
def test_gpudirect_path(rendered, gpudirect, method, status):
    facts = converge(rendered["dgx-h100"])
    facts["drivers"]["gpudirect"] = gpudirect
    check = by_key(_audit.audit_host(facts, desired(nvidia_peermem_method=method), ["drivers"]))[("gpudirect.path", None)]
    assert check["status"] == status and check["live"] == gpudirect["active"]


def test_node_labels(rendered):
    report = _audit.audit({"a": {"facts": converge(rendered["dgx-h100"]), "desired": desired(),
                                 "layers": ["netns"]},
                           "b": {"facts": None, "desired": None}})
    assert report["hosts"]["a"]["labels"] == {"rdma.k8s-node.io/audit": "ok", "rdma.k8s-node.io/netns-mode": "shared",
                                              "rdma.k8s-node.io/gpudirect": "peermem"}
    assert report["hosts"]["b"]["labels"]["rdma.k8s-node.io/audit"] == "unknown"
    assert report["hosts"]["b"]["labels"]["rdma.k8s-node.io/netns-mode"] == "unknown"


def test_finite_memlock_in_any_spelling(rendered):
    facts = runtime_facts(rendered, containerd__unit_memlock="4194304",
                          containerd__running={"pid": 9, "memlock": {"soft": "4194304", "hard": "4194304"}},
                          containerd__runtimes__runc__base_spec_memlock={"soft": "4194304", "hard": "4194304"})
    checks = by_key(_audit.audit_host(facts, desired(containerd_rdma_memlock="4M"), ["containerd"]))
    assert checks[("containerd.memlock", None)]["status"] == "ok"
    assert checks[("containerd.memlock", None)]["live"] == 4194304
    assert checks[("containerd.base_spec", "runc")]["status"] == "ok"
    checks = by_key(_audit.audit_host(facts, desired(containerd_rdma_memlock="unlimited"), ["containerd"]))
    assert checks[("containerd.memlock", None)]["status"] == "drift"


@pytest.mark.parametrize("packages,want,status", [
    ({"doca-ofed": {"version": "3.2.0-0.1.4", "state": "installed"}}, "3.2.0", "ok"),
    ({"doca-ofed": {"version": "2.9.1-0.1.4", "state": "installed"}}, "3.2.0", "drift"),
    ({"doca-ofed": {"version": "3.2.0-0.1.4", "state": "half-configured"}}, "3.2.0", "drift"),
    ({}, "3.2.0", "drift"),
    (None, "3.2.0", "unknown"),
])
def test_doca_version_only_when_provisioning_installs_doca(rendered, packages, want, status):
    facts = converge(rendered["dgx-h100"])
    facts["drivers"]["ofed"]["packages"] = packages
    checks = by_key(_audit.audit_host(facts, desired(rdma_k8s_node_doca_ofed=True, doca_ofed_version=want),
                                      ["drivers"]))
    assert checks[("drivers.doca_version", "doca-ofed")]["status"] == status
    assert ("drivers.doca_version", "doca-ofed") not in by_key(_audit.audit_host(facts, desired(), ["drivers"]))


def _with_vf_admin(facts, pf_name, admin):
    """rdma_facts' VF admin attributes (ip link show <pf> vfinfo_list) written into a converged PF's VFs."""
    pf = next(d for d in facts["devices"] if d["name"] == pf_name)
    for vf in pf["vfs"]:
        vf.update({"link_state": "auto", "trust": False, "spoofchk": True, "vlan": 0, "qos": 0,
                   "mac": "00:00:00:00:00:00"})
        vf.update(admin.get(vf["index"], {}))
    return pf


def test_desired_vf_attrs_overlay_defaults_with_per_vf_entries():
    spec = {"num_vfs": 3, "vf_defaults": {"trust": True, "vlan": None},
            "vfs": [{"index": 1, "vlan": 100, "qos": 3}, {"index": 7, "trust": False}]}
    assert _sriov_judge.desired_vf_attrs(spec, 3) == {0: {"trust": True}, 1: {"trust": True, "vlan": 100, "qos": 3},
                                                      2: {"trust": True}}
    assert _sriov_judge.desired_vf_attrs({"num_vfs": 2}, 2) == {}


def test_desired_vf_attrs_are_converted_as_sriov_vfs_converts_them():
    spec = {"vf_defaults": {"trust": "yes", "spoofchk": "off", "link_state": "Auto"},
            "vfs": [{"index": 0, "vlan": "100", "qos": 3, "mac": "0A:00:00:00:00:01"}]}
    assert _sriov_judge.desired_vf_attrs(spec, 2) == {
        0: {"trust": True, "spoofchk": False, "link_state": "auto", "vlan": 100, "qos": 3, "mac": "0a:00:00:00:00:01"},
        1: {"trust": True, "spoofchk": False, "link_state": "auto"}}
    # a value sriov_vfs would refuse stays as given, so it can never look converged
    assert _sriov_judge.desired_vf_attrs({"vf_defaults": {"vlan": "ten"}}, 1) == {0: {"vlan": "ten"}}


def test_sriov_vf_attrs_ok_drift_absent_and_unknown(rendered):
    spec = {"netdev": "ens1f0np0", "num_vfs": 2, "vf_defaults": {"trust": True, "spoofchk": False},
            "vfs": [{"index": 1, "vlan": 100, "qos": 3, "mac": "02:AA:BB:CC:DD:01"}]}
    want = desired(sriov_pfs=[spec])
    facts = converge(rendered["roce-cx6dx"], sriov={"mlx5_0": 2})
    pf = _with_vf_admin(facts, "mlx5_0", {0: {"trust": True, "spoofchk": False},
                                          1: {"trust": True, "spoofchk": False, "vlan": 100, "qos": 3,
                                              "mac": "02:aa:bb:cc:dd:01"}})
    check = by_key(_audit.audit_host(facts, want, NODE_LAYERS))[("sriov.vf_attrs", "ens1f0np0")]
    assert check["status"] == "ok"
    assert check["desired"]["1"] == {"trust": True, "spoofchk": False, "vlan": 100, "qos": 3, "mac": "02:aa:bb:cc:dd:01"}

    pf["vfs"][1]["vlan"] = 0  # someone ran `ip link set ens1f0np0 vf 1 vlan 0`
    pf["vfs"][0]["trust"] = False
    check = by_key(_audit.audit_host(facts, want, NODE_LAYERS))[("sriov.vf_attrs", "ens1f0np0")]
    assert check["status"] == "drift" and "sriov role" in check["remedy"]
    assert check["detail"] == "VF 0: trust differ; VF 1: vlan differ"
    assert check["live"]["1"]["vlan"] == 0

    pf["vfs"] = pf["vfs"][:1]
    pf["vfs"][0]["trust"] = True
    check = by_key(_audit.audit_host(facts, want, NODE_LAYERS))[("sriov.vf_attrs", "ens1f0np0")]
    assert (check["status"], check["detail"]) == ("drift", "VF 1 absent")

    facts = converge(rendered["roce-cx6dx"], sriov={"mlx5_0": 2})
    _with_vf_admin(facts, "mlx5_0", {0: {"trust": None, "spoofchk": False},
                                     1: {"trust": True, "spoofchk": False, "vlan": 100, "qos": 3,
                                         "mac": "02:aa:bb:cc:dd:01"}})
    check = by_key(_audit.audit_host(facts, want, NODE_LAYERS))[("sriov.vf_attrs", "ens1f0np0")]
    assert check["status"] == "unknown" and "VF 0 trust" in check["detail"]


def test_no_vf_attrs_check_without_desired_attributes(rendered):
    facts = converge(rendered["dgx-h100"], sriov={"mlx5_0": 2})
    checks = _audit.audit_host(facts, desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 2}]), NODE_LAYERS)
    assert not [c for c in checks if c["id"] == "sriov.vf_attrs"]
    ib = desired(sriov_pfs=[{"rdma_device": "mlx5_0", "num_vfs": 2, "vf_defaults": {"link_state": "auto"}}])
    _with_vf_admin(facts, "mlx5_0", {1: {"link_state": "disable"}})
    check = by_key(_audit.audit_host(facts, ib, NODE_LAYERS))[("sriov.vf_attrs", "mlx5_0")]
    assert (check["status"], check["detail"]) == ("drift", "VF 1: link_state differ")


@pytest.mark.parametrize("layers", [None, ["kernel"]])
@pytest.mark.parametrize("section", [("sriov", "x"), ("sriov", {"pfs": "x"}), ("sriov", {"pfs": [{"vfs": 5}]}),
                                     ("sriov", {"pfs": [{"vfs": [{"node_guid": ["x"]}]}]}), ("qos", {"ports": "x"}),
                                     ("qos", {"ports": {"eth0": {"pfc": [[1]], "trust": ["x"]}}})])
def test_a_section_an_inventory_judgement_cannot_read_makes_that_host_unknown(rendered, section, layers):
    """Every room's inventory judgement reads every host's section, whatever the host's layers: one it cannot read
    makes that host unknown with the reason, the other hosts are judged as without it (the whole report used to fail
    with TypeError or AttributeError)."""
    good = converge(rendered["dgx-h100"])
    alone = _audit.audit({"good": {"facts": copy.deepcopy(good), "desired": None}})["hosts"]["good"]
    report = _audit.audit({"bad": {"facts": {"layers": dict([section])}, "desired": None, "layers": layers},
                           "good": {"facts": good, "desired": None}})
    bad = report["hosts"]["bad"]
    assert bad["status"] == "unknown" and bad["summary"] is None
    assert all(c["status"] == "unknown" and "another shape" in c["detail"] for c in bad["checks"]), bad["checks"]
    assert report["hosts"]["good"] == alone


@pytest.mark.parametrize("facts", [{"drivers": "x"}, {"persisted": [1]}, {"problems": "oops"}, {"devices": "x"},
                                   {"problems": [1]}, {"mtu": [], "devices": [{"netdevs": ["a"]}]}])
def test_facts_of_another_shape_make_that_host_unknown_not_the_report_fail(rendered, facts):
    """A host whose registered facts have another shape (an edited or stale facts cache) is unknown with the reason;
    the other hosts are judged (the whole report used to fail with AttributeError)."""
    good = converge(rendered["dgx-h100"])
    report = _audit.audit({"bad": {"facts": facts, "desired": None, "layers": NODE_LAYERS},
                           "good": {"facts": good, "desired": None, "layers": NODE_LAYERS}})
    bad = report["hosts"]["bad"]
    assert bad["status"] == "unknown" and bad["summary"] is None
    assert all(c["status"] == "unknown" and "another shape" in c["detail"] for c in bad["checks"]), bad["checks"]
    assert report["hosts"]["good"]["checks"] and report["hosts"]["good"]["summary"]
