# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""modprobe.d configuration, pure: parse files, merge them in kmod's order, find a module option's effective value.

kmod reads ``*.conf`` from its configuration directories; a file name in an earlier directory hides the same name
in later ones, and the surviving files are read sorted by name.  ``options`` lines for one module accumulate in that
order and are passed to the module as one parameter string, where the last occurrence of a parameter wins.  Module
names compare with ``-`` and ``_`` as the same character.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

# kmod's search order (libkmod default_config_paths), earliest wins for a given file name
CONFIG_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")


def module_name(name):
    """Kernel module names compare with ``-`` and ``_`` as the same character."""
    return name.replace("-", "_")


def logical_lines(text):
    """Lines with ``\\``-continuations joined and comments dropped, as kmod reads them."""
    out = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    if pending.strip() and not pending.strip().startswith("#"):
        out.append(pending.strip())
    return out


def option_values(text, module, param):
    """Values given to ``module``'s ``param`` by ``options`` lines of one file, in order."""
    values = []
    for line in logical_lines(text):
        fields = line.split()
        if len(fields) < 3 or fields[0] != "options" or module_name(fields[1]) != module_name(module):
            continue
        for option in fields[2:]:
            key, sep, value = option.partition("=")
            if key == param:
                values.append(value if sep else "")
    return values


def config_files(listing):
    """kmod's reading order from ``{directory: [file names]}``: names deduplicated (earlier directory wins),
    ``*.conf`` only, hidden files skipped (libkmod ``conf_files_filter_out()``), sorted by name.
    Returns ``[(directory, name)]``."""
    chosen = {}
    for directory in CONFIG_DIRS:
        for name in listing.get(directory, []):
            if name.endswith(".conf") and not name.startswith(".") and name not in chosen:
                chosen[name] = directory
    return [(chosen[name], name) for name in sorted(chosen)]


def effective_option(files, module, param):
    """``(value, path)`` of the last ``module param=`` setting across ``files`` = ``[(path, text)]`` in reading order,
    or ``(None, None)`` when nothing sets it."""
    found = (None, None)
    for path, text in files:
        values = option_values(text, module, param)
        if values:
            found = (values[-1], path)
    return found
