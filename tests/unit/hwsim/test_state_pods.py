"""VFs in pods' network namespaces: what the host sees (tests/hwsim/README.md "VFs in pods").

The SR-IOV / host-device CNI moves a VF's netdev into the pod's namespace (net/core/dev.c
__dev_change_net_namespace()), the RDMA CNI moves its RDMA device in exclusive mode only (drivers/infiniband/core/
device.c ib_device_set_netns_put(): EOPNOTSUPP while ib_devices_shared_netns).  sysfs is tagged by the namespace of
the sysfs mount: net_class and ib_class have ns_type, uverbs_class has none.
"""

import errno

import pytest
from hwsim_helpers import errno_of

PF = "0000:18:00.0"
PF_DIR = f"sys/bus/pci/devices/{PF}"
ROCE_PF = "0000:01:00.0"


def ib_node(make_node, count=2, exclusive=False, pods=("pod-a",)):
    node = make_node()
    if exclusive:
        node.set_netns_mode(False)
    node.write(f"{PF_DIR}/sriov_numvfs", f"{count}\n")
    for pod in pods:
        node.netns_add(pod)
    return node


def vf_bdf(node, index=0):
    return node.readlink(f"{PF_DIR}/virtfn{index}").rsplit("/", 1)[-1]


def rdma_of(node, bdf):
    return next(ib.name for ib in node.ibdevs.values() if ib.dev.bdf == bdf)


def test_moved_netdev_leaves_the_hosts_sysfs_procfs_and_ip_link(make_node):
    node = ib_node(make_node)
    vf = vf_bdf(node)
    assert node.readdir(f"sys/bus/pci/devices/{vf}/net") == ["ibp24s0v0"]
    assert node.read("proc/sys/net/ipv4/conf/ibp24s0v0/rp_filter")
    assert "ibp24s0v0:" in node.read("proc/net/dev")
    moved = node.vf_set_netns(vf, "pod-a", "net1")
    assert moved == {"netdev": "net1", "rdma": None}  # shared mode: the RDMA device stays
    assert "ibp24s0v0" not in node.readdir("sys/class/net")
    assert node.readdir(f"sys/bus/pci/devices/{vf}/net") == []  # the class dir stays, empty from init_net
    assert errno_of(node.read, "proc/sys/net/ipv4/conf/ibp24s0v0/rp_filter") == errno.ENOENT
    assert "ibp24s0v0" not in node.read("proc/net/dev") and "net1" not in node.read("proc/net/dev")
    assert errno_of(node.netdev, "ibp24s0v0") == errno.ENODEV  # ip link show dev ibp24s0v0
    # the PF's view of its VFs does not change: vfinfo_list, the driver, the interrupts
    from hwsim import control  # pylint: disable=import-outside-toplevel
    [pf_link] = control.COMMANDS["ip_link_show"](node, {"dev": "ibp24s0"})
    assert [vf["vf"] for vf in pf_link["vfinfo_list"]] == [0, 1]
    assert node.readlink(f"sys/bus/pci/devices/{vf}/driver").endswith("mlx5_core")
    assert f"@pci:{vf}" in node.read("proc/interrupts")
    assert node.readdir(f"sys/bus/pci/devices/{vf}/msi_irqs")
    # shared mode: the RDMA device is still the host's, in sysfs and in `rdma dev`
    name = rdma_of(node, vf)
    assert name in node.readdir("sys/class/infiniband")
    assert name in [dev["ifname"] for dev in control.COMMANDS["rdma_dev_show"](node, {})]


def test_netdev_comes_back_under_the_given_name_with_init_nets_default_sysctls(make_node):
    node = ib_node(make_node)
    vf = vf_bdf(node)
    node.write("proc/sys/net/ipv4/conf/ibp24s0v0/arp_ignore", "2")
    node.write("proc/sys/net/ipv4/conf/default/arp_ignore", "1")
    ifindex = node.read("sys/class/net/ibp24s0v0/ifindex")
    node.vf_set_netns(vf, "pod-a", "net1")
    assert node.link_set_netns("net1", None, "ibp24s0v0", source="pod-a") == "ibp24s0v0"
    assert node.readdir(f"sys/bus/pci/devices/{vf}/net") == ["ibp24s0v0"]
    assert node.read("sys/class/net/ibp24s0v0/ifindex") == ifindex  # the ifindex travels
    # inetdev_event(): a fresh in_device from init_net's default devconf, not the values it had
    assert node.read("proc/sys/net/ipv4/conf/ibp24s0v0/arp_ignore") == "1\n"


def test_link_set_netns_errors(make_node):
    node = ib_node(make_node)
    assert errno_of(node.link_set_netns, "nosuch", "pod-a") == errno.ENODEV
    assert errno_of(node.link_set_netns, "ibp24s0v0", "no-pod") == errno.ENOENT
    assert errno_of(node.link_set_netns, "lo", "pod-a") == errno.EINVAL  # NETIF_F_NETNS_LOCAL
    node.link_set_netns("ibp24s0v0", "pod-a", "net1")
    assert errno_of(node.link_set_netns, "ibp24s0v1", "pod-a", "net1") == errno.EEXIST
    assert errno_of(node.link_set_netns, "net1", None) == errno.ENODEV  # not in init_net
    assert node.link_set_netns("net1", "pod-a", source="pod-a") == "net1"  # same namespace: no-op


def test_rdma_device_moves_only_in_exclusive_mode(make_node):
    node = ib_node(make_node)
    vf = vf_bdf(node)
    name = rdma_of(node, vf)
    assert errno_of(node.rdma_dev_set_netns, name, "pod-a") == errno.EOPNOTSUPP
    node = ib_node(make_node, exclusive=True)
    vf = vf_bdf(node)
    name = rdma_of(node, vf)
    assert errno_of(node.rdma_dev_set_netns, name, "no-pod") == errno.ENOENT
    assert node.vf_set_netns(vf, "pod-a", "net1") == {"netdev": "net1", "rdma": name}
    assert name not in node.readdir("sys/class/infiniband")
    assert node.readdir(f"sys/bus/pci/devices/{vf}/infiniband") == []
    from hwsim import control  # pylint: disable=import-outside-toplevel
    assert name not in [dev["ifname"] for dev in control.COMMANDS["rdma_dev_show"](node, {})]
    assert name not in [link["ifname"] for link in control.COMMANDS["rdma_link_show"](node, {})]
    # the host no longer sees it: an `rdma dev set` from init_net does not find it
    assert errno_of(node.rdma_dev_set_netns, name, None) == errno.ENODEV
    # uverbs_class has no ns_type: the host still lists its uverbs device
    uverbs = dict((node.read(f"sys/class/infiniband_verbs/{entry}/ibdev").strip(), entry)
                  for entry in node.readdir("sys/class/infiniband_verbs") if entry.startswith("uverbs"))
    assert name in uverbs
    # the rdma cgroup is not namespaced: rdma.max keeps every device (no cgroup on dgx-h100); the mode cannot change
    assert errno_of(node.set_netns_mode, True) == errno.EBUSY
    node.rdma_dev_set_netns(name, None, source="pod-a")
    assert name in node.readdir("sys/class/infiniband")


def test_netns_teardown_returns_devices_under_their_pod_name_when_free(make_node):
    node = ib_node(make_node, count=3, exclusive=True)
    vfs = [vf_bdf(node, i) for i in range(3)]
    node.vf_set_netns(vfs[0], "pod-a", "net1")
    node.vf_set_netns(vfs[2], "pod-a", "net2")
    rdma = sorted([rdma_of(node, vfs[0]), rdma_of(node, vfs[2])])
    out = node.netns_del("pod-a")
    assert out["netdevs"] == {"net1": "net1", "net2": "net2"} and sorted(out["rdma"]) == rdma
    assert {"net1", "net2"} <= set(node.readdir("sys/class/net"))
    assert set(rdma) <= set(node.readdir("sys/class/infiniband"))  # rdma_dev_exit_net(), same names
    assert node.readdir(f"sys/bus/pci/devices/{vfs[0]}/net") == ["net1"]
    assert node.netns == [] and node.ns_netdevs == {}


def test_netns_teardown_name_taken_on_the_host_is_dev_ifindex_then_dev_n(make_node):
    node = ib_node(make_node, count=3, pods=("pod-a", "pod-b"))
    vfs = [vf_bdf(node, i) for i in range(3)]
    ifindex = node.netdev_of_device(node.devices[vfs[0]]).ifindex
    # VF 0 is ibp24s0v1 in the pod, a name VF 1 has on the host: it comes back as dev<ifindex>
    node.link_set_netns("ibp24s0v0", "pod-a", "ibp24s0v1")
    assert node.netns_del("pod-a")["netdevs"] == {"ibp24s0v1": f"dev{ifindex}"}
    assert node.readdir(f"sys/bus/pci/devices/{vfs[0]}/net") == [f"dev{ifindex}"]
    # dev<ifindex> taken too (VF 2 renamed to it through a namespace round trip): the lowest free dev%d
    node.link_set_netns("ibp24s0v2", "pod-b", "x")
    node.link_set_netns("x", None, "devX", source="pod-b")
    node.link_set_netns(f"dev{ifindex}", "pod-b", "ibp24s0v1")
    node.netns_add("pod-c")
    node.link_set_netns("devX", "pod-c", "y")
    node.link_set_netns("y", None, f"dev{ifindex}", source="pod-c")
    assert node.netns_del("pod-b")["netdevs"] == {"ibp24s0v1": "dev0"}
    assert node.netdev_of_device(node.devices[vfs[0]]).name == "dev0"


def test_sriov_numvfs_0_destroys_vfs_in_pods(make_node):
    node = ib_node(make_node, exclusive=True)
    vf = vf_bdf(node)
    name = rdma_of(node, vf)
    node.vf_set_netns(vf, "pod-a", "net1")
    node.write(f"{PF_DIR}/sriov_numvfs", "0")
    assert node.ns_netdevs["pod-a"] == {}
    assert name not in node.ibdevs
    assert node.netns_del("pod-a") == {"netdevs": {}, "rdma": []}


def test_vf_rebind_registers_a_new_netdev_on_the_host(make_node):
    node = ib_node(make_node)
    vf = vf_bdf(node)
    node.vf_set_netns(vf, "pod-a", "net1")
    node.write("sys/bus/pci/drivers/mlx5_core/unbind", vf)
    assert node.ns_netdevs["pod-a"] == {}
    node.write("sys/bus/pci/drivers/mlx5_core/bind", vf)
    assert node.readdir(f"sys/bus/pci/devices/{vf}/net") == ["ibp24s0v0"]


def test_roce_vf_in_a_pod_shared_mode_gid_ndev_and_rdma_link(make_node):
    node = make_node("roce-cx6dx")
    pf_dir = f"sys/bus/pci/devices/{ROCE_PF}"
    node.write(f"{pf_dir}/sriov_numvfs", "1")
    node.netns_add("pod-a")
    vf = node.readlink(f"{pf_dir}/virtfn0").rsplit("/", 1)[-1]
    [host_name] = node.readdir(f"sys/bus/pci/devices/{vf}/net")
    name = rdma_of(node, vf)
    node.vf_set_netns(vf, "pod-a", "net1")
    # print_ndev(): ndev->name, whatever namespace the netdev is in
    assert node.read(f"sys/class/infiniband/{name}/ports/1/gid_attrs/ndevs/0") == "net1\n"
    from hwsim import control  # pylint: disable=import-outside-toplevel
    [link] = [link for link in control.COMMANDS["rdma_link_show"](node, {}) if link["ifname"] == name]
    assert "netdev" not in link  # fill_port_info(): only a netdev in the caller's namespace
    node.link_set_netns("net1", None, host_name, source="pod-a")
    [link] = [link for link in control.COMMANDS["rdma_link_show"](node, {}) if link["ifname"] == name]
    assert link["netdev"] == host_name


def test_control_commands(make_node):
    from hwsim import control  # pylint: disable=import-outside-toplevel
    import json  # pylint: disable=import-outside-toplevel
    node = ib_node(make_node, exclusive=True)
    vf = vf_bdf(node)

    def call(**command):
        return json.loads(control.handle(node, json.dumps(command)))

    reply = call(cmd="vf_set_netns", bdf=vf, netns="pod-a", ifname="net1")
    assert reply["ok"] and reply["result"]["netdev"] == "net1"
    dump = call(cmd="dump")["result"]
    assert dump["pods"]["pod-a"]["netdevs"] == {"net1": vf}
    assert dump["pods"]["pod-a"]["rdma"] == [rdma_of(node, vf)]
    assert call(cmd="ip_link_set_netns", dev="net1", netns=None, name="ibp24s0v0", **{"from": "pod-a"})["ok"]
    assert call(cmd="rdma_dev_set_netns", dev=rdma_of(node, vf), netns="init", **{"from": "pod-a"})["ok"]
    reply = call(cmd="vf_set_netns", bdf="0000:ff:00.0", netns="pod-a")
    assert not reply["ok"] and reply["errno"] == "ENODEV"
    assert call(cmd="netns_del", name="pod-a")["result"] == {"netdevs": {}, "rdma": [], "netns": []}


@pytest.mark.parametrize("archetype", ["dgx-h100", "roce-cx6dx"])
def test_power_on_forgets_pods(make_node, archetype):
    node = make_node(archetype)
    node.netns_add("pod-a")
    node.power_on()
    assert node.netns == [] and node.ns_netdevs == {}
