"""Fuzz _modprobe: modprobe.d text never makes the reader raise, continuations join, and the effective option is the
last ``options`` value in kmod's file order."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from unit.fuzz.strategies import byte_soup, huge, long_line, node_text, odd_text, slow, typed_only

MODULE = st.sampled_from(["ib_core", "ib-core", "mlx5_core", "nvidia-peermem", "x"])
OPTION = st.one_of(st.sampled_from(["netns_mode=0", "netns_mode=1", "netns_mode", "netns_mode=", "x=y", "=1"]),
                   st.tuples(st.text("abn_s", min_size=1, max_size=5), st.text("01yn", max_size=2)).map("=".join))
LINE = st.one_of(
    st.tuples(st.sampled_from(["options", "  options", "options\t", "install", "blacklist", "alias", "#options"]),
              MODULE, st.lists(OPTION, max_size=3)).map(lambda t: " ".join([t[0], t[1]] + t[2])),
    st.tuples(st.sampled_from(["options ib_core \\", "options \\", "\\", "# \\"]), st.sampled_from(["", " "])).map("".join),
    st.sampled_from(["", "# comment", "options", "options ib_core"]),
)
TEXT = node_text(LINE, ("options ", "\\\n", "\\", " ", "=", "#"))


@given(TEXT, MODULE, st.sampled_from(["netns_mode", "x", ""]))
def test_option_values_never_raise(text, module, param):
    lines = typed_only(_modprobe.logical_lines, text)
    assert all(line == line.strip() and line and not line.startswith("#") for line in lines)
    values = typed_only(_modprobe.option_values, text, module, param)
    assert all(isinstance(v, str) for v in values)


@slow()
@given(st.lists(st.tuples(st.sampled_from(["/etc/modprobe.d/a.conf", "/usr/lib/modprobe.d/b.conf"]), TEXT), max_size=4),
       MODULE)
def test_effective_option_is_the_last_value(files, module):
    value, path = typed_only(_modprobe.effective_option, files, module, "netns_mode")
    per_file = [(p, _modprobe.option_values(t, module, "netns_mode")) for p, t in files]
    last = [(vals[-1], p) for p, vals in per_file if vals]
    assert (value, path) == (last[-1] if last else (None, None))


@given(st.dictionaries(st.sampled_from(list(_modprobe.CONFIG_DIRS) + ["/other"]),
                       st.lists(st.one_of(st.sampled_from(["a.conf", "b.conf", ".h.conf", "x.txt", "z.conf"]),
                                          odd_text(4)), max_size=5), max_size=6))
def test_config_files_order(listing):
    files = typed_only(_modprobe.config_files, listing)
    names = [name for dummy, name in files]
    assert names == sorted(set(names)) and all(n.endswith(".conf") and not n.startswith(".") for n in names)


@huge()
@given(st.one_of(long_line(("options ib_core netns_mode=1 ", "\\\n", "\\", " "), 20_000, 200_000), byte_soup(5000)))
def test_huge_files(text):
    typed_only(_modprobe.option_values, text, "ib_core", "netns_mode")
