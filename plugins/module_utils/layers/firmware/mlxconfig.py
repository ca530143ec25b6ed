# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``mlxconfig`` (MFT, DOCA) and ``mstconfig`` (mstflint) output and values, pure.

Both tools are the same program (mstflint's mlxconfig/), with the same output: a device block (``Device type:``,
``Name:``, ``Description:``, ``Device:``), then ``Configurations:`` and one line per parameter.  ``-e q`` prints the
Default, Current and Next Boot columns, ``q`` only Next Boot; a line starts with ``*`` when Next Boot differs from
Default or Current, and (mstflint 4.26 and later) may carry ``RO`` for a read-only parameter.  The column widths
changed between versions (names in 36 columns after 9 characters in 4.21, 44 after 8 in 4.26+; values in 16 or 20
columns, one extra space after a value that fills its column), so lines are split on whitespace, not on columns.

A value prints as a number (``255``), as ``NAME(number)`` for enums and booleans (``ETH(2)``, ``True(1)``), as
``Array[0..7]`` for array parameters, or ``N/A`` when unknown (mlxcfg_ui.cpp ``printValue()``/``printParam()``).
The tool takes a value on its command line as the enum's name (any case) or its number (mlxcfg_param.cpp
``parseValueAux()``); booleans are the enum False=0/True=1.  Sources: docs/firmware.md.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

COLUMNS_EXTENDED = ("default", "current", "next")
_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*(\[\d+\])?$")
_SHOWN = re.compile(r"^(.*)\((\d+)\)$")
_INFO = ("Device type", "Name", "Description", "Device")


def parse_query(text):
    """``{"device": {type, name, description, device}, "columns": (...), "params": {NAME: {column: value}},
    "errors": [...]}`` of one device's query output.  ParseError when there is no configuration table (the tool
    printed an error, or something else).  ``errors`` holds the tool's ``-E-`` lines; lines that are not a parameter
    line (the ``*`` legend, ``(...)`` cuts) are skipped."""
    device = {}
    params = {}
    errors = []
    columns = None
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("-E-"):
            errors.append(stripped[3:].strip())
            continue
        if columns is None:
            key, sep, value = stripped.partition(":")
            if sep and key in _INFO:
                device[key.lower().replace(" ", "_")] = value.strip()
            elif stripped.startswith("Configurations:"):
                header = stripped[len("Configurations:"):].split()
                columns = COLUMNS_EXTENDED if "Default" in header and "Current" in header else ("next",)
            continue
        words = stripped.split()
        if words and words[0] == "*":
            words = words[1:]
        elif words and words[0].startswith("*"):
            words[0] = words[0][1:]
        if words and words[0] == "RO":
            words = words[1:]
        if len(words) != len(columns) + 1 or not _NAME.match(words[0]):
            continue
        params[words[0]] = dict(zip(columns, words[1:]))
    if columns is None:
        raise ParseError("no configuration table in the output%s" % (": " + "; ".join(errors) if errors else ""))
    return {"device": device, "columns": columns, "params": params, "errors": errors}


def errors_of(text):
    """The messages of the ``-E-`` lines of a run (``set`` prints them on stdout after the table header)."""
    return [line.strip()[3:].strip() for line in (text or "").splitlines() if line.strip().startswith("-E-")]


def shown(text):
    """``(name, number)`` of a printed value: ``ETH(2)`` -> ``("ETH", 2)``, ``255`` -> ``(None, 255)``,
    ``Array[0..7]`` -> ``("Array[0..7]", None)``; ``(None, None)`` for ``N/A`` or nothing."""
    text = (text or "").strip()
    if not text or text == "N/A":
        return None, None
    match = _SHOWN.match(text)
    if match:
        return match.group(1), int(match.group(2))
    if text.isdigit() and text.isascii():
        return None, int(text)
    return text, None


def wanted(text):
    """``(name, number)`` of a value as the tool takes it: a number (decimal or ``0x`` hex) or a name."""
    text = str(text).strip()
    if re.match(r"^0[xX][0-9a-fA-F]+$", text):
        return None, int(text, 16)
    if text.isdigit() and text.isascii():
        return None, int(text)
    return text, None


def same(desired, printed):
    """Whether the value ``desired`` (as given to the tool) is what the query printed: the same number, or the same
    enum name in any case (a name the device prints without its number compares by name)."""
    want_name, want_number = wanted(desired)
    name, number = shown(printed)
    if want_number is not None:
        return number == want_number
    return name is not None and name.lower() == want_name.lower()


def is_array(printed):
    """An array parameter (``Array[0..7]``): its elements are set one by one, not through this layer."""
    return (printed or "").startswith("Array[")


def set_argv(tool, device, values):
    """``<tool> -d <device> -y set K=V ...`` (``-y``: no confirmation prompt); values in the given order."""
    return [tool, "-d", device, "-y", "set"] + ["%s=%s" % (name, value) for name, value in values]


def query_argv(tool, device):
    """``<tool> -e -d <device> q``: Default, Current and Next Boot."""
    return [tool, "-e", "-d", device, "q"]
