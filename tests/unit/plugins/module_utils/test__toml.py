"""_toml: parse (checked against tomllib), and the surgical editor (only the edited key changes)."""

import difflib
import time
import tomllib

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, ParseError

CRI = ("plugins", "io.containerd.grpc.v1.cri")
RUNC = CRI + ("containerd", "runtimes", "runc")

VALID = [
    "",
    "a = 1\nb = 'lit'\nc = \"esc\\t\\u00e9\"\n",
    "[a]\nx.y = true\n[a.b]\nz = [1, 2,\n  3, # comment\n]\n",
    "s = \"\"\"\nline1\\\n   line2\"\"\"\nt = '''x''y'''\n",
    "[[p]]\nn = 1\n[[p]]\nn = 2\n[p.sub]\nq = 0x1f\n",
    "i = { a = 1, b.c = 'd' }\nf = 1.5e3\nneg = -7\nu = 1_000\n",
    "'quoted key'.\"dq\" = 1\n[\"io.containerd.grpc.v1.cri\".x]\nk = false\n",
    "arr = []\nnested = [[1, 2], ['a']]\n",
]


@pytest.mark.parametrize("text", VALID)
def test_parse_matches_tomllib(text):
    assert _toml.parse(text).data == tomllib.loads(text)


INVALID = [
    ("[a\nb = 1\n", "line 1"),
    ("a = 1\na = 2\n", "duplicate key a"),
    ("[t]\n[t]\n", "defined twice"),
    ("a = \"unterminated\n", "line 1"),
    ("a = [1, 2\n", "end of file"),
    ("a = 1 b = 2\n", "one statement per line"),
    ("a = {x = 1}\n[a]\ny = 2\n", "line 2: table a is defined twice"),
    ("a = tru\n", "invalid value"),
    ("a = \"\\q\"\n", "invalid escape"),
    ("x = 1\n\n\n[plugins.\"io.containerd.grpc.v1.cri\"\n", "line 4"),
]


@pytest.mark.parametrize("text,message", INVALID)
def test_parse_errors_name_the_line(text, message):
    with pytest.raises(ParseError) as info:
        _toml.parse(text, "config.toml")
    assert message in info.value.msg
    assert info.value.msg.startswith("config.toml line")
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)


def changed_lines(before, after):
    return [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]


def test_replace_value_keeps_comment_and_everything_else():
    text = '# top\nversion = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n' \
           '  base_runtime_spec = ""   # keep me\n  runtime_type = "io.containerd.runc.v2"\n'
    new = _toml.set_key(text, RUNC, "base_runtime_spec", "/etc/containerd/cri-base.json")
    assert changed_lines(text, new) == [
        '-   base_runtime_spec = ""   # keep me',
        '+   base_runtime_spec = "/etc/containerd/cri-base.json"   # keep me']


def test_same_value_returns_text_unchanged():
    text = "[a]\nk = true # c\n"
    assert _toml.set_key(text, ("a",), "k", True) is text


def test_insert_into_existing_table_after_its_last_key():
    text = '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "x"\n\n[debug]\n  level = "info"\n'
    new = _toml.set_key(text, CRI, "enable_cdi", True)
    assert new == '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "x"\n  enable_cdi = true\n\n' \
                  '[debug]\n  level = "info"\n'


def test_new_table_goes_before_its_first_subtable():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "x"\n'
    new = _toml.set_key(text, CRI, "enable_cdi", True)
    data = tomllib.loads(new)
    assert data["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True
    assert new.index("[plugins.\"io.containerd.grpc.v1.cri\"]") < new.index("runtimes.runc]")


def test_dotted_key_table_gets_a_dotted_key():
    text = '[plugins]\n  "io.containerd.grpc.v1.cri".containerd.runtimes.runc.runtime_type = "r"\n[debug]\n  level = "info"\n'
    new = _toml.set_key(text, RUNC, "base_runtime_spec", "/s.json")
    assert '  "io.containerd.grpc.v1.cri".containerd.runtimes.runc.base_runtime_spec = "/s.json"\n' in new
    assert tomllib.loads(new)["debug"] == {"level": "info"}


def test_inline_table_is_refused():
    text = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n  runc = { runtime_type = "r" }\n'
    with pytest.raises(ConflictError) as info:
        _toml.set_key(text, RUNC, "base_runtime_spec", "/s.json", "config.toml")
    assert "inline table" in info.value.msg


def test_empty_file_gets_version_and_table():
    new = _toml.set_key(_toml.set_key("", RUNC, "base_runtime_spec", "/s"), (), "version", 2)
    assert tomllib.loads(new) == {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {
        "containerd": {"runtimes": {"runc": {"base_runtime_spec": "/s"}}}}}}
    assert new.startswith("version = 2\n")


def test_rlim_infinity_cannot_be_written():
    with pytest.raises(ParseError):
        _toml.render_value(18446744073709551615)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["generated/containerd-v1.7.34_config-default.toml",
                                  "generated/containerd-v2.0.11_config-default.toml",
                                  "generated/containerd-v2.1.9_config-default.toml",
                                  "generated/containerd-v2.1.9_config-migrate_of_repo-default-1.7.toml",
                                  "from-containerd-repo/default-1.6.toml",
                                  "from-containerd-repo/default-1.7.toml"])
def test_realdata_parse_and_edit(realdata, name):
    text = (realdata / "containerd" / name).read_text()
    assert _toml.parse(text, name).data == tomllib.loads(text)
    v3 = tomllib.loads(text).get("version") == 3
    table = ("plugins", "io.containerd.cri.v1.runtime") if v3 else CRI
    new = _toml.set_key(text, table + ("containerd", "runtimes", "runc"), "base_runtime_spec", "/etc/containerd/cri-base.json")
    new = _toml.set_key(new, table + ("containerd", "runtimes", "nvidia"), "base_runtime_spec", "/etc/containerd/cri-base.json")
    new = _toml.set_key(new, table, "enable_cdi", True)
    before, after = tomllib.loads(text), tomllib.loads(new)
    runtimes = after
    for part in table + ("containerd", "runtimes"):
        runtimes = runtimes[part]
    assert runtimes["runc"]["base_runtime_spec"] == "/etc/containerd/cri-base.json"
    assert runtimes["nvidia"] == {"base_runtime_spec": "/etc/containerd/cri-base.json"}
    # nothing else changed: remove the three edits and the documents are equal
    del runtimes["nvidia"]
    cri = after
    for part in table:
        cri = cri[part]
    orig = before
    for part in table:
        orig = orig[part]
    runtimes["runc"]["base_runtime_spec"] = orig["containerd"]["runtimes"]["runc"].get("base_runtime_spec")
    if "base_runtime_spec" not in orig["containerd"]["runtimes"]["runc"]:
        del runtimes["runc"]["base_runtime_spec"]
    if "enable_cdi" in orig:
        cri["enable_cdi"] = orig["enable_cdi"]
    else:
        del cri["enable_cdi"]
    assert after == before
    # and every comment line of the original is still there
    comments = [line for line in text.splitlines() if line.strip().startswith("#")]
    assert all(line in new.splitlines() for line in comments)


# -- found by the fuzz suite (tests/unit/fuzz/test_toml.py) --------------------------------------------------------
@pytest.mark.parametrize("text,message", [
    ("a = " + "[" * 10_000, "nested more than 100 deep"),                     # was RecursionError
    ("a = " + "{b = " * 5_000 + "1" + "}" * 5_000, "nested more than 100 deep"),
    ("a = " + "1" * 5_000, "integer of 5000 digits is too long"),             # was ValueError (int max str digits)
    ('a = "\\U00110000"', "is not a Unicode scalar value"),                   # was ValueError from chr()
    ('a = "\\ud800"', "is not a Unicode scalar value"),                       # a lone surrogate: not a character
])
def test_hostile_text_is_a_parse_error(text, message):
    with pytest.raises(ParseError) as info:
        _toml.parse(text, "config.toml")
    assert message in info.value.msg and info.value.msg.startswith("config.toml line 1: ")


def test_nesting_up_to_the_limit_and_big_hex_integers_still_parse():
    depth = _toml.MAX_NESTING
    assert _toml.parse("a = " + "[" * depth + "]" * depth).data == tomllib.loads("a = " + "[" * depth + "]" * depth)
    assert _toml.parse("a = 0x" + "f" * 300).data["a"] == int("f" * 300, 16)


def test_many_lines_and_continuations_parse_in_linear_time():
    """line numbers were counted from the top for every statement, and every line-ending backslash and every date
    copied the rest of the text: 50,000 lines took 13 s, now well under one."""
    text = "".join("k%d = 1979-05-27\n" % i for i in range(50_000)) + 'm = """' + "\\\n" * 50_000 + '"""\n'
    start = time.monotonic()
    doc = _toml.parse(text)
    assert time.monotonic() - start < 5
    assert doc.data["m"] == "" and doc.statements[-1].line == 50_001
