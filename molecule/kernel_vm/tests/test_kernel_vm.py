"""Verify the VM after its reboot through GRUB's configuration: the running kernel has what the collection
configured, the initramfs it booted carries the persisted netns mode, and containers created through CRI get
memlock unlimited from containerd_rdma's base runtime spec."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", pathlib.Path(__file__).resolve().parents[3]))
SCENARIO = os.environ.get("MOLECULE_SCENARIO_NAME", "kernel_vm")
EPHEMERAL = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
STATE = ROOT / ".cache/vm-run" / SCENARIO
NETNS_CONF = "etc/modprobe.d/rdma-k8s-node-ib_core.conf"
UNLIMITED = "unlimited"


def name_of(host):
    return host.backend.get_hostname()


def test_running_kernel_has_the_boot_arguments(host):
    args = host.file("/proc/cmdline").content_string.split()
    for wanted in ("iommu=pt", "ib_core.netns_mode=1"):
        assert args.count(wanted) == 1, args
    # the vendor IOMMU switch is off by default (ACS redirection would slow GPUDirect RDMA down)
    assert not any(a in args for a in ("intel_iommu=on", "amd_iommu=on")), args


def test_rdma_core_is_in_the_persisted_mode(host):
    assert host.file("/sys/module/ib_core/parameters/netns_mode").content_string.strip() == "Y"
    assert host.run("rdma system show").stdout.startswith("netns shared ")
    assert host.file("/" + NETNS_CONF).content_string.rstrip().endswith("options ib_core netns_mode=1")


def cpio_files(data):
    """{name: content} of the newc archives in a decompressed initramfs (NUL padding between archives)."""
    files, pos = {}, 0
    while pos < len(data):
        if data[pos] == 0:
            pos += 1
            continue
        assert data[pos:pos + 6] in (b"070701", b"070702"), pos
        size, namesize = int(data[pos + 54:pos + 62], 16), int(data[pos + 94:pos + 102], 16)
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos = (pos + 110 + namesize + 3) & ~3
        files[name] = data[pos:pos + size]
        pos = (pos + size + 3) & ~3
    return files


def test_booted_initramfs_loads_ib_core_with_the_persisted_mode(host):
    # side_effect.yml booted the initramfs that grub.cfg names, copied from the VM after rdma_netns regenerated it
    release = host.check_output("uname -r")
    booted = STATE / ("%s-boot" % name_of(host)) / "boot" / ("initrd.img-%s" % release)
    image = booted.read_bytes()
    assert host.check_output("sha256sum /boot/initrd.img-%s" % release).split()[0] == \
        subprocess.run(["sha256sum", str(booted)], check=True, capture_output=True, text=True).stdout.split()[0]
    files = cpio_files(gzip.decompress(image))      # scripts/build-vm: COMPRESS=gzip, no early archive
    assert files[NETNS_CONF].decode().rstrip().endswith("options ib_core netns_mode=1")
    assert any(name.endswith("/ib_core.ko") for name in files)
    assert "ib_core" in files["conf/modules"].decode().split()   # loaded in the initramfs, before the root fs


def test_soft_roce_device_is_back(host):
    assert host.file("/sys/class/infiniband/rxe0").exists
    assert "ACTIVE" in host.file("/sys/class/infiniband/rxe0/ports/1/state").content_string


def test_pod_namespace_did_not_survive_the_reboot(host):
    assert "pod-sandbox-1" not in host.run("ip netns list").stdout


def test_sysctls_apply_at_boot(host):
    assert host.sysctl("net.ipv4.conf.all.arp_ignore") == 1
    assert host.sysctl("net.ipv4.conf.eth0.arp_ignore") == 2
    assert host.sysctl("net.ipv4.conf.eth0.rp_filter") == 2


def test_containerd_runs_with_memlock_unlimited_after_the_reboot(host):
    assert host.service("containerd").is_running
    pid = host.check_output("systemctl show -p MainPID --value containerd")
    line = [l for l in host.file("/proc/%s/limits" % pid).content_string.splitlines()
            if l.startswith("Max locked memory")][0]
    assert line.split()[3:5] == [UNLIMITED, UNLIMITED], line


@pytest.fixture(scope="module")
def cri(host):
    """cri_ulimit's result for a pod's container as root and as uid 1000, through CRI over ssh."""
    argv = [sys.executable, str(ROOT / "tests/cri/cri_ssh.py"), "--ssh-config", str(STATE / "ssh_config"),
            "--host", name_of(host), "--image", "localhost/cri-test:1", "--uid", "0", "--uid", "1000"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail("cri_ssh.py failed (rc %s): %s" % (done.returncode, done.stderr[-3000:]))
    print(done.stdout)
    return {result["uid"]: result for result in json.loads(done.stdout)}


@pytest.mark.parametrize("uid", [0, 1000])
def test_cri_container_has_memlock_unlimited(cri, uid):
    result = cri[uid]
    assert (result["memlock_soft"], result["memlock_hard"]) == (UNLIMITED, UNLIMITED), result
    assert result["shell"]["l"] == UNLIMITED and result["shell"]["Hl"] == UNLIMITED, result


@pytest.mark.parametrize("uid", [0, 1000])
def test_without_the_base_spec_memlock_was_finite(uid):
    # prepare.yml ran the same probe before the collection: containerd's default is the kernel's 8 MiB
    baseline = {r["uid"]: r for r in json.loads((EPHEMERAL / "cri-baseline-rdma-vm.json").read_text())}[uid]
    assert baseline["memlock_hard"] != UNLIMITED and baseline["memlock_hard"] <= 64 * 1024 * 1024, baseline
    assert baseline["shell"]["l"] != UNLIMITED, baseline


def test_fabric_acceptance_report(host):
    """validate.yml (side_effect) wrote the audit's report formats: a real ib_write_bw result and every fault row."""
    reports = EPHEMERAL / "rdma-validate"
    report = json.loads((reports / "report.json").read_text())
    rows = {row["id"]: row for row in report["pairs"]}
    passing = rows["node-a--node-b--r0"]
    assert passing["status"] == "pass" and passing["gbps"] > 0 and passing["pct_of_line_rate"] > 0
    assert "BW average[Gb/sec]" in passing["client_output"]
    assert report["summary"]["by_status"]["fail"] == 5
    junit = ET.parse(str(reports / "junit.xml")).getroot()
    assert junit.get("failures") == "5"
    assert "| node-a -> node-b | 0 | rxe0 -> rxe0 |" in (reports / "report.md").read_text()
    assert host.run("pgrep -f 'ib_write_bw|perftest-hang'").rc == 1
