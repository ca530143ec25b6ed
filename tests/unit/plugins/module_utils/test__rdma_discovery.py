"""rdma_facts discovery against the real sysfs captures (hwloc, ghw) and small kernel-shaped trees."""

import collections
import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _rdma_discovery as disc
from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from unit.plugins.realdata_trees import CaptureTrees
from unit.plugins.sysfs_tree import SysfsTree

CONTRACT_KEYS = {"devices", "gpus", "gpu_nic_affinity", "netns_mode", "kernel_cmdline", "modules", "sysctl", "mtu",
                 "rdma_cgroup", "problems", "numa_nodes", "cpu_vendor", "device_plugins"}
DEVICE_KEYS = {"name", "pci_address", "numa_node", "driver", "netdevs", "ports", "node_guid", "is_vf", "pf", "sriov",
               "vfs", "fw_ver", "board_id"}


@pytest.fixture(scope="module")
def captures(realdata, tmp_path_factory):
    trees = CaptureTrees(realdata, tmp_path_factory.mktemp("captures"))
    yield trees
    trees.cleanup()


def facts_of(root):
    return disc.gather(HostRoot(str(root)))


# -- real captures ---------------------------------------------------------------------------------------------------

@pytest.mark.realdata
@pytest.mark.parametrize("name", ["mlx4", "qib", "ve", "power9", "domain32", "ghw-gpu-vm", "ghw-xeon"])
def test_every_capture_gives_the_contract_shape(captures, name):
    facts = facts_of(captures.root(name))
    assert set(facts) == CONTRACT_KEYS
    for device in facts["devices"]:
        assert set(device) == DEVICE_KEYS
    assert set(facts["gpu_nic_affinity"]) == {gpu["pci_address"] for gpu in facts["gpus"]}
    for problem in facts["problems"]:
        assert set(problem) == {"path", "error"}


@pytest.mark.realdata
def test_mlx4_connectx3_on_numa1(captures):
    facts = facts_of(captures.root("mlx4"))
    by_name = {dev["name"]: dev for dev in facts["devices"]}
    # the nested mlx4_0/mlx4_0 directory of the capture is neither a device nor a port
    assert sorted(by_name) == ["mlx4_0", "scif0"]
    mlx4 = by_name["mlx4_0"]
    assert mlx4["pci_address"] == "0000:82:00.0"
    assert mlx4["numa_node"] == 1
    assert mlx4["driver"] == "mlx4_core"
    assert mlx4["node_guid"] == "0002:c903:00f9:bfa0"
    assert mlx4["fw_ver"] == "2.11.500"
    assert mlx4["netdevs"] == ["ib0"]
    assert mlx4["ports"] == [{"port": 1, "link_layer": "InfiniBand", "state": "ACTIVE", "phys_state": "LinkUp",
                              "rate": "56 Gb/sec (4X FDR)", "port_guid": "0002:c903:00f9:bfa1", "netdev": None}]
    assert (mlx4["is_vf"], mlx4["pf"], mlx4["sriov"], mlx4["vfs"]) == (False, None, None, [])
    assert facts["mtu"] == {"ib0": 2044}
    assert set(facts["sysctl"]) == {"all", "default", "ib0"}
    # scif0 (Xeon Phi SCIF) is not on PCI, and its link dangles in the capture: reported, not hidden
    scif = by_name["scif0"]
    assert scif["pci_address"] is None and scif["ports"] == [] and scif["node_guid"] is None
    assert {"path": "/sys/class/infiniband/scif0",
            "error": "dangling link: the RDMA device's sysfs directory does not exist"} in facts["problems"]
    # the node lists end in a NUL byte in this capture; they still parse
    assert facts["numa_nodes"] == {"online": [0, 1], "has_cpu": [0, 1]}


@pytest.mark.realdata
def test_qlogic_qib_and_unknown_numa(captures):
    root = captures.root("qib")
    facts = facts_of(root)
    [qib] = facts["devices"]
    assert (qib["name"], qib["pci_address"], qib["driver"]) == ("qib0", "0000:43:00.0", "ib_qib")
    # The capture's qib numa_node file holds "2" (every other PCI function holds -1; the hwloc README's
    # "numa_node=-1 everywhere" is true for all but this one).
    assert qib["numa_node"] == 2
    assert qib["node_guid"] == "0011:7500:0077:cfc8"
    assert qib["ports"][0]["state"] == "ACTIVE"
    assert qib["fw_ver"] is None  # qib has no fw_ver attribute: absent, not a problem
    assert facts["problems"] == []
    # -1 everywhere else is "unknown", never node 0
    host = HostRoot(root)
    finder = disc._Discovery(host)
    for bdf in ("0000:02:00.0", "0000:00:05.0", "0000:40:03.0"):
        pci = finder.pci_at(bdf, finder.reader.follow("/sys/bus/pci/devices/" + bdf))
        assert host.read_attr(pci.path + "/numa_node") == "-1"
        assert pci.numa_node is None
    assert facts["numa_nodes"]["online"] == [0, 1, 2, 3]


@pytest.mark.realdata
def test_vector_engines_and_connectx4_behind_plx_switches(captures):
    root = captures.root("ve")
    facts = facts_of(root)
    assert facts["devices"] == [] and facts["gpus"] == [] and facts["gpu_nic_affinity"] == {}  # no /sys/class/infiniband
    assert facts["kernel_cmdline"]["params"]["console"] == ["tty0", "ttyS0,115200n8"]
    assert facts["kernel_cmdline"]["params"]["ro"] is True
    finder = disc._Discovery(HostRoot(root))

    def pci(bdf):
        return finder.pci_at(bdf, finder.reader.follow("/sys/bus/pci/devices/" + bdf))

    # the "GPU-like" accelerators are NEC Vector Engines (class 0x0b4000): classify the real sysfs positions
    ve_1b, cx4_1a, cx4_3e, ve_3d = pci("0000:1b:00.0"), pci("0000:1a:00.0"), pci("0000:3e:00.0"), pci("0000:3d:00.0")
    assert ve_1b.position["bridges"] == ["0000:17:00.0", "0000:18:00.0", "0000:19:08.0"]
    assert [p.numa_node for p in (ve_1b, cx4_1a, cx4_3e, ve_3d)] == [0, 0, 0, 0]
    assert topo.classify(ve_1b.position, cx4_1a.position, ve_1b.numa_node, cx4_1a.numa_node) == "PIX"
    assert topo.classify(ve_3d.position, cx4_3e.position, ve_3d.numa_node, cx4_3e.numa_node) == "PIX"
    assert topo.classify(ve_1b.position, cx4_3e.position, ve_1b.numa_node, cx4_3e.numa_node) == "NODE"
    assert cx4_1a.driver == "mlx5_core"
    # the Intel X722 PF: SR-IOV capable, no VFs
    assert pci("0000:60:00.0").sriov() == {"totalvfs": 64, "numvfs": 0}


@pytest.mark.realdata
def test_power9_gpu_dirs_with_only_class_and_local_cpus(captures):
    facts = facts_of(captures.root("power9"))
    # the six V100 directories have no vendor file: they cannot be confirmed as NVIDIA and are not guessed
    assert facts["gpus"] == [] and facts["devices"] == []
    # GPU-memory NUMA nodes 250-255 are online but have no CPUs
    assert facts["numa_nodes"] == {"online": [0, 8, 250, 251, 252, 253, 254, 255], "has_cpu": [0, 8]}
    assert facts["problems"] == []


@pytest.mark.realdata
def test_five_hex_digit_pci_domain(captures):
    root = captures.root("domain32")
    facts = facts_of(root)
    assert facts["problems"] == []
    finder = disc._Discovery(HostRoot(root))
    entries = HostRoot(root).listdir("/sys/bus/pci/devices")
    assert "10000:00:04.0" in entries
    position = topo.pci_path(finder.reader.follow("/sys/bus/pci/devices/10000:00:04.0"))
    assert position == {"host_bridge": "pci10000:00", "bdf": "10000:00:04.0", "bridges": []}
    assert topo.normalize_bdf("10000:00:04.0") == "10000:00:04.0"


@pytest.mark.realdata
def test_gpu_only_vm_with_unknown_numa(captures):
    facts = facts_of(captures.root("ghw-gpu-vm"))
    assert facts["gpus"] == [{"pci_address": "0000:06:00.0", "numa_node": None, "vendor": "0x10de", "device": "0x15f8",
                              "class": "0x030200", "driver": "nvidia", "local_cpulist": "0-7"}]
    assert facts["devices"] == []
    assert facts["gpu_nic_affinity"] == {"0000:06:00.0": {}}


@pytest.mark.realdata
def test_ghw_xeon_without_rdma_or_gpu(captures):
    facts = facts_of(captures.root("ghw-xeon"))
    assert facts["gpus"] == [] and facts["devices"] == [] and facts["problems"] == []
    assert facts["numa_nodes"]["online"] == [0, 1]


# -- synthetic kernel-shaped trees ------------------------------------------------------------------------------------

GPU_SWITCH = ["0000:17:00.0", "0000:18:00.0", "0000:19:00.0"]


@pytest.fixture
def node(tmp_path):
    """One GPU and one IB PF behind the same switch (NUMA 0) with 3 VFs, one RoCE NIC on NUMA 1."""
    tree = SysfsTree(tmp_path)
    tree.pci(GPU_SWITCH + ["0000:1b:00.0"], host_bridge="pci0000:17", vendor="0x10de", device="0x2330",
             klass="0x030200", driver="nvidia", local_cpulist="0-55,112-167")
    pf = tree.pci(["0000:17:00.0", "0000:18:00.0", "0000:19:04.0", "0000:1a:00.0"], host_bridge="pci0000:17",
                  driver="mlx5_core")
    tree.ibdev(pf, "mlx5_0", node_guid="a088:c203:0013:2a7c", gid0="fe80:0000:0000:0000:a088:c203:0013:2a7c")
    tree.netdev(pf, "ibp26s0", mtu=4092, sysctl={"arp_ignore": 1, "arp_announce": 2, "rp_filter": 0})
    vf0, vf1, vf2 = tree.sriov(pf, ["0000:1a:00.1", "0000:1a:00.2", "0000:1a:00.3"], totalvfs=16)
    tree.ibdev(vf0, "mlx5_2")  # fresh VF: all-zero GUIDs
    tree.netdev(vf0, "ibp26s0v0", mtu=4092)
    tree.ibdev(vf1, "mlx5_3", node_guid="0200:0000:0001:0001", gid0="fe80:0000:0000:0000:0200:0000:0001:0001")
    os.unlink(str(tree.local(vf2 + "/driver")))  # unbound VF: no RDMA device
    roce = tree.pci(["0000:c0:01.0", "0000:c1:00.0"], host_bridge="pci0000:c0", device="0x101d", klass="0x020000",
                    numa_node="1", driver="mlx5_core")
    tree.ibdev(roce, "mlx5_1", node_guid="1070:fd03:0001:0002", link_layer="Ethernet",
               gid0="fe80:0000:0000:0000:1270:fdff:fe01:0002")
    tree.netdev(roce, "ens1f0np0", mtu=9000)
    tree.file("/sys/devices/system/node/online", "0-1")
    tree.file("/sys/devices/system/node/has_cpu", "0-1")
    tree.file("/sys/module/ib_core/parameters/netns_mode", "N")
    tree.file("/proc/cmdline", 'BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt ib_core.netns_mode=0 '
                               'dyndbg="file drivers/net/* +p" "quoted arg=x y" console=tty0 console=ttyS0 -- single')
    tree.file("/proc/modules", "mlx5_ib 483328 0 - Live 0x0000000000000000\n"
                               "ib_core 462848 1 mlx5_ib, Live 0x0000000000000000\n"
                               "mlx5_core 2424832 1 mlx5_ib, Live 0x0000000000000000\n")
    for name, values in (("all", (0, 0, 2)), ("default", (0, 0, 1))):
        for key, value in zip(disc.SYSCTL_KEYS, values):
            tree.file("/proc/sys/net/ipv4/conf/%s/%s" % (name, key), str(value))
    return tree


def test_synthetic_node_devices_vfs_and_guids(node):
    facts = facts_of(node.root)
    assert facts["problems"] == []
    names = [dev["name"] for dev in facts["devices"]]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    pf = facts["devices"][0]
    assert pf["sriov"] == {"totalvfs": 16, "numvfs": 3}
    assert (pf["is_vf"], pf["pf"], pf["numa_node"], pf["netdevs"]) == (False, None, 0, ["ibp26s0"])
    assert pf["ports"][0]["port_guid"] == "a088:c203:0013:2a7c"
    # gathered without commands: the VF admin attributes (rtnetlink only) are not read
    admin_keys = ("link_state", "trust", "spoofchk", "vlan", "qos", "mac")
    assert all(vf.pop(key) is None for vf in pf["vfs"] for key in admin_keys)
    assert pf["vfs"] == [
        {"index": 0, "pci_address": "0000:1a:00.1", "driver": "mlx5_core", "name": "mlx5_2",
         "node_guid": "0000:0000:0000:0000", "port_guid": "0000:0000:0000:0000"},
        {"index": 1, "pci_address": "0000:1a:00.2", "driver": "mlx5_core", "name": "mlx5_3",
         "node_guid": "0200:0000:0001:0001", "port_guid": "0200:0000:0001:0001"},
        {"index": 2, "pci_address": "0000:1a:00.3", "driver": None, "name": None, "node_guid": None, "port_guid": None},
    ]
    vf_dev = facts["devices"][2]
    assert (vf_dev["is_vf"], vf_dev["pf"], vf_dev["sriov"], vf_dev["vfs"]) == (True, "0000:1a:00.0", None, [])
    assert vf_dev["node_guid"] == "0000:0000:0000:0000"
    roce = facts["devices"][1]
    assert roce["ports"][0]["link_layer"] == "Ethernet" and roce["ports"][0]["port_guid"] is None
    assert roce["numa_node"] == 1


def test_synthetic_node_affinity_and_gpus(node):
    facts = facts_of(node.root)
    assert facts["gpus"] == [{"pci_address": "0000:1b:00.0", "numa_node": 0, "vendor": "0x10de", "device": "0x2330",
                              "class": "0x030200", "driver": "nvidia", "local_cpulist": "0-55,112-167"}]
    assert facts["gpu_nic_affinity"] == {"0000:1b:00.0": {"mlx5_0": "PIX", "mlx5_1": "SYS", "mlx5_2": "PIX",
                                                          "mlx5_3": "PIX"}}


def test_synthetic_node_settings(node):
    facts = facts_of(node.root)
    assert facts["netns_mode"] == "exclusive"
    cmdline = facts["kernel_cmdline"]
    assert cmdline["args"] == ["BOOT_IMAGE=/vmlinuz", "ro", "intel_iommu=on", "iommu=pt", "ib_core.netns_mode=0",
                               "dyndbg=file drivers/net/* +p", "quoted arg=x y", "console=tty0", "console=ttyS0",
                               "--", "single"]
    assert cmdline["params"] == {"BOOT_IMAGE": "/vmlinuz", "ro": True, "intel_iommu": "on", "iommu": "pt",
                                 "ib_core.netns_mode": "0", "dyndbg": "file drivers/net/* +p", "quoted arg": "x y",
                                 "console": ["tty0", "ttyS0"]}
    assert facts["modules"] == ["ib_core", "mlx5_core", "mlx5_ib"]
    assert facts["mtu"] == {"ens1f0np0": 9000, "ibp26s0": 4092, "ibp26s0v0": 4092}
    assert facts["sysctl"]["all"] == {"arp_ignore": 0, "arp_announce": 0, "rp_filter": 2}
    assert facts["sysctl"]["default"] == {"arp_ignore": 0, "arp_announce": 0, "rp_filter": 1}
    assert facts["sysctl"]["ibp26s0"] == {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 0}
    assert facts["sysctl"]["ens1f0np0"] == {"arp_ignore": None, "arp_announce": None, "rp_filter": None}
    assert facts["rdma_cgroup"] == {}


def test_every_file_is_read_at_most_once_and_devices_is_not_walked(node, monkeypatch):
    reads = collections.Counter()
    lists = collections.Counter()
    real_read, real_list = HostRoot.read_text, HostRoot.listdir

    def counting_read(self, path, default=None):
        reads[path] += 1
        return real_read(self, path, default)

    def counting_list(self, path):
        lists[path] += 1
        return real_list(self, path)

    monkeypatch.setattr(HostRoot, "read_text", counting_read)
    monkeypatch.setattr(HostRoot, "listdir", counting_list)
    facts_of(node.root)
    assert reads and max(reads.values()) == 1, [p for p, n in reads.items() if n > 1]
    assert max(lists.values()) == 1, [p for p, n in lists.items() if n > 1]
    assert not [p for p in lists if p in ("/sys", "/sys/devices") or p.startswith("/sys/devices/pci0000:17/0000:17")
                and p.count("/") < 6]


@pytest.mark.parametrize("value, mode", [("Y", "shared"), ("N", "exclusive"), ("1", "shared"), ("0", "exclusive")])
def test_netns_mode_values(tmp_path, value, mode):
    SysfsTree(tmp_path).file("/sys/module/ib_core/parameters/netns_mode", value)
    assert facts_of(tmp_path)["netns_mode"] == mode


def test_netns_mode_absent_and_garbage(tmp_path):
    assert facts_of(tmp_path)["netns_mode"] is None
    SysfsTree(tmp_path).file("/sys/module/ib_core/parameters/netns_mode", "maybe")
    facts = facts_of(tmp_path)
    assert facts["netns_mode"] is None
    assert facts["problems"] == [{"path": "/sys/module/ib_core/parameters/netns_mode", "error": "unexpected value 'maybe'"}]


def test_empty_root_gives_empty_facts(tmp_path):
    facts = facts_of(tmp_path)
    assert facts == {"devices": [], "gpus": [], "gpu_nic_affinity": {}, "numa_nodes": {"online": None, "has_cpu": None},
                     "netns_mode": None, "kernel_cmdline": None, "modules": None,
                     "sysctl": {"all": dict.fromkeys(disc.SYSCTL_KEYS), "default": dict.fromkeys(disc.SYSCTL_KEYS)},
                     "mtu": {}, "rdma_cgroup": {}, "problems": [], "cpu_vendor": None, "device_plugins": []}


def _two_host_bridges(tmp_path, gpu_numa, nic_numa, nodes):
    tree = SysfsTree(tmp_path)
    tree.pci(["0000:00:01.0", "0000:01:00.0"], vendor="0x10de", klass="0x030000", numa_node=gpu_numa, driver="nvidia")
    nic = tree.pci(["0000:80:01.0", "0000:81:00.0"], host_bridge="pci0000:80", numa_node=nic_numa, driver="mlx5_core")
    tree.ibdev(nic, "mlx5_0")
    if nodes is not None:
        tree.file("/sys/devices/system/node/online", nodes)
        tree.file("/sys/devices/system/node/has_cpu", nodes)
    return facts_of(tmp_path)


@pytest.mark.parametrize("gpu_numa, nic_numa, nodes, expected, gpu_node", [
    ("0", "0", "0-1", "NODE", 0),
    ("0", "1", "0-1", "SYS", 0),
    ("-1", "1", "0-1", None, None),  # unknown on a 2-node machine: unknown, not node 0
    ("-1", "-1", "0", "NODE", None),  # single NUMA node: nothing to cross
    (None, "0", "0-1", None, None),  # numa_node file missing
    ("-1", "-1", None, None, None),  # node count unknown
])
def test_unknown_numa_is_never_node_zero(tmp_path, gpu_numa, nic_numa, nodes, expected, gpu_node):
    facts = _two_host_bridges(tmp_path, gpu_numa, nic_numa, nodes)
    assert facts["gpus"][0]["numa_node"] == gpu_node
    assert facts["gpu_nic_affinity"] == {"0000:01:00.0": {"mlx5_0": expected}}


def test_unparsable_and_unreadable_attributes_become_problems(tmp_path):
    tree = SysfsTree(tmp_path)
    nic = tree.pci(["0000:80:01.0", "0000:81:00.0"], host_bridge="pci0000:80", numa_node="banana", driver="mlx5_core")
    tree.ibdev(nic, "mlx5_0")
    # a symlink loop: the file exists as a directory entry but cannot be opened (ELOOP) -- EACCES needs non-root
    os.unlink(str(tree.local(nic + "/infiniband/mlx5_0/node_guid")))
    os.symlink("node_guid", str(tree.local(nic + "/infiniband/mlx5_0/node_guid")))
    tree.file("/sys/devices/system/node/online", "0-x")
    facts = facts_of(tmp_path)
    [dev] = facts["devices"]
    assert dev["numa_node"] is None and dev["node_guid"] is None
    paths = {p["path"]: p["error"] for p in facts["problems"]}
    assert paths[nic + "/numa_node"] == "not an integer: 'banana'"
    assert "cannot read" in paths[nic + "/infiniband/mlx5_0/node_guid"]
    assert paths["/sys/devices/system/node/online"] == "not a node list: '0-x'"


def test_gpu_local_cpus_mask_and_non_gpu_nvidia_functions(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.pci(["0000:00:01.0", "0000:01:00.0"], vendor="0x10de", klass="0x030200", extra={"local_cpus": "00ff,00000000"})
    tree.pci(["0000:00:01.0", "0000:01:00.1"], vendor="0x10de", klass="0x040300")  # the GPU's HDMI audio function
    tree.pci(["0000:00:02.0", "0000:02:00.0"], vendor="0x10de", klass="0x068000")  # NVSwitch
    tree.pci(["0000:00:03.0", "0000:03:00.0"], vendor="0x1002", klass="0x030000")  # not NVIDIA
    facts = facts_of(tmp_path)
    assert [(g["pci_address"], g["local_cpulist"]) for g in facts["gpus"]] == [("0000:01:00.0", "32-39")]


def test_rdma_cgroup_v2_walks_only_where_rdma_is_enabled(tmp_path):
    tree = SysfsTree(tmp_path)
    cg = "/sys/fs/cgroup"
    tree.file(cg + "/cgroup.controllers", "cpu io memory pids rdma")
    tree.file(cg + "/cgroup.subtree_control", "cpu memory pids rdma")
    tree.file(cg + "/kubepods.slice/rdma.max", "mlx5_0 hca_handle=2 hca_object=2000\nmlx5_1 hca_handle=max hca_object=max")
    tree.file(cg + "/kubepods.slice/cgroup.subtree_control", "cpu memory")
    tree.file(cg + "/kubepods.slice/pod1/rdma.max", "mlx5_0 hca_handle=1 hca_object=max")  # stale: parent disabled rdma
    tree.file(cg + "/system.slice/rdma.max", "")
    tree.file(cg + "/system.slice/cgroup.subtree_control", "rdma")
    tree.file(cg + "/system.slice/a.service/rdma.max", "mlx5_0 hca_handle=max hca_object=10")
    tree.file(cg + "/broken.slice/rdma.max", "mlx5_0 hca_handle=lots")
    facts = facts_of(tmp_path)
    assert facts["rdma_cgroup"] == {
        "/kubepods.slice": {"mlx5_0": {"hca_handle": 2, "hca_object": 2000},
                            "mlx5_1": {"hca_handle": "max", "hca_object": "max"}},
        "/system.slice": {},
        "/system.slice/a.service": {"mlx5_0": {"hca_handle": "max", "hca_object": 10}},
    }
    assert facts["problems"] == [{"path": cg + "/broken.slice/rdma.max", "error": "unexpected rdma.max value 'hca_handle=lots'"}]


def test_rdma_cgroup_v2_controller_off_reads_nothing_below(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.file("/sys/fs/cgroup/cgroup.controllers", "cpu io memory pids rdma")
    tree.file("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory")
    tree.file("/sys/fs/cgroup/kubepods.slice/rdma.max", "mlx5_0 hca_handle=2 hca_object=2000")
    assert facts_of(tmp_path)["rdma_cgroup"] == {}


def test_rdma_cgroup_v1_hierarchy(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.file("/sys/fs/cgroup/rdma/cgroup.procs", "1")
    tree.file("/sys/fs/cgroup/rdma/tasks", "1")
    tree.file("/sys/fs/cgroup/rdma/kubepods/rdma.max", "mlx5_0 hca_handle=4 hca_object=max")
    tree.file("/sys/fs/cgroup/rdma/kubepods/pod1/rdma.max", "mlx5_0 hca_handle=max hca_object=max")
    assert facts_of(tmp_path)["rdma_cgroup"] == {
        "/kubepods": {"mlx5_0": {"hca_handle": 4, "hca_object": "max"}},
        "/kubepods/pod1": {"mlx5_0": {"hca_handle": "max", "hca_object": "max"}},
    }


@pytest.mark.parametrize("gid, guid", [
    ("fe80:0000:0000:0000:0002:c903:00f9:bfa1", "0002:c903:00f9:bfa1"),
    ("FE80:0000:0000:0000:A088:C203:0013:2A7C", "a088:c203:0013:2a7c"),
    ("fe80:0000:0000:0000:0000:0000:0000:0000", "0000:0000:0000:0000"),
    ("fe80::1", None),
    (None, None),
])
def test_port_guid_from_gid(gid, guid):
    assert disc.port_guid_from_gid(gid) == guid


# -- node simulator archetypes (tests/hwsim) ---------------------------------------------------------------------------

try:
    import hwsim
    from hwsim.renderer import render as _render  # noqa: F401 - probe: the power-on renderer exists

    ARCHETYPES = hwsim.archetypes()
except ImportError:  # pragma: no cover - the simulator is developed in parallel
    hwsim = None
    ARCHETYPES = []

needs_hwsim = pytest.mark.skipif(hwsim is None, reason="tests/hwsim (node simulator) with render() is not available")
DGX_RAIL_MAP = "topo/derived-from-issue-excerpts/dgx-h100-user-guide_gpu-nic-rail-map.json"


@pytest.fixture(scope="module")
def archetype_root(tmp_path_factory):
    rendered = {}

    def root(name):
        if name not in rendered:
            rendered[name] = str(hwsim.render(name, tmp_path_factory.mktemp(name)))
        return rendered[name]

    return root


@needs_hwsim
@pytest.mark.parametrize("name", ARCHETYPES)
def test_every_archetype(archetype_root, name):
    root = archetype_root(name)
    facts = facts_of(root)
    assert set(facts) == CONTRACT_KEYS
    assert facts["problems"] == []
    spec = hwsim.load(name)
    # every RDMA device the simulator made is found, with its PCI function and NUMA node as the tree says
    host = HostRoot(root)
    expected = sorted(host.listdir("/sys/class/infiniband"), key=topo.natural_key)
    assert [dev["name"] for dev in facts["devices"]] == expected
    for dev in facts["devices"]:
        assert dev["pci_address"] == host.link_name("/sys/class/infiniband/%s/device" % dev["name"])
        assert dev["numa_node"] == int(host.read_attr("/sys/bus/pci/devices/%s/numa_node" % dev["pci_address"]))
        assert dev["ports"] and all(port["state"] for port in dev["ports"])
        for netdev in dev["netdevs"]:
            assert facts["mtu"][netdev] == int(host.read_attr("/sys/class/net/%s/mtu" % netdev))
    assert facts["kernel_cmdline"]["raw"] == spec.cmdline
    assert facts["numa_nodes"]["online"] == sorted(spec.numa)
    assert set(spec.modules_loaded) <= set(facts["modules"])
    for gpu in facts["gpus"]:
        assert set(facts["gpu_nic_affinity"][gpu["pci_address"]]) == {d["name"] for d in facts["devices"]}
        assert all(value in topo.LEVELS for value in facts["gpu_nic_affinity"][gpu["pci_address"]].values())


@needs_hwsim
@pytest.mark.realdata
@pytest.mark.parametrize("name", [n for n in ARCHETYPES if n in ("dell-xe9680-12nic", "a100-10nic")])
def test_matrix_archetypes_reproduce_the_real_nvidia_smi_matrix(realdata, archetype_root, name):
    from unit.plugins.topo_matrix import gpu_nic_cells, parse_topo

    source = hwsim.load(name).source
    real = parse_topo((realdata / "topo" / "full-matrices" / source).read_text())
    facts = facts_of(archetype_root(name))
    gpus = [gpu["pci_address"] for gpu in facts["gpus"]]  # PCI order = nvidia-smi's GPU index order
    assert len(gpus) == len(real["gpus"])
    computed = {}
    for index, address in enumerate(gpus):
        for nic, value in facts["gpu_nic_affinity"][address].items():
            computed[("GPU%d" % index, nic)] = value
    expected = gpu_nic_cells(real)
    assert {key[1] for key in expected} <= {dev["name"] for dev in facts["devices"]}
    assert {key: computed[key] for key in expected} == expected


@needs_hwsim
@pytest.mark.realdata
def test_dgx_h100_rails_are_pix_to_their_gpu(realdata, archetype_root):
    import json

    rail_map = json.loads((realdata / DGX_RAIL_MAP).read_text())
    facts = facts_of(archetype_root("dgx-h100"))
    gpus = [gpu["pci_address"] for gpu in facts["gpus"]]
    by_name = {dev["name"]: dev for dev in facts["devices"]}
    for row_data in rail_map["rows"]:
        cpu, gpu_index, netdev, rdma = row_data[2:]
        row = facts["gpu_nic_affinity"][gpus[gpu_index]]
        assert row[rdma] == "PIX"
        assert [name for name, value in row.items() if value == "PIX"] == [rdma]
        assert by_name[rdma]["netdevs"] == [netdev]
        assert by_name[rdma]["numa_node"] == cpu == facts["gpus"][gpu_index]["numa_node"]
        assert by_name[rdma]["ports"][0]["link_layer"] == "InfiniBand"
        assert by_name[rdma]["sriov"] == {"totalvfs": 16, "numvfs": 0}


@needs_hwsim
def test_numa_split_and_roce_and_no_rdma(archetype_root):
    split = facts_of(archetype_root("numa-split"))
    [gpu] = split["gpus"]
    assert set(split["gpu_nic_affinity"][gpu["pci_address"]].values()) == {"SYS"}
    roce = facts_of(archetype_root("roce-cx6dx"))
    assert [p["link_layer"] for d in roce["devices"] for p in d["ports"]] == ["Ethernet", "Ethernet"]
    assert all(p["port_guid"] is None for d in roce["devices"] for p in d["ports"])
    assert [d["netdevs"] for d in roce["devices"]] == [["ens1f0np0"], ["ens1f1np1"]]
    assert {v for row in roce["gpu_nic_affinity"].values() for v in row.values()} == {"PHB"}
    plain = facts_of(archetype_root("no-rdma"))
    assert plain["devices"] == [] and plain["gpus"] == [] and plain["netns_mode"] is None


@needs_hwsim
def test_dgx_h100_with_vfs_zero_guids(tmp_path):
    spec = hwsim.load("dgx-h100")
    node = hwsim.Node(spec)
    pf = node.readlink("/sys/class/infiniband/mlx5_0/device").rsplit("/", 1)[-1]
    node.write("/sys/bus/pci/devices/%s/sriov_numvfs" % pf, "4")
    node.advance()
    hwsim.render(spec, tmp_path, node=node)
    facts = facts_of(tmp_path)
    assert facts["problems"] == []
    mlx5_0 = [d for d in facts["devices"] if d["name"] == "mlx5_0"][0]
    assert mlx5_0["sriov"] == {"totalvfs": 16, "numvfs": 4}
    assert [vf["index"] for vf in mlx5_0["vfs"]] == [0, 1, 2, 3]
    for vf in mlx5_0["vfs"]:
        assert vf["name"] and vf["driver"] == "mlx5_core"
        assert vf["node_guid"] == vf["port_guid"] == disc.ZERO_GUID  # reported, not hidden
        vf_dev = [d for d in facts["devices"] if d["name"] == vf["name"]][0]
        assert (vf_dev["is_vf"], vf_dev["pf"], vf_dev["pci_address"]) == (True, pf, vf["pci_address"])
    gpu0 = facts["gpus"][0]["pci_address"]
    assert all(facts["gpu_nic_affinity"][gpu0][vf["name"]] == "PIX" for vf in mlx5_0["vfs"])


@needs_hwsim
def test_dgx_h100_rdma_cgroup(archetype_root):
    root = archetype_root("dgx-h100")
    limits = facts_of(root)["rdma_cgroup"]
    assert limits["/kubepods.slice"]["mlx5_0"] == {"hca_handle": "max", "hca_object": "max"}


def test_physfn_and_virtfn_as_regular_files_are_problems(tmp_path):
    """The negative cases sriov-network-device-plugin tests: ``physfn``/``virtfn0`` as files with junk in them."""
    tree = SysfsTree(tmp_path)
    pf = tree.pci(["0000:00:01.0", "0000:01:00.0"], driver="mlx5_core", extra={"virtfn0": "junk"})
    tree.ibdev(pf, "mlx5_0")
    vf = tree.pci(["0000:00:02.0", "0000:02:00.0"], driver="mlx5_core", extra={"physfn": "invalid content"})
    tree.ibdev(vf, "mlx5_1")
    facts = facts_of(tmp_path)
    assert [(d["name"], d["is_vf"], d["pf"], d["vfs"]) for d in facts["devices"]] == [
        ("mlx5_0", False, None, []), ("mlx5_1", False, None, [])]
    assert facts["problems"] == [
        {"path": vf + "/physfn", "error": "physfn entry is not a link to a PCI function"},
        {"path": pf + "/virtfn0", "error": "virtfn entry is not a link to a PCI function"},
    ]


def test_soft_roce_device_without_pci_takes_its_netdev_from_the_gid_table(tmp_path):
    """rxe/siw devices live under /sys/devices/virtual: their netdev is the one behind GID 0 of the port."""
    ib = tmp_path / "sys/devices/virtual/infiniband/rxe0"
    (ib / "ports/1/gid_attrs/ndevs").mkdir(parents=True)
    (ib / "ports/1/link_layer").write_text("Ethernet\n")
    (ib / "ports/1/state").write_text("4: ACTIVE\n")
    (ib / "ports/1/gid_attrs/ndevs/0").write_text("eth0\n")
    (ib / "node_guid").write_text("5054:00ff:fe12:3456\n")
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    os.symlink("../../devices/virtual/infiniband/rxe0", tmp_path / "sys/class/infiniband/rxe0")
    rxe = facts_of(tmp_path)["devices"][0]
    assert (rxe["name"], rxe["pci_address"], rxe["netdevs"]) == ("rxe0", None, ["eth0"])
    assert rxe["ports"][0]["netdev"] == "eth0" and rxe["ports"][0]["port_guid"] is None


def test_cpu_vendor_and_device_plugins(tmp_path):
    tree = SysfsTree(tmp_path)
    tree.file("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\n"
                               "processor\t: 1\nvendor_id\t: AuthenticAMD\n")
    for pid, comm in (("1", "systemd"), ("4242", "k8s-rdma-shared"), ("4343", "sriovdp"), ("99", "kubelet")):
        tree.file("/proc/%s/comm" % pid, comm + "\n")
    tree.file("/proc/self/comm", "python3\n")
    facts = facts_of(tmp_path)
    assert facts["cpu_vendor"] == "AuthenticAMD"
    assert facts["device_plugins"] == ["k8s-rdma-shared", "sriovdp"]


def test_no_cpuinfo_and_no_plugins(tmp_path):
    SysfsTree(tmp_path).file("/proc/cpuinfo", "processor\t: 0\nmodel name\t: POWER9\n")
    facts = facts_of(tmp_path)
    assert facts["cpu_vendor"] is None and facts["device_plugins"] == []


# -- found by the fuzz suite (tests/unit/fuzz/test_rdma_discovery.py) ----------------------------------------------
class _TextOnlyIp:  # pylint: disable=too-few-public-methods
    """``ip`` without JSON output whose text has a VF line the parser cannot read."""

    @staticmethod
    def run_kernel(argv):
        if "-j" in argv:
            return 1, "", "Option \"-j\" is unknown"
        return 0, "    vf 0     MAC 02:00:00:00:00:01, NODE_GUID zz\n", ""


def test_vf_admin_text_it_cannot_read_is_a_problem(tmp_path):
    """parse_ip_vfs_text's error (was a ValueError) is a problem of the gather, not a failure of rdma_facts."""
    discovery = disc._Discovery(HostRoot(str(tmp_path)), _TextOnlyIp())  # pylint: disable=protected-access
    assert discovery.vf_admin({"netdevs": ["ib0"]}) == {}
    assert discovery.reader.problems[0]["path"] == "ip link show dev ib0"


def test_a_port_directory_int_refuses_keeps_its_name(tmp_path):
    """ports/² passed str.isdigit() and int('²') raised ValueError."""
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/\u00b2"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    discovery = disc._Discovery(HostRoot(str(tmp_path)))  # pylint: disable=protected-access
    assert [p["port"] for p in discovery._ports("/sys/class/infiniband/mlx5_0")] == ["\u00b2"]  # pylint: disable=protected-access
