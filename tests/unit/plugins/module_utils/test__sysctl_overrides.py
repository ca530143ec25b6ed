"""_sysctl's reading of other sysctl.d files, pure: systemd-sysctl's and procps' rules, and the override planner.

The rules were read in systemd src/sysctl/sysctl.c (parse_line, apply_all, apply_glob_option_with_prefix),
src/basic/conf-files.c, src/shared/sysctl-util.c (sysctl_normalize) and procps sysctl.c (PreloadSystem,
write_setting_list); real files come from tests/fixtures/realworld, read at test time.
"""

import pathlib

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as S
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"
OURS = "/etc/sysctl.d/90-rdma-k8s-node.conf"
SETTINGS = S.validate({"net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.all.arp_ignore": 1,
                       "net/ipv4/conf/eth0.100/arp_ignore": 2})


def corpus(rel):
    return (CORPUS / rel).read_text()


def layer(path, text):
    return (path, S.parse_file(text))


def ours(text=None):
    return S.parse_file(text if text is not None else S.render(SETTINGS))


@pytest.mark.parametrize("key, normalized", [
    ("net.ipv4.conf.all.rp_filter", "net/ipv4/conf/all/rp_filter"),
    ("net/ipv4/conf/all/rp_filter", "net/ipv4/conf/all/rp_filter"),
    # the first separator decides: dotted keys swap dots and slashes (a VLAN interface written eth0/100)
    ("net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/conf/eth0.100/rp_filter"),
    ("net/ipv4/conf/eth0.100/rp_filter", "net/ipv4/conf/eth0.100/rp_filter"),
    ("/net//ipv4/./conf/all/rp_filter/", "net/ipv4/conf/all/rp_filter"),
    ("net.ipv4.conf.*.rp_filter", "net/ipv4/conf/*/rp_filter"),
])
def test_keys_normalize_as_systemd_sysctl(key, normalized):
    assert S.normalize_key(key) == normalized


def test_parse_file_reads_systemds_50_default_with_globs_and_negative_matches():
    entries = S.parse_file(corpus("systemd/upstream/usr/lib/sysctl.d/50-default.conf"))
    by_key = dict((key, (value, line)) for key, value, line in entries)
    assert by_key["net/ipv4/conf/*/rp_filter"] == ("2", 26)
    assert by_key["net/ipv4/conf/all/rp_filter"] == (None, 27), "'-key' without '=' is a negative match"
    assert by_key["net/core/default_qdisc"] == ("fq_codel", 48), "'-key = value' is the key, failure ignored"
    assert by_key["net/ipv4/ping_group_range"] == ("0 2147483647", 45)


def test_parse_file_skips_comments_and_lines_without_assignment():
    assert S.parse_file("# a\n; b\n\n   \nnot an assignment\n  x.y =  1 2 \r\n") == [("x/y", "1 2", 6)]


def test_read_order_hides_names_and_sorts_across_directories():
    listing = {"/usr/lib/sysctl.d": ["50-default.conf", "99-protect-links.conf", "README"],
               "/etc/sysctl.d": ["99-sysctl.conf", "50-default.conf", ".hidden.conf"],
               "/run/sysctl.d": ["10-run.conf"]}
    assert S.read_order(listing) == ["/run/sysctl.d/10-run.conf", "/etc/sysctl.d/50-default.conf",
                                     "/usr/lib/sysctl.d/99-protect-links.conf", "/etc/sysctl.d/99-sysctl.conf"]


def test_with_ours_takes_its_name_and_place():
    layers = [layer("/usr/lib/sysctl.d/50-default.conf", ""), layer("/usr/lib/sysctl.d/90-rdma-k8s-node.conf", "a=1"),
              layer("/etc/sysctl.d/99-sysctl.conf", "")]
    placed = S.with_ours(layers, OURS, ours())
    assert [path for path, dummy in placed] == ["/usr/lib/sysctl.d/50-default.conf", OURS, "/etc/sysctl.d/99-sysctl.conf"]
    with pytest.raises(InputError):
        S.with_ours(layers, "/run/sysctl.d/90-x.conf", [])


def test_explicit_keys_beat_globs_whatever_the_order():
    options = S.boot_values([layer("/a/10.conf", "net.ipv4.conf.eth0.rp_filter = 0"),
                             layer("/a/20.conf", "net.ipv4.conf.*.rp_filter = 1")])
    assert S.boot_value(options, "net/ipv4/conf/eth0/rp_filter") == ("0", "/a/10.conf", 1)
    assert S.boot_value(options, "net/ipv4/conf/ib0/rp_filter") == ("1", "/a/20.conf", 1)
    assert S.boot_value(options, "net/ipv4/conf/ib0/arp_ignore") is None


def test_same_value_again_keeps_the_first_entry_another_value_moves_it_last():
    options = S.boot_values([layer("/a/10.conf", "x.y = 1\nx.z = 1"), layer("/a/20.conf", "x.y = 1\nx.z = 2")])
    assert options["x/y"] == ("1", "/a/10.conf", 1)
    assert list(options) == ["x/y", "x/z"] and options["x/z"] == ("2", "/a/20.conf", 2)


def test_later_globs_in_map_order_win_for_keys_without_an_explicit_entry():
    options = S.boot_values([layer("/a/10.conf", "net.ipv4.conf.*.rp_filter = 2"),
                             layer("/a/20.conf", "net.ipv4.conf.ib*.rp_filter = 0")])
    assert S.boot_value(options, "net/ipv4/conf/ib0/rp_filter")[0] == "0"
    assert S.boot_value(options, "net/ipv4/conf/eth0/rp_filter")[0] == "2"


def test_no_override_when_ours_is_last_or_others_agree():
    layers = [layer("/usr/lib/sysctl.d/50-default.conf", corpus("systemd/upstream/usr/lib/sysctl.d/50-default.conf")),
              layer("/etc/sysctl.d/95-same.conf", "net.ipv4.conf.all.rp_filter=2\n")]
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS) == []


def test_a_later_file_with_another_value_is_an_override_at_boot():
    layers = [layer("/etc/sysctl.d/99-zz-hardening.conf", "net.ipv4.conf.all.rp_filter = 1\n")]
    found = S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS)
    assert found == [{"key": "net.ipv4.conf.all.rp_filter", "want": "2", "value": "1",
                      "file": "/etc/sysctl.d/99-zz-hardening.conf", "line": 1, "reader": "systemd-sysctl",
                      "kind": "later_file"}]
    assert "99-zz-hardening.conf:1 sets net.ipv4.conf.all.rp_filter = 1" in S.describe_override(found[0])


def test_an_earlier_file_is_beaten_by_ours():
    layers = [layer("/etc/sysctl.d/10-early.conf", "net.ipv4.conf.all.rp_filter = 1\n")]
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS) == []


def test_a_later_negative_match_makes_systemd_skip_our_key():
    layers = [layer("/usr/lib/sysctl.d/99-x.conf", "-net.ipv4.conf.all.arp_ignore\n")]
    found = S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS)
    assert [(f["key"], f["kind"], f["value"]) for f in found] == [("net.ipv4.conf.all.arp_ignore", "excluded", None)]
    assert "writes nothing" in S.describe_override(found[0])


def test_a_later_glob_never_overrides_an_explicit_key_of_ours():
    layers = [layer("/etc/sysctl.d/99-x.conf", "net.ipv4.conf.*.rp_filter = 1\n")]
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS) == []


def test_vlan_interface_written_with_the_other_separator_is_the_same_key():
    layers = [layer("/etc/sysctl.d/99-x.conf", "net.ipv4.conf.eth0/100.arp_ignore = 0\n")]
    found = S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS)
    assert [(f["key"], f["value"]) for f in found] == [("net/ipv4/conf/eth0.100/arp_ignore", "0")]


def test_values_compare_as_words():
    layers = [layer("/etc/sysctl.d/99-x.conf", "net.ipv4.conf.all.rp_filter =   2  \n")]
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS) == []


def test_sysctl_conf_read_last_by_procps_only():
    conf = layer("/etc/sysctl.conf", "net.ipv4.conf.all.rp_filter=1\n")
    found = S.overrides(S.with_ours([], OURS, ours()), OURS, SETTINGS, conf)
    assert [(f["reader"], f["kind"], f["file"]) for f in found] == [("sysctl --system", "sysctl_conf", "/etc/sysctl.conf")]
    assert "not at boot" in S.describe_override(found[0])


def test_debian_link_makes_sysctl_conf_a_boot_override():
    """Debian's procps ships /etc/sysctl.d/99-sysctl.conf -> ../sysctl.conf: read after 90-rdma-k8s-node.conf."""
    text = corpus("debian12/etc/sysctl.conf").replace("#net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.all.rp_filter=1")
    layers = [layer("/etc/sysctl.d/99-sysctl.conf", text)]
    found = S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS, layer("/etc/sysctl.conf", text))
    assert [(f["reader"], f["file"], f["line"]) for f in found] == [("systemd-sysctl", "/etc/sysctl.d/99-sysctl.conf", 20)]


def test_debians_stock_sysctl_conf_sets_nothing():
    text = corpus("debian12/etc/sysctl.conf")
    layers = [layer("/etc/sysctl.d/99-sysctl.conf", text)]
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS, layer("/etc/sysctl.conf", text)) == []


def test_eks_al2023_files_leave_the_rdma_keys_alone():
    layers = [layer("/etc/sysctl.d/" + name, corpus("eks-al2023/etc/sysctl.d/" + name))
              for name in ("67-eks-reserved-ports.conf", "99-amazon.conf", "99-kubernetes-cri.conf")]
    conf = layer("/etc/sysctl.conf", corpus("eks-al2023/etc/sysctl.conf"))
    assert S.overrides(S.with_ours(layers, OURS, ours()), OURS, SETTINGS, conf) == []


def test_procps_writes_every_explicit_line_so_a_later_one_wins_even_after_a_negative_match():
    layers = [layer("/etc/sysctl.d/90-a.conf", "x.y = 1"), layer("/etc/sysctl.d/95-b.conf", "-x.y")]
    assert S.system_value(layers, "x/y") == ("1", "/etc/sysctl.d/90-a.conf", 1)
    assert S.boot_value(S.boot_values(layers), "x/y") == (None, "/etc/sysctl.d/95-b.conf", 1)
