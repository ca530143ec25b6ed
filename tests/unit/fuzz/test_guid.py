"""Fuzz _guid: GUID spellings, the pf_guid scheme, sriov-network-operator's pool file (read and rewritten) and the
planner raise only typed errors; every spelling of a GUID parses back to the same number."""

import json

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, mutated, nested, odd_text, slow, typed_only

GUID_INT = st.one_of(st.integers(0, 2 ** 64 - 1), st.sampled_from([0, 1, 2 ** 64 - 1, 2 ** 63, 0x0200000000000001]))


def spellings(value):
    raw = "%016x" % value
    return [_guid.format_guid(value), raw, "0x" + raw, raw.upper(), "-".join(raw[i:i + 2] for i in range(0, 16, 2)),
            ":".join(raw[i:i + 4] for i in range(0, 16, 4)), ".".join(raw[i:i + 4] for i in range(0, 16, 4)),
            " %s\n" % _guid.format_guid(value),
            ":".join(str(int(raw[i:i + 2], 16) and raw[i:i + 2].lstrip("0") or "0") for i in range(0, 16, 2))]


GUID_TEXT = st.one_of(GUID_INT.map(lambda v: spellings(v)[0]), GUID_INT.flatmap(lambda v: st.sampled_from(spellings(v))),
                      mutated(GUID_INT.map(_guid.format_guid)), odd_text(8), byte_soup(30),
                      st.sampled_from(list(HUGE_NUMBERS)))
ANYTHING = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10), GUID_TEXT),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=8)


@given(GUID_INT, st.data())
def test_every_spelling_parses_back(value, data):
    text = data.draw(st.sampled_from(spellings(value)))
    assert _guid.parse_guid(text) == value


@given(st.one_of(GUID_TEXT, ANYTHING))
def test_parse_guid_raises_input_errors_only(text):
    result = typed_only(_guid.parse_guid, text, "guids[0]")
    assert isinstance(result, InputError) or 0 <= result < 2 ** 64


@given(st.one_of(st.integers(), st.text(max_size=6), GUID_TEXT, st.none(), st.booleans()))
def test_parse_prefix_typed(text):
    result = typed_only(_guid.parse_prefix, text)
    assert isinstance(result, InputError) or (0 <= result < 0xFF and result & 0x02)


@given(GUID_INT, st.integers(-3, 300), st.sampled_from([0x02, 0x06, 0xFE]))
def test_derive_typed_and_assignable(pf_guid, index, prefix):
    result = typed_only(_guid.derive, pf_guid, index, prefix)
    if not isinstance(result, InputError):
        assert _guid.assignable(result) == result and result >> 56 == prefix


def pool_entry():
    address = st.sampled_from(["0000:3b:00.0", "0000:3B:00.1", "", None, 5, "x"])
    guid = st.one_of(GUID_INT.map(_guid.format_guid), GUID_TEXT, ANYTHING)
    return st.one_of(
        st.fixed_dictionaries({"pciAddress": address, "guids": st.lists(guid, max_size=4)}),
        st.fixed_dictionaries({"pfGuid": guid, "guidsRange": st.fixed_dictionaries({"start": guid, "end": guid})}),
        st.dictionaries(st.sampled_from(list(_guid.POOL_KEYS) + ["pci_address", "rangeStart", "x"]), ANYTHING,
                        max_size=4),
        ANYTHING,
    )


POOL_TEXT = st.one_of(
    st.lists(pool_entry(), max_size=4).map(json.dumps),
    mutated(st.lists(pool_entry(), max_size=3).map(json.dumps)),
    ANYTHING.map(json.dumps),
    byte_soup(), odd_text(),
    nested("[", "]"), nested('{"a":', "}", suffix=""), nested("[", "]", prefix='[{"pciAddress": "x", "guids": ', suffix="}]"),
    st.sampled_from(["[" + "1" * 5000 + "]", "[1e400]", "[NaN]", '[{"pciAddress": "x", "guids": [' + "9" * 4400 + "]}]"]),
)


@given(POOL_TEXT, st.sampled_from(["0000:3b:00.0", "0000:3B:00.1"]), st.lists(GUID_TEXT, max_size=2))
def test_pool_file_read_and_lookups_raise_only_typed_errors(text, pci, pf_guids):
    entries = typed_only(_guid.parse_pool, text, "/etc/sriov-operator/infiniband/guids")
    if isinstance(entries, ParseError):
        assert entries.msg.startswith("/etc/sriov-operator/infiniband/guids")
        return
    entry = typed_only(_guid.pool_entry_for, entries, pci, [g for g in pf_guids if isinstance(g, str)])
    if isinstance(entry, dict):
        for count in (0, 1, 3):
            typed_only(_guid.pool_guids, entry, count)
            typed_only(_guid.desired_guids, "pool_file", count, pool_entry=entry)


@slow()
@given(POOL_TEXT, st.sampled_from(["0000:3b:00.0", "0000:3B:00.1", "0000:af:00.0"]), st.lists(GUID_INT.filter(bool), max_size=3))
def test_render_pool_keeps_other_entries(text, pci, guids):
    new = typed_only(_guid.render_pool, text, pci, guids)
    if isinstance(new, ParseError):
        return
    old = (json.loads(text) if text.strip() else None) or []  # null: no entries, as Go decodes it
    if new is None:  # no GUIDs and nothing else: no file (an entry without GUIDs is one the operator refuses)
        assert not guids and all(isinstance(e, dict) and str(e.get("pciAddress", "")).lower() == pci.lower()
                                 for e in old or [])
        return
    data = json.loads(new)
    mine = [e for e in data if isinstance(e, dict) and str(e.get("pciAddress", "")).lower() == pci.lower()]
    assert mine == ([{"pciAddress": pci, "guids": [_guid.format_guid(g) for g in guids]}] if guids else [])
    # what render_pool writes, the operator reads (sriov-network-operator's rules, _guid.parse_pool)
    _guid.parse_pool(new)
    others = [e for e in old if not (isinstance(e, dict) and str(e.get("pciAddress", "")).lower() == pci.lower())]
    assert sorted(json.dumps(e, sort_keys=True) for e in others) == \
        sorted(json.dumps(e, sort_keys=True) for e in data if e not in mine)
    # the rewritten file reads back: the operator gets our entry, with the same GUIDs
    assert typed_only(_guid.render_pool, new, pci, guids) == new


@given(st.sampled_from(list(_guid.SCHEMES) + ["x", None]), st.integers(-1, 300), st.one_of(GUID_INT, st.none()),
       st.lists(st.one_of(GUID_TEXT, ANYTHING), max_size=5))
def test_desired_guids_typed(scheme, count, pf_guid, explicit):
    result = typed_only(_guid.desired_guids, scheme, min(count, 20), pf_node_guid=pf_guid, explicit=explicit,
                        pool_entry={"guids": []})
    if isinstance(result, list):
        assert len(set(result)) == len(result) and all(0 < g < 2 ** 64 - 1 for g in result)


OBSERVED_VF = st.fixed_dictionaries(
    {"admin_node": st.one_of(st.none(), GUID_INT), "admin_port": st.one_of(st.none(), GUID_INT),
     "node": st.one_of(st.none(), GUID_INT), "port": st.one_of(st.none(), GUID_INT)})


@given(st.lists(GUID_INT, max_size=5), st.dictionaries(st.integers(0, 5), OBSERVED_VF, max_size=5),
       st.dictionaries(GUID_INT, st.text(max_size=5), max_size=3))
def test_plan_typed_and_idempotent(desired, observed, taken):
    steps = typed_only(_guid.plan, desired, observed, taken)
    if isinstance(steps, list):
        done = dict(observed)
        for step in steps:
            done[step["vf"]] = {"admin_node": step["guid"], "admin_port": step["guid"], "node": step["guid"],
                                "port": step["guid"]}
        assert _guid.plan(desired, done, taken) == []
