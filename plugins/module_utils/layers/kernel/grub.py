# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB configuration, pure: our ``/etc/default/grub.d`` drop-in, ``GRUB_CMDLINE_LINUX`` lines, grubby and grub.cfg.

Debian and Ubuntu source ``/etc/default/grub`` and then ``/etc/default/grub.d/*.cfg`` (sorted) as shell before
generating ``grub.cfg``.  The collection owns one drop-in, sorted last, that:

* removes from ``GRUB_CMDLINE_LINUX`` and ``GRUB_CMDLINE_LINUX_DEFAULT`` every argument whose name it sets and
  every argument matching an ``absent`` pattern, and
* appends the wanted arguments to ``GRUB_CMDLINE_LINUX`` (all entries, recovery included).

Its text depends only on the request, never on what other files say, so it is stable (idempotent) while an
operator's own edits to ``/etc/default/grub`` keep working around it.  What the files configure is learned the way
grub-mkconfig learns it, by sourcing them with ``/bin/sh`` (:func:`evaluate_script`), so later drop-ins that
override ours are seen, not guessed.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

DROPIN_HEADER = "# Managed by rdma.k8s_node.kernel_cmdline. Do not edit: change the module's arguments instead."
CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")


def _shell_name_pattern(name):
    """A ``case`` pattern for a parameter name where ``-`` and ``_`` match each other, as in the kernel."""
    return "".join("[-_]" if char in "-_" else char for char in name)


def removal_patterns(present, absent):
    """Shell ``case`` patterns for everything the drop-in strips: names it sets, and the ``absent`` patterns."""
    patterns = []
    for name in dict.fromkeys(_cmdline.key_of(arg) for arg in present):
        pat = _shell_name_pattern(name)
        patterns.extend([pat, pat + "=*"])
    for pattern in absent:
        if set("*?[") & set(pattern):
            patterns.append(_cmdline.folded_glob(pattern))  # - and _ alike, as the planner matches (a_b* removes a-b)
        elif "=" in pattern:
            name, value = pattern.split("=", 1)
            patterns.append("%s=%s" % (_shell_name_pattern(name), value))
        else:
            pat = _shell_name_pattern(pattern)
            patterns.extend([pat, pat + "=*"])
    return list(dict.fromkeys(patterns))


def render_dropin(present, absent):
    """The drop-in's text for a validated request (see :func:`_cmdline.validate_request`)."""
    lines = [DROPIN_HEADER, "# wanted: %s" % (" ".join(present) or "(none)"),
             "# removed: %s" % (" ".join(absent) or "(none)")]
    patterns = removal_patterns(present, absent)
    if patterns:
        lines.append("set -f  # the arguments below are words, not file names")
        for var in CMDLINE_VARS:
            lines.extend([
                "_rdma_k8s_node_kept=",
                "for _rdma_k8s_node_arg in ${%s}; do" % var,
                '  case "$_rdma_k8s_node_arg" in',
                "    %s) ;;" % "|".join(patterns),
                '    *) _rdma_k8s_node_kept="${_rdma_k8s_node_kept:+$_rdma_k8s_node_kept }$_rdma_k8s_node_arg" ;;',
                "  esac",
                "done",
                '%s="$_rdma_k8s_node_kept"' % var,
            ])
        lines.append("set +f")
        lines.append("unset _rdma_k8s_node_arg _rdma_k8s_node_kept")
    if present:
        lines.append('GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }%s"' % " ".join(present))
    return "\n".join(lines) + "\n"


def evaluate_script(paths=None):
    """A POSIX sh script that sources its arguments in order and prints both command-line variables, one per
    line, the way grub-mkconfig reads them.  An argument ``F:<node path>`` is a file, sourced when it exists (as
    grub-mkconfig skips missing ones); ``T:<text>`` is a candidate content, evaluated in the file's place, so check
    mode learns what a change would configure without writing anything anywhere.  ``paths`` is accepted for
    callers of the older form and ignored: the arguments carry everything."""
    del paths
    return ('for a in "$@"; do case "$a" in F:*) f=${a#F:}; if [ -f "$f" ]; then . "$f"; fi;; '
            'T:*) eval "${a#T:}";; esac; done; '
            'printf "%s\\n%s\\n" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')


def parse_evaluation(stdout):
    """The two lines printed by :func:`evaluate_script` as ``{GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT}``."""
    lines = stdout.split("\n")
    if len(lines) < 2:
        raise ParseError("sourcing the GRUB defaults printed %r, expected two lines" % stdout)
    return {"GRUB_CMDLINE_LINUX": lines[0].strip(), "GRUB_CMDLINE_LINUX_DEFAULT": lines[1].strip()}


def default_entry_args(values):
    """The arguments of GRUB's default (non-recovery) entry: ``GRUB_CMDLINE_LINUX`` then ``..._DEFAULT``."""
    return _cmdline.split_raw(" ".join(filter(None, [values.get(v, "") for v in CMDLINE_VARS])))


# -- /etc/default/grub line editing (for the 'grub_default' mode and EL's GRUB_CMDLINE_LINUX) ----------------------

# the value is the rest of the line, right-stripped in code: ``(?P<value>.*?)\s*$`` backtracks quadratically on a
# long run of blanks that does not end the line
_ASSIGN_RE = re.compile(r"^(?P<indent>\s*)(?:export\s+)?(?P<var>[A-Z_][A-Z0-9_]*)=(?P<value>.*)$")


def _unquote(value, var, source=None):
    """Value of a simple shell assignment; expansions or command substitutions are refused, not guessed."""
    where = "%s: " % source if source else ""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        if any(c in inner for c in '$`\\"'):
            raise ParseError("%s%s uses shell expansion or escapes (%s); edit it by hand or use the drop-in mode"
                             % (where, var, value), {"path": source})
        return inner
    if any(c in value for c in "$`\\\"' \t;&|"):
        raise ParseError("%s%s=%s is not a simple assignment this module can rewrite" % (where, var, value), {"path": source})
    return value


def find_assignment(text, var, source=None):
    """``(line_index, value)`` of the last assignment of ``var`` in a GRUB defaults file, or ``(None, None)``.
    ``source`` (the file's path) starts the message of a ParseError."""
    found = (None, None)
    for index, line in enumerate(text.split("\n")):  # the shell's lines: only \n ends one (not \r, \f, \x1c ...)
        match = _ASSIGN_RE.match(line)
        if match and match.group("var") == var:
            found = (index, _unquote(match.group("value").rstrip(), var, source))
    return found


def set_assignment(text, var, value, source=None):
    """``text`` with the last assignment of ``var`` replaced (or one appended) by ``var="value"``; every other
    byte stays (line ends included: CRLF, a form feed in a comment)."""
    index, dummy_old = find_assignment(text, var, source)
    lines = (text if not text or text.endswith("\n") else text + "\n").split("\n")  # the last one is ""
    new_line = '%s="%s"' % (var, value)
    if index is None:
        lines.insert(len(lines) - 1, new_line)
    else:
        line = lines[index]
        lines[index] = _ASSIGN_RE.match(line).group("indent") + new_line + line[len(line.rstrip()):]
    return "\n".join(lines)


# -- grubby and generated grub.cfg -------------------------------------------------------------------------------------

def parse_grubby_info(text):
    """``grubby --info=ALL`` output -> ``[{index, kernel, args: [...]}, ...]``.  Values are ``key=value`` or
    ``key="value"`` lines, one block per entry, each block starting with ``index=``."""
    entries = []
    current = None
    for line in text.splitlines():
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if key == "index":
            # isdigit() is also true for "²" and for 5,000 digits, which int() refuses: ASCII and short only
            number = value.isdigit() and value.isascii() and len(value) < 20
            current = {"index": int(value) if number else value, "kernel": None, "args": []}
            entries.append(current)
        elif current is not None and key == "kernel":
            current["kernel"] = value
        elif current is not None and key == "args":
            current["args"] = _cmdline.split_raw(value)
    return entries


_LINUX_LINE_RE = re.compile(r"^\s*linux(?:efi|16)?\s+(\S+)\s*(.*)$")


def grub_cfg_linux_lines(text):
    """The kernel command lines of a generated ``grub.cfg``: ``[{"kernel": path, "args": [...]}]`` in file order."""
    out = []
    for line in text.splitlines():
        match = _LINUX_LINE_RE.match(line)
        if match:
            out.append({"kernel": match.group(1), "args": _cmdline.split_raw(match.group(2))})
    return out
