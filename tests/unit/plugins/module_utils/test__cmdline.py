"""Kernel command-line splitting and planning, with the kernel's quoting and name rules."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as cl
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError


@pytest.mark.parametrize("raw, args", [
    ("", []),
    ("  ro   quiet ", ["ro", "quiet"]),
    ('dyndbg="file x.c +p" ro', ['dyndbg="file x.c +p"', "ro"]),
    ('"foo=a b" bar', ['"foo=a b"', "bar"]),
    ("ro -- single splash", ["ro", "--", "single", "splash"]),
])
def test_split_raw(raw, args):
    assert cl.split_raw(raw) == args


def test_init_arguments_are_not_kernel_arguments():
    assert cl.kernel_args("root=/dev/sda1 ro -- iommu=pt") == ["root=/dev/sda1", "ro"]
    parsed = cl.parse("root=/dev/sda1 ro -- iommu=pt")
    assert "iommu" not in parsed["params"] and parsed["args"][-2:] == ["--", "iommu=pt"]


@pytest.mark.parametrize("arg, key, value", [
    ("iommu=pt", "iommu", "pt"),
    ("quiet", "quiet", None),
    ('dyndbg="file x.c +p"', "dyndbg", "file x.c +p"),
    ('"foo=a b"', "foo", "a b"),
    ('"flag"', "flag", None),
    ('a=b"', "a", 'b"'),
    ("ib-core.netns-mode=0", "ib_core.netns_mode", "0"),
    ("rd.driver.blacklist=nouveau", "rd.driver.blacklist", "nouveau"),
    ("a=b=c", "a", "b=c"),
])
def test_key_and_value(arg, key, value):
    assert cl.key_of(arg) == key
    assert cl.value_of(arg) == value


def test_whole_token_comparison():
    assert not cl.same_arg("amd_iommu=pt", "iommu=pt")
    assert cl.same_arg("ib-core.netns_mode=0", "ib_core.netns-mode=0")
    assert not cl.same_arg("iommu", "iommu=pt")


def test_parse_repeated_and_flags():
    parsed = cl.parse("BOOT_IMAGE=/vmlinuz console=tty0 console=ttyS0,115200 ib-core.netns_mode=0 quiet\n")
    assert parsed["params"] == {"BOOT_IMAGE": "/vmlinuz", "console": ["tty0", "ttyS0,115200"],
                                "ib-core.netns_mode": "0", "quiet": True}
    assert parsed["raw"].endswith("quiet")


@pytest.mark.parametrize("raw, args, params", [
    ("", [], {}),
    ("ro\n", ["ro"], {"ro": True}),
    ('a="b c" d= e=f=g', ["a=b c", "d=", "e=f=g"], {"a": "b c", "d": "", "e": "f=g"}),
    ("x=1 x=2 x=3", ["x=1", "x=2", "x=3"], {"x": ["1", "2", "3"]}),
    ("  spaced   out  ", ["spaced", "out"], {"spaced": True, "out": True}),
    ('"unterminated quote', ["unterminated quote"], {"unterminated quote": True}),
    ('""', [""], {"": True}),
])
def test_parse_cmdline(raw, args, params):
    parsed = cl.parse(raw)
    assert parsed == {"raw": raw.strip(), "args": args, "params": params}


@pytest.mark.parametrize("raw, value", [
    ("ro ib_core.netns_mode=1", "1"),
    ("ib-core.netns-mode=1 ib_core.netns_mode=0", "0"),
    ("ro", None),
    ("ro -- ib_core.netns_mode=0", None),
    ("ib_core.netns_mode", True),
])
def test_last_value(raw, value):
    assert cl.last_value(raw, "ib_core.netns_mode") == value


@pytest.mark.parametrize("current, present, absent, expected", [
    # plain add, at the end
    (["ro", "quiet"], ["iommu=pt"], [], ["ro", "quiet", "iommu=pt"]),
    # replacement in place, whole token
    (["iommu=off", "ro"], ["iommu=pt"], [], ["iommu=pt", "ro"]),
    (["amd_iommu=pt"], ["iommu=pt"], [], ["amd_iommu=pt", "iommu=pt"]),
    # duplicates of a wanted name collapse to the wanted set
    (["iommu=pt", "ro", "iommu=off"], ["iommu=pt"], [], ["iommu=pt", "ro"]),
    # two wanted values of one name are both kept, in order
    (["console=tty0"], ["console=tty0", "console=ttyS0"], [], ["console=tty0", "console=ttyS0"]),
    # removal by name, exact token, glob
    (["ib_core.netns_mode=1", "ro"], [], ["ib_core.netns_mode"], ["ro"]),
    (["intel_iommu=on", "intel_iommu=sm_on"], [], ["intel_iommu=on"], ["intel_iommu=sm_on"]),
    (["intel_iommu=on", "amd_iommu=on", "iommu=pt"], [], ["*_iommu=*"], ["iommu=pt"]),
    # dash/underscore spelling of an existing argument is kept, not rewritten
    (["ib-core.netns-mode=0"], ["ib_core.netns_mode=0"], [], ["ib-core.netns-mode=0"]),
])
def test_plan(current, present, absent, expected):
    new, changes = cl.plan(current, present, absent)
    assert new == expected
    again, no_changes = cl.plan(new, present, absent)
    assert again == new and no_changes == []
    assert bool(changes) == (new != current)


def test_plan_reports_adds_and_removes():
    new, changes = cl.plan(["iommu=off", "quiet"], ["iommu=pt", "intel_iommu=on"], ["quiet"])
    assert new == ["iommu=pt", "intel_iommu=on"]
    assert changes == [{"op": "remove", "arg": "iommu=off"}, {"op": "remove", "arg": "quiet"},
                       {"op": "add", "arg": "iommu=pt"}, {"op": "add", "arg": "intel_iommu=on"}]


def test_noop_keeps_identity_and_quoted_arguments():
    current = ['dyndbg="file x.c +p"', "iommu=pt"]
    assert cl.plan(current, ["iommu=pt"], []) == (current, [])


@pytest.mark.parametrize("present, absent, message", [
    (["iommu=pt"], ["iommu"], "both wanted"),
    (["intel_iommu=on"], ["*iommu*"], "both wanted"),
    (["a b"], [], "not a kernel argument"),
    (['x="y"'], [], "not a kernel argument"),
    (["$(reboot)"], [], "not a kernel argument"),
    (["=pt"], [], "not a kernel argument"),
    ([""], [], "non-empty"),
    ([None], [], "non-empty"),
    ([], ["a b"], "not an argument name"),
    ([], [""], "not an argument name"),
])
def test_bad_requests(present, absent, message):
    with pytest.raises(InputError, match=message):
        cl.plan(["ro"], present, absent)


def test_missing_from_live():
    assert cl.missing_from(["ro", "iommu=pt"], ["iommu=pt", "intel_iommu=on"]) == ["intel_iommu=on"]
    assert cl.missing_from(["amd_iommu=pt"], ["iommu=pt"]) == ["iommu=pt"]


@pytest.mark.parametrize("vendor, arg", [
    ("GenuineIntel", "intel_iommu=on"), ("AuthenticAMD", "amd_iommu=on"), ("HygonGenuine", "amd_iommu=on"),
    ("ARM", None), ("", None),
])
def test_iommu_vendor_arg(vendor, arg):
    assert cl.iommu_vendor_arg(vendor) == arg


@pytest.mark.parametrize("arg", ["--", "-x", "--foo=bar"])
def test_arguments_the_kernel_would_hand_to_init_are_refused(arg):
    with pytest.raises(InputError, match="'--'"):
        cl.validate_arg(arg)


def test_one_argument_asked_for_in_two_spellings_is_added_once():
    """Found by the fuzz suite: present=[a-b, a_b] added both, and every later run removed one spelling and added the
    other (the same kernel argument: never a no-op)."""
    new_args, changes = cl.plan([], ["ib-core.netns-mode=0", "ib_core.netns_mode=0", "iommu=pt", "iommu=pt"])
    assert new_args == ["ib-core.netns-mode=0", "iommu=pt"]
    assert cl.plan(new_args, ["ib-core.netns-mode=0", "ib_core.netns_mode=0", "iommu=pt", "iommu=pt"]) == (new_args, [])
    assert cl.plan(["ib_core.netns_mode=0"], ["ib-core.netns-mode=0", "ib_core.netns_mode=0"]) == (["ib_core.netns_mode=0"], [])


@pytest.mark.parametrize("pattern, glob", [("a_b*", "a[-_]b*"), ("ib_core.*", "ib[-_]core.*"), ("[a-z]*_x", "[a-z]*[-_]x"),
                                           ("[!]_]-", "[!]_][-_]"), ("[", "[[]"), ("a[-", "a[[][-_]")])
def test_folded_glob(pattern, glob):
    """The one glob an absent pattern stands for, in the planner and in the GRUB drop-in (found by the fuzz suite:
    the planner folded - and _, the drop-in did not, so absent: [a_b*] left a-b in GRUB_CMDLINE_LINUX_DEFAULT)."""
    assert cl.folded_glob(pattern) == glob
    assert cl.matches_absent("ib-core.netns_mode=0", "ib_core.*") and cl.matches_absent("a-b", "a_b*")
