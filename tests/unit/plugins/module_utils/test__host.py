"""HostRoot: path mapping under a root, absence vs failure, and bad roots."""

import errno
import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, HostRootError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot


@pytest.fixture
def node(tmp_path):
    (tmp_path / "sys/devices/pci0000:17/0000:17:00.0").mkdir(parents=True)
    (tmp_path / "sys/devices/pci0000:17/0000:17:00.0/numa_node").write_text("1\n")
    (tmp_path / "sys/devices/pci0000:17/0000:17:00.0/vendor").write_text("0x15b3\n")
    (tmp_path / "sys/devices/pci0000:17/0000:17:00.0/garbage").write_text("zz\n")
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:17/0000:17:00.0", tmp_path / "sys/bus/pci/devices/0000:17:00.0")
    os.symlink("/etc/hostname", tmp_path / "sys/escape")
    return tmp_path


def test_paths_are_prefixed_and_cannot_climb_out(node):
    host = HostRoot(str(node))
    assert host.path("/sys/bus") == str(node) + "/sys/bus"
    assert host.path("/../../etc/passwd") == str(node) + "/etc/passwd"
    assert host.path("/") == str(node)
    assert HostRoot("/").path("/sys/../proc") == "/proc"


def test_relative_node_path_is_rejected(node):
    with pytest.raises(HostRootError, match="absolute"):
        HostRoot(str(node)).path("sys/bus")


@pytest.mark.parametrize("root, message", [
    ("/nonexistent/root", "does not exist"),
    ("relative/root", "absolute"),
    ("", "non-empty"),
])
def test_bad_roots_fail_clearly(root, message):
    with pytest.raises(HostRootError, match=message):
        HostRoot(root)


def test_root_that_is_a_file_fails(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(HostRootError, match="not a directory"):
        HostRoot(str(target))


def test_attributes_and_links(node):
    host = HostRoot(str(node))
    dev = "/sys/bus/pci/devices/0000:17:00.0"
    assert host.read_attr(dev + "/numa_node") == "1"
    assert host.read_int(dev + "/numa_node") == 1
    assert host.read_int(dev + "/vendor", base=16) == 0x15B3
    assert host.read_attr(dev + "/missing", default="d") == "d"
    assert host.resolve(dev) == "/sys/devices/pci0000:17/0000:17:00.0"
    assert host.link_name(dev) == "0000:17:00.0"
    assert host.readlink(dev + "/numa_node") is None
    assert host.listdir("/sys/bus/pci/devices") == ["0000:17:00.0"]
    assert host.listdir("/sys/class/infiniband") == []


def test_malformed_integer_is_reported_not_raised(node):
    problems = []
    value = HostRoot(str(node)).read_int("/sys/devices/pci0000:17/0000:17:00.0/garbage", default=-7, problems=problems)
    assert value == -7
    assert problems and "not an integer" in problems[0]["error"]


def test_absolute_link_is_rerooted_as_in_a_chroot(node):
    """sys/escape -> /etc/hostname: inside the root that is root/etc/hostname, never the machine's /etc/hostname."""
    host = HostRoot(str(node))
    assert host.resolve("/sys/escape") is None  # root/etc/hostname does not exist
    assert host.read_attr("/sys/escape") is None
    (node / "etc").mkdir()
    (node / "etc/hostname").write_text("node-7\n")
    assert host.resolve("/sys/escape") == "/etc/hostname"
    assert host.read_attr("/sys/escape") == "node-7"


def test_read_errors_other_than_absence_raise(node, monkeypatch):
    host = HostRoot(str(node))

    def failing_read(*args, **kwargs):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "read", failing_read)
    with pytest.raises(HostReadError, match="Input/output error"):
        host.read_attr("/sys/devices/pci0000:17/0000:17:00.0/numa_node")
    problems = []
    assert host.try_attr("/sys/devices/pci0000:17/0000:17:00.0/numa_node", "?", problems) == "?"
    assert problems[0]["path"].endswith("numa_node")


def test_write_attr_reaches_the_file_and_keeps_errno(node):
    host = HostRoot(str(node))
    host.write_attr("/sys/devices/pci0000:17/0000:17:00.0/numa_node", 3)
    assert host.read_int("/sys/devices/pci0000:17/0000:17:00.0/numa_node") == 3
    with pytest.raises(OSError) as info:
        host.write_attr("/sys/devices/pci0000:17/0000:17:00.0/nope/x", "1")
    assert info.value.errno == errno.ENOENT


def test_a_read_error_is_never_a_count(node, monkeypatch):
    """read_int_strict (what write decisions use): absent is the default, but EIO or garbage raise naming the file."""
    host = HostRoot(str(node))
    dev = "/sys/devices/pci0000:17/0000:17:00.0"
    assert host.read_int_strict(dev + "/missing", default=0) == 0
    with pytest.raises(HostReadError, match="garbage holds 'zz', not an integer"):
        host.read_int_strict(dev + "/garbage")

    def failing_read(*args, **kwargs):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "read", failing_read)
    with pytest.raises(HostReadError, match="numa_node: Input/output error"):
        host.read_int_strict(dev + "/numa_node", default=0)


def test_read_stat_is_the_status_and_the_bytes_of_one_open(node):
    """read_stat: what stat() and read_bytes() give, through one descriptor; None when absent; the same errors."""
    host = HostRoot(str(node))
    path = "/sys/bus/pci/devices/0000:17:00.0/numa_node"
    (node / "sys/devices/pci0000:17/0000:17:00.0/numa_node").chmod(0o444)
    info, data = host.read_stat(path)
    assert data == host.read_bytes(path) == b"1\n" and HostRoot.attr_text(data) == host.read_attr(path) == "1"
    assert (info.st_ino, info.st_mode) == (host.stat(path).st_ino, host.stat(path).st_mode)
    assert info.st_mode & 0o777 == 0o444
    assert host.read_stat("/sys/nope") is None and host.read_bytes("/sys/nope", default=b"x") == b"x"
    with pytest.raises(HostReadError, match="it is a directory"):
        host.read_stat("/sys/bus/pci/devices")
    with pytest.raises(HostReadError, match="larger than 1 bytes"):
        host.read_stat(path, limit=1)
