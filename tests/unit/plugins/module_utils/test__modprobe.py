"""modprobe.d parsing and kmod's file order."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe as mp


def test_logical_lines_join_continuations_and_drop_comments():
    text = "# comment\noptions ib_core \\\n  netns_mode=0\n\n  # indented comment\nblacklist foo\n"
    assert mp.logical_lines(text) == ["options ib_core    netns_mode=0", "blacklist foo"]


@pytest.mark.parametrize("text, values", [
    ("options ib_core netns_mode=0\n", ["0"]),
    ("options ib-core netns_mode=1 other=2\noptions ib_core netns_mode=0\n", ["1", "0"]),
    ("options ib_uverbs netns_mode=0\n", []),
    ("install ib_core /bin/true\n#options ib_core netns_mode=0\n", []),
    ("options ib_core netns_mode\n", [""]),
])
def test_option_values(text, values):
    assert mp.option_values(text, "ib_core", "netns_mode") == values


def test_config_files_order_and_shadowing():
    listing = {
        "/lib/modprobe.d": ["50-a.conf", "10-b.conf", "aliases.conf", "README"],
        "/etc/modprobe.d": ["50-a.conf", "90-ours.conf", "x.conf.dpkg-old"],
        "/run/modprobe.d": ["20-run.conf"],
    }
    assert mp.config_files(listing) == [
        ("/lib/modprobe.d", "10-b.conf"), ("/run/modprobe.d", "20-run.conf"), ("/etc/modprobe.d", "50-a.conf"),
        ("/etc/modprobe.d", "90-ours.conf"), ("/lib/modprobe.d", "aliases.conf")]


def test_effective_option_last_wins():
    files = [("/etc/modprobe.d/10-a.conf", "options ib_core netns_mode=1\n"),
             ("/etc/modprobe.d/50-b.conf", "options mlx5_core foo=1\n"),
             ("/etc/modprobe.d/90-c.conf", "options ib_core netns_mode=0\n")]
    assert mp.effective_option(files, "ib_core", "netns_mode") == ("0", "/etc/modprobe.d/90-c.conf")
    assert mp.effective_option(files[:2], "ib_core", "netns_mode") == ("1", "/etc/modprobe.d/10-a.conf")
    assert mp.effective_option([], "ib_core", "netns_mode") == (None, None)
