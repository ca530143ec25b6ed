"""The mount caches positive directory entries (hwsim/fusefs.py ENTRY_TIMEOUT), never what the kernel would not.

Each test first walks the paths it later removes or renames, so that the kernel holds their dentries, then changes
the node and looks again well inside the entry timeout: every open, stat, readlink and listdir still reaches the
daemon, which answers from the node's current state, as sysfs's own revalidation (kernfs_dop_revalidate) does.
"""

import errno
import os
import time

from hwsim_helpers import errno_of

import hwsim.fusefs

NUMVFS = "sys/class/net/ibp24s0/device/sriov_numvfs"
VF = "sys/bus/pci/devices/0000:18:00.1"


def write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        return os.write(fd, data.encode())
    finally:
        os.close(fd)


def warm(root, paths):
    """Look every path up (and read the files, list the directories): their dentries are now cached."""
    for rel in paths:
        path = root / rel
        os.lstat(path)
        if path.is_file():
            path.read_bytes()
        elif path.is_dir() and not path.is_symlink():
            os.listdir(path)


def test_the_cache_is_short_and_covers_positive_entries_only():
    assert 0 < hwsim.fusefs.ENTRY_TIMEOUT <= 1.0


def test_removed_vfs_are_gone_at_once_through_cached_dentries(dgx):
    root = dgx.root
    write(root / NUMVFS, "2")
    cached = [VF, VF + "/infiniband", VF + "/infiniband/mlx5_12/node_guid", VF + "/physfn", "sys/class/infiniband/mlx5_12/ports/1/state",
              "sys/bus/pci/devices/0000:18:00.0/virtfn0", "sys/class/net/ibp24s0v0/mtu"]
    warm(root, cached)
    write(root / NUMVFS, "0")  # the first lookups below come within milliseconds, well inside the entry timeout
    for rel in cached:
        assert errno_of(os.lstat, root / rel) == errno.ENOENT, rel
    assert errno_of(os.open, root / VF / "infiniband/mlx5_12/node_guid", os.O_RDONLY) == errno.ENOENT
    assert errno_of(os.readlink, root / "sys/bus/pci/devices/0000:18:00.0/virtfn0") == errno.ENOENT
    # a directory held in the cache does not open, and is not accessible (libfuse's defaults said yes to both)
    assert errno_of(os.open, root / VF / "infiniband", os.O_RDONLY | os.O_DIRECTORY) == errno.ENOENT
    assert errno_of(os.listdir, root / VF / "infiniband") == errno.ENOENT
    assert not os.access(root / VF / "infiniband", os.F_OK)
    assert "0000:18:00.1" not in os.listdir(root / "sys/bus/pci/devices")
    assert "mlx5_12" not in os.listdir(root / "sys/class/infiniband")
    assert not [n for n in os.listdir(root / "sys/bus/pci/devices/0000:18:00.0") if n.startswith("virtfn")]
    # and they come back at the same paths, with the new VFs' own values
    write(root / NUMVFS, "1")
    assert os.readlink(root / "sys/bus/pci/devices/0000:18:00.0/virtfn0") == "../0000:18:00.1"
    assert (root / VF / "infiniband/mlx5_12/node_guid").read_text(encoding="utf-8") == "0000:0000:0000:0000\n"
    assert errno_of(os.lstat, root / "sys/bus/pci/devices/0000:18:00.0/virtfn1") == errno.ENOENT


def test_a_netdev_renamed_by_udev_leaves_no_old_name_behind(dgx):
    root = dgx.root
    # long enough that the kernel's name is still there when listed, on a loaded machine (CI runs this beside the
    # QEMU lane: 0.3 s was not always enough between the write and the listing)
    dgx.call({"cmd": "set_delay", "name": "udev_rename", "seconds": 5})
    write(root / NUMVFS, "1")
    names = set(os.listdir(root / "sys/class/net"))
    kernel_names = sorted(n for n in names if n.startswith("ib") and not n.startswith("ibp"))
    assert kernel_names, names
    old = "sys/class/net/%s" % kernel_names[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:  # the old name's dentries kept fresh in the kernel's cache (1 s) until udev renames it
            warm(root, [old, old + "/mtu", old + "/device"])
        except FileNotFoundError:
            break  # renamed (the node applies due events at the start of every operation)
        time.sleep(0.1)
    assert errno_of(os.lstat, root / old) == errno.ENOENT
    assert errno_of(os.open, root / old / "mtu", os.O_RDONLY) == errno.ENOENT
    assert (root / "sys/class/net/ibp24s0v0").is_symlink()
    assert kernel_names[0] not in os.listdir(root / "sys/class/net")


def test_a_path_that_appears_is_seen_at_once_after_a_failed_lookup(dgx):
    root = dgx.root
    assert errno_of(os.lstat, root / VF) == errno.ENOENT  # a negative lookup: not cached (negative_timeout 0)
    write(root / NUMVFS, "1")
    assert (root / VF).is_dir()
