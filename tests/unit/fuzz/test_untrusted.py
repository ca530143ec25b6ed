"""Fuzz _untrusted, the loaders of node YAML/JSON: aliases (billion laughs), nesting, size and every malformed
document are ParseErrors naming the file; what loads is plain data no deeper than the limit."""

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _untrusted
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, huge, long_line, mutated, nested, node_text, odd_text, \
    typed_only

LAUGHS = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n" + "".join(
    "%s: &%s [%s]\n" % (chr(98 + i), chr(98 + i), ",".join(["*" + chr(97 + i)] * 9)) for i in range(8))
YAML_LINE = st.one_of(
    st.tuples(st.sampled_from(["a", "b", "- a", "  c", "? x", "'q'", '"d"', "<<"]), st.sampled_from([": ", ":", " "]),
              st.one_of(st.sampled_from(["&x 1", "*x", "!!python/object/apply:os.system ['id']", "!!binary aGk=",
                                         "!!timestamp 2001-12-14", "{a: [1, {b: 2}]}", "[1, [2, [3]]]", "|", ">-",
                                         "~", "1e400", "0x" + "f" * 200, "0o777", ".inf", "2001-12-14t21:59:43.10-05:00",
                                         "{[1]: 2}", "{{a: 1}: 2}", "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]"]),
                        st.sampled_from(list(HUGE_NUMBERS)), odd_text(3))).map("".join),
    st.sampled_from(["---", "...", "%YAML 1.1", "%TAG ! tag:x,2000:", "# c"]))
YAML = st.one_of(node_text(YAML_LINE, (": ", "- ", "[", "{", "&a ", "*a ")), st.just(LAUGHS),
                 nested("[", "]", high=200), nested("{a: ", "}", high=200), nested("- ", prefix="x:\n", high=100),
                 nested("a:\n  ", high=100), mutated(st.just(LAUGHS)))
DEEP_YAML = st.one_of(nested("[", "]", high=3000), nested("{a: ", "}", high=3000), nested("- ", prefix="x:\n", high=500),
                      nested("a:\n  ", high=300))
JSON = st.one_of(
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                 max_leaves=12).map(json.dumps),
    nested("[", "]"), nested('{"a": ', "}", suffix="1"), st.just("[" + "1" * 5000 + "]"), byte_soup(), odd_text())


def depth(value):
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


@given(YAML)
def test_load_yaml_typed(text):
    data = typed_only(_untrusted.load_yaml, text, "/var/lib/kubelet/config.yaml", yaml)
    if isinstance(data, ParseError):
        assert "/var/lib/kubelet/config.yaml" in data.msg
    else:
        assert depth(data) <= _untrusted.MAX_DEPTH


@given(JSON)
def test_load_json_typed(text):
    data = typed_only(_untrusted.load_json, text, "/var/lib/kubelet/cpu_manager_state")
    if not isinstance(data, ParseError):
        assert depth(data) <= _untrusted.MAX_DEPTH and json.dumps(data) == json.dumps(json.loads(text))  # (NaN != NaN)


@huge()
@given(st.one_of(long_line(("a: ", "- ", "[", "{", " ", "&a ", "*a ", "'", '"', "#", "\n"), 20_000, 200_000), DEEP_YAML,
                 st.integers(1, 3).map(lambda n: "a" * (_untrusted.MAX_BYTES + n))))  # refused before parsing
def test_huge_documents(text):
    typed_only(_untrusted.load_yaml, text, "/c", yaml)
    typed_only(_untrusted.load_json, text, "/c")
