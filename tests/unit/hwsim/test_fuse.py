"""The same kernel rules through a real FUSE mount: errno reaches os.write/open, reads work like sysfs reads."""

import errno
import os
import subprocess
import sys
import threading
import time

import pytest
from hwsim_helpers import errno_of

import hwsim

NUMVFS = "sys/class/net/ibp24s0/device/sriov_numvfs"


def write(path, data):
    """One write() on a fresh O_WRONLY fd, as `echo N > file` does."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        return os.write(fd, data.encode())
    finally:
        os.close(fd)


def test_reads_work_for_cat_python_and_small_os_reads(dgx):
    path = dgx.root / "sys/class/infiniband/mlx5_0/node_guid"
    assert path.read_text(encoding="utf-8") == "a088:c203:0055:1e20\n"
    assert os.stat(path).st_size == 4096
    assert subprocess.run(["cat", str(path)], capture_output=True, text=True, check=True).stdout == "a088:c203:0055:1e20\n"
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, 3) for dummy in range(8)]
    finally:
        os.close(fd)
    assert b"".join(chunks) == b"a088:c203:0055:1e20\n"
    assert (dgx.root / "proc/cmdline").read_text(encoding="utf-8").startswith("BOOT_IMAGE=")
    assert os.readlink(dgx.root / "sys/class/net/ibp24s0/device") == "../../../0000:18:00.0"


def test_sriov_errnos_through_the_mount(dgx):
    path = dgx.root / NUMVFS
    assert write(path, "2\n") == 2
    assert path.read_text(encoding="utf-8") == "2\n"
    assert errno_of(write, path, "3") == errno.EBUSY
    assert write(path, "2") == 1
    assert errno_of(write, path, "99") == errno.ERANGE
    assert errno_of(write, path, "x") == errno.EINVAL
    assert sorted(os.listdir(dgx.root / "sys/bus/pci/devices/0000:18:00.1/infiniband")) == ["mlx5_12"]
    assert (dgx.root / "sys/class/infiniband/mlx5_12/node_guid").read_text(encoding="utf-8") == "0000:0000:0000:0000\n"
    assert write(path, "0") == 1
    assert not (dgx.root / "sys/bus/pci/devices/0000:18:00.1").exists()


def test_read_only_missing_and_create(dgx):
    assert errno_of(open, dgx.root / "sys/bus/pci/devices/0000:18:00.0/vendor", "w", encoding="utf-8") == errno.EACCES
    assert errno_of(os.open, dgx.root / "sys/module/ib_core/parameters/netns_mode", os.O_WRONLY) == errno.EACCES
    assert errno_of(os.open, dgx.root / "sys/class/net/nosuch/mtu", os.O_RDONLY) == errno.ENOENT
    assert errno_of(os.open, dgx.root / "sys/class/net/newfile", os.O_WRONLY | os.O_CREAT) == errno.EACCES
    assert errno_of(os.mkdir, dgx.root / "sys/foo") == errno.EPERM
    assert errno_of(os.open, dgx.root / "sys/bus/pci/drivers/mlx5_core/bind", os.O_RDONLY) == errno.EACCES


def test_unbind_bind_with_admin_guid_through_mount(dgx):
    write(dgx.root / NUMVFS, "1")
    dgx.call({"cmd": "ip_link_set_vf", "dev": "ibp24s0", "vf": 0, "node_guid": "02:00:00:00:00:00:00:07"})
    drivers = dgx.root / "sys/bus/pci/drivers/mlx5_core"
    assert errno_of(write, drivers / "bind", "0000:18:00.1") == errno.EBUSY
    write(drivers / "unbind", "0000:18:00.1")
    assert errno_of(write, drivers / "unbind", "0000:18:00.1") == errno.ENODEV
    write(drivers / "bind", "0000:18:00.1\n")
    assert (dgx.root / "sys/class/infiniband/mlx5_12/node_guid").read_text(encoding="utf-8") == "0200:0000:0000:0007\n"


def test_vf_probe_delay_visible_through_mount(dgx):
    dgx.call({"cmd": "set_delay", "name": "vf_probe", "seconds": 0.6})
    write(dgx.root / NUMVFS, "1")
    assert os.path.islink(dgx.root / "sys/bus/pci/devices/0000:18:00.0/virtfn0")
    assert not (dgx.root / "sys/class/net/ibp24s0v0").exists()
    time.sleep(0.8)
    assert (dgx.root / "sys/class/net/ibp24s0v0").exists()


def test_fault_errno_and_hang_with_timeout(dgx):
    fault = dgx.call({"cmd": "fault_add", "path": NUMVFS, "op": "write", "errno": "EIO"})
    assert errno_of(write, dgx.root / "sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "1") == errno.EIO
    dgx.call({"cmd": "fault_clear", "id": fault["id"]})
    dgx.call({"cmd": "fault_add", "path": NUMVFS, "op": "write", "action": "hang", "seconds": 30})
    outcome = {}

    def writer():
        outcome["errno"] = errno_of(write, dgx.root / NUMVFS, "1")

    thread = threading.Thread(target=writer)
    started = time.monotonic()
    thread.start()
    thread.join(0.5)
    assert thread.is_alive(), "an injected hang must block the writer"
    assert (dgx.root / "proc/cmdline").exists()
    dgx.call({"cmd": "fault_clear"})
    thread.join(5)
    assert outcome["errno"] == errno.ETIMEDOUT
    assert time.monotonic() - started < 10


def test_netns_mode_switch_through_ctl(dgx):
    dgx.call({"cmd": "netns_add", "name": "cni-0"})
    with pytest.raises(hwsim.HwsimError) as info:
        dgx.call({"cmd": "rdma_system_set", "netns": "exclusive"})
    assert info.value.errno == "EBUSY"
    dgx.call({"cmd": "netns_del", "name": "cni-0"})
    dgx.call({"cmd": "rdma_system_set", "netns": "exclusive"})
    assert (dgx.root / "sys/module/ib_core/parameters/netns_mode").read_text(encoding="utf-8") == "N\n"
    dgx.call({"cmd": "reset"})
    assert (dgx.root / "sys/module/ib_core/parameters/netns_mode").read_text(encoding="utf-8") == "Y\n"


def test_bad_control_commands(dgx):
    assert dgx.ctl({"cmd": "nope"})["errno"] == "EINVAL"
    assert dgx.ctl({"no": "cmd"})["ok"] is False


def test_mount_twice_is_refused_and_cli_umount(tmp_path):
    reason = hwsim.fuse_available()
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, PYTHONPATH=str(hwsim.mount.PACKAGE_PARENT))
    mnt = tmp_path / "m"
    out = subprocess.run([sys.executable, "-m", "hwsim", "mount", "numa-split", str(mnt)], env=env, capture_output=True,
                         text=True, check=True)
    try:
        assert out.stdout.strip().isdigit()
        again = subprocess.run([sys.executable, "-m", "hwsim", "mount", "numa-split", str(mnt)], env=env,
                               capture_output=True, text=True, check=False)
        assert again.returncode == 1 and "already" in again.stderr
        listed = subprocess.run([sys.executable, "-m", "hwsim", "list"], env=env, capture_output=True, text=True,
                                check=True)
        assert "dgx-h100" in listed.stdout.split()
    finally:
        subprocess.run([sys.executable, "-m", "hwsim", "umount", str(mnt)], env=env, check=True)
    assert not os.path.ismount(mnt)


def test_a_single_threaded_mount_is_faster_and_refuses_what_would_block_it(tmp_path):
    """``threads=False`` (simnode's default): one request at a time, so a hang, a delay fault or a sleeping delay of
    the state model would stall every caller, the ctl file that releases it included: refused with a message; faults
    that do not block still work."""
    with hwsim.mounted("dgx-h100", tmp_path / "mnt", threads=False) as mnt:
        for fault in ({"action": "hang", "seconds": 1}, {"action": "delay", "seconds": 0.5}):
            with pytest.raises(hwsim.HwsimError, match="serves requests in threads") as raised:
                mnt.call(dict(fault, cmd="fault_add", path=NUMVFS, op="write"))
            assert raised.value.errno == "EINVAL"
        with pytest.raises(hwsim.HwsimError, match="sriov_numvfs_write delay needs a mount that serves requests in threads"):
            mnt.call({"cmd": "set_delay", "name": "sriov_numvfs_write", "seconds": 1})
        mnt.call({"cmd": "set_delay", "name": "vf_probe", "seconds": 0.1})  # an event due later, not a sleep
        mnt.call({"cmd": "fault_add", "path": NUMVFS, "op": "write", "errno": "EIO"})
        assert errno_of(write, mnt.root / NUMVFS, "1") == errno.EIO
        assert (mnt.root / "sys/class/infiniband/mlx5_0/node_guid").read_text(encoding="utf-8") == "a088:c203:0055:1e20\n"
