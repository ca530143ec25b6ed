"""node_vm verify: what the real kernel and the real kubelet show after converge and side_effect.yml.

side_effect.yml ends with a power cycle into a newer kernel (step 8, exclusive.yml), so everything here came back by
itself: the VFs from the sriov boot unit, the kubelet's managers from its configuration and the checkpoints it wrote
after kubelet_topology removed the refused ones, and RDMA netns mode exclusive from rdma_netns' files.  What steps 7
and 8 saw of their pods (the shared-mode pod is retired by step 8, the exclusive-mode one is removed by the kubelet)
they kept in /var/lib/rdma-vm.
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
    # as the boot unit left them after the power cycle, read before the RDMA pod step raised the PF
    out = host.file("/var/lib/rdma-vm/pf-after-boot.json").content_string
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
    # side_effect's last kubelet_topology run wrote best-effort into its --config-dir drop-in, over config.yaml's
    # restricted: the kubelet merged the drop-in at boot
    assert re.search(r'topologyPolicyName="best-effort"', log), log[-2000:]
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


def test_the_dropin_is_what_the_kubelet_merged_over_its_config_file(host):
    dropin = host.file("/etc/kubernetes/kubelet.conf.d/50-rdma-k8s-node-topology.conf")
    assert dropin.exists
    assert re.search(r'"?topologyManagerPolicy"?: *"?best-effort', dropin.content_string), dropin.content_string
    config = host.file("/var/lib/kubelet/config.yaml").content_string
    assert "topologyManagerPolicy: restricted" in config
    assert "--config-dir=/etc/kubernetes/kubelet.conf.d" in host.check_output("cat /proc/$(pidof kubelet)/cmdline | tr '\\0' ' '")


def test_the_faults_left_no_fault_behind(host):
    # step 4 of side_effect.yml: both rollback cases removed their systemd drop-in
    assert not host.file("/etc/systemd/system/kubelet.service.d/90-test-fault.conf").exists


def memlock_and_devices(spec):
    """(RLIMIT_MEMLOCK soft and hard, effective capabilities, device paths) of `crictl inspect` output."""
    process = spec["info"]["runtimeSpec"]["process"]
    # crictl prints the spec's uint64 through a float: 2**64 - 1 comes out as 18446744073709552000
    memlock = [(float(r["soft"]), float(r["hard"])) for r in process["rlimits"] if r["type"] == "RLIMIT_MEMLOCK"]
    devices = [d["path"] for d in spec["info"]["runtimeSpec"]["linux"]["devices"]]
    return memlock, process["capabilities"]["effective"], devices


def test_the_device_plugin_registered_its_resource_with_the_kubelet(host):
    # step 7's evidence, kept before step 8 retired the plugin and its pod
    checkpoint = json.loads(host.file("/var/lib/rdma-vm/shared-pod-checkpoint.json").content_string)
    entries = checkpoint["Data"]["PodDeviceEntries"]
    assert [entry["ResourceName"] for entry in entries] == ["rdma/hca_shared_devices_a"], entries
    assert "rdma/hca_shared_devices_a" in checkpoint["Data"]["RegisteredDevices"]
    # the plugin's own check of the RDMA subsystem's netns mode (it exits on exclusive) passed on the shared node
    log = host.file("/var/lib/rdma-vm/shared-dp.log").content_string
    assert "All servers started." in log, log[-2000:]


def test_the_rdma_pod_ran_with_an_rdma_device_and_unlimited_memlock(host):
    memlock, capabilities, devices = memlock_and_devices(
        json.loads(host.file("/var/lib/rdma-vm/shared-pod-inspect.json").content_string))
    assert memlock == [(float(2 ** 64 - 1), float(2 ** 64 - 1))], memlock
    assert "CAP_IPC_LOCK" not in capabilities
    assert any(path.startswith("/dev/infiniband/uverbs") for path in devices), devices


def test_the_node_booted_the_newer_kernel_in_exclusive_mode_with_the_collections_settings(host):
    # step 8: Debian's backported kernel, installed after rdma_netns persisted exclusive mode
    release = host.check_output("uname -r")
    assert int(release.split(".")[0]) >= 7, release
    assert host.check_output("rdma system show").startswith("netns exclusive")
    assert host.file("/sys/module/ib_core/parameters/netns_mode").content_string.strip() == "N"
    assert "options ib_core netns_mode=0" in host.file("/etc/modprobe.d/rdma-k8s-node-ib_core.conf").content_string
    assert re.search(r"(^| )ib_core\.netns_mode=0( |$)", host.file("/proc/cmdline").content_string)
    # the new kernel's initramfs (its postinst generated it) carries the collection's file: ib_core loads there
    listing = host.check_output("lsinitramfs /boot/initrd.img-%s", release)
    assert "etc/modprobe.d/rdma-k8s-node-ib_core.conf" in listing.split()
    assert "ib_core.ko" in listing


def test_the_exclusive_pod_had_an_rdma_device_of_its_own_and_unlimited_memlock(host):
    spec = json.loads(host.file("/var/lib/rdma-vm/exclusive-pod-inspect.json").content_string)
    memlock, capabilities, devices = memlock_and_devices(spec)
    assert memlock == [(float(2 ** 64 - 1), float(2 ** 64 - 1))], memlock
    assert "CAP_IPC_LOCK" not in capabilities
    # the one device node the play handed over, as a device plugin's allocation would
    infiniband = [path for path in devices if path.startswith("/dev/infiniband/")]
    assert len(infiniband) == 1 and re.match(r"/dev/infiniband/uverbs[0-9]+$", infiniband[0]), devices
    # the sandbox's own network namespace, which containerd pinned for the CNI (a host-network pod has none)
    sandbox = json.loads(host.file("/var/lib/rdma-vm/exclusive-sandbox-inspect.json").content_string)
    namespaces = sandbox["info"]["runtimeSpec"]["linux"]["namespaces"]
    assert [n["path"] for n in namespaces if n["type"] == "network"][0].startswith("/var/run/netns/cni-"), namespaces
    assert sandbox["status"]["network"]["ip"] == "10.81.0.21"
