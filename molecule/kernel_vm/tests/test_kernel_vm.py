"""Verify the VM after its reboot through GRUB: the running kernel has what the collection configured."""

from __future__ import annotations


def test_running_kernel_has_the_boot_arguments(host):
    args = host.file("/proc/cmdline").content_string.split()
    for wanted in ("iommu=pt", "ib_core.netns_mode=1"):
        assert args.count(wanted) == 1, args
    assert any(a in args for a in ("intel_iommu=on", "amd_iommu=on")), args


def test_rdma_core_is_in_the_persisted_mode(host):
    assert host.file("/sys/module/ib_core/parameters/netns_mode").content_string.strip() == "Y"
    assert host.run("rdma system show").stdout.startswith("netns shared ")
    assert host.file("/etc/modprobe.d/rdma-k8s-node-ib_core.conf").content_string.rstrip().endswith(
        "options ib_core netns_mode=1")


def test_soft_roce_device_is_back(host):
    assert host.file("/sys/class/infiniband/rxe0").exists
    assert "ACTIVE" in host.file("/sys/class/infiniband/rxe0/ports/1/state").content_string


def test_pod_namespace_did_not_survive_the_reboot(host):
    assert "pod-sandbox-1" not in host.run("ip netns list").stdout


def test_sysctls_apply_at_boot(host):
    assert host.sysctl("net.ipv4.conf.all.arp_ignore") == 1
    assert host.sysctl("net.ipv4.conf.eth0.arp_ignore") == 2
    assert host.sysctl("net.ipv4.conf.eth0.rp_filter") == 2
