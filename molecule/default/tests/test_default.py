"""Verify the simulated nodes of the default scenario (testinfra, connection podman).

Expectations come from the same vars/<archetype>.yml as converge.yml; which archetype a container
simulates is in its HWSIM_SPEC environment variable (set by create.yml).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

SCENARIO = Path(__file__).resolve().parent.parent
SHIM_DIR = SCENARIO.parent.parent / "tests" / "hwsim" / "shims"
REQUIRED_SHIMS = {"rdma", "ip", "modprobe", "mstconfig", "ofed_info"}
SHIMS = sorted(REQUIRED_SHIMS | {p.name for p in SHIM_DIR.iterdir() if p.is_file() and os.access(p, os.X_OK)})


@pytest.fixture(scope="module")
def expect(host):
    spec = host.run("printenv HWSIM_SPEC").stdout.strip()
    assert spec, "the container has no HWSIM_SPEC: was it made by this scenario's create.yml?"
    name = os.path.basename(spec)
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    with (SCENARIO / "vars" / f"{name}.yml").open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    failed = host.run("systemctl --failed --no-legend --plain").stdout
    assert state.stdout.strip() == "running", failed


@pytest.mark.parametrize("shim", SHIMS)
def test_shims_come_first_on_path(host, shim):
    found = host.run(f"command -v {shim}")
    assert found.rc == 0, f"{shim} is not on PATH"
    assert found.stdout.strip() == f"/usr/local/sbin/{shim}"
    assert host.file(f"/usr/local/sbin/{shim}").mode & 0o111


def test_rdma_shim_answers_from_the_simulator(host, expect):
    """The shim runs on the container's own Python and reaches the FUSE node through the bind mount."""
    out = host.run("rdma dev")
    assert out.rc == 0, out.stderr
    names = [line.split(":")[1].strip() for line in out.stdout.splitlines() if line.strip()]
    assert sorted(names) == sorted(expect["rdma_devices"])


def test_simulator_location_is_configured(host):
    assert host.file("/etc/environment").contains("^HWSIM_ROOT=/opt/hwsim$")
    assert host.file("/opt/hwsim/.hwsim/ctl").exists


def test_host_root_view(host):
    for name in ("etc", "var", "boot", "run", "usr"):
        # bind mounts of the container's own trees (the collection resolves host_root as a chroot)
        assert host.run(f"findmnt -n /opt/hostroot/{name}").rc == 0, f"/opt/hostroot/{name} is not a mount"
        assert host.file(f"/opt/hostroot/{name}").is_directory and not host.file(f"/opt/hostroot/{name}").is_symlink
    for name in ("bin", "sbin", "lib"):
        assert host.file(f"/opt/hostroot/{name}").linked_to == f"/opt/hostroot/usr/{name}"
    # sys and proc are the simulator's (bind mounts of the FUSE node), not the container's
    for path in ("/opt/hwsim", "/opt/hostroot/sys", "/opt/hostroot/proc"):
        fstype = host.run(f"findmnt -n -o FSTYPE {path}").stdout.strip()
        assert fstype.startswith("fuse"), f"{path} is {fstype or 'not a mount point'}, not the hwsim FUSE node"
    assert host.file("/opt/hostroot/sys/class").is_directory
    assert host.file("/opt/hostroot/proc/cmdline").exists


def test_infiniband_devices_match_spec(host, expect):
    listed = host.run("ls -1 /opt/hostroot/sys/class/infiniband")
    assert listed.rc == 0, listed.stderr
    assert sorted(listed.stdout.split()) == sorted(expect["rdma_devices"])


def test_ci_host_arp_ignore_unchanged():
    """The containers may set net.* in their own netns; the CI host's value must not move."""
    baseline = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "host-arp_ignore").read_text(encoding="utf-8")
    now = Path("/proc/sys/net/ipv4/conf/all/arp_ignore").read_text(encoding="utf-8")
    assert now.strip() == baseline.strip()
