"""Verify the kernel scenario: real GRUB output, modprobe.d, the simulated netns mode, sysctls in both worlds."""

from __future__ import annotations

import pytest

GRUB_CFG = "/boot/grub/grub.cfg"


def default_entry_args(host):
    """Arguments of the first `linux` line of grub.cfg (GRUB's default entry)."""
    for line in host.file(GRUB_CFG).content_string.splitlines():
        words = line.split()
        if words and words[0] == "linux":
            return words[2:]
    raise AssertionError("no linux line in " + GRUB_CFG)


def vendor_arg(host):
    vendor = host.run("awk -F': ' '/^vendor_id/ {print $2; exit}' /proc/cpuinfo").stdout.strip()
    return {"GenuineIntel": "intel_iommu=on", "AuthenticAMD": "amd_iommu=on", "HygonGenuine": "amd_iommu=on"}[vendor]


def test_grub_default_entry_has_the_arguments(host):
    args = default_entry_args(host)
    for wanted in ("iommu=pt", vendor_arg(host), "pci=realloc", "ib_core.netns_mode=0"):
        assert args.count(wanted) == 1, (wanted, args)
    assert "quiet" in args, "arguments the operator had must survive"


def test_recovery_entry_gets_them_too(host):
    text = host.file(GRUB_CFG).content_string
    recovery = [line for line in text.splitlines() if line.strip().startswith("linux") and " single" in line]
    assert recovery and "iommu=pt" in recovery[0].split()


def test_dropins_are_ours_and_sourced(host):
    for name in ("99-rdma-k8s-node.cfg", "98-rdma-k8s-node-netns.cfg"):
        dropin = host.file("/etc/default/grub.d/" + name)
        assert dropin.exists and dropin.mode == 0o644
        assert dropin.content_string.startswith("# Managed by rdma.k8s_node.kernel_cmdline")


def test_netns_mode_is_persisted_and_live(host):
    conf = host.file("/etc/modprobe.d/rdma-k8s-node-ib_core.conf")
    assert conf.content_string.rstrip().endswith("options ib_core netns_mode=0")
    assert host.file("/opt/hostroot/sys/module/ib_core/parameters/netns_mode").content_string.strip() == "N"
    assert host.run("rdma system show").stdout.startswith("netns exclusive ")


@pytest.mark.parametrize("key, value", [("arp_ignore", 1), ("arp_announce", 2), ("rp_filter", 2)])
def test_host_wide_sysctls_in_the_containers_own_netns(host, key, value):
    assert host.sysctl(f"net.ipv4.conf.all.{key}") == value
    assert host.sysctl(f"net.ipv4.conf.default.{key}") == value


def test_rdma_netdev_sysctls_in_the_simulator(host):
    conf_dir = "/opt/hostroot/proc/sys/net/ipv4/conf"
    persisted = host.file("/etc/sysctl.d/90-rdma-k8s-node.conf").content_string
    netdevs = [line.split(".")[3] for line in persisted.splitlines()
               if line.startswith("net.ipv4.conf.") and line.split(".")[3] not in ("all", "default")]
    assert netdevs, persisted
    for netdev in set(netdevs):
        assert host.file(f"{conf_dir}/{netdev}/arp_ignore").content_string.strip() == "2"
        assert host.file(f"{conf_dir}/{netdev}/rp_filter").content_string.strip() == "2"
