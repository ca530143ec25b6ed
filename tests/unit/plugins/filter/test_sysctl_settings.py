"""The rdma_sysctl role's settings builder."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._sysctl_settings import rdma_netdevs, rdma_sysctl_settings

FACTS = {"devices": [
    {"name": "mlx5_0", "is_vf": False, "netdevs": ["ibp24s0"]},
    {"name": "mlx5_1", "is_vf": False, "netdevs": ["enp41s0f0np0"]},
    {"name": "mlx5_12", "is_vf": True, "netdevs": ["ibp24s0v0"]},
    {"name": "mlx5_2", "is_vf": False, "netdevs": []},
]}


def test_interfaces_from_facts_skip_vfs():
    assert rdma_netdevs(FACTS) == ["ibp24s0", "enp41s0f0np0"]
    assert rdma_netdevs({}) == []


def test_order_and_keys():
    settings = rdma_sysctl_settings([], {"arp_ignore": 1, "rp_filter": 2}, {"arp_ignore": 2}, FACTS)
    assert list(settings.items()) == [
        ("net.ipv4.conf.all.arp_ignore", 1), ("net.ipv4.conf.all.rp_filter", 2),
        ("net.ipv4.conf.default.arp_ignore", 1), ("net.ipv4.conf.default.rp_filter", 2),
        ("net.ipv4.conf.ibp24s0.arp_ignore", 2), ("net.ipv4.conf.enp41s0f0np0.arp_ignore", 2)]


def test_explicit_interfaces_win_and_dots_use_slashes():
    settings = rdma_sysctl_settings(["eth0.100"], {}, {"rp_filter": 0}, FACTS)
    assert settings == {"net/ipv4/conf/eth0.100/rp_filter": 0}


@pytest.mark.parametrize("interfaces, host, per, message", [
    ("ib0", {}, {}, "list of interface names"),
    ([""], {}, {}, "list of interface names"),
    (["all"], {}, {}, "not an RDMA interface"),
    ([], [], {}, "host must be a dictionary"),
    ([], {}, None, "per_interface must be a dictionary"),
])
def test_bad_input(interfaces, host, per, message):
    with pytest.raises(AnsibleFilterError, match=message):
        rdma_sysctl_settings(interfaces, host, per, FACTS)
