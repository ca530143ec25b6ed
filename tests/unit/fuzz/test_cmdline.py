"""Fuzz _cmdline: tokenising /proc/cmdline never raises and is stable, and the add/remove planner validates its
request with InputError only, is idempotent, and keeps every argument it was not asked to touch."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from unit.fuzz.strategies import byte_soup, huge, long_line, mutated, odd_text, slow, typed_only

NAME = st.one_of(st.sampled_from(["iommu", "intel_iommu", "amd_iommu", "ib_core.netns_mode", "ib-core.netns-mode",
                                  "console", "quiet", "root", "BOOT_IMAGE", "hugepages", "isolcpus", "a", "a-b", "a_b"]),
                 st.text("abcxyz_-.019", min_size=1, max_size=8))
VALUE = st.one_of(st.sampled_from(["pt", "on", "off", "1", "0", "ttyS0,115200", "/dev/sda1", "UUID=1-2", "", "a b",
                                   '"q"', "x=y"]), st.text("abc019,./:=+-@%", max_size=8))
RAW_ARG = st.one_of(
    NAME,
    st.tuples(NAME, VALUE).map("=".join),
    st.tuples(NAME, VALUE).map(lambda t: '%s="%s"' % t),
    st.tuples(NAME, VALUE).map(lambda t: '"%s=%s"' % t),
    st.just("--"),
    odd_text(4),
)
SPACE = st.sampled_from([" ", " ", "  ", "\t", "\n", "\x0b", "\x1c", "\xa0", "\u3000"])
CMDLINE = st.one_of(
    st.lists(st.tuples(RAW_ARG, SPACE), max_size=12).map(lambda items: "".join(a + s for a, s in items)),
    mutated(st.lists(RAW_ARG, max_size=12).map(" ".join)),
    byte_soup(),
    odd_text(),
    long_line(("a", " ", '"', "=", "a=b ", '"a b" ')),
)
SAFE_ARG = st.one_of(NAME, st.tuples(NAME, st.text("abc019,./:+@%=-", min_size=1, max_size=6)).map("=".join)).filter(
    lambda a: _cmdline._SAFE_ARG_RE.match(a) and not a.startswith("="))  # pylint: disable=protected-access
PATTERN = st.one_of(SAFE_ARG, NAME.map(lambda n: n + "*"), NAME.map(lambda n: n[:1] + "?" + n[1:]),
                    st.sampled_from(["*iommu*", "[ai]*", "console=*", "[!x]*", "["]))
ANY_REQUEST = st.one_of(st.none(), st.lists(st.one_of(SAFE_ARG, RAW_ARG, st.integers(), st.none(), byte_soup(10)),
                                            max_size=4))


@slow()
@given(CMDLINE)
def test_tokenising_never_raises_and_is_stable(cmdline):
    args = typed_only(_cmdline.split_raw, cmdline)
    assert isinstance(args, list)
    assert _cmdline.split_raw(" ".join(args)) == args
    assert all(arg and arg.strip() == arg or '"' in arg for arg in args)
    parsed = typed_only(_cmdline.parse, cmdline)
    assert parsed["raw"] == cmdline.strip()
    assert len(parsed["args"]) == len(_cmdline.split_raw(cmdline.strip()))
    for arg in args:
        _cmdline.key_of(arg)
        _cmdline.value_of(arg)
        _cmdline.unquoted(arg)
    kernel = _cmdline.kernel_args(cmdline)
    assert "--" not in kernel and kernel == args[:len(kernel)]


@slow()
@given(CMDLINE, NAME)
def test_last_value_is_the_last_parameter_of_that_name(cmdline, name):
    found = typed_only(_cmdline.last_value, cmdline, name)
    params = _cmdline.parse(cmdline)["params"]
    same = [arg for arg in _cmdline.kernel_args(cmdline) if _cmdline.key_of(arg) == name.replace("-", "_")]
    assert (found is None) == (not same)
    if same:
        value = _cmdline.value_of(same[-1])
        assert found == (True if value is None else value)
    assert isinstance(params, dict)


@given(st.lists(RAW_ARG, max_size=10), ANY_REQUEST, ANY_REQUEST)
def test_plan_refuses_bad_requests_with_input_errors(current, present, absent):
    typed_only(_cmdline.plan, current, present, absent)


@slow()
@given(st.lists(st.one_of(RAW_ARG, SAFE_ARG), max_size=12), st.lists(SAFE_ARG, max_size=4), st.lists(PATTERN, max_size=3))
def test_plan_is_idempotent_and_keeps_unrelated_arguments(current, present, absent):
    result = typed_only(_cmdline.plan, current, present, absent)
    if isinstance(result, InputError):
        return
    new_args, changes = result
    again, more = _cmdline.plan(new_args, present, absent)
    assert more == [] and again == new_args, "a second run changes something"
    for want in present:
        assert any(_cmdline.same_arg(arg, want) for arg in new_args)
    for arg in new_args:
        assert not any(_cmdline.matches_absent(arg, pattern) for pattern in absent)
    touched = set(_cmdline.key_of(arg) for arg in present)
    kept = [arg for arg in current if _cmdline.key_of(arg) not in touched
            and not any(_cmdline.matches_absent(arg, pattern) for pattern in absent)]
    assert [arg for arg in new_args if arg in kept] == kept, "an unrelated argument moved or vanished"
    removed = [c["arg"] for c in changes if c["op"] == "remove"]
    added = [c["arg"] for c in changes if c["op"] == "add"]
    assert sorted(current + added) == sorted(new_args + removed)
    if not changes:
        assert new_args == current


@given(st.lists(RAW_ARG, max_size=8), st.lists(RAW_ARG, max_size=8))
def test_missing_from_never_raises(live, configured):
    missing = typed_only(_cmdline.missing_from, live, configured)
    assert all(arg in configured for arg in missing)


@given(st.one_of(st.none(), st.integers(), byte_soup(30), odd_text(10), SAFE_ARG), st.sampled_from(["present", "absent"]))
def test_validate_arg_typed(arg, option):
    result = typed_only(_cmdline.validate_arg, arg, option)
    assert result == arg or isinstance(result, InputError)


@huge()
@given(long_line(("a", " ", '"', "=", "a=b ", '"a b" ', "--"), 20_000, 200_000))
def test_huge_command_lines(cmdline):
    assert typed_only(_cmdline.parse, cmdline)["raw"] == cmdline.strip()
    typed_only(_cmdline.plan, _cmdline.split_raw(cmdline), ["iommu=pt"], ["a*"])
