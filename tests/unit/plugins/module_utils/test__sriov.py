"""SR-IOV parsers and planners, pure and table-driven (kernel rules: drivers/pci/iov.c, domain-facts §2)."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import rules as s
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

IP_JSON = json.dumps([{
    "ifindex": 4, "ifname": "ibp24s0", "link_type": "infiniband", "vfinfo_list": [
        {"vf": 0, "link_type": "infiniband", "address": "00:00:10:49:fe:80", "spoofchk": False,
         "node guid": "02:ea:03:00:55:1e:20:00", "port guid": "02:ea:03:00:55:1e:20:00", "link_state": "auto",
         "trust": False, "query_rss_en": False},
        {"vf": 1, "link_type": "infiniband", "address": "00:00:10:49:fe:80", "spoofchk": False,
         "node guid": "00:00:00:00:00:00:00:00", "port guid": "00:00:00:00:00:00:00:00", "link_state": "disable",
         "trust": False, "query_rss_en": False}]}])
ETH_JSON = json.dumps([{"ifname": "ens1f0np0", "vfinfo_list": [
    {"vf": 0, "link_type": "ether", "address": "02:3F:D2:40:00:00", "vlan_list": [{"vlan": 100, "qos": 3}],
     "spoofchk": True, "link_state": "auto", "trust": True}]}])

MSTCONFIG = """
Device #1:
----------

Device type:    ConnectX7
Description:    NVIDIA ConnectX-7 Adapter Card
Device:         0000:18:00.0

Configurations:                              Default         Current         Next Boot
*        SRIOV_EN                            False(0)        True(1)         True(1)
*        NUM_OF_VFS                          0               8               16
*        LINK_TYPE_P1                        IB(1)           IB(1)           IB(1)
The '*' shows parameters with next value different from default/current value.
"""


def test_parse_ip_vfs_ib_and_eth():
    ib = s.parse_ip_vfs(IP_JSON)
    assert ib[0]["node_guid"] == 0x02EA030055_1E2000 and ib[1]["node_guid"] == 0 and ib[1]["link_state"] == "disable"
    assert ib[0]["mac"] is None
    eth = s.parse_ip_vfs(ETH_JSON)[0]
    assert (eth["vlan"], eth["qos"], eth["trust"], eth["spoofchk"], eth["mac"]) == (100, 3, True, True, "02:3f:d2:40:00:00")
    assert s.parse_ip_vfs(json.dumps([{"ifname": "x"}])) == {}
    for bad in ("", "[]", "nope"):
        with pytest.raises(ParseError):
            s.parse_ip_vfs(bad)


def test_parse_ip_links_vfs_reads_a_dump_like_single_links():
    """A dump is the single-link objects in a list: each link with VFs reads as parse_ip_vfs reads it alone."""
    dump = json.dumps([{"ifindex": 1, "ifname": "lo", "link_type": "loopback"}] + json.loads(IP_JSON)
                      + [{"ifname": "ibp64s0", "vfinfo_list": []}] + json.loads(ETH_JSON))
    links = s.parse_ip_links_vfs(dump)
    assert links == {"ibp24s0": s.parse_ip_vfs(IP_JSON), "ens1f0np0": s.parse_ip_vfs(ETH_JSON)}
    assert s.parse_ip_links_vfs("[]") == {}
    for bad in ("", "nope", '{"ifname": "x"}'):
        with pytest.raises(ParseError):
            s.parse_ip_links_vfs(bad)


def test_parse_ip_vfs_realdata_text_is_not_json(realdata):
    """The real iproute2 example is the text form; the module asks for -j and must not mistake text for JSON."""
    text = (realdata / "outputs/iproute2-commit-examples/ip-link-show-ib-vf-guid.commit-738728cc.txt").read_text()
    assert "NODE_GUID" in text
    with pytest.raises(ParseError):
        s.parse_ip_vfs(text)


def test_parse_mstconfig_and_verdict():
    params = s.parse_mstconfig(MSTCONFIG)
    assert params["NUM_OF_VFS"] == {"default": "0", "current": "8", "next": "16"}
    assert s.firmware_verdict(params, 8) is None
    message, staged = s.firmware_verdict(params, 12)
    assert staged and "staged for the next boot" in message
    message, staged = s.firmware_verdict(params, 20)
    assert not staged and "NUM_OF_VFS=20" in message
    assert s.firmware_verdict(params, 0) is None
    off = s.parse_mstconfig(MSTCONFIG.replace("True(1)         True(1)", "False(0)        False(0)"))
    assert "SRIOV_EN=False(0)" in s.firmware_verdict(off, 1)[0]
    with pytest.raises(ParseError):
        s.parse_mstconfig("-E- Failed to open the device\n")


def test_parse_eswitch():
    assert s.parse_eswitch('{"dev": {"pci/0000:01:00.0": {"mode": "switchdev"}}}') == "switchdev"
    assert s.parse_eswitch('{"dev": {}}') is None
    with pytest.raises(ParseError):
        s.parse_eswitch("pci/0000:01:00.0: mode legacy")


@pytest.mark.parametrize("current, desired, total, allow, writes", [
    (0, 0, 16, False, []),
    (0, 4, 16, False, [4]),
    (4, 4, 16, False, []),
    (4, 0, 16, False, [0]),
    (4, 8, 16, True, [0, 8]),
    (8, 2, 16, True, [0, 2]),
    (0, 16, 16, False, [16]),
    (0, 0, None, False, []),
])
def test_plan_numvfs(current, desired, total, allow, writes):
    assert s.plan_numvfs(current, desired, total, allow) == writes


@pytest.mark.parametrize("current, desired, total, fragment", [
    (0, 17, 16, "above sriov_totalvfs 16"),
    (0, -1, 16, "whole number"),
    (0, 1, None, "no SR-IOV capability"),
    (0, True, 16, "whole number"),
])
def test_plan_numvfs_input_errors(current, desired, total, fragment):
    with pytest.raises(InputError) as info:
        s.plan_numvfs(current, desired, total, True)
    assert fragment in info.value.msg


def test_plan_numvfs_reset_refused_names_vfs_in_use():
    with pytest.raises(ConflictError) as info:
        s.plan_numvfs(4, 8, 16, False, {2: "netdev ibp24s0v2 is up"})
    assert "VF 2 (netdev ibp24s0v2 is up)" in info.value.msg and "allow_vf_reset=true" in info.value.msg
    with pytest.raises(ConflictError) as info:
        s.plan_numvfs(4, 8, 16, False)
    assert "none looks in use" in info.value.msg


def test_desired_vf_attrs_overlay_and_errors():
    out = s.desired_vf_attrs(2, {"trust": True, "vlan": None}, [{"index": 1, "vlan": 10, "qos": 2, "trust": None}],
                             "Ethernet")
    assert out == {0: {"trust": True}, 1: {"trust": True, "vlan": 10, "qos": 2}}
    cases = [
        ((2, None, [{"index": 2}], "Ethernet"), "vfs[0].index must be between 0 and num_vfs-1"),
        ((2, None, [{"index": 0}, {"index": 0}], "Ethernet"), "listed twice"),
        ((1, {"vlan": 5000}, None, "Ethernet"), "vf_defaults.vlan"),
        ((1, {"qos": 9, "vlan": 1}, None, "Ethernet"), "vf_defaults.qos"),
        ((1, {"qos": 2}, None, "Ethernet"), "needs a non-zero vlan"),
        ((1, {"mac": "nope"}, None, "Ethernet"), "not a MAC"),
        ((2, {"mac": "02:00:00:00:00:01"}, None, "Ethernet"), "both ask for MAC"),
        ((1, {"trust": True}, None, "InfiniBand"), "only exist on Ethernet"),
    ]
    for args, fragment in cases:
        with pytest.raises(InputError) as info:
            s.desired_vf_attrs(*args)
        assert fragment in info.value.msg, args


def test_plan_vf_attrs_and_argv():
    desired = {0: {"link_state": "auto"}, 1: {"vlan": 100, "qos": 3, "trust": True}, 2: {"mac": "02:00:00:00:00:02"}}
    observed = {0: {"link_state": "auto"}, 1: {"vlan": 100, "qos": 0, "trust": True}, 2: {"mac": "02:00:00:00:00:09"}}
    changes = s.plan_vf_attrs(desired, observed)
    assert changes == [(1, {"qos": 3, "vlan": 100}), (2, {"mac": "02:00:00:00:00:02"})]
    assert s.ip_vf_argv("ens1f0np0", 1, changes[0][1]) == ["ip", "link", "set", "ens1f0np0", "vf", "1", "vlan", "100",
                                                           "qos", "3"]
    assert s.ip_vf_argv("ib0", 0, {"link_state": "auto", "trust": False}) == ["ip", "link", "set", "ib0", "vf", "0",
                                                                              "trust", "off", "state", "auto"]
    assert s.plan_vf_attrs(desired, {}) == [(0, {"link_state": "auto"}), (1, desired[1]), (2, desired[2])]


# print_vfinfo() text lines (iproute2 ip/ipaddress.c), as `ip link show dev <pf>` prints them without -j
IB_ADDR = "00:00:10:49:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:55:1e:20"
IB_BRD = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
IP_TEXT_IB = "\n".join([
    "4: ibp24s0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP mode DEFAULT group default qlen 256",
    "    link/infiniband %s brd %s" % (IB_ADDR, IB_BRD),
    "    vf 0     link/infiniband %s brd %s, spoof checking off, NODE_GUID 02:ea:03:00:55:1e:20:00, "
    "PORT_GUID 02:ea:03:00:55:1e:20:00, link-state auto, trust off, query_rss off" % (IB_ADDR, IB_BRD),
    "    vf 1     link/infiniband %s brd %s, spoof checking off, NODE_GUID 00:00:00:00:00:00:00:00, "
    "PORT_GUID 00:00:00:00:00:00:00:00, link-state disable, trust off, query_rss off" % (IB_ADDR, IB_BRD),
]) + "\n"
IP_TEXT_ETH = "\n".join([
    "2: ens1f0np0: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000",
    "    link/ether b8:3f:d2:40:00:00 brd ff:ff:ff:ff:ff:ff",
    "    vf 0     link/ether 00:00:00:00:00:00 brd ff:ff:ff:ff:ff:ff, spoof checking on, link-state auto, trust off",
    "    vf 1     link/ether 02:AA:BB:CC:DD:01 brd ff:ff:ff:ff:ff:ff, vlan 100, qos 3, tx rate 100 (Mbps), "
    "spoof checking off, link-state disable, trust on, query_rss off",
    "    vf 2 MAC 02:aa:bb:cc:dd:02, vlan 7, spoof checking on, link-state enable",
]) + "\n"


def test_parse_ip_vfs_text_matches_the_json_reading():
    ib = s.parse_ip_vfs_text(IP_TEXT_IB)
    assert ib == dict((i, dict(v, vlan=0, qos=0)) for i, v in s.parse_ip_vfs(IP_JSON).items())
    eth = s.parse_ip_vfs_text(IP_TEXT_ETH)
    assert eth[0] == {"node_guid": None, "port_guid": None, "link_state": "auto", "trust": False, "spoofchk": True,
                      "vlan": 0, "qos": 0, "mac": "00:00:00:00:00:00"}
    assert (eth[1]["vlan"], eth[1]["qos"], eth[1]["trust"], eth[1]["spoofchk"], eth[1]["link_state"], eth[1]["mac"]) == (
        100, 3, True, False, "disable", "02:aa:bb:cc:dd:01")
    # iproute2 before IFLA_VF_BROADCAST ("MAC"), a driver reporting no trust: None, not False
    assert (eth[2]["mac"], eth[2]["vlan"], eth[2]["trust"], eth[2]["link_state"]) == (
        "02:aa:bb:cc:dd:02", 7, None, "enable")
    assert s.parse_ip_vfs_text("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n") == {}


def test_parse_ip_vfs_reads_vlan_list_as_the_kernel_sends_it():
    text = json.dumps([{"ifname": "ens1f0np0", "vfinfo_list": [
        {"vf": 0, "link_type": "ether", "address": "00:00:00:00:00:00", "vlan_list": [{}],
         "rate": {"max_tx": 0, "min_tx": 0}, "spoofchk": True, "link_state": "auto", "trust": False, "query_rss_en": False},
        {"vf": 1, "mac": "02:00:00:00:00:01", "vlan": 5, "qos": 1, "spoofchk": True}]}])  # pre-4.9 kernel, old ip
    vfs = s.parse_ip_vfs(text)
    assert (vfs[0]["vlan"], vfs[0]["qos"], vfs[0]["mac"]) == (0, 0, "00:00:00:00:00:00")
    assert (vfs[1]["vlan"], vfs[1]["qos"], vfs[1]["mac"], vfs[1]["trust"], vfs[1]["link_state"]) == (
        5, 1, "02:00:00:00:00:01", None, None)


@pytest.mark.parametrize("mac, says", [("00:00:00:00:00:00", "zero address"), ("01:00:5e:00:00:01", "multicast"),
                                       ("FF:FF:FF:FF:FF:FF", "multicast")])
def test_vf_macs_must_be_unicast_and_not_zero(mac, says):
    with pytest.raises(InputError, match=says):
        s.validate_vf_attrs({"mac": mac}, "vfs[0]")
    assert s.validate_vf_attrs({"mac": "02:AA:bb:00:00:01"}, "vfs[0]")["mac"] == "02:aa:bb:00:00:01"


@pytest.mark.parametrize("text", ["[" * 100000, "[1]", '{"dev": 5}', "null", '[{"vfinfo_list": [{"vf": "x"}]}]',
                                  '[{"ifname": "a", "vfinfo_list": [{"vf": 1, "vlan_list": [3]}]}]'])
def test_hostile_ip_and_devlink_json_is_a_parse_error(text):
    """Deep nesting (RecursionError), wrong shapes (AttributeError, KeyError, ValueError): all ParseError."""
    for parse in (s.parse_ip_vfs, s.parse_ip_links_vfs, s.parse_eswitch):
        try:
            parse(text)
        except ParseError:
            pass


# -- found by the fuzz suite (tests/unit/fuzz/test_rdma_discovery.py) ----------------------------------------------
@pytest.mark.parametrize("line", ["    vf 0     link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff, NODE_GUID zz",
                                  "    vf 0     MAC 02:00:00:00:00:01, vlan " + "9" * 5000,
                                  "    vf " + "1" * 5000 + "     MAC 02:00:00:00:00:01"])
def test_ip_text_vf_line_that_cannot_be_read_is_a_parse_error(line):
    """A GUID that is not hex or a number int() refuses raised ValueError out of parse_ip_vfs_text."""
    with pytest.raises(ParseError, match="ip link show printed a VF line this module cannot read"):
        s.parse_ip_vfs_text("4: ib0: <UP> mtu 4092\n" + line + "\n")
