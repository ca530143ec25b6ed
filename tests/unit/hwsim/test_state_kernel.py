"""Other kernel rules of the state model: permissions, RDMA netns mode, modules, power-on reset, faults, sysctls.

Sources: kernfs_fop_open() (EACCES on write to attributes without store), drivers/infiniband/core/device.c
rdma_compatdev_set() and module_param netns_mode 0444, kmod config order (modprobe.d then kernel cmdline),
drivers/net/... carrier_show() EINVAL when down, drivers/infiniband/core/sysfs.c print_ndev() EINVAL without
ndev, kernel/cgroup/rdma.c, Documentation/networking/ip-sysctl.rst (conf/default seeds new interfaces).
"""

import errno
import threading
import time

import pytest
from hwsim_helpers import errno_of

import hwsim

NETNS_PARAM = "sys/module/ib_core/parameters/netns_mode"


@pytest.mark.parametrize("path", [
    "sys/bus/pci/devices/0000:18:00.0/vendor",
    "sys/bus/pci/devices/0000:18:00.0/device",
    "sys/bus/pci/devices/0000:18:00.0/class",
    "sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs",
    "sys/class/infiniband/mlx5_0/node_guid",
    NETNS_PARAM,
    "proc/cmdline",
    "proc/modules",
])
def test_read_only_attributes_refuse_writes_with_eacces(make_node, path):
    node = make_node()
    assert errno_of(node.write, path, "1") == errno.EACCES


def test_write_only_attribute_refuses_reads_with_eacces(make_node):
    assert errno_of(make_node().read, "sys/bus/pci/drivers/mlx5_core/bind") == errno.EACCES


def test_missing_paths_are_enoent(make_node):
    node = make_node()
    assert errno_of(node.read, "sys/class/net/nosuch/mtu") == errno.ENOENT
    assert errno_of(node.write, "sys/bus/pci/devices/0000:18:00.7/sriov_numvfs", "1") == errno.ENOENT


def test_netns_mode_param_reads_y_and_switch_rules(make_node):
    node = make_node()
    assert node.read(NETNS_PARAM) == "Y\n"
    node.set_netns_mode(True)
    node.netns_add("cni-1234")
    assert errno_of(node.set_netns_mode, False) == errno.EBUSY
    node.set_netns_mode(True)
    node.netns_del("cni-1234")
    node.set_netns_mode(False)
    assert node.read(NETNS_PARAM) == "N\n"


def test_netns_add_twice_and_del_unknown(make_node):
    node = make_node()
    node.netns_add("a")
    assert errno_of(node.netns_add, "a") == errno.EEXIST
    assert errno_of(node.netns_del, "b") == errno.ENOENT


def test_no_rdma_node_has_no_ib_core(make_node):
    node = make_node("no-rdma")
    assert errno_of(node.read, NETNS_PARAM) == errno.ENOENT
    assert node.readdir("sys/class/infiniband") == []
    assert errno_of(node.set_netns_mode, False) == errno.EPROTONOSUPPORT


def test_power_on_reset_clears_vfs_guids_netns_and_restores_sysctls(make_node):
    node = make_node()
    node.write("sys/class/net/ibp24s0/device/sriov_numvfs", "2")
    node.set_vf("ibp24s0", 0, node_guid="02:00:00:00:00:00:00:01")
    node.write("proc/sys/net/ipv4/conf/all/rp_filter", "1")
    node.netns_add("pod")
    node.set_netns_mode(True)
    node.power_on()
    assert node.read("sys/class/net/ibp24s0/device/sriov_numvfs") == "0\n"
    assert node.pf_by_bdf("0000:18:00.0").admin == {}
    assert node.netns == []
    assert node.read("proc/sys/net/ipv4/conf/all/rp_filter") == "0\n"
    assert sorted(node.readdir("sys/class/infiniband")) == sorted(f"mlx5_{i}" for i in range(12))


def test_reset_applies_modprobe_d_and_modules_load_d(make_node, tmp_path):
    (tmp_path / "modprobe.d").mkdir()
    (tmp_path / "modprobe.d" / "ib_core.conf").write_text("# managed\noptions ib_core netns_mode=0\n", encoding="utf-8")
    (tmp_path / "modules-load.d").mkdir()
    (tmp_path / "modules-load.d" / "rdma.conf").write_text("nvidia-peermem\n# comment\nnot_a_module\n", encoding="utf-8")
    node = make_node(etc_dir=tmp_path)
    assert node.read(NETNS_PARAM) == "N\n"
    assert "nvidia_peermem" in node.read("proc/modules")
    assert any("not_a_module" in line for line in node.boot_log)


def test_kernel_cmdline_wins_over_modprobe_d(make_node, tmp_path):
    (tmp_path / "modprobe.d").mkdir()
    (tmp_path / "modprobe.d" / "x.conf").write_text("options ib_core netns_mode=0\n", encoding="utf-8")
    node = make_node(etc_dir=tmp_path)
    node.power_on(cmdline=node.spec.cmdline + " ib_core.netns_mode=1")
    assert node.read(NETNS_PARAM) == "Y\n"
    assert node.read("proc/cmdline").endswith("ib_core.netns_mode=1\n")


def test_runtime_mode_change_does_not_survive_reset(make_node):
    node = make_node()
    node.set_netns_mode(False)
    node.power_on()
    assert node.read(NETNS_PARAM) == "Y\n"


def test_reloading_ib_core_applies_new_options(make_node):
    node = make_node("roce-cx6dx")
    for name in ("rdma_ucm", "mlx5_ib", "ib_umad"):
        node.rmmod(name)
    assert "ib_core" not in node.modules
    assert node.readdir("sys/class/infiniband") == []
    node.modprobe("ib_core", {"netns_mode": "0"})
    assert node.read(NETNS_PARAM) == "N\n"


def test_modprobe_loads_dependencies_and_creates_devices(make_node):
    node = make_node("no-rdma")
    inserted = node.modprobe("nvidia_peermem")
    assert inserted == ["ib_core", "nvidia", "nvidia_peermem"]
    assert node.read(NETNS_PARAM) == "Y\n"
    assert "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n" in node.read("proc/modules")
    assert "ib_core 520192 1 nvidia_peermem, Live" in node.read("proc/modules")


def test_modprobe_errors(make_node):
    node = make_node()
    assert errno_of(node.modprobe, "no_such_module") == errno.ENOENT
    assert errno_of(node.rmmod, "ib_core") == errno.EBUSY
    assert errno_of(node.rmmod, "nvidia_peermem") == errno.ENOENT


def test_module_load_error_from_catalogue(make_node, tmp_path):
    spec_file = tmp_path / "x.yaml"
    spec_file.write_text(
        "name: x\nnuma: [{id: 0, cpus: '0-3'}]\nmodules:\n  catalogue:\n    nvidia_peermem: {load_error: EINVAL}\n",
        encoding="utf-8")
    node = hwsim.Node(hwsim.load(spec_file))
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.EINVAL
    assert "nvidia_peermem" not in node.modules


def test_unloading_ipoib_and_mlx5_ib(make_node):
    node = make_node()
    node.rmmod("ib_ipoib")
    assert "ibp24s0" not in node.readdir("sys/class/net")
    assert "enp41s0f0np0" in node.readdir("sys/class/net")
    assert "mlx5_0" in node.readdir("sys/class/infiniband")
    removed = node.rmmod("mlx5_ib")
    assert "mlx5_core" in removed
    assert node.readdir("sys/class/infiniband") == []
    assert node.readdir("sys/class/net") == ["lo"]
    node.modprobe("mlx5_ib")
    assert "enp41s0f0np0" in node.readdir("sys/class/net")
    assert "mlx5_0" in node.readdir("sys/class/infiniband")


def test_firmware_changes_apply_only_at_power_on(make_node):
    node = make_node()
    node.fw_set("0000:18:00.0", {"NUM_OF_VFS": "8"})
    assert node.read("sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs") == "16\n"
    node.power_on()
    assert node.read("sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs") == "8\n"
    assert errno_of(node.fw_set, "0000:18:00.0", {"NUM_OF_VFS": "x"}) == errno.EINVAL
    assert errno_of(node.fw_set, "0000:18:00.0", {"BOGUS": "1"}) == errno.EINVAL


def test_link_type_change_switches_class_link_layer_and_name(make_node):
    node = make_node()
    node.fw_set("0000:18:00.0", {"LINK_TYPE_P1": "ETH"})
    node.power_on()
    assert node.read("sys/bus/pci/devices/0000:18:00.0/class") == "0x020000\n"
    assert "enp24s0np0" in node.readdir("sys/class/net")
    assert node.read("sys/class/infiniband/mlx5_0/ports/1/link_layer") == "Ethernet\n"


def test_sriov_en_false_removes_sriov_capability(make_node):
    node = make_node()
    node.fw_set("0000:18:00.0", {"SRIOV_EN": "False"})
    node.power_on()
    assert errno_of(node.read, "sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs") == errno.ENOENT


def test_sysctls_validate_and_default_seeds_new_interfaces(make_node):
    node = make_node()
    assert errno_of(node.write, "proc/sys/net/ipv4/conf/all/arp_ignore", "x") == errno.EINVAL
    node.write("proc/sys/net/ipv4/conf/default/arp_ignore", "2\n")
    assert node.read("proc/sys/net/ipv4/conf/ibp24s0/arp_ignore") == "0\n"
    node.write("sys/class/net/ibp24s0/device/sriov_numvfs", "1")
    assert node.read("proc/sys/net/ipv4/conf/ibp24s0v0/arp_ignore") == "2\n"
    assert errno_of(node.write, "proc/sys/net/core/devconf_inherit_init_net", "4") == errno.EINVAL


def test_mtu_store_range(make_node):
    node = make_node()
    node.write("sys/class/net/ibp24s0/mtu", "2044")
    assert node.read("sys/class/net/ibp24s0/mtu") == "2044\n"
    assert errno_of(node.write, "sys/class/net/ibp24s0/mtu", "9000") == errno.EINVAL


def test_carrier_of_down_link_and_ib_gid_ndev_are_einval(make_node):
    node = make_node("no-rdma")
    assert errno_of(node.read, "sys/class/net/enP65536p1s0f1/carrier") == errno.EINVAL
    assert node.read("sys/class/net/enP65536p1s0f0/carrier") == "1\n"
    dgx = make_node()
    assert errno_of(dgx.read, "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0") == errno.EINVAL
    assert dgx.read("sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0") == "enp41s0f0np0\n"
    assert dgx.read("sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/1") == "RoCE v2\n"


def test_rdma_cgroup_max(make_node):
    node = make_node("roce-cx6dx")
    path = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/rdma.max"
    assert node.read(path) == "mlx5_0 hca_handle=max hca_object=max\nmlx5_1 hca_handle=max hca_object=max\n"
    node.write(path, "mlx5_0 hca_handle=2 hca_object=2000\n")
    assert node.read(path).startswith("mlx5_0 hca_handle=2 hca_object=2000\n")
    assert errno_of(node.write, path, "mlx5_9 hca_handle=1") == errno.ENODEV
    assert errno_of(node.write, path, "mlx5_0 hca_handle=lots") == errno.EINVAL


def test_fault_errno_on_canonical_path_and_count(make_node):
    node = make_node()
    node.faults.add("sys/class/net/ibp24s0/device/sriov_numvfs", op="write", errno_="EIO", count=1)
    assert errno_of(node.write, "sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "1") == errno.EIO
    assert errno_of(node.write, "sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "1") is None


def test_fault_read_only_does_not_affect_writes_and_clears(make_node):
    node = make_node()
    fault = node.faults.add("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", op="read", errno_="EAGAIN")
    assert errno_of(node.read, "sys/class/net/ibp24s0/device/sriov_numvfs") == errno.EAGAIN
    node.write("sys/class/net/ibp24s0/device/sriov_numvfs", "1")
    assert node.faults.clear(fault.ident) == 1
    assert node.read("sys/class/net/ibp24s0/device/sriov_numvfs") == "1\n"


def test_fault_glob(make_node):
    node = make_node()
    node.faults.add("sys/devices/*/mtu", op="read", errno_="ENXIO")
    assert errno_of(node.read, "sys/class/net/ibp64s0/mtu") == errno.ENXIO


def test_fault_delay_and_hang(make_node):
    node = make_node()
    node.faults.add("proc/cmdline", op="read", action="delay", seconds=0.2)
    started = time.monotonic()
    assert node.read("proc/cmdline").startswith("BOOT_IMAGE")
    assert time.monotonic() - started >= 0.2
    node.faults.clear()
    node.faults.add("proc/cmdline", op="read", action="hang", seconds=30)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(err=errno_of(node.read, "proc/cmdline")))
    worker.start()
    time.sleep(0.1)
    assert worker.is_alive()
    assert node.read("proc/modules")
    node.faults.clear()
    worker.join(2)
    assert outcome["err"] == errno.ETIMEDOUT


def test_fault_validation():
    table = hwsim.Node(hwsim.load("numa-split")).faults
    with pytest.raises(ValueError):
        table.add("x", op="exec")
    with pytest.raises(ValueError):
        table.add("x", action="hang")
    with pytest.raises(ValueError):
        table.add("x", errno_="ENOTANERRNO")
