"""Verify the drivers scenario (testinfra, connection podman) after side_effect: DOCA 3.2.0 installed by real apt
from the node's mirror, pinned, built by the DKMS stand-in, running in the simulated kernel after an openibd
restart, and GPUDirect RDMA on the path each node can use.

Expected values are written out here, from the test repository's definition (tests/drivers/build_doca_repo.py)
and the node specs (specs/*.yaml), not taken from the collection's code.
"""

from __future__ import annotations

import os

import pytest

SYS = "/opt/hostroot/sys"
OFED = "25.10-1.2.8.0"
DKMS_VERSION = "25.10.OFED.25.10.1.2.8.1"
NODES = {  # spec file -> (kernel release, mirror, GPUDirect path)
    "ib-proprietary.yaml": ("6.1.0-28-amd64", "file:///srv/doca-mirror/doca/3.2.0/debian12/x86_64/", "peermem"),
    "ib-open.yaml": ("6.12.38+deb13-amd64", "http://127.0.0.1:8080/doca/3.2.0/debian13/x86_64/", "dmabuf"),
}


def assert_canonical_key(text):
    """What the role installs: one public key block in GnuPG's layout - no armor headers, 64-column base64, the
    checksum line - and no other armor line (nothing else apt or dnf could read a key from)."""
    lines = text.split("\n")
    assert lines[0] == "-----BEGIN PGP PUBLIC KEY BLOCK-----" and lines[1] == ""
    assert lines[-2:] == ["-----END PGP PUBLIC KEY BLOCK-----", ""]
    assert [line for line in lines if line.startswith("-") or ":" in line] == [lines[0], lines[-2]]
    body = lines[2:-2]
    assert body[-1].startswith("=") and len(body[-1]) == 5
    assert all(len(line) == 64 for line in body[:-2]) and 0 < len(body[-2]) <= 64


@pytest.fixture(scope="module")
def node(host):
    return NODES[os.path.basename(host.run("printenv HWSIM_SPEC").stdout.strip())]


def test_apt_source_key_and_pin(host, node):
    source = host.file("/etc/apt/sources.list.d/rdma-k8s-node-doca.sources").content_string
    assert f"URIs: {node[1]}\n" in source and "Suites: ./\n" in source
    assert "Signed-By: /etc/apt/keyrings/rdma-k8s-node-doca.asc\n" in source
    keyring = host.file("/etc/apt/keyrings/rdma-k8s-node-doca.asc")
    assert (keyring.user, keyring.group, keyring.mode) == ("root", "root", 0o644)
    assert_canonical_key(keyring.content_string)
    # the canonical copy of the key the role checked against doca_ofed_gpg_fingerprint: the repository's key is a
    # GnuPG 2 export, which is already canonical, so the two are the same bytes
    assert keyring.content_string == host.file("/srv/doca-mirror/doca/GPG-KEY-Mellanox.pub").content_string
    pin = host.file("/etc/apt/preferences.d/rdma-k8s-node-doca.pref").content_string
    assert "Package: doca-ofed\nPin: version 3.2.0-*\nPin-Priority: 1001\n" in pin, "the hand edit was repaired"
    policy = host.check_output("apt-cache policy doca-ofed")
    assert "Installed: 3.2.0-0.2.8" in policy and "*** 3.2.0-0.2.8 1001" in policy


def test_packages_configured_at_the_pinned_release(host):
    for name, version in (("doca-ofed", "3.2.0-0.2.8"), ("mlnx-ofed-kernel-dkms", DKMS_VERSION + "-1"),
                          ("ofed-scripts", "25.10.OFED.25.10.1.2.8-1")):
        package = host.package(name)
        assert package.is_installed and package.version == version
    assert host.check_output("dpkg --audit") == "", "nothing half-configured (the failed DKMS build was retried)"


def test_ofed_info_reports_doca_ofed(host):
    assert host.check_output("ofed_info -s") == f"OFED-internal-{OFED}:"
    assert host.check_output("ofed_info -n") == OFED


def test_dkms_built_and_installed_for_the_running_kernel(host, node):
    kernel = node[0]
    link = host.file(f"/var/lib/dkms/mlnx-ofed-kernel/kernel-{kernel}-x86_64")
    assert link.is_symlink and link.linked_to.endswith(f"/{DKMS_VERSION}/{kernel}/x86_64")
    modules = host.file(f"/var/lib/dkms/mlnx-ofed-kernel/{DKMS_VERSION}/{kernel}/x86_64/module").listdir()
    assert {"mlx5_core.ko", "mlx5_ib.ko", "ib_uverbs.ko", "rdma_ucm.ko", "ib_umad.ko", "ib_ipoib.ko"} <= set(modules)
    assert not host.file(f"/var/lib/dkms/mlnx-ofed-kernel/{DKMS_VERSION}/build").exists
    assert not host.file("/var/lib/dkms/mlnx-ofed-kernel/24.10.OFED.24.10.1.1.4.1").exists, "old release removed"


def test_the_simulated_kernel_runs_doca_ofeds_modules(host):
    for module in ("ib_core", "mlx5_core", "mlx5_ib", "ib_uverbs", "rdma_ucm", "ib_umad", "ib_ipoib"):
        assert host.file(f"{SYS}/module/{module}/version").content_string == "25.10-1.2.8\n", module
    assert host.file(f"{SYS}/class/infiniband/mlx5_0").exists
    assert host.file(f"{SYS}/class/net/ibp2s0").exists


def test_openibd_ran(host):
    openibd = host.service("openibd")
    assert openibd.is_enabled and openibd.is_running


def test_gpudirect_path(host, node):
    conf = host.file("/etc/modules-load.d/nvidia-peermem.conf")
    dropin = host.file("/etc/systemd/system/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf")
    banner = host.file("/opt/hostroot/proc/driver/nvidia/version").content_string
    if node[2] == "peermem":
        assert banner.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05")
        assert host.file(f"{SYS}/module/nvidia_peermem").is_directory
        assert conf.content_string.endswith("\nnvidia_peermem\n")
        assert "ExecStartPost=-/usr/local/sbin/modprobe nvidia_peermem" in host.check_output(
            "systemctl cat openibd.service")
        assert dropin.exists
    else:
        assert banner.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08")
        assert not host.file(f"{SYS}/module/nvidia_peermem").exists
        assert not conf.exists and not dropin.exists


def test_el_repository_file(host, node):
    if node[2] != "dmabuf":
        pytest.skip("rendered on the trixie node only")
    text = host.file("/tmp/el-yum.repos.d/rdma-k8s-node-doca.repo").content_string
    assert "[rdma-k8s-node-doca]\n" in text
    assert "baseurl = https://linux.mellanox.com/public/repo/doca/3.2.0/rhel9.4/x86_64/\n" in text
    # dnf imports the key from the copy the role checked, never from the URL
    assert "gpgkey = file:///tmp/el-rpm-gpg/RPM-GPG-KEY-rdma-k8s-node-doca\n" in text
    key = host.file("/tmp/el-rpm-gpg/RPM-GPG-KEY-rdma-k8s-node-doca")
    assert key.mode == 0o644
    assert_canonical_key(key.content_string)
    assert "gpgcheck = 1\n" in text and "enabled = 1\n" in text
