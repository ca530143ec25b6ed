"""node_vm verify: what the real kernel and the real kubelet show after converge and side_effect.yml.

side_effect.yml ends with a power cycle, so everything here came back by itself: the VFs from the sriov boot unit,
the kubelet's managers from its configuration and the checkpoints it wrote after kubelet_topology removed the
refused ones.
"""

import json
import re

PF = "0000:81:00.0"
SYSFS = "/sys/bus/pci/devices/" + PF
VF_MACS = {0: "02:00:00:00:81:10", 1: "02:00:00:00:81:11", 2: "02:00:00:00:81:12"}


def pf_netdev(host):
    return host.check_output("ls %s/net", SYSFS).split()[0]


def test_the_pf_is_the_igb_on_numa_node_1(host):
    assert host.file(SYSFS + "/numa_node").content_string.strip() == "1"
    assert host.check_output("readlink -f %s/driver", SYSFS).endswith("/igb")
    assert host.file(SYSFS + "/sriov_totalvfs").content_string.strip() == "7"


def test_the_boot_unit_recreated_three_vfs_after_the_power_cycle(host):
    assert host.file(SYSFS + "/sriov_numvfs").content_string.strip() == "3"
    unit = host.service("rdma-k8s-node-sriov.service")
    assert unit.is_enabled
    assert host.check_output("systemctl show -p Result --value rdma-k8s-node-sriov.service") == "success"


def test_the_vfs_carry_the_names_the_vms_udev_gave_them(host):
    pf = pf_netdev(host)
    # udev's path naming: the PF enp129s0 (bus 0x81), its VFs enp129s0v<N> (systemd's net_id "v" suffix)
    assert pf == "enp129s0"
    for index in range(3):
        vf = host.check_output("ls %s", "%s/virtfn%d/net" % (SYSFS, index))
        assert vf == "%sv%d" % (pf, index)


def test_vf_attributes_went_through_the_kernel(host):
    pf = pf_netdev(host)
    out = host.check_output("ip -j -d link show dev %s", pf)
    vfs = dict((vf["vf"], vf) for vf in json.loads(out)[0]["vfinfo_list"])
    assert sorted(vfs) == [0, 1, 2]
    for index, mac in VF_MACS.items():
        assert vfs[index]["address"] == mac
        assert vfs[index]["trust"] is True
        assert vfs[index]["spoofchk"] is False
    assert vfs[0]["vlan_list"][0]["vlan"] == 100


def test_the_kubelet_came_back_after_the_power_cycle_with_the_managers_kubelet_topology_set(host):
    # the memory manager checkpoint's per-NUMA totals change across reboots (kubernetes#131253): without the
    # role's boot-time reset the real kubelet refuses "the expected machine state is different from the real one"
    assert host.service("rdma-k8s-node-kubelet-memory-state.service").is_enabled
    assert host.service("kubelet").is_running
    assert host.check_output("python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:10248/healthz\").read().decode())'") == "ok"
    log = host.check_output("journalctl -b -u kubelet --no-pager -o cat")
    assert re.search(r'topologyPolicyName="restricted"', log), log[-2000:]
    assert re.search(r'cpu_manager.*"Starting" policy="static"', log)
    assert re.search(r'memory_manager.*"Starting memorymanager" policy="Static"', log)


def test_the_kubelet_wrote_checkpoints_for_the_new_policies(host):
    cpu = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    assert cpu["policyName"] == "static"
    memory = json.loads(host.file("/var/lib/kubelet/memory_manager_state").content_string)
    assert memory["policyName"] == "Static"
    # side_effect moved the reservation to NUMA node 1: the new machine state reserves there (100Mi)
    reserved = dict((node, state["memoryMap"]["memory"]["systemReserved"]) for node, state in memory["machineState"].items())
    assert reserved == {"0": 0, "1": 100 * 1024 * 1024}
