"""A simulated node for module tests: the hwsim FUSE mount seen through an assembled host root.

``root/sys`` and ``root/proc`` are the simulator's (bind mounts, hwsim/bind.py), ``root/etc`` a real directory the simulator also reads
at power-on (modprobe.d, modules-load.d), and the command shims (``rdma``, ``ip``, ``modprobe`` ...) come first
on PATH, talking to the same simulated kernel.  The module under test runs unchanged with ``host_root=root``.
"""

import contextlib
import os
import pathlib

import pytest

import hwsim
import hwsim.bind

SHIMS = pathlib.Path(hwsim.__file__).resolve().parent / "shims"


class SimNode:
    """Handles for a test: the host root, the mount (``sim.call({...})`` drives the simulator), the etc dir."""

    def __init__(self, root, mount, etc):
        self.root = root
        self.mount = mount
        self.etc = etc

    def call(self, command):
        """Send one control command to the simulator and return its result."""
        return self.mount.call(command)

    def reboot(self):
        """Power-on reset: the simulated hardware forgets runtime state and rereads etc/."""
        return self.call({"cmd": "reset"})


@contextlib.contextmanager
def sim_node(spec, tmp_path, monkeypatch, threads=False):
    """Mount ``spec`` and yield a SimNode; always unmounts.  The daemon serves one request at a time (about twice as
    fast: the module is its only caller) unless ``threads``: a test that injects hang or delay faults needs them."""
    reason = hwsim.fuse_available()
    if reason:
        pytest.skip("FUSE unavailable: %s" % reason)
    etc = tmp_path / "etc"
    for directory in ("modprobe.d", "modules-load.d", "sysctl.d"):
        (etc / directory).mkdir(parents=True, exist_ok=True)
    reason = hwsim.bind.available()
    if reason:
        pytest.skip(reason)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with hwsim.mounted(spec, mnt, etc=etc, threads=threads) as mount:
        # bind mounts, as a pod sees /host: the collection resolves paths as in a chroot at the root
        with hwsim.bind.Assembled(tmp_path / "root", {"sys": mnt / "sys", "proc": mnt / "proc", "etc": etc}) as view:
            monkeypatch.setenv("PATH", "%s:%s" % (SHIMS, os.environ.get("PATH", "")))
            monkeypatch.setenv("HWSIM_ROOT", str(mnt))
            yield SimNode(view.root, mount, etc)
