# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command lines, pure: split like the kernel, compare whole arguments, plan additions and removals.

The kernel (``next_arg()`` in kernel/params.c) splits at unquoted white space; a double quote toggles quoting
and may wrap a whole argument (``"foo=a b"``) or its value (``foo="a b"``).  Parameter names compare with
``-`` and ``_`` as the same character (``parameq()``), so ``ib-core.netns-mode`` is ``ib_core.netns_mode``.
A bare ``--`` ends the kernel's arguments; what follows belongs to init and is never touched here.

Arguments are kept in their written form (quotes included) so that a plan rewrites only what it must.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError

# What may appear in an argument we write: GRUB files are shell, so nothing the shell would expand or end.
_SAFE_ARG_RE = re.compile(r"^[A-Za-z0-9_.,:/+@%=-]+\Z")
_SAFE_PATTERN_RE = re.compile(r"^[A-Za-z0-9_.,:/+@%=*?\[\]!-]+\Z")
_GLOB_CHARS = set("*?[")


def split_raw(cmdline):
    """Split at unquoted white space, keeping each argument exactly as written (quotes included)."""
    args = []
    current = []
    in_quote = False
    for char in cmdline:
        if char == '"':
            in_quote = not in_quote
        if char.isspace() and not in_quote:
            if current:
                args.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        args.append("".join(current))
    return args


def kernel_args(cmdline):
    """The kernel's own arguments of a command line: everything before a bare ``--``."""
    args = split_raw(cmdline)
    return args[:args.index("--")] if "--" in args else args


def _next_arg(arg):
    """``(name, value)`` of one argument with the kernel's quote handling (``next_arg()``); value None for a flag.

    A leading quote on the whole argument and a quote opening the value are dropped, each with the argument's
    closing quote; quotes elsewhere stay, as the kernel leaves them.
    """
    quoted = arg.startswith('"')
    text = arg[1:] if quoted else arg
    closing = len(text) > 0 and text.endswith('"')
    if "=" not in text:
        return (text[:-1] if quoted and closing else text), None
    name, value = text.split("=", 1)
    if value.startswith('"'):
        value = value[1:]
        if value.endswith('"'):
            value = value[:-1]
    elif quoted and closing:
        value = value[:-1]
    return name, value


def key_of(arg):
    """The parameter name of an argument, quotes removed, ``-`` folded to ``_`` as the kernel compares names."""
    return _next_arg(arg)[0].replace("-", "_")


def value_of(arg):
    """The value of an argument with the kernel's quote handling, or None for a bare flag."""
    return _next_arg(arg)[1]


def unquoted(arg):
    """The argument as the kernel hands it on: ``name`` or ``name=value`` without the quoting."""
    name, value = _next_arg(arg)
    return name if value is None else "%s=%s" % (name, value)


def same_arg(left, right):
    """Whole-argument equality with kernel semantics: ``iommu=pt`` never matches ``amd_iommu=pt``."""
    return key_of(left) == key_of(right) and value_of(left) == value_of(right)


def parse(cmdline):
    """``{raw, args, params}`` of a command line, as facts report it.

    ``args`` are all arguments as the kernel hands them on (quotes removed), including a bare ``--`` and the init
    arguments after it; ``params`` maps each kernel parameter name (as written) to its value (True for a flag),
    a list when the name repeats, and stops at ``--``.
    """
    raw = (cmdline or "").strip()
    tokens = split_raw(raw)
    params = {}
    for token in kernel_args(raw):
        name, value = _next_arg(token)
        value = True if value is None else value
        if name not in params:
            params[name] = value
        elif isinstance(params[name], list):
            params[name].append(value)
        else:
            params[name] = [params[name], value]
    return {"raw": raw, "args": [unquoted(token) for token in tokens], "params": params}


def last_value(cmdline, name):
    """The value the kernel ends up with for parameter ``name`` (compared with ``-``/``_`` folded): the last one,
    True for a bare flag, None when absent."""
    found = None
    for token in kernel_args(cmdline or ""):
        if key_of(token) == name.replace("-", "_"):
            value = value_of(token)
            found = True if value is None else value
    return found


def validate_arg(arg, option="present"):
    """Reject arguments that cannot be written safely into a GRUB shell file or a BLS entry."""
    if not isinstance(arg, str) or not arg:
        raise InputError("%s: kernel arguments must be non-empty strings, got %r" % (option, arg))
    if arg == "--" or arg.startswith("-"):
        raise InputError("%s: %r: the kernel stops parsing its own parameters at '--' and hands the rest to init; "
                         "an argument cannot start with '-'" % (option, arg))
    if not _SAFE_ARG_RE.match(arg) or arg.startswith("="):
        raise InputError(
            "%s: %r is not a kernel argument this module writes (allowed: letters, digits and _ . , : / + @ %% = -;"
            " no spaces, quotes or shell characters)" % (option, arg))
    return arg


def folded_glob(pattern):
    """``pattern`` with each ``-`` and ``_`` outside a bracket expression as ``[-_]`` (``ib_core.*`` matches
    ``ib-core.netns_mode=0``, as the kernel reads both names alike).  The one glob an ``absent`` pattern stands for, here
    (fnmatch) and in the GRUB drop-in (a shell ``case`` pattern), so that both remove the same arguments."""
    out, index = [], 0
    while index < len(pattern):
        if pattern[index] == "[":
            end = index + 1 + (pattern[index + 1:index + 2] == "!")
            end = pattern.find("]", end + (pattern[end:end + 1] == "]"))
            out.append(pattern[index:end + 1] if end >= 0 else "[[]")  # an unclosed [ is itself (both read "[[]" so)
            index = end + 1 if end >= 0 else index + 1
            continue
        out.append("[-_]" if pattern[index] in "-_" else pattern[index])
        index += 1
    return "".join(out)


def matches_absent(arg, pattern):
    """An ``absent`` pattern matches a bare name (any value), one exact ``name=value``, or a glob on the argument."""
    if _GLOB_CHARS & set(pattern):
        unquoted = key_of(arg) if value_of(arg) is None else "%s=%s" % (key_of(arg), value_of(arg))
        glob = folded_glob(pattern)
        return fnmatch.fnmatchcase(unquoted, glob) or fnmatch.fnmatchcase(arg, glob)
    if "=" in pattern:
        return same_arg(arg, pattern)
    return key_of(arg) == key_of(pattern)


def validate_request(present, absent):
    """Check ``present``/``absent`` before any I/O: shapes, characters, and contradictions between the two."""
    present = [validate_arg(arg, "present") for arg in present or []]
    absent = list(absent or [])
    for pattern in absent:
        # patterns become `case` patterns of a shell file that grub-mkconfig sources as root: the characters
        # of a kernel argument plus the glob characters, nothing that the shell would execute or expand
        if not isinstance(pattern, str) or not _SAFE_PATTERN_RE.match(pattern) or pattern.startswith("="):
            raise InputError("absent: %r is not an argument name, name=value or glob pattern (allowed: letters, digits, "
                             "_ . , : / + @ %% = - and the glob characters * ? [ ] !)" % (pattern,))
    for arg in present:
        for pattern in absent:
            if matches_absent(arg, pattern):
                raise InputError("%r is both wanted (present) and removed (absent by %r)" % (arg, pattern))
    return present, absent


def plan(current, present=None, absent=None):
    """Pure planner: the argument list that ``current`` (a list of arguments) must become.

    * ``present`` arguments define the complete set of values of their name: ``iommu=pt`` replaces ``iommu=off``
      in place; two wanted ``console=`` values keep both; an argument already there keeps its spelling and place.
    * ``absent`` patterns remove every match (see :func:`_matches_absent`).
    Returns ``(new_args, changes)`` with ``changes`` = ``[{"op": "add"|"remove", "arg": ...}]``.  When nothing must
    change, ``new_args`` is ``current`` unchanged, so a second run is a no-op and nothing is appended twice.
    """
    present, absent = validate_request(present, absent)
    wanted = {}
    for arg in present:
        # a-b and a_b (or iommu=pt twice) are one argument: kept once, else every run would swap the two spellings
        wants = wanted.setdefault(key_of(arg), [])
        if not any(same_arg(arg, want) for want in wants):
            wants.append(arg)

    new_args = []
    placed = set()
    for arg in current:
        key = key_of(arg)
        if any(matches_absent(arg, pattern) for pattern in absent):
            continue
        if key not in wanted:
            new_args.append(arg)
        elif key not in placed:
            # the wanted values of a name take the place of its first occurrence
            placed.add(key)
            same_name = [a for a in current if key_of(a) == key]
            new_args.extend(next((a for a in same_name if same_arg(a, want)), want) for want in wanted[key])
    for key, wants in wanted.items():
        if key not in placed:
            new_args.extend(wants)

    kept = list(new_args)
    changes = []
    for arg in current:
        if arg in kept:
            kept.remove(arg)
        else:
            changes.append({"op": "remove", "arg": arg})
    remaining = list(current)
    for arg in new_args:
        if arg in remaining:
            remaining.remove(arg)
        else:
            changes.append({"op": "add", "arg": arg})
    if not changes:
        return list(current), []
    return new_args, changes


def missing_from(live_args, configured_args):
    """Arguments configured for the next boot whose name=value the running kernel does not have (whole-token)."""
    return [arg for arg in configured_args if not any(same_arg(arg, live) for live in live_args)]


def iommu_vendor_arg(cpu_vendor):
    """The vendor IOMMU switch for a ``/proc/cpuinfo`` ``vendor_id``: Intel needs ``intel_iommu=on``;
    AMD's IOMMU is on by default, and ``amd_iommu=on`` is accepted and harmless.  None for others."""
    if cpu_vendor == "GenuineIntel":
        return "intel_iommu=on"
    if cpu_vendor in ("AuthenticAMD", "HygonGenuine"):
        return "amd_iommu=on"
    return None
