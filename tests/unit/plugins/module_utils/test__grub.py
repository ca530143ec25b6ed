"""GRUB drop-in rendering (checked against a real /bin/sh), defaults-file edits, grubby and grub.cfg parsing."""

import subprocess
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline, grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError


def run_sh(*texts, cwd=None):
    """Source GRUB defaults texts in order with /bin/sh through the module's own evaluation script."""
    paths = []
    for number, text in enumerate(texts):
        path = cwd / ("%02d.cfg" % number)
        path.write_text(text)
        paths.append(str(path))
    out = subprocess.run(["/bin/sh", "-c", _grub.evaluate_script(), "sh"] + ["F:" + p for p in paths],
                         check=True, capture_output=True, text=True, env={}).stdout
    return _grub.parse_evaluation(out)


@pytest.mark.parametrize("defaults, present, absent, linux, default", [
    ('GRUB_CMDLINE_LINUX=""\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"', ["iommu=pt"], [], "iommu=pt", "quiet"),
    ('GRUB_CMDLINE_LINUX="iommu=off console=ttyS0"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=soft"',
     ["iommu=pt", "intel_iommu=on"], [], "console=ttyS0 iommu=pt intel_iommu=on", "quiet"),
    ('GRUB_CMDLINE_LINUX="ib-core.netns-mode=1 amd_iommu=pt"', ["ib_core.netns_mode=0"], [],
     "amd_iommu=pt ib_core.netns_mode=0", ""),
    ('GRUB_CMDLINE_LINUX="intel_iommu=on amd_iommu=on iommu=pt"', [], ["*_iommu=*"], "iommu=pt", ""),
    ('GRUB_CMDLINE_LINUX="a=1 a=2 b"\nGRUB_CMDLINE_LINUX_DEFAULT="b quiet"', [], ["a=2", "b"], "a=1", "quiet"),
    ("", ["iommu=pt"], ["quiet"], "iommu=pt", ""),
    ('GRUB_CMDLINE_LINUX="ro"', [], [], "ro", ""),
])
def test_dropin_through_real_shell(tmp_path, defaults, present, absent, linux, default):
    dropin = _grub.render_dropin(present, absent)
    once = run_sh(defaults, dropin, cwd=tmp_path)
    assert once == {"GRUB_CMDLINE_LINUX": linux, "GRUB_CMDLINE_LINUX_DEFAULT": default}
    # the drop-in never appends twice, even when its result is fed through it again
    assert run_sh(defaults, dropin, dropin, cwd=tmp_path) == once


def test_later_dropin_overrides_are_seen(tmp_path):
    values = run_sh('GRUB_CMDLINE_LINUX="ro"', _grub.render_dropin(["iommu=pt"], []),
                    'GRUB_CMDLINE_LINUX="ro"', cwd=tmp_path)
    assert values["GRUB_CMDLINE_LINUX"] == "ro"


def test_default_entry_args():
    assert _grub.default_entry_args({"GRUB_CMDLINE_LINUX": "console=ttyS0 iommu=pt",
                                     "GRUB_CMDLINE_LINUX_DEFAULT": "quiet"}) == ["console=ttyS0", "iommu=pt", "quiet"]


def test_dropin_text_is_stable_and_owns_its_names():
    text = _grub.render_dropin(["iommu=pt"], ["quiet"])
    assert text == _grub.render_dropin(["iommu=pt"], ["quiet"])
    assert text.startswith(_grub.DROPIN_HEADER)
    assert "iommu|iommu=*|quiet|quiet=*) ;;" in text
    assert text.rstrip().endswith('GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"')
    assert "[-_]" in _grub.render_dropin(["ib_core.netns_mode=0"], [])


def test_parse_evaluation_rejects_garbage():
    with pytest.raises(ParseError):
        _grub.parse_evaluation("one line only")


def test_glob_in_variable_is_not_expanded(tmp_path):
    defaults = 'GRUB_CMDLINE_LINUX="ro *"'
    (tmp_path / "00.cfg").write_text("x")  # a file the * would expand to
    assert run_sh(defaults, _grub.render_dropin(["iommu=pt"], []), cwd=tmp_path)["GRUB_CMDLINE_LINUX"] == "ro * iommu=pt"


@pytest.mark.parametrize("text, value", [
    ('GRUB_CMDLINE_LINUX="a b"\n', "a b"),
    ("GRUB_CMDLINE_LINUX='a b'\n", "a b"),
    ("GRUB_CMDLINE_LINUX=ab\n", "ab"),
    ('GRUB_CMDLINE_LINUX="x"\n# GRUB_CMDLINE_LINUX="old"\n  GRUB_CMDLINE_LINUX="y"\n', "y"),
    ("GRUB_TIMEOUT=5\n", None),
])
def test_find_assignment(text, value):
    assert _grub.find_assignment(text, "GRUB_CMDLINE_LINUX")[1] == value


@pytest.mark.parametrize("text", [
    'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n',
    'GRUB_CMDLINE_LINUX="`cat /x`"\n',
    "GRUB_CMDLINE_LINUX=a;reboot\n",
])
def test_expansions_are_refused(text):
    with pytest.raises(ParseError):
        _grub.find_assignment(text, "GRUB_CMDLINE_LINUX")


def test_set_assignment_keeps_the_rest():
    text = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="quiet"\nGRUB_TIMEOUT=5\n'
    assert _grub.set_assignment(text, "GRUB_CMDLINE_LINUX", "quiet iommu=pt") == \
        'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="quiet iommu=pt"\nGRUB_TIMEOUT=5\n'
    assert _grub.set_assignment("GRUB_DEFAULT=0\n", "GRUB_CMDLINE_LINUX", "iommu=pt").endswith('GRUB_CMDLINE_LINUX="iommu=pt"\n')


GRUBBY_INFO = '''index=0
kernel="/boot/vmlinuz-5.14.0-427.el9.x86_64"
args="ro crashkernel=1G-4G:192M rd.lvm.lv=rhel/root iommu=pt"
root="/dev/mapper/rhel-root"
initrd="/boot/initramfs-5.14.0-427.el9.x86_64.img"
title="Red Hat Enterprise Linux (5.14.0-427.el9.x86_64) 9.4 (Plow)"
id="abc-5.14.0-427.el9.x86_64"
index=1
kernel="/boot/vmlinuz-0-rescue-abc"
args="ro crashkernel=1G-4G:192M"
'''


def test_parse_grubby_info():
    entries = _grub.parse_grubby_info(GRUBBY_INFO)
    assert [e["index"] for e in entries] == [0, 1]
    assert entries[0]["kernel"].endswith("el9.x86_64")
    assert entries[0]["args"][-1] == "iommu=pt"
    assert entries[1]["args"] == ["ro", "crashkernel=1G-4G:192M"]


def test_grub_cfg_linux_lines():
    cfg = ("menuentry 'Debian GNU/Linux' {\n\tlinux\t/boot/vmlinuz-6.1.0-28-amd64 root=UUID=1 ro iommu=pt quiet\n"
           "\tinitrd\t/boot/initrd.img\n}\n  linuxefi /vmlinuz-x ro single\n")
    lines = _grub.grub_cfg_linux_lines(cfg)
    assert lines[0] == {"kernel": "/boot/vmlinuz-6.1.0-28-amd64", "args": ["root=UUID=1", "ro", "iommu=pt", "quiet"]}
    assert lines[1]["args"] == ["ro", "single"]


def test_candidate_text_is_evaluated_in_place_of_its_file(tmp_path):
    """``T:<text>`` stands for a file's future content (check mode writes nothing): it is evaluated at its place in
    the order, so a later file still overrides it, and a missing ``F:`` file is skipped like grub-mkconfig does."""
    later = tmp_path / "later.cfg"
    later.write_text('GRUB_CMDLINE_LINUX_DEFAULT="later"\n')
    args = ['T:GRUB_CMDLINE_LINUX="iommu=pt"\nGRUB_CMDLINE_LINUX_DEFAULT="cand"', "F:" + str(tmp_path / "missing.cfg"),
            "F:" + str(later)]
    out = subprocess.run(["/bin/sh", "-c", _grub.evaluate_script(), "sh"] + args,
                         check=True, capture_output=True, text=True, env={}).stdout
    assert _grub.parse_evaluation(out) == {"GRUB_CMDLINE_LINUX": "iommu=pt", "GRUB_CMDLINE_LINUX_DEFAULT": "later"}


# -- found by the fuzz suite (tests/unit/fuzz/test_grub.py) --------------------------------------------------------
def test_set_assignment_keeps_every_other_byte():
    """Lines were split with splitlines() and joined with \\n: CRLF line ends and a form feed or \\x1c inside a
    comment (the shell reads neither as a line end) were rewritten."""
    text = '# a\x0cb\x1cc\r\nGRUB_TIMEOUT=5\r\nGRUB_CMDLINE_LINUX="quiet"\r\n# end'
    new = _grub.set_assignment(text, "GRUB_CMDLINE_LINUX", "quiet iommu=pt")
    assert new == '# a\x0cb\x1cc\r\nGRUB_TIMEOUT=5\r\nGRUB_CMDLINE_LINUX="quiet iommu=pt"\r\n# end\n'
    assert _grub.find_assignment(new, "GRUB_CMDLINE_LINUX") == (2, "quiet iommu=pt")
    assert _grub.set_assignment("A=1", "B", "x") == 'A=1\nB="x"\n'


def test_a_long_blank_run_in_an_assignment_is_linear():
    """``(?P<value>.*?)\\s*$`` backtracked quadratically: 20,000 blanks before the last word took 2.7 s."""
    line = "GRUB_CMDLINE_LINUX=" + " " * 200_000 + "x"
    start = time.monotonic()
    with pytest.raises(ParseError, match="not a simple assignment"):
        _grub.find_assignment(line, "GRUB_CMDLINE_LINUX")
    assert _grub.find_assignment("GRUB_CMDLINE_LINUX=x" + " " * 200_000, "GRUB_CMDLINE_LINUX") == (0, "x")
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("index", ["\u00b2", "\u0663", "1" * 5000])
def test_grubby_index_that_int_refuses_stays_text(index):
    """str.isdigit() is true for '²' and for 5,000 digits, which int() refuses (ValueError)."""
    assert _grub.parse_grubby_info("index=%s\nkernel=/boot/vmlinuz\n" % index)[0]["index"] == index
    assert _grub.parse_grubby_info("index=3\n")[0]["index"] == 3


def test_dropin_removes_what_the_planner_removes_for_a_glob_with_a_dash_or_underscore():
    """Found by the fuzz suite: absent: [a_b*] -- the planner removed a-b, the drop-in's `case a_b*)` kept it."""
    script = 'GRUB_CMDLINE_LINUX="ib-core.netns_mode=0 quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="a-b"\n'
    script += _grub.render_dropin([], ["ib_core.*", "a_b*"])
    script += 'printf "%s\\n%s\\n" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"\n'
    out = subprocess.run(["/bin/sh", "-c", script], check=True, capture_output=True, text=True).stdout
    assert _grub.parse_evaluation(out) == {"GRUB_CMDLINE_LINUX": "quiet", "GRUB_CMDLINE_LINUX_DEFAULT": ""}
    assert _cmdline.plan(["ib-core.netns_mode=0", "quiet", "a-b"], [], ["ib_core.*", "a_b*"])[0] == ["quiet"]
