"""The rooms' inventory-wide checks name a bounded number of hosts in their detail: the detail is repeated on every
host concerned, so naming every host made the report grow with the square of the inventory (docs/benchmarks.md)."""

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import judge as firmware_judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health import judge as health_judge


def test_host_lists_are_bounded_and_counted():
    for judge in (health_judge, firmware_judge):
        assert judge.host_list({"b", "a"}) == "a, b"
        names = ["n%04d" % i for i in range(1200)]
        assert judge.host_list(set(names)) == "1200 hosts: n0000, n0001, n0002, n0003, n0004 and 1195 more"


def _health(fw):
    return {"nics": [{"name": "mlx5_0", "hca_type": "MT4129", "fw_ver": fw}]}


def test_mixed_firmware_detail_does_not_grow_with_the_inventory():
    sizes = {}
    for count in (100, 1000):
        hosts = dict(("n%04d" % i, _health("28.39.1002" if i % 10 else "28.36.1010")) for i in range(count))
        out = health_judge.inventory_judge(hosts)
        checks = [c for checks in out.values() for c in checks]
        assert len(checks) == count and all(c["status"] == "fail" for c in checks)
        sizes[count] = len(json.dumps(checks)) / float(count)
        assert out["n0000"][0]["detail"] == (
            "MT4129 runs 2 firmware versions across the inventory: 28.36.1010 on %d hosts: n0000, n0010, n0020, "
            "n0030, n0040 and %d more; 28.39.1002 on %d hosts: n0001, n0002, n0003, n0004, n0005 and %d more"
            % (count // 10, count // 10 - 5, count - count // 10, count - count // 10 - 5))
    assert sizes[1000] < sizes[100] * 1.1  # bytes per host: constant, not linear in N


def _card(value):
    return {"cards": {"c": {"device": "0000:18:00.0", "device_type": "ConnectX7", "functions": {},
                            "params": {"SRIOV_EN": ["", value, value]}}}}


def test_firmware_inventory_detail_does_not_grow_with_the_inventory():
    hosts = dict(("n%04d" % i, _card("True(1)" if i % 50 else "False(0)")) for i in range(1000))
    out = firmware_judge.inventory_judge(hosts)
    odd = out["n0000"][0]
    assert odd["status"] == "drift"
    assert odd["detail"].endswith("hosts with the most common one: 980 hosts: n0001, n0002, n0003, n0004, n0005 "
                                  "and 975 more")
