"""VF netdev names: the kernel's lowest free eth%d / ib%d at registration, udev's predictable rename after it.

Kernel: net/core/dev.c __dev_alloc_name() (lowest unused number, not a counter), ipoib_add_port("ib%d") with
NET_NAME_UNKNOWN, alloc_etherdev "eth%d" NET_NAME_ENUM, dev_change_name() -> NET_NAME_RENAMED. udev: systemd's
SR-IOV VF name is the PF device's name + v<N> (systemd commit 609948c7), applied after the "add" uevent, never to
a link that is up (systemd PR #21109).
"""

import dataclasses
import errno

import pytest
import yaml
from hwsim_helpers import errno_of

import hwsim

PF = "sys/bus/pci/devices/0000:18:00.0"
NUMVFS = f"{PF}/sriov_numvfs"
DRIVER = "sys/bus/pci/drivers/mlx5_core"


@pytest.fixture
def naming_node(clock):
    """Factory: naming_node(naming, archetype='dgx-h100', **delays) -> Node on the fake clock."""
    def make(naming, archetype="dgx-h100", **delays):
        spec = dataclasses.replace(hwsim.load(archetype), vf_netdev_naming=naming)
        node = hwsim.Node(spec, clock=clock, sleep=lambda seconds: None)
        node.delays.update(delays)
        return node
    return make


def vf_netdevs(node, index, pf=PF):
    return node.readdir(f"{pf}/virtfn{index}/net")


def rebind(node, bdf):
    node.write(f"{DRIVER}/unbind", bdf)
    node.write(f"{DRIVER}/bind", bdf)


def test_predictable_names_follow_the_pf_device_and_are_marked_renamed(naming_node):
    node = naming_node("predictable")
    node.write(NUMVFS, "2")
    assert [vf_netdevs(node, i) for i in (0, 1)] == [["ibp24s0v0"], ["ibp24s0v1"]]
    assert node.read("sys/class/net/ibp24s0v0/name_assign_type") == "4\n"
    assert node.read("sys/class/net/ibp24s0/name_assign_type") == "4\n"
    roce = naming_node("predictable", "roce-cx6dx")
    roce.write("sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", "1")
    # the VF of ens1f0np0 is ens1f0v0: the PF's n<phys_port_name> is not part of the VF's name
    assert vf_netdevs(roce, 0, "sys/bus/pci/devices/0000:01:00.0") == ["ens1f0v0"]


def test_udev_window_shows_the_kernel_name_first(naming_node, clock):
    node = naming_node("predictable", udev_rename=1.0)
    node.write(NUMVFS, "2")
    assert [vf_netdevs(node, i) for i in (0, 1)] == [["ib0"], ["ib1"]]
    assert errno_of(node.read, "sys/class/net/ib0/name_assign_type") == errno.EINVAL  # NET_NAME_UNKNOWN
    ifindex = node.read("sys/class/net/ib0/ifindex")
    clock.advance(1.0)
    assert [vf_netdevs(node, i) for i in (0, 1)] == [["ibp24s0v0"], ["ibp24s0v1"]]
    assert node.read("sys/class/net/ibp24s0v0/ifindex") == ifindex, "a rename keeps the interface"
    assert node.read("sys/class/net/ibp24s0v0/name_assign_type") == "4\n"
    assert "ib0" not in node.readdir("proc/sys/net/ipv4/conf") and "ibp24s0v0" in node.readdir("proc/sys/net/ipv4/conf")


def test_rebind_creates_a_new_netdev_that_udev_renames_again(naming_node, clock):
    node = naming_node("predictable", udev_rename=0.5)
    node.write(NUMVFS, "2")
    clock.advance(0.5)
    before = node.read("sys/class/net/ibp24s0v1/ifindex")
    rebind(node, "0000:18:00.2")
    assert vf_netdevs(node, 1) == ["ib0"], "the remembered name is gone until udev has run"
    assert "ibp24s0v1" not in node.readdir("sys/class/net")
    clock.advance(0.5)
    assert vf_netdevs(node, 1) == ["ibp24s0v1"]
    assert node.read("sys/class/net/ibp24s0v1/ifindex") != before


def test_udev_does_not_rename_a_link_that_is_already_up(naming_node, clock):
    node = naming_node("predictable", udev_rename=1.0)
    node.write(NUMVFS, "1")
    node.set_link("ib0", up=True)
    clock.advance(1.0)
    assert vf_netdevs(node, 0) == ["ib0"]


def test_unbound_vf_netdev_is_not_renamed_by_a_late_udev_event(naming_node, clock):
    node = naming_node("predictable", udev_rename=1.0)
    node.write(NUMVFS, "1")
    node.write(f"{DRIVER}/unbind", "0000:18:00.1")
    clock.advance(1.0)
    assert "ibp24s0v0" not in node.readdir("sys/class/net")


def test_kernel_names_take_the_lowest_free_number_so_a_rebind_can_rename(naming_node):
    node = naming_node("kernel")
    node.write(NUMVFS, "3")
    assert [vf_netdevs(node, i) for i in range(3)] == [["ib0"], ["ib1"], ["ib2"]]
    rebind(node, "0000:18:00.2")
    assert vf_netdevs(node, 1) == ["ib1"], "nothing lower is free: the same name comes back"
    node.write(f"{DRIVER}/unbind", "0000:18:00.1")  # VF 0 without a driver frees ib0
    rebind(node, "0000:18:00.2")
    rebind(node, "0000:18:00.3")
    node.write(f"{DRIVER}/bind", "0000:18:00.1")
    assert [vf_netdevs(node, i) for i in range(3)] == [["ib2"], ["ib0"], ["ib1"]]
    assert errno_of(node.read, "sys/class/net/ib0/name_assign_type") == errno.EINVAL


def test_kernel_names_on_ethernet_are_enumerated_eth(naming_node):
    node = naming_node("kernel", "roce-cx6dx")
    node.write("sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", "2")
    assert vf_netdevs(node, 0, "sys/bus/pci/devices/0000:01:00.0") == ["eth0"]
    assert node.read("sys/class/net/eth1/name_assign_type") == "1\n"  # NET_NAME_ENUM
    assert node.read("sys/class/net/ens1f0np0/name_assign_type") == "4\n"


def test_spec_rejects_an_unknown_naming_scheme():
    data = yaml.safe_load(hwsim.load("dgx-h100").path.read_text())
    data["vf_netdev_naming"] = "biosdevname"
    with pytest.raises(hwsim.SpecError, match="vf_netdev_naming"):
        hwsim.spec.parse(data)
