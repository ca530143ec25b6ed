"""Fixtures for the hwsim tests: make tests/ importable, a fake clock, and FUSE mounts that always unmount."""

import sys
import uuid
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[2]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import hwsim  # noqa: E402  pylint: disable=wrong-import-position
from hwsim import mount as hwsim_mount  # noqa: E402  pylint: disable=wrong-import-position

SHIMS = TESTS_DIR / "hwsim" / "shims"


class FakeClock:
    """A monotonic clock the test advances by hand, so delay behaviour is deterministic."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        """Move time forward."""
        self.now += seconds


@pytest.fixture
def clock():
    """A fresh fake clock."""
    return FakeClock()


@pytest.fixture
def make_node(clock):
    """Factory: make_node('dgx-h100', etc_dir=None, **delays) -> Node using the fake clock and no real sleeping."""
    sleeps = []

    def make(name="dgx-h100", etc_dir=None, **delays):
        node = hwsim.Node(hwsim.load(name), etc_dir=etc_dir, clock=clock, sleep=sleeps.append)
        node.delays.update(delays)
        node.sleeps = sleeps
        return node
    return make


def _require_fuse():
    reason = hwsim_mount.fuse_available()
    if reason:
        pytest.skip(f"FUSE tests need /dev/fuse and fusermount3: {reason}")


@pytest.fixture(scope="module")
def dgx_mount(tmp_path_factory):
    """dgx-h100 mounted for a whole test module; tests reset it through the ctl file."""
    _require_fuse()
    root = tmp_path_factory.mktemp("mnt") / f"dgx-{uuid.uuid4().hex[:6]}"
    with hwsim.mounted("dgx-h100", root) as mnt:
        yield mnt


@pytest.fixture
def dgx(dgx_mount):
    """The module's dgx-h100 mount, powered on fresh, with no faults and no delays."""
    dgx_mount.call({"cmd": "fault_clear"})
    for name in ("sriov_numvfs_write", "vf_probe", "bind", "udev_rename"):
        dgx_mount.call({"cmd": "set_delay", "name": name, "seconds": 0})
    dgx_mount.call({"cmd": "reset"})
    return dgx_mount
