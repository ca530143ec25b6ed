"""Fuzz _grub: /etc/default/grub assignments (shell-quoted GRUB_CMDLINE values) read with ParseError only, rewritten
with every other line kept byte for byte and read back; grubby and grub.cfg output and the drop-in never raise."""

import subprocess

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline, grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from unit.fuzz.strategies import byte_soup, huge, long_line, node_text, odd_text, slow, typed_only
from unit.fuzz.test_cmdline import PATTERN, SAFE_ARG

VAR = st.sampled_from(["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_TIMEOUT", "GRUB_DEFAULT"])
ARGS = st.lists(SAFE_ARG, max_size=5).map(" ".join)
SHELL_VALUE = st.one_of(
    ARGS.map('"{}"'.format), ARGS.map("'{}'".format), ARGS.filter(lambda a: " " not in a),
    st.sampled_from(['"$GRUB_CMDLINE_LINUX quiet"', '"`id`"', '"a\\"b"', "'a'b'", "a;b", '"', "'", '""', "''",
                     '"a" "b"', "$(x)", "${X:-y}"]),
    odd_text(6),
)
LINE = st.one_of(
    st.tuples(st.sampled_from(["", "  ", "\t", "export ", "  export  "]), VAR, SHELL_VALUE,
              st.sampled_from(["", " ", "\t", "  \r"])).map(lambda t: "%s%s=%s%s" % t),
    st.sampled_from(["# comment", "", "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`",
                     "if [ -x /x ]; then", "fi", "GRUB_TERMINAL=console"]),
)
TEXT = node_text(LINE, ("GRUB_CMDLINE_LINUX=", '"', "'", " ", "\\", "$"))


@slow()
@given(TEXT, VAR)
def test_find_assignment_raises_only_parse_errors(text, var):
    found = typed_only(_grub.find_assignment, text, var, "/etc/default/grub")
    if isinstance(found, ParseError):
        assert found.msg.startswith("/etc/default/grub: ")
    else:
        index, value = found
        assert (index is None) == (value is None)


@slow()
@given(TEXT, VAR, ARGS)
def test_set_assignment_round_trips_and_keeps_other_lines(text, var, value):
    new = typed_only(_grub.set_assignment, text, var, value, "/etc/default/grub")
    if isinstance(new, ParseError):
        return
    index, got = _grub.find_assignment(new, var)
    assert got == value
    old_lines, new_lines = text.split("\n"), new.split("\n")
    if text and not text.endswith("\n"):
        old_lines.append("")
    before_index, dummy = _grub.find_assignment(text, var)
    if before_index is None:  # appended before the final newline
        assert new_lines[:-2] == old_lines[:-1] and new_lines[-2].startswith(var + "=") and new_lines[-1] == ""
    else:
        assert len(new_lines) == len(old_lines)
        assert [line for i, line in enumerate(new_lines) if i != index] == \
               [line for i, line in enumerate(old_lines) if i != index]
    assert _grub.set_assignment(new, var, value) == new


@given(st.lists(SAFE_ARG, max_size=4), st.lists(PATTERN, max_size=3))
def test_render_dropin_never_raises(present, absent):
    request = typed_only(_cmdline.validate_request, present, absent)
    if isinstance(request, tuple):
        text = typed_only(_grub.render_dropin, *request)
        assert text.startswith(_grub.DROPIN_HEADER) and text.endswith("\n")


@slow()
@given(st.lists(SAFE_ARG, max_size=4), st.lists(PATTERN, max_size=3), st.lists(SAFE_ARG, max_size=6),
       st.lists(SAFE_ARG, max_size=4))
def test_dropin_removes_and_adds_in_sh(present, absent, linux, default):
    """The drop-in sourced by /bin/sh after a defaults file gives what the planner says (a few runs of sh each)."""
    request = typed_only(_cmdline.validate_request, present, absent)
    if not isinstance(request, tuple):
        return
    present, absent = request
    script = 'GRUB_CMDLINE_LINUX="%s"\nGRUB_CMDLINE_LINUX_DEFAULT="%s"\n%s' % (
        " ".join(linux), " ".join(default), _grub.render_dropin(present, absent))
    script += '\nprintf "%s\\n%s\\n" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"\n'
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=20, check=True).stdout
    values = _grub.parse_evaluation(out)
    got = _grub.default_entry_args(values)
    for want in present:
        assert any(_cmdline.same_arg(arg, want) for arg in got)
    for arg in got:
        if arg not in present:
            assert not any(_cmdline.matches_absent(arg, p) for p in absent)
            assert _cmdline.key_of(arg) not in set(_cmdline.key_of(a) for a in present)


@slow()
@given(st.one_of(TEXT, byte_soup(), odd_text()))
def test_evaluation_and_generated_files_never_raise(text):
    typed_only(_grub.parse_evaluation, text)
    typed_only(_grub.default_entry_args, {"GRUB_CMDLINE_LINUX": text, "GRUB_CMDLINE_LINUX_DEFAULT": text[:10]})
    for entry in typed_only(_grub.grub_cfg_linux_lines, text):
        assert entry["kernel"] and isinstance(entry["args"], list)


GRUBBY_LINE = st.one_of(
    st.tuples(st.sampled_from(["index", "kernel", "args", "root", "initrd", "title", "id"]),
              st.one_of(st.integers(-5, 99).map(str), ARGS.map('"{}"'.format), st.sampled_from(
                  ['"/boot/vmlinuz-6.1.0"', "\u00b2", "\u0663", "1" * 5000, '"', "", "-1"]), odd_text(4))).map("=".join),
    st.sampled_from(["", "garbage", "index"]),
)
GRUB_CFG_LINE = st.one_of(
    st.tuples(st.sampled_from(["linux", "  linux", "\tlinuxefi", "linux16", "linuxx", "initrd"]),
              st.sampled_from([" /vmlinuz-6.1", "\t/boot/x", "", " "]), ARGS.map(lambda a: " " + a)).map("".join),
    st.sampled_from(["menuentry 'Debian' {", "}", "set root=x", "  linux"]),
)


@given(node_text(GRUBBY_LINE, ("index=", "args=", '"')))
def test_grubby_info_never_raises(text):
    for entry in typed_only(_grub.parse_grubby_info, text):
        assert isinstance(entry["args"], list)
        assert isinstance(entry["index"], (int, str))


@slow()
@given(node_text(GRUB_CFG_LINE, ("linux ", " ", "\t")))
def test_grub_cfg_never_raises(text):
    for entry in typed_only(_grub.grub_cfg_linux_lines, text):
        assert entry["kernel"].strip() == entry["kernel"]


@huge()
@given(long_line(("GRUB_CMDLINE_LINUX=", " ", "a", "\t", '"'), 50_000, 200_000))
def test_long_assignment_lines_are_linear(text):
    typed_only(_grub.find_assignment, "GRUB_CMDLINE_LINUX=" + text, "GRUB_CMDLINE_LINUX")
