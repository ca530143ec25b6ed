"""modprobe.d parsing and kmod's file order (kmod libkmod-config.c, libkmod-module.c, shared/util.c read upstream)."""

import pathlib

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe as mp


def test_logical_lines_join_continuations_and_drop_comments():
    text = "# comment\noptions ib_core \\\n  netns_mode=0\n\n  # indented comment\nblacklist foo\n"
    # freadline_wrapped(): the backslash and the newline vanish, nothing is put in their place
    assert mp.logical_lines(text) == ["options ib_core   netns_mode=0", "blacklist foo"]


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


CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"


def corpus(rel):
    return (CORPUS / rel).read_text()


def test_backslashes_as_kmod_reads_them():
    text = "options ib_core net\\\nns_mode=0\noptions x a=\\\\\\\nb=1\noptions y \\q=1\\"
    assert mp.numbered_lines(text) == [(1, "options ib_core netns_mode=0"), (3, "options x a=\\b=1"),
                                       (5, "options y q=1")]


def test_directives_fold_module_names_and_skip_what_kmod_ignores():
    text = "options ib-core netns_mode=0\noptions ib_core\nfrobnicate x\nblacklist nvidia-peermem\n" \
           "install ib_umad /sbin/modprobe --ignore-install ib_umad $CMDLINE_OPTS\n\t# not a comment for kmod\n"
    assert mp.directives(text) == [
        (1, "options", "ib_core", "netns_mode=0"), (4, "blacklist", "nvidia_peermem", ""),
        (5, "install", "ib_umad", "/sbin/modprobe --ignore-install ib_umad $CMDLINE_OPTS")]


@pytest.mark.parametrize("text, values", [
    ('options ib_core netns_mode="0"\n', ["0"]),       # the kernel's next_arg() drops the quotes
    ("options ib_core netns-mode=0\n", ["0"]),         # parameq(): '-' and '_' are the same
    ("options ib_core  other=1\tnetns_mode=1\n", ["1"]),
])
def test_option_values_with_the_kernels_rules(text, values):
    assert mp.option_values(text, "ib_core", "netns_mode") == values


def test_settings_in_kernel_order_command_line_last():
    layers = [("/etc/modprobe.d/10-a.conf", mp.directives("options ib_core netns_mode=1\n")),
              ("/etc/modprobe.d/90-b.conf", mp.directives("options ib_core foo=1 netns_mode=0\n"))]
    assert mp.settings_of(layers, "ib_core", "netns_mode") == [
        ("1", "/etc/modprobe.d/10-a.conf", 1), ("0", "/etc/modprobe.d/90-b.conf", 1)]
    assert mp.settings_of(layers, "ib_core", "netns_mode", ("/proc/cmdline", "ro ib-core.netns_mode=1 quiet"))[-1] == \
        ("1", "/proc/cmdline", None)


def test_with_ours_hides_the_same_name_and_sorts():
    layers = [("/usr/lib/modprobe.d/rdma-k8s-node-ib_core.conf", []), ("/lib/modprobe.d/systemd.conf", [])]
    assert [p for p, dummy in mp.with_ours(layers, "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", [])] == [
        "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", "/lib/modprobe.d/systemd.conf"]


def test_blacklist_and_install_first_match():
    layers = [("/etc/modprobe.d/a.conf", mp.directives("install nvidia_* /bin/true\nblacklist nvidia-peermem\n")),
              ("/etc/modprobe.d/b.conf", mp.directives("install nvidia_peermem /bin/false\n"))]
    assert mp.blacklisted(layers, "nvidia_peermem") == [("/etc/modprobe.d/a.conf", 2)]
    assert mp.blacklisted(layers, "nvidia_peermem", ("/proc/cmdline", "modprobe.blacklist=nouveau,nvidia-peermem")) == [
        ("/etc/modprobe.d/a.conf", 2), ("/proc/cmdline", None)]
    assert mp.install_command(layers, "nvidia-peermem") == ("/etc/modprobe.d/a.conf", 1, "/bin/true")
    assert mp.install_command(layers, "ib_core") is None


def test_real_files_from_mlnx_ofed_rdma_core_systemd_and_azure():
    assert mp.directives(corpus("mlnx-ofed/etc/modprobe.d/mlnx.conf")) == []
    assert mp.directives(corpus("mlnx-ofed/etc/modprobe.d/ib_ipoib.conf")) == [(6, "alias", "netdev_ib*", "ib_ipoib")]
    [(line, command, module, rest)] = mp.directives(corpus("mlnx-ofed/etc/modprobe.d/mlnx-bf.conf"))
    assert (command, module) == ("install", "ib_umad") and "$CMDLINE_OPTS" in rest
    assert mp.directives(corpus("rdma-core/debian12/etc/modprobe.d/mlx4.conf")) == []
    assert [d[1:3] for d in mp.directives(corpus("systemd/debian12/lib/modprobe.d/systemd.conf"))] == [
        ("options", "bonding"), ("options", "dummy"), ("options", "ifb")]
    assert mp.option_values(corpus("azhpc-images/etc/modprobe.d/nvidia.conf"), "nvidia", "NVreg_CreateImexChannel0") \
        == ["1"]
