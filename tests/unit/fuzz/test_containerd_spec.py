"""Properties of containerd_rdma's derived base spec (``_containerd.derive_spec``): another tool's JSON spec, written
in any style (indentation, separators, key order, trailing newline or not, rlimits present, empty, null or
missing, the collection's entry present with other values or not), comes back with exactly RLIMIT_MEMLOCK (and
RLIMIT_NOFILE when asked) changed and every other byte where it was; anything that is no spec is a ParseError."""

import json

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

INF = ctd.RLIM_INFINITY
KINDS = ["RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_CORE", "RLIMIT_NPROC"]
LIMITS = st.one_of(st.integers(0, 2 ** 64 - 1), st.just(INF))
RLIMIT = st.fixed_dictionaries({"type": st.sampled_from(KINDS), "hard": LIMITS, "soft": LIMITS}).flatmap(
    lambda entry: st.permutations(list(entry.items())).map(dict))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 20), st.text(max_size=8))
OTHER = st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k not in ("process", "rlimits")),
                        st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) |
                                     st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6),
                        max_size=3)


@st.composite
def specs(draw):
    process = draw(OTHER)
    rlimits = draw(st.one_of(st.just("absent"), st.none(), st.lists(RLIMIT, max_size=4)))
    if rlimits != "absent":
        process["rlimits"] = rlimits
        items = list(process.items())
        process = dict(draw(st.permutations(items)))
    spec = draw(OTHER)
    spec["process"] = process
    spec = dict(draw(st.permutations(list(spec.items()))))
    indent = draw(st.sampled_from([None, 2, 4, "\t", 1]))
    separators = draw(st.sampled_from([None, (",", ":"), (", ", ": "), (",", ": ")]))
    if indent is not None and separators is not None:
        separators = (",", separators[1])
    text = json.dumps(spec, indent=indent, separators=separators)
    return spec, text + draw(st.sampled_from(["", "\n", "\n\n"]))


@given(specs(), st.one_of(st.just(INF), st.integers(1, 2 ** 40)), st.one_of(st.none(), st.integers(64, 1 << 30)))
def test_derived_spec_changes_only_the_owned_rlimits(case, memlock, nofile):
    spec, text = case
    new = ctd.derive_spec(text, memlock, nofile, "spec.json")
    got = json.loads(new)
    expected = json.loads(text)
    rlimits = expected["process"].get("rlimits") or []
    for kind, value in [("RLIMIT_MEMLOCK", memlock)] + ([("RLIMIT_NOFILE", nofile)] if nofile is not None else []):
        entries = [r for r in rlimits if r["type"] == kind]
        for entry in entries:
            entry["hard"] = entry["soft"] = value
        if not entries:
            rlimits.append({"type": kind, "hard": value, "soft": value})
    expected["process"]["rlimits"] = rlimits
    assert got == expected
    assert ctd.spec_satisfies(got, memlock, nofile)
    assert ctd.derive_spec(new, memlock, nofile, "spec.json") == new          # idempotent
    # bytes before the process object's first change and after its last are the owner's
    start = text.index('"process"')
    assert new[:start] == text[:start]
    tail = len(text) - text.rindex("}")
    assert new[-tail:] == text[-tail:]
    assert spec is not None


@given(st.text(max_size=60))
def test_anything_else_is_a_parse_error(text):
    try:
        new = ctd.derive_spec(text, INF, None, "spec.json")
    except ParseError:
        return
    assert ctd.spec_satisfies(json.loads(new), INF)
