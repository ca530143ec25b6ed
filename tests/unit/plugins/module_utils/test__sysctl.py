"""sysctl key spellings, value normalization, the drop-in text, and the kernel's max(all, interface) rule."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as sc
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError


@pytest.mark.parametrize("key, path, shown", [
    ("net.ipv4.conf.all.arp_ignore", "/proc/sys/net/ipv4/conf/all/arp_ignore", "net.ipv4.conf.all.arp_ignore"),
    ("net/ipv4/conf/eth0.100/rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter", "net/ipv4/conf/eth0.100/rp_filter"),
    ("/net/ipv4/conf/ibp24s0/rp_filter", "/proc/sys/net/ipv4/conf/ibp24s0/rp_filter", "net.ipv4.conf.ibp24s0.rp_filter"),
])
def test_key_spellings(key, path, shown):
    assert sc.proc_path(key) == path
    assert sc.display(key) == shown


@pytest.mark.parametrize("key", ["", " net.x", "net..x", "net/../../etc/passwd", "net.ipv4.conf.eth0;reboot.x", None, 3])
def test_bad_keys(key):
    with pytest.raises(InputError):
        sc.proc_path(key)


@pytest.mark.parametrize("value, shown", [(2, "2"), ("02", "2"), (" 1 ", "1"), ("4096  87380 6291456", "4096\t87380\t6291456"),
                                          ("fq_codel", "fq_codel")])
def test_values(value, shown):
    assert sc.normalize_value("k", value) == shown


@pytest.mark.parametrize("value", [True, None, "1; reboot", "$(x)"])
def test_bad_values(value):
    with pytest.raises(InputError):
        sc.normalize_value("k", value)


def test_validate_and_render():
    settings = sc.validate({"net.ipv4.conf.all.arp_ignore": 1, "net/ipv4/conf/eth0.100/rp_filter": "2"})
    assert sc.render(settings) == sc.HEADER + "net.ipv4.conf.all.arp_ignore = 1\nnet/ipv4/conf/eth0.100/rp_filter = 2\n"
    with pytest.raises(InputError, match="given twice"):
        sc.validate({"net.ipv4.conf.all.arp_ignore": 1, "net/ipv4/conf/all/arp_ignore": 1})
    with pytest.raises(InputError, match="non-empty"):
        sc.validate({})


def test_differs_compares_words():
    assert not sc.differs("4096\t87380\t6291456", "4096\t87380\t6291456")
    assert not sc.differs("1", "1")
    assert sc.differs("0", "1") and sc.differs(None, "1")


@pytest.mark.parametrize("values, param, iface, result", [
    ({"all": {"rp_filter": 1}, "ib0": {"rp_filter": 0}}, "rp_filter", "ib0", 1),
    ({"all": {"rp_filter": 0}, "ib0": {"rp_filter": 2}}, "rp_filter", "ib0", 2),
    ({"all": {"arp_ignore": 2}, "ib0": {"arp_ignore": 1}}, "arp_ignore", "ib0", 2),
    ({"all": {"forwarding": 1}, "ib0": {"forwarding": 0}}, "forwarding", "ib0", 0),
    ({"all": {}, "ib0": {}}, "rp_filter", "ib0", None),
    ({"all": {"rp_filter": 1}}, "rp_filter", "ib0", 1),
])
def test_effective_uses_the_max_rule(values, param, iface, result):
    assert sc.effective(values, param, iface) == result


@pytest.mark.parametrize("key, value, says", [
    ("net.ipv4.conf.all.arp_ignore", 4, "must be one of 0, 1, 2, 3, 8"),
    ("net.ipv4.conf.ib0.arp_announce", "3", "must be one of 0, 1, 2"),
    ("net.ipv4.conf.default.rp_filter", -1, "must be one of 0, 1, 2"),
    ("net.ipv4.conf.all.rp_filter", "1 2", "takes one integer"),
    ("net.ipv4.conf.all.arp_ignore", "", "empty value"),
    ("net.core.rmem_max", "9" * 50, "longer than any the kernel accepts"),
    ("net.core.rmem_max", "9" * 5000, "at most 4096"),
])
def test_values_are_typed_per_key_and_bounded(key, value, says):
    with pytest.raises(InputError, match=says):
        sc.normalize_value(key, value)


def test_typed_keys_accept_their_documented_values():
    assert [sc.normalize_value("net.ipv4.conf.all.arp_ignore", v) for v in (0, 1, 2, 3, 8)] == ["0", "1", "2", "3", "8"]
    assert sc.normalize_value("net.ipv4.conf.ib0.rp_filter", "02") == "2"


@pytest.mark.parametrize("key", ["-", "-net.core.rmem_max", "/-net/core/rmem_max"])
def test_a_key_cannot_start_with_a_dash(key):
    """Found by the fuzz suite: render() wrote "- = 0", which systemd-sysctl reads as the key "" with the
    ignore-failure prefix (and "-net.x" as net.x, not the key that was validated)."""
    with pytest.raises(InputError, match="cannot start with '-'"):
        sc.validate({key: 0})
    assert sc.display("net.core.-x") == "net.core.-x"
