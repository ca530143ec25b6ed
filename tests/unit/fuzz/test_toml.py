"""Fuzz _toml: parse never raises anything but ParseError, agrees with tomllib where both accept, and set_key only
inserts or replaces the one value (every other byte stays), is idempotent and leaves valid TOML."""

import datetime
import difflib
import math
import tomllib

from hypothesis import assume, given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, ParseError
from unit.fuzz.strategies import byte_soup, huge, long_line, mutated, nested, node_text, odd_text, slow, typed_only

BARE = st.text("abcxyzABC019_-", min_size=1, max_size=6)
QUOTED = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='"\\\n\x7f'), max_size=6).map(
        lambda s: '"%s"' % "".join(c if ord(c) >= 0x20 else "\\u%04x" % ord(c) for c in s)),
    st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="'"), max_size=6).map("'{}'".format),
    st.sampled_from(['"io.containerd.grpc.v1.cri"', '"a.b"', "'x y'", '""', '"\\u00e9"', '"\\U0001F600"']))
KEY = st.lists(st.one_of(BARE, BARE, QUOTED), min_size=1, max_size=3).map(".".join)
SCALAR = st.one_of(
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(str),
    st.sampled_from(["0", "+1", "-0", "1_000", "0x1f", "0xdead_beef", "0o755", "0b1010", "1.5", "-2e-3", "6.626e-34",
                     "1e1_0", "inf", "-inf", "+nan", "true", "false", "1979-05-27", "07:32:00", "1979-05-27 07:32:00Z",
                     "1979-05-27T07:32:00-08:00", "9223372036854775807", "-9223372036854775808",
                     "9223372036854775808", "0x" + "f" * 17, "1" * 30, "1" * 5000, "1e400", '"\\U00110000"',
                     '"\\ud800"', '"\\uDFFF"', '"\\U0000D800"', '"a\\tb\\"c\\\\"', "'lit'", '"""\nml\\\n   x"""',
                     "'''\nml'''", '""""quoted""""', '"\\x"', '"""a\\\n\\\n\\\n"""']),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=10).map(_toml.render_value),
    st.floats(allow_nan=False).map(repr).filter(lambda s: "e" in s or "." in s),
)


def value_of(depth=3):
    if depth == 0:
        return SCALAR
    inner = value_of(depth - 1)
    return st.one_of(
        SCALAR, SCALAR,
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(inner, max_size=3).map(lambda items: "[\n  " + ",\n  # c\n  ".join(items) + ",\n]"),
        st.lists(st.tuples(KEY, inner), max_size=3).map(
            lambda kvs: "{" + ", ".join("%s = %s" % kv for kv in kvs) + "}"),
    )


VALUE = value_of()
COMMENT = st.one_of(st.just(""), st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=10).map(
    lambda c: "  # " + c))
LINE = st.one_of(
    st.tuples(st.sampled_from(["", "  ", "\t"]), KEY, VALUE, COMMENT).map(lambda t: "%s%s = %s%s" % t),
    st.tuples(st.sampled_from(["", "  "]), KEY, COMMENT).map(lambda t: "%s[%s]%s" % t),
    st.tuples(st.sampled_from(["", "  "]), KEY, COMMENT).map(lambda t: "%s[[%s]]%s" % t),
    COMMENT.map(lambda c: c.strip()),
    st.just(""),
)
PIECES = ("[", "]", "{", "}", "a = ", '"', "'", '"""', "'''", "\\\n", "#", ",", "[[", "1979-05-27 ", "1_", "\\u")
TEXT = st.one_of(
    node_text(LINE, PIECES, max_lines=10),
    nested("[", "]", prefix="a = ", high=150),
    nested("{b = ", "}", prefix="a = ", suffix="1", high=150),
    nested("[[", "]]", prefix="a = ", high=150),
)
HUGE = st.one_of(
    nested("[", "]", prefix="a = "),
    nested("[", prefix="a = "),
    nested("{b = ", "}", prefix="a = ", suffix="1"),
    nested("[[", "]]", prefix="a = "),
    nested("[a]\n", prefix="", low=1, high=2_000),
    st.integers(1, 50_000).map(lambda n: 'a = """' + "\\\n" * n + '"""'),
    st.integers(1, 20_000).map(lambda n: "a = [" + "1979-05-27, " * n + "]"),
    st.integers(1, 20_000).map(lambda n: "".join("k%d = %d\n" % (i, i) for i in range(n))),
    long_line(("a", "1", "_", " ", "\\t", "\\\\", "é"), 10_000, 200_000).map(lambda s: 'a = "%s"' % s),
    long_line(PIECES, 10_000, 200_000),
)
DOC = st.one_of(node_text(LINE, PIECES, max_lines=10), st.lists(LINE, max_size=10).map("\n".join))


def comparable(value):
    """False for data tomllib and _toml represent differently on purpose (dates and times; NaN != NaN)."""
    if isinstance(value, (_toml.RawValue, datetime.date, datetime.time)):
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if isinstance(value, dict):
        return all(comparable(v) for v in value.values())
    if isinstance(value, list):
        return all(comparable(v) for v in value)
    return True


@slow()
@given(TEXT)
def test_parse_raises_only_parse_errors(text):
    result = typed_only(_toml.parse, text, "config.toml")
    assert isinstance(result, (_toml.Document, ParseError))
    if isinstance(result, ParseError):
        assert result.msg.startswith("config.toml line ")


@huge()
@given(HUGE)
def test_parse_huge_text_in_linear_time(text):
    assert isinstance(typed_only(_toml.parse, text), (_toml.Document, ParseError))


@slow()
@given(DOC)
def test_parse_agrees_with_tomllib(text):
    ours = typed_only(_toml.parse, text)
    try:
        theirs = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        return  # _toml may be more lenient (it is not a validator); it never disagrees on what both accept
    if isinstance(ours, ParseError):
        # what tomllib accepts and _toml refuses: integers Python will not convert from decimal, and nesting
        # deeper than _toml.MAX_NESTING
        assert "digits is too long" in ours.msg or "nested more than" in ours.msg, (text, ours.msg)
        return
    assume(comparable(theirs) and comparable(ours.data))
    assert ours.data == theirs


PLAIN = st.one_of(
    st.text(max_size=20),
    st.integers(-(2 ** 63), 2 ** 63 - 1),
    st.booleans(),
    st.lists(st.one_of(st.text(max_size=6), st.integers(-(2 ** 63), 2 ** 63 - 1)), max_size=4),
)


@given(PLAIN)
def test_render_value_round_trips(value):
    doc = _toml.parse("k = " + _toml.render_value(value) + "\n")
    assert doc.data["k"] == (list(value) if isinstance(value, tuple) else value)


@given(st.one_of(st.integers(), st.floats(), st.none(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
def test_render_value_refuses_typed(value):
    result = typed_only(_toml.render_value, value)
    if isinstance(value, int) and -(2 ** 63) <= value < 2 ** 63:
        assert result == str(value)
    else:
        assert isinstance(result, ParseError)


TABLE = st.lists(st.one_of(BARE, st.sampled_from(["plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes",
                                                  "runc", "options", "a", "a.b", "x y", ""])), max_size=4).map(tuple)
NAME = st.one_of(BARE, st.sampled_from(["version", "base_runtime_spec", "enable_cdi", "a", "x y", "é", ""]))


@given(DOC, TABLE, NAME, PLAIN)
def test_set_key_changes_only_that_value(text, table, key, value):
    if isinstance(typed_only(_toml.parse, text), ParseError):
        return
    new = typed_only(_toml.set_key, text, table, key, value, "config.toml")
    if isinstance(new, (ConflictError, ParseError)):
        return
    assert isinstance(new, str)
    after = _toml.parse(new)
    assert after.get(table + (key,)) == value
    # every byte of the old text is still there, in order: the edit replaced one value or inserted lines
    before = _toml.parse(text)
    old_stmt = next((s for s in before.statements if s.kind == "kv" and s.path == table + (key,)), None)
    if old_stmt is not None and old_stmt.value == value and type(old_stmt.value) is type(value):
        assert new == text  # the same value (-0 is 0): nothing to write
    elif old_stmt is not None:
        assert new == text[:old_stmt.value_start] + _toml.render_value(value) + text[old_stmt.value_end:]
    else:
        ops = difflib.SequenceMatcher(None, text, new, autojunk=False).get_opcodes()
        assert all(op in ("equal", "insert") for op, *dummy in ops), ops
    # and applying the same edit again changes nothing
    assert _toml.set_key(new, table, key, value, "config.toml") == new


@slow()
@given(mutated(DOC), TABLE, NAME, PLAIN)
def test_set_key_on_any_text_raises_only_typed_errors(text, table, key, value):
    typed_only(_toml.set_key, text, table, key, value, "config.toml")


@given(st.one_of(byte_soup(), odd_text()), st.lists(st.one_of(byte_soup(20), odd_text(5)), max_size=3), st.one_of(byte_soup(20), odd_text(5)))
def test_set_key_hostile_names(text, table, key):
    typed_only(_toml.set_key, text, tuple(table), key, "v", "config.toml")
