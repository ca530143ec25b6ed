"""Fuzz _rdma_discovery and the ``ip``/``devlink``/``mstconfig`` parsers it and the SR-IOV modules use: ``ip -j link
show`` JSON of any shape, ``ip link show`` text, rdma.max, and the whole gather() on a generated sysfs tree: only
typed errors from the parsers, and gather() never fails (unreadable or malformed attributes become problems)."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _rdma_discovery as disc
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, examples, huge, long_line, mutated, nested, node_text, \
    node_tree, odd_text, slow, typed_only

GUID = st.one_of(st.sampled_from(["02:00:00:00:00:00:00:01", "00:00:00:00:00:00:00:00", "zz", "", "0x1", "1" * 5000,
                                  "ff:" * 40 + "ff"]), odd_text(3))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 5000), st.sampled_from(list(HUGE_NUMBERS)), GUID,
                   st.floats(allow_nan=False))
VF = st.fixed_dictionaries({}, optional={
    "vf": st.one_of(st.integers(-1, 300), st.sampled_from(["1", "x", "\u00b2", "1" * 5000]), st.none()),
    "node guid": GUID, "port guid": GUID, "link_state": st.sampled_from(["auto", "enable", None, 1]),
    "trust": SCALAR, "spoofchk": SCALAR, "vlan": SCALAR, "qos": SCALAR, "link_type": st.sampled_from(["ether", "", None, 5]),
    "address": st.one_of(GUID, st.integers()), "mac": st.one_of(GUID, st.integers()),
    "vlan_list": st.one_of(st.lists(st.dictionaries(st.sampled_from(["vlan", "qos"]), SCALAR, max_size=2), max_size=2),
                           SCALAR)})
LINK = st.one_of(st.fixed_dictionaries({"ifname": st.one_of(st.sampled_from(["ib0", "eth0", ""]), SCALAR)},
                                       optional={"vfinfo_list": st.one_of(st.lists(st.one_of(VF, SCALAR), max_size=3),
                                                                          SCALAR)}), SCALAR)
IP_JSON = st.one_of(st.lists(LINK, max_size=3).map(json.dumps), mutated(st.lists(LINK, max_size=2).map(json.dumps)),
                    nested("[", "]"), byte_soup(), st.just("[]"), st.just('[{"vfinfo_list": [{"vf": 0}]}]'))
VF_LINE = st.one_of(
    st.tuples(st.sampled_from(["    vf ", "vf ", "  vf x"]),
              st.one_of(st.integers(0, 99).map(str), st.sampled_from(["\u0663", "1" * 5000])),
              st.sampled_from(["     link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff", " MAC 02:00:00:00:00:01", "", " "]),
              st.lists(st.sampled_from([", vlan 5", ", qos 2", ", vlan x", ", spoof checking on", ", trust off",
                                        ", link-state auto", ", NODE_GUID 02:00:00:00:00:00:00:01", ", PORT_GUID zz",
                                        ", NODE_GUID " + "f" * 5000, ", query_rss off", ",", ", vlan \u00b2",
                                        ", vlan " + "9" * 5000]), max_size=4).map("".join)).map("".join),
    st.sampled_from(["4: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP mode DEFAULT",
                     "    link/infiniband 00:00:10:87:fe:80", ""]))
FW_LINE = st.one_of(st.sampled_from(["Configurations:", "         SRIOV_EN                  True(1)         True(1)         True(1)",
                                     "*        NUM_OF_VFS                8               16              16",
                                     "Device #1:", "", "  x y z"]), odd_text(5))
RDMA_MAX = st.one_of(
    st.tuples(st.sampled_from(["mlx5_0", "", "  "]), st.lists(st.tuples(st.sampled_from(["hca_handle", "hca_object", "x", ""]),
                                                                        st.sampled_from(["=", ""]),
                                                                        st.one_of(st.sampled_from(["max", "2", "\u00b2", "-1", ""]),
                                                                                  st.sampled_from(list(HUGE_NUMBERS)))).map(
        "".join), max_size=3)).map(lambda t: t[0] + " " + " ".join(t[1])),
    odd_text(5))


@given(IP_JSON)
def test_ip_json_raises_only_parse_errors(text):
    for func in (_sriov.parse_ip_vfs, _sriov.parse_ip_links_vfs):
        result = typed_only(func, text)
        assert isinstance(result, (dict, ParseError))


@given(node_text(VF_LINE, ("vf ", ", ", " ")))
def test_ip_text_never_raises(text):
    result = typed_only(_sriov.parse_ip_vfs_text, text)
    assert isinstance(result, (dict, ParseError))


@given(st.one_of(IP_JSON, st.dictionaries(st.just("dev"), st.dictionaries(st.text(max_size=5), SCALAR, max_size=2),
                                          max_size=1).map(json.dumps)))
def test_eswitch_raises_only_parse_errors(text):
    typed_only(_sriov.parse_eswitch, text)


@given(node_text(FW_LINE, ("SRIOV_EN ", " ", "*")), st.integers(0, 300))
def test_mstconfig_raises_only_parse_errors(text, num_vfs):
    params = typed_only(_sriov.parse_mstconfig, text)
    if isinstance(params, dict):
        typed_only(_sriov.firmware_verdict, params, num_vfs)


@slow()
@given(node_text(RDMA_MAX, ("hca_handle=", " ", "max")))
def test_rdma_max_raises_only_its_value_error(text):
    """parse_rdma_max's documented refusal is ValueError (the walk reports it as a problem)."""
    try:
        limits = typed_only(disc.parse_rdma_max, text)
    except ValueError:
        return
    assert all(isinstance(v, dict) for v in limits.values())


ATTR = st.one_of(st.sampled_from(["", "\n", "-1", "0", "1", "4: ACTIVE", "5: LinkUp", "InfiniBand", "Ethernet", "Y", "N", "x",
                                  "0x10de", "0x030200", "0x15b3", "0000:3b:00.0", "ff,ffffffff", "0-3", "0-4294967295",
                                  "fe80:0000:0000:0000:0002:c903:00f9:bfa1", "200 Gb/sec (4X HDR)"]),
                 st.sampled_from(list(HUGE_NUMBERS)), odd_text(4), byte_soup(20))
BDF = st.sampled_from(["0000:3b:00.0", "0000:3b:00.1", "0000:af:00.0"])
PORT = st.sampled_from(["1", "2", "\u00b2", "x"])


NODE_FILES = ["/sys/devices/system/node/online", "/sys/devices/system/node/has_cpu",
              "/sys/module/ib_core/parameters/netns_mode", "/proc/cmdline", "/proc/modules", "/proc/cpuinfo",
              "/proc/123/comm", "/proc/sys/net/ipv4/conf/all/rp_filter", "/sys/fs/cgroup/cgroup.controllers",
              "/sys/fs/cgroup/cgroup.subtree_control", "/sys/fs/cgroup/a/rdma.max", "/sys/fs/cgroup/a/cgroup.subtree_control",
              "/sys/fs/cgroup/a/b/rdma.max"]


@st.composite
def sysfs(draw):
    """A node tree: PCI functions under one host bridge with random attributes, RDMA devices pointing at them
    (or dangling), VFs, GPUs, /proc and cgroup files."""
    files, links = {}, {}
    bdfs = draw(st.lists(BDF, min_size=1, max_size=3, unique=True))
    base = "/sys/devices/pci0000:3a/0000:3a:00.0"
    for index, bdf in enumerate(bdfs):
        dev = "%s/%s" % (base, bdf)
        for attr in draw(st.lists(st.sampled_from(["numa_node", "vendor", "class", "device", "sriov_totalvfs",
                                                   "sriov_numvfs", "local_cpulist", "local_cpus"]), max_size=6, unique=True)):
            files["%s/%s" % (dev, attr)] = draw(ATTR)
        links["/sys/bus/pci/devices/" + bdf] = "../../.." + dev
        if draw(st.booleans()):
            links[dev + "/driver"] = "../../../../bus/pci/drivers/" + draw(st.sampled_from(["mlx5_core", "nvidia", "x"]))
        if draw(st.booleans()):
            files[dev + "/net/" + draw(st.sampled_from(["ib0", "eth0", "ib0.8001", "\u00b2"])) + "/mtu"] = draw(ATTR)
        if draw(st.booleans()):
            links[dev + "/virtfn" + draw(st.sampled_from(["0", "1", "\u00b2"]))] = "../" + draw(st.sampled_from(bdfs + ["zz"]))
        if draw(st.booleans()):
            links[dev + "/physfn"] = "../" + draw(st.sampled_from(bdfs + ["zz"]))
        name = "mlx5_%d" % index
        ib = dev + "/infiniband/" + name
        links["/sys/class/infiniband/" + name] = draw(st.sampled_from(["../../.." + ib, "../../../nowhere"]))
        for attr in ("node_guid", "fw_ver", "board_id"):
            if draw(st.booleans()):
                files["%s/%s" % (ib, attr)] = draw(ATTR)
        for port in draw(st.lists(PORT, max_size=2, unique=True)):
            for attr in draw(st.lists(st.sampled_from(["link_layer", "state", "phys_state", "rate", "gids/0",
                                                       "gid_attrs/ndevs/0"]), max_size=6, unique=True)):
                files["%s/ports/%s/%s" % (ib, port, attr)] = draw(ATTR)
    for path in draw(st.lists(st.sampled_from(NODE_FILES), max_size=8, unique=True)):
        files[path] = draw(st.one_of(ATTR, st.sampled_from(["rdma", "rdma cpu", "k8s-rdma-shared", "vendor_id : GenuineIntel"]),
                                     node_text(RDMA_MAX)))
    return files, links


@settings(max_examples=examples(0.1))  # a real tree per example: 10 % of the profile's count
@given(sysfs())
def test_gather_never_fails(tree):
    files, links = tree
    with node_tree(files, links) as host:
        facts = typed_only(disc.gather, host)
    assert isinstance(facts, dict) and isinstance(facts["problems"], list), facts


@huge()
@given(st.one_of(long_line(("vf 1 ", ", ", "vlan 1", " "), 20_000, 200_000),
                 long_line(("mlx5_0 ", "hca_handle=1 "), 20_000, 200_000)))
def test_huge_output(text):
    typed_only(_sriov.parse_ip_vfs_text, text)
    try:
        typed_only(disc.parse_rdma_max, text)
    except ValueError:
        pass
