"""SR-IOV and driver-binding rules of the state model, each pinned to the kernel code it imitates.

drivers/pci/iov.c sriov_numvfs_store() order: kstrtou16 -> EINVAL, > totalvfs -> ERANGE, same value -> no-op,
no driver -> ENOENT, 0 -> disable, N while enabled -> EBUSY. drivers/base/bus.c bind_store()/unbind_store(),
drivers/pci/pci-driver.c pci_device_can_probe(). See domain-facts.md section 2 and 3.
"""

import errno

import pytest
from hwsim_helpers import errno_of

PF = "sys/bus/pci/devices/0000:18:00.0"
NUMVFS = "sys/class/net/ibp24s0/device/sriov_numvfs"
BIND = "sys/bus/pci/drivers/mlx5_core/bind"
UNBIND = "sys/bus/pci/drivers/mlx5_core/unbind"


def test_numvfs_power_on_state(make_node):
    node = make_node()
    assert node.read(f"{PF}/sriov_numvfs") == "0\n"
    assert node.read(f"{PF}/sriov_totalvfs") == "16\n"
    assert node.read(f"{PF}/sriov_drivers_autoprobe") == "1\n"


def test_numvfs_n_to_m_is_ebusy_and_same_value_is_noop(make_node):
    node = make_node()
    node.write(NUMVFS, "4\n")
    assert errno_of(node.write, NUMVFS, "8") == errno.EBUSY
    assert node.write(NUMVFS, "4") == 1
    assert node.read(NUMVFS) == "4\n"
    assert len([n for n in node.readdir(PF) if n.startswith("virtfn")]) == 4


@pytest.mark.parametrize("value", ["17", "65535"])
def test_numvfs_above_totalvfs_is_erange(make_node, value):
    assert errno_of(make_node().write, NUMVFS, value) == errno.ERANGE


@pytest.mark.parametrize("value", ["abc", "-1", " 4", "4 4", "", "70000"])
def test_numvfs_not_a_u16_is_einval(make_node, value):
    assert errno_of(make_node().write, NUMVFS, value) == errno.EINVAL


def test_numvfs_accepts_kstrtou16_forms(make_node):
    node = make_node()
    node.write(NUMVFS, "0x3\n")
    assert node.read(NUMVFS) == "3\n"


def test_numvfs_erange_checked_before_noop(make_node):
    node = make_node()
    node.write(NUMVFS, "0")
    assert errno_of(node.write, NUMVFS, "99") == errno.ERANGE


def test_numvfs_without_pf_driver_is_enoent_but_same_value_still_succeeds(make_node):
    node = make_node()
    node.write(UNBIND, "0000:18:00.0")
    assert node.read(f"{PF}/sriov_numvfs") == "0\n"
    assert errno_of(node.write, f"{PF}/sriov_numvfs", "2") == errno.ENOENT
    assert errno_of(node.write, f"{PF}/sriov_numvfs", "0") is None


def test_vfs_appear_with_links_driver_netdev_and_rdma_device(make_node):
    node = make_node()
    node.write(NUMVFS, "2")
    assert node.readlink(f"{PF}/virtfn0") == "../0000:18:00.1"
    assert node.readlink(f"{PF}/virtfn1") == "../0000:18:00.2"
    assert node.readlink("sys/bus/pci/devices/0000:18:00.1/physfn") == "../0000:18:00.0"
    assert node.read("sys/bus/pci/devices/0000:18:00.1/device") == "0x101e\n"
    assert node.read("sys/bus/pci/devices/0000:18:00.1/class") == "0x020700\n"
    assert node.readlink("sys/bus/pci/devices/0000:18:00.1/driver").endswith("bus/pci/drivers/mlx5_core")
    assert node.readdir("sys/bus/pci/devices/0000:18:00.1/net") == ["ibp24s0v0"]
    assert node.readdir("sys/bus/pci/devices/0000:18:00.1/infiniband") == ["mlx5_12"]
    assert node.readdir("sys/bus/pci/devices/0000:18:00.2/infiniband") == ["mlx5_13"]
    assert node.lookup("sys/class/infiniband/mlx5_12")[0].startswith("sys/devices/pci0000:15/")


def test_new_vf_guids_are_all_zero(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    ib = "sys/class/infiniband/mlx5_12"
    assert node.read(f"{ib}/node_guid") == "0000:0000:0000:0000\n"
    assert node.read(f"{ib}/ports/1/gids/0") == "fe80:0000:0000:0000:0000:0000:0000:0000\n"
    assert node.read("sys/class/net/ibp24s0v0/address").endswith("00:00:00:00:00:00:00:00\n")
    assert node.read(f"{ib}/ports/1/state") == "1: DOWN\n"


def test_zero_destroys_vfs_netdevs_rdma_devices_and_class_links(make_node):
    node = make_node()
    node.write(NUMVFS, "3")
    node.write(NUMVFS, "0")
    assert not [n for n in node.readdir(PF) if n.startswith("virtfn")]
    assert errno_of(node.read, "sys/bus/pci/devices/0000:18:00.1/vendor") == errno.ENOENT
    assert "ibp24s0v0" not in node.readdir("sys/class/net")
    assert "mlx5_12" not in node.readdir("sys/class/infiniband")
    assert errno_of(node.readlink, "sys/bus/pci/drivers/mlx5_core/0000:18:00.1") == errno.ENOENT


def test_multi_function_card_vf_offsets_do_not_collide(make_node):
    node = make_node("roce-cx6dx")
    node.write("sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", "8")
    node.write("sys/bus/pci/devices/0000:01:00.1/sriov_numvfs", "2")
    assert node.readlink("sys/bus/pci/devices/0000:01:00.0/virtfn0") == "../0000:01:00.2"
    assert node.readlink("sys/bus/pci/devices/0000:01:00.0/virtfn7") == "../0000:01:01.1"
    assert node.readlink("sys/bus/pci/devices/0000:01:00.1/virtfn0") == "../0000:01:01.2"
    assert node.read("sys/bus/pci/devices/0000:01:00.1/sriov_offset") == "9\n"


def test_vf_creation_delay_shows_partial_state(make_node, clock):
    node = make_node(vf_probe=2.0)
    node.write(NUMVFS, "2")
    assert node.readlink(f"{PF}/virtfn0") == "../0000:18:00.1"
    assert errno_of(node.readlink, "sys/bus/pci/devices/0000:18:00.1/driver") == errno.ENOENT
    assert "ibp24s0v0" not in node.readdir("sys/class/net")
    clock.advance(1.9)
    assert "mlx5_12" not in node.readdir("sys/class/infiniband")
    clock.advance(0.2)
    assert "ibp24s0v0" in node.readdir("sys/class/net")
    assert "mlx5_12" in node.readdir("sys/class/infiniband")


def test_numvfs_write_delay_blocks_the_writer(make_node):
    node = make_node(sriov_numvfs_write=1.5)
    node.write(NUMVFS, "1")
    assert node.sleeps == [1.5]


def test_disable_before_delayed_probe_cancels_it(make_node, clock):
    node = make_node(vf_probe=1.0)
    node.write(NUMVFS, "2")
    node.write(NUMVFS, "0")
    clock.advance(5)
    assert node.readdir("sys/class/infiniband") == sorted(f"mlx5_{i}" for i in range(12))


def test_autoprobe_off_leaves_vfs_unbound_and_bind_needs_driver_override(make_node):
    node = make_node()
    node.write(f"{PF}/sriov_drivers_autoprobe", "0")
    node.write(NUMVFS, "1")
    assert errno_of(node.readlink, "sys/bus/pci/devices/0000:18:00.1/driver") == errno.ENOENT
    assert errno_of(node.write, BIND, "0000:18:00.1") == errno.ENODEV
    node.write("sys/bus/pci/devices/0000:18:00.1/driver_override", "mlx5_core\n")
    assert node.read("sys/bus/pci/devices/0000:18:00.1/driver_override") == "mlx5_core\n"
    node.write(BIND, "0000:18:00.1\n")
    assert node.readdir("sys/bus/pci/devices/0000:18:00.1/infiniband") == ["mlx5_12"]


def test_autoprobe_is_kstrtobool(make_node):
    node = make_node()
    node.write(f"{PF}/sriov_drivers_autoprobe", "off")
    assert node.read(f"{PF}/sriov_drivers_autoprobe") == "0\n"
    assert errno_of(node.write, f"{PF}/sriov_drivers_autoprobe", "maybe") == errno.EINVAL


def test_bind_bound_is_ebusy_unbind_unbound_is_enodev(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    assert errno_of(node.write, BIND, "0000:18:00.1") == errno.EBUSY
    node.write(UNBIND, "0000:18:00.1")
    assert errno_of(node.write, UNBIND, "0000:18:00.1") == errno.ENODEV
    assert errno_of(node.write, UNBIND, "0000:99:00.0") == errno.ENODEV
    assert errno_of(node.write, BIND, "0000:1b:00.0") == errno.ENODEV


def test_unbind_removes_driver_link_netdev_and_rdma_device(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    node.write(UNBIND, "0000:18:00.1")
    vf = "sys/bus/pci/devices/0000:18:00.1"
    assert errno_of(node.readlink, f"{vf}/driver") == errno.ENOENT
    assert errno_of(node.readdir, f"{vf}/net") == errno.ENOENT
    assert "mlx5_12" not in node.readdir("sys/class/infiniband")
    assert node.read(f"{vf}/vendor") == "0x15b3\n"


def test_rebind_makes_the_admin_guid_visible(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    node.set_vf("ibp24s0", 0, node_guid="02:00:00:00:00:00:00:01", port_guid="02:00:00:00:00:00:00:01", state="auto")
    ib = "sys/class/infiniband/mlx5_12"
    assert node.read(f"{ib}/node_guid") == "0000:0000:0000:0000\n"
    node.write(UNBIND, "0000:18:00.1")
    node.write(BIND, "0000:18:00.1")
    assert node.read(f"{ib}/node_guid") == "0200:0000:0000:0001\n"
    assert node.read(f"{ib}/ports/1/gids/0") == "fe80:0000:0000:0000:0200:0000:0000:0001\n"
    assert node.read("sys/class/net/ibp24s0v0/address").endswith("02:00:00:00:00:00:00:01\n")
    assert node.read(f"{ib}/ports/1/state") == "4: ACTIVE\n"


def test_admin_guids_reset_when_vfs_are_destroyed(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    node.set_vf("ibp24s0", 0, node_guid="02:00:00:00:00:00:00:01")
    node.write(NUMVFS, "0")
    node.write(NUMVFS, "1")
    assert node.pf_by_bdf("0000:18:00.0").admin[0].node_guid == 0


def test_set_vf_errors(make_node):
    node = make_node()
    node.write(NUMVFS, "1")
    assert errno_of(node.set_vf, "ibp24s0", 1, node_guid="02:00:00:00:00:00:00:01") == errno.EINVAL
    assert errno_of(node.set_vf, "ibp24s0", 0, mac="02:00:00:00:00:01") == errno.EOPNOTSUPP
    assert errno_of(node.set_vf, "enp41s0f0np0", 0, node_guid="02:00:00:00:00:00:00:01") == errno.EINVAL
    assert errno_of(node.set_vf, "nosuch", 0, state="auto") == errno.ENODEV


def test_pf_unbind_takes_its_vfs_with_it(make_node):
    node = make_node()
    node.write(NUMVFS, "2")
    node.write(UNBIND, "0000:18:00.0")
    assert errno_of(node.read, "sys/bus/pci/devices/0000:18:00.1/vendor") == errno.ENOENT
    assert node.read(f"{PF}/sriov_numvfs") == "0\n"


def test_pf_without_sriov_in_firmware_has_no_sriov_attributes(make_node):
    node = make_node()
    assert errno_of(node.read, "sys/class/net/enp41s0f0np0/device/sriov_totalvfs") == errno.ENOENT


def test_intel_vfs_autoload_iavf(make_node):
    node = make_node("no-rdma")
    node.write("sys/class/net/enP65536p1s0f0/device/sriov_numvfs", "2")
    assert node.readlink("sys/bus/pci/devices/10000:01:00.0/virtfn0") == "../10000:01:00.2"
    assert node.readlink("sys/bus/pci/devices/10000:01:00.2/driver").endswith("drivers/iavf")
    assert "iavf" in node.read("proc/modules")
