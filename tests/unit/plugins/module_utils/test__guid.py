"""InfiniBand VF GUIDs, pure: spellings, validity, the pf_guid scheme, the operator's pool file, the plan."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as g
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

PF = 0xA088C20300551E20   # dgx-h100 ibp24s0 (NVIDIA OUI a0:88:c2, Mellanox-style 03:00 filler)


@pytest.mark.parametrize("text, value", [
    ("02:00:00:00:00:00:00:01", 0x0200000000000001),
    ("2:0:0:0:0:0:0:1", 0x0200000000000001),
    ("02-AA-00-00-00-00-00-01", 0x02AA000000000001),
    ("a088:c203:0055:1e20", PF),
    ("a088.c203.0055.1e20", PF),
    ("0xa088c20300551e20", PF),
    ("  a088c20300551e20 ", PF),
])
def test_parse_guid_spellings(text, value):
    assert g.parse_guid(text) == value


@pytest.mark.parametrize("text", ["", "02:00:00:00:00:00:01", "02:00:00:00:00:00:00:00:01", "zz:00:00:00:00:00:00:01",
                                  "a088:c203:0055", "123", None, 5, True])
def test_parse_guid_rejects(text):
    with pytest.raises(InputError) as info:
        g.parse_guid(text, "guids[3]")
    assert "guids[3]" in info.value.msg


def test_format_roundtrip():
    assert g.format_guid(PF) == "a0:88:c2:03:00:55:1e:20"
    assert g.parse_guid(g.format_guid(PF)) == PF


@pytest.mark.parametrize("value, fragment", [(0, "all zero"), ((1 << 64) - 1, "all FF")])
def test_assignable_rejects_zero_and_all_ff(value, fragment):
    with pytest.raises(InputError) as info:
        g.assignable(value, "the GUID")
    assert fragment in info.value.msg
    assert g.assignable(1) == 1


@pytest.mark.parametrize("text, value", [("02", 2), ("0x06", 6), ("fe", 0xFE), (0x0A, 0x0A)])
def test_prefix_ok(text, value):
    assert g.parse_prefix(text) == value


@pytest.mark.parametrize("text, fragment", [("01", "locally-administered"), ("ff", "locally-administered"),
                                            ("100", "one octet"), ("xx", "one octet"), ("00", "locally")])
def test_prefix_bad(text, fragment):
    with pytest.raises(InputError) as info:
        g.parse_prefix(text)
    assert fragment in info.value.msg


def test_derive_layout():
    # prefix | a0^88^c2 = ea | 03:00:55:1e:20 | vf
    assert g.format_guid(g.derive(PF, 0)) == "02:ea:03:00:55:1e:20:00"
    assert g.format_guid(g.derive(PF, 127, 0x06)) == "06:ea:03:00:55:1e:20:7f"


def test_derive_unique_over_consecutive_pf_guids_and_vfs():
    """A card's ports have consecutive GUIDs, racks have thousands of them: no two (PF, VF) pairs collide."""
    guids = [g.derive(PF + pf, vf) for pf in range(4096) for vf in range(128)]
    assert len(set(guids)) == len(guids)
    assert all(value >> 56 == 0x02 for value in guids)


def test_derive_never_equals_a_vendor_guid():
    """Vendor GUIDs are universally administered (bit 0x02 of the first octet clear); ours always have it set."""
    for pf in (PF, 0x0002C90300A1B2C3, 0xB83FD20300A13C40):
        assert (g.derive(pf, 1) >> 56) & 0x02 and not (pf >> 56) & 0x02


@pytest.mark.parametrize("pf, vf, fragment", [(PF, 256, "one octet"), (0, 0, "nothing stable"),
                                              ((1 << 64) - 1, 0, "nothing stable")])
def test_derive_errors(pf, vf, fragment):
    with pytest.raises(InputError) as info:
        g.derive(pf, vf)
    assert fragment in info.value.msg


# the operator compares pfGuid with each link's hardware address string: an IPoIB netdev has 20 octets
IPOIB_ADDRESS = "00:00:10:87:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:55:1e:21"
OPERATOR_FILE = json.dumps([
    {"pciAddress": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:00", "02:00:00:00:00:00:00:01"]},
    {"pfGuid": IPOIB_ADDRESS,
     "guidsRange": {"start": "02:00:00:00:00:aa:00:02", "end": "02:00:00:00:00:aa:00:0a"}},
])


def test_pool_file_operator_keys():
    entries = g.parse_pool(OPERATOR_FILE)
    assert entries[0] == {"pci_address": "0000:18:00.0", "guids": [0x0200000000000000, 0x0200000000000001], "ignored": []}
    assert entries[1]["range"] == (0x0200000000AA0002, 0x0200000000AA000A)
    first = g.pool_entry_for(entries, "0000:18:00.0", [])
    assert g.pool_guids(first, 2) == [0x0200000000000000, 0x0200000000000001]
    by_guid = g.pool_entry_for(entries, "0000:99:00.0", [IPOIB_ADDRESS])
    assert g.pool_guids(by_guid, 9)[-1] == 0x0200000000AA000A
    # exact string equality, as the operator compares: another case or the 8-octet node GUID never matches
    for spelling in (IPOIB_ADDRESS.upper(), "a0:88:c2:03:00:55:1e:21"):
        with pytest.raises(ParseError):
            g.pool_entry_for(entries, "0000:99:00.0", [spelling])
    # with the node's links, pfGuid entries resolve to a PCI address (and one matching no link fails the file)
    resolved = g.parse_pool(OPERATOR_FILE, links=[("ibp24s0", IPOIB_ADDRESS, "0000:99:00.0")])
    assert g.pool_entry_for(resolved, "0000:99:00.0", [])["range"][0] == 0x0200000000AA0002
    # a link address of no link present now (ib_ipoib not loaded yet at boot) is kept, unresolved: the operator
    # resolves it when it starts; an 8-octet node GUID can be no link's address: the operator refuses the file
    absent = g.parse_pool(OPERATOR_FILE, links=[("eth0", "52:54:00:12:34:56", "0000:00:03.0")])
    assert absent[1]["unresolved"] is True and "pci_address" not in absent[1]
    node_guid = OPERATOR_FILE.replace(IPOIB_ADDRESS, "a0:88:c2:03:00:55:1e:21")
    with pytest.raises(ParseError, match="entry 1 pfGuid .* matches no network interface.* and cannot be one"):
        g.parse_pool(node_guid, links=[("eth0", "52:54:00:12:34:56", "0000:00:03.0")])
    with pytest.raises(ParseError, match="without a device link: the operator ignores the whole file, as if it did not"):
        g.parse_pool(OPERATOR_FILE, links=[("bond0", IPOIB_ADDRESS, None)])


@pytest.mark.parametrize("data, fragment", [
    ([{"pci_address": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:01"]}], "write 'pciAddress'"),
    ([{"pf_guid": "x", "guids": ["02:00:00:00:00:00:00:01"]}], "write 'pfGuid'"),
    ([{"pciAddress": "0000:18:00.0", "rangeStart": "02:00:00:00:00:00:00:01"}], "guidsRange.start"),
    ([{"pciAddress": "0000:18:00.0", "guids": ["02aa:bbcc:ddee:ff00"]}], "Go's net.ParseMAC of 8 octets"),
    ([{"pciAddress": "a", "pfGuid": "b", "guids": ["02:00:00:00:00:00:00:01"]}], "exactly one of pciAddress and pfGuid"),
    ([{"guids": ["02:00:00:00:00:00:00:01"]}], "exactly one of pciAddress and pfGuid"),
    ([{"pciAddress": "a"}], "exactly one of guids and guidsRange"),
    ([{"pciAddress": "a", "guids": ["02:00:00:00:00:00:00:01"], "guidsRange": {"start": "1", "end": "2"}}], "exactly one"),
    ([{"pciAddress": "a", "guidsRange": {"start": "02:00:00:00:00:00:00:01"}}], "both start and end"),
    ([{"pciAddress": "a", "guidsRange": {"start": "02:00:00:00:00:00:00:05", "end": "02:00:00:00:00:00:00:01"}}],
     "below its start"),
    ([{"pciAddress": "a", "guids": ["nope"]}], "guids[0]"),
    ([{"pciAddress": "a", "guids": ["02:00:00:00:00:00:00:01"], "pfGuid": 5}], "must be a JSON string"),
    ({"pciAddress": "a"}, "JSON list"),
])
def test_pool_file_errors(data, fragment):
    with pytest.raises(ParseError) as info:
        g.parse_pool(json.dumps(data))
    assert fragment in info.value.msg


def test_pool_file_not_json_and_exhaustion():
    with pytest.raises(ParseError):
        g.parse_pool("[oops")
    entries = g.parse_pool(OPERATOR_FILE)
    with pytest.raises(ParseError) as info:
        g.pool_guids(entries[0], 3)
    assert "lists 2 GUIDs" in info.value.msg and "3 VFs" in info.value.msg
    with pytest.raises(ParseError):
        g.pool_guids(entries[1], 10)
    with pytest.raises(ParseError) as info:
        g.pool_entry_for(entries, "0000:01:00.0", [])
    assert "no entry for PF 0000:01:00.0" in info.value.msg


def test_render_pool_merges_and_is_read_back():
    text = g.render_pool(OPERATOR_FILE, "0000:18:00.0", [g.derive(PF, 0)])
    entries = g.parse_pool(text)
    assert len(entries) == 2
    assert g.pool_guids(g.pool_entry_for(entries, "0000:18:00.0", []), 1) == [g.derive(PF, 0)]
    assert g.render_pool(text, "0000:18:00.0", [g.derive(PF, 0)]) == text
    fresh = g.render_pool(None, "0000:2a:00.0", [1, 2])
    assert json.loads(fresh) == [{"guids": ["00:00:00:00:00:00:00:01", "00:00:00:00:00:00:00:02"],
                                  "pciAddress": "0000:2a:00.0"}]


def test_desired_guids_checks():
    assert g.desired_guids("pf_guid", 2, PF) == [g.derive(PF, 0), g.derive(PF, 1)]
    assert g.desired_guids("list", 1, explicit=["02:00:00:00:00:00:00:07", "junk-not-needed"][:1]) == [0x0200000000000007]
    for explicit, fragment in ((["02:00:00:00:00:00:00:07"], "lists 1 GUIDs but the PF has 2 VFs"),
                               (["02:00:00:00:00:00:00:07", "02:00:00:00:00:00:00:07"], "would both get"),
                               (["02:00:00:00:00:00:00:07", "00:00:00:00:00:00:00:00"], "all zero"),
                               (["ff:ff:ff:ff:ff:ff:ff:ff", "02:00:00:00:00:00:00:07"], "all FF")):
        with pytest.raises(InputError) as info:
            g.desired_guids("list", 2, explicit=explicit)
        assert fragment in info.value.msg


A, B = 0x0200000000000001, 0x0200000000000002


@pytest.mark.parametrize("observed, expected", [
    ({0: {"admin_node": 0, "admin_port": 0, "node": 0, "port": 0}}, [(0, True, "zero GUID")]),
    ({0: {"admin_node": B, "admin_port": B, "node": B, "port": B}}, [(0, True, "GUID differs")]),
    ({0: {"admin_node": A, "admin_port": A, "node": 0, "port": 0}}, [(0, False, "set but not yet effective")]),
    ({0: {"admin_node": A, "admin_port": A, "node": A, "port": A}}, []),
    ({0: {"admin_node": A, "admin_port": A, "node": None, "port": None}}, []),   # VF in a pod: admin is all we see
    ({0: {"admin_node": A, "admin_port": 0, "node": A, "port": A}}, [(0, True, "GUID differs")]),
])
def test_plan_table(observed, expected):
    steps = g.plan([A], observed)
    assert [(s["vf"], s["set"], s["reason"].split(" (")[0]) for s in steps] == expected


def test_plan_conflict_with_taken():
    with pytest.raises(ConflictError) as info:
        g.plan([A, B], {}, {B: "VF 3 of ibp64s0"})
    assert "VF 1" in info.value.msg and "VF 3 of ibp64s0" in info.value.msg


# -- found by the fuzz suite (tests/unit/fuzz/test_guid.py) --------------------------------------------------------
@pytest.mark.parametrize("text, why", [("[" * 5000 + "]" * 5000, "is not valid JSON"),
                                       ("[" + "1" * 5000 + "]", "entry 0 is not a JSON object"),
                                       ("{", "is not valid JSON"), ("not json", "is not valid JSON")])
def test_hostile_pool_files_are_parse_errors(text, why):
    """json.loads raised RecursionError (deep nesting) and ValueError (a 5,000-digit integer) past parse_pool, and
    render_pool did not catch even a JSONDecodeError.  A 5,000-digit number is JSON (Go decodes it and refuses it as
    an entry; elsewhere in an entry it skips it: test_ib_vf_guids_operator_real.py)."""
    with pytest.raises(ParseError, match="^/etc/sriov-operator/infiniband/guids " + why):
        g.parse_pool(text)
    with pytest.raises(ParseError, match="^/etc/sriov-operator/infiniband/guids " + why):
        g.render_pool(text, "0000:3b:00.0", [1])


def test_pf_guid_scheme_without_a_readable_node_guid():
    """ib_vf_guids passes None when the PF's node_guid is missing or garbled: was a TypeError (None >> 40)."""
    with pytest.raises(InputError, match="node GUID is unknown"):
        g.desired_guids("pf_guid", 2, None)
    assert g.desired_guids("pf_guid", 0, None) == []


# -- exactly as sriov-network-operator reads and refuses (ParseGUID = net.ParseMAC + 8 octets; encoding/json) -------
# Go's own table, src/net/mac_test.go parseMACTests (golang/go), every row: what net.ParseMAC accepts and the octets.
GO_PARSE_MAC_TESTS = [
    ("00:00:5e:00:53:01", "00005e005301"), ("00-00-5e-00-53-01", "00005e005301"), ("0000.5e00.5301", "00005e005301"),
    ("02:00:5e:10:00:00:00:01", "02005e1000000001"), ("02-00-5e-10-00-00-00-01", "02005e1000000001"),
    ("0200.5e10.0000.0001", "02005e1000000001"),
    ("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", "00000000fe8000000000000002005e1000000001"),
    ("00-00-00-00-fe-80-00-00-00-00-00-00-02-00-5e-10-00-00-00-01", "00000000fe8000000000000002005e1000000001"),
    ("0000.0000.fe80.0000.0000.0000.0200.5e10.0000.0001", "00000000fe8000000000000002005e1000000001"),
    ("ab:cd:ef:AB:CD:EF", "abcdefabcdef"), ("ab:cd:ef:AB:CD:EF:ab:cd", "abcdefabcdefabcd"),
    ("ab:cd:ef:AB:CD:EF:ab:cd:ef:AB:CD:EF:ab:cd:ef:AB:CD:EF:ab:cd", "abcdefabcdefabcdefabcdefabcdefabcdefabcd"),
    ("01.02.03.04.05.06", None), ("01:02:03:04:05:06:", None), ("x1:02:03:04:05:06", None),
    ("01002:03:04:05:06", None), ("01:02003:04:05:06", None), ("01:02:03004:05:06", None),
    ("01:02:03:04005:06", None), ("01:02:03:04:05006", None), ("01-02:03:04:05:06", None),
    ("01:02-03-04-05-06", None), ("0123:4567:89AF", None), ("0123-4567-89AF", None),
]


@pytest.mark.parametrize("text, octets", GO_PARSE_MAC_TESTS)
def test_parse_mac_is_gos_net_parsemac(text, octets):
    assert g.parse_mac(text) == (bytes.fromhex(octets) if octets else None)


@pytest.mark.parametrize("text, octets", GO_PARSE_MAC_TESTS)
def test_parse_go_guid_accepts_only_gos_8_octet_forms(text, octets):
    if octets is not None and len(octets) == 16:
        assert g.parse_go_guid(text) == int(octets, 16)
    else:
        with pytest.raises(ParseError, match="not a GUID sriov-network-operator accepts"):
            g.parse_go_guid(text)


@pytest.mark.parametrize("text", ["2:0:0:0:0:0:0:1", "02aa:bbcc:ddee:ff00", "0x02aabbccddeeff00", "02aabbccddeeff00",
                                  " 02:00:00:00:00:00:00:01", "02:00:00:00:00:00:00:0１", "02:00:00:00:00:00:00:01\n"])
def test_spellings_the_lenient_parser_takes_but_the_operator_refuses(text):
    with pytest.raises(ParseError):
        g.parse_go_guid(text)


def test_real_operator_unit_test_file_and_documentation_example():
    from unit.plugins.modules.realworld_trees import corpus
    entries = g.parse_pool(corpus("sriov-network-operator/unit-test/etc/sriov-operator/infiniband/guids"))
    assert g.pool_guids(g.pool_entry_for(entries, "0000:d8:00.0", []), 1) == [0x0001020304050607]
    with pytest.raises(ParseError) as info:
        g.parse_pool(corpus("sriov-network-operator/doc-example/etc/sriov-operator/infiniband/guids"))
    assert "entry 0 has neither pciAddress nor pfGuid" in info.value.msg and "write 'pciAddress'" in info.value.msg


def test_json_decoding_as_go_case_insensitive_last_wins_nulls_unknown_keys():
    text = ('[{"PCIADDRESS": "0000:18:00.0", "comment": {"any": [1]}, "Guids": null, '
            '"guids": ["02:00:00:00:00:00:00:01"], "pfGuid": null}, null]')
    with pytest.raises(ParseError, match="entry 1 has neither pciAddress nor pfGuid"):
        g.parse_pool(text)  # a null element decodes to an empty entry, which the operator refuses
    [entry] = g.parse_pool(text.replace(", null]", "]"))
    assert entry["pci_address"] == "0000:18:00.0" and entry["ignored"] == ["comment"]
    # Go's EqualFold also folds the Kelvin sign into k and the long s into s
    assert g.parse_pool('[{"pciAddre\u017fs": "x", "guid\u017f": ["02:00:00:00:00:00:00:01"]}]')[0]["pci_address"] == "x"
    # the later entry for a PF replaces the earlier one (a map by PCI address), whatever the docs say
    two = json.dumps([{"pciAddress": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:01"]},
                      {"pciAddress": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:02"]}])
    assert g.pool_guids(g.pool_entry_for(g.parse_pool(two), "0000:18:00.0", []), 1) == [0x0200000000000002]
    for bad in ('{"pciAddress": "x"}', '[1]', '[{"guids": "02:00:00:00:00:00:00:01", "pciAddress": "x"}]', "",
                '[NaN]', '[{"pciAddress": "x", "guidsRange": []}]'):
        with pytest.raises(ParseError):
            g.parse_pool(bad)
    assert g.parse_pool("null") == []


def test_render_pool_keeps_others_in_place_writes_ours_last_and_refuses_what_the_operator_refuses():
    other = {"pfGuid": IPOIB_ADDRESS, "guidsRange": {"start": "02:00:00:00:00:aa:00:02", "end": "02:00:00:00:00:aa:00:0a"}}
    text = json.dumps([{"pciAddress": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:07"]}, other])
    new = g.render_pool(text, "0000:18:00.0", [1])
    assert json.loads(new) == [other, {"pciAddress": "0000:18:00.0", "guids": ["00:00:00:00:00:00:00:01"]}]
    with pytest.raises(ParseError, match="matches no network interface"):
        g.render_pool(text.replace(IPOIB_ADDRESS, IPOIB_ADDRESS.upper()), "0000:18:00.0", [1], links=[])
    with pytest.raises(ParseError, match="entry 0 has neither pciAddress nor pfGuid"):
        g.render_pool('[{"pci_address": "0000:19:00.0", "guids": ["02:00:00:00:00:00:00:01"]}]', "0000:18:00.0", [1])
    with pytest.raises(ParseError, match="spells one key twice"):
        g.render_pool('[{"pciAddress": "a", "PCIAddress": "b", "guids": ["02:00:00:00:00:00:00:01"]}]', "0000:18:00.0", [1])
    # no VFs: our entry goes (the operator refuses one without GUIDs), and no file is left for nothing
    assert g.render_pool(new, "0000:18:00.0", []) == json.dumps([other], indent=2) + "\n"
    assert g.render_pool(json.dumps([{"pciAddress": "0000:18:00.0", "guids": ["02:00:00:00:00:00:00:07"]}]),
                         "0000:18:00.0", []) is None


def test_pool_bytes_and_numbers_as_go_reads_them():
    """Found by the differential against the operator's own code (test_ib_vf_guids_operator_real.py): Go decodes each
    byte of invalid UTF-8 in a string as one U+FFFD and a lone surrogate escape as U+FFFD; it skips a number of any
    length in an unknown key (Python's int() refuses more than 4,300 digits)."""
    guid = '"guids": ["02:00:00:00:00:00:00:01"]'
    assert g.parse_pool(b'[{"pciAddress": "a\xe2\x82b", %s}]' % guid.encode())[0]["pci_address"] == "a\ufffd\ufffdb"
    assert g.parse_pool('[{"pciAddress": "\\ud800", %s}]' % guid)[0]["pci_address"] == "\ufffd"
    huge = '[{"pciAddress": "x", %s, "z": %s}]' % (guid, "9" * 5000)
    assert g.parse_pool(huge)[0]["guids"] == [0x0200000000000001]
    with pytest.raises(ParseError, match="cannot be rewritten keeping its other entries"):
        g.render_pool(huge, "0000:3b:00.0", [1])
    # a float beyond range in a key the operator skips: read, but written back it would be Infinity (not JSON)
    beyond = '[{"pciAddress": "x", %s, "z": 1e400}]' % guid
    assert g.parse_pool(beyond)[0]["guids"] == [0x0200000000000001]
    with pytest.raises(ParseError, match="cannot be rewritten keeping its other entries: the number 1e400"):
        g.render_pool(beyond, "0000:3b:00.0", [1])
    assert json.loads(g.render_pool(beyond.replace("1e400", "1e300"), "0000:3b:00.0", [1]))[0]["z"] == 1e300
    with pytest.raises(ParseError, match="is not a GUID sriov-network-operator accepts"):
        g.parse_pool('[{"pciAddress": "x", "guids": ["02aabbccddeeff01"]}]')
    assert g.parse_pool('[{"pciAddress": "x", "guids": ["02aabbccddeeff01"]}]', bare_hex=True)[0]["guids"] == [
        0x02AABBCCDDEEFF01]
