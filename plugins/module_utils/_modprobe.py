# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""modprobe.d configuration, pure: parse files, merge them in kmod's order, find a module option's effective value.

Read in kmod's source (libkmod/libkmod-config.c, libkmod-module.c, shared/util.c ``freadline_wrapped``):

* kmod reads ``*.conf`` (not hidden) from its configuration directories; a file name in an earlier directory hides
  the same name in later ones, and the surviving files are read sorted by name (``conf_files_insert_sorted``).
* A backslash joins the next line (the backslash and newline vanish); before any other character it is dropped and
  the character kept.  A line whose first character is ``#`` is a comment; words are split at blanks and tabs.
* ``options`` lines for one module accumulate in reading order and reach the module as one parameter string
  (``kmod_module_get_options``), with the kernel command line's ``module.param=`` options appended last
  (``kmod_config_parse_kcmdline`` runs after the files); the kernel applies the parameters in order
  (kernel/params.c ``parse_args``), so the last occurrence of a parameter wins.  Module and parameter names compare
  with ``-`` and ``_`` as the same character.
* The first ``install`` line whose module pattern (fnmatch) matches replaces the insertion
  (``kmod_module_get_install_commands``: "find only the first command").
* ``blacklist <module>`` in any file (or ``modprobe.blacklist=`` on the kernel command line) makes
  ``kmod_module_probe_insert_module(KMOD_PROBE_APPLY_BLACKLIST)`` skip the module: systemd-modules-load loads its
  modules-load.d lists that way ("Module '%s' is deny-listed (by kmod)"); an explicit ``modprobe <module>`` does not.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import os
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline

# kmod's search order (libkmod default_config_paths), earliest wins for a given file name
CONFIG_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")


def module_name(name):
    """Kernel module names compare with ``-`` and ``_`` as the same character."""
    return name.replace("-", "_")


_ESCAPE = re.compile(r"\\(.?)", re.S)
_WORDS = re.compile(r"[ \t]+")
COMMANDS = ("alias", "blacklist", "options", "install", "remove", "softdep", "weakdep")


def numbered_lines(text):
    """``[(first line number, logical line)]`` as ``freadline_wrapped()`` reads them: a backslash before a newline
    joins the lines, before another character it is dropped; stripped, blank lines and ``#`` comments dropped."""
    out = []
    pending, start = None, 0
    for number, raw in enumerate((text or "").split("\n"), 1):
        joins = (len(raw) - len(raw.rstrip("\\"))) % 2 == 1
        if pending is None:
            pending, start = "", number
        pending += raw[:-1] if joins else raw
        if joins:
            continue
        out.append((start, _ESCAPE.sub(lambda match: match.group(1), pending)))
        pending = None
    if pending is not None:
        out.append((start, _ESCAPE.sub(lambda match: match.group(1), pending)))
    return [(number, line.strip()) for number, line in out if line.strip() and not line.strip().startswith("#")]


def logical_lines(text):
    """The logical lines of a modprobe.d file, continuations joined and comments dropped, as kmod reads them."""
    return [line for dummy, line in numbered_lines(text)]


def directives(text):
    """``[(line, command, module, rest)]`` of one modprobe.d file: ``module`` with ``-`` folded to ``_`` (kmod's
    ``underscores()``), ``rest`` the remainder of the line (options string, install command...); lines kmod
    ignores (unknown commands, a missing module or options) are left out."""
    out = []
    for number, line in numbered_lines(text):
        parts = _WORDS.split(line, 2)
        if parts[0] not in COMMANDS or len(parts) < 2 or not parts[1]:
            continue
        rest = parts[2] if len(parts) > 2 else ""
        if parts[0] in ("options", "install", "remove", "softdep", "weakdep") and not rest:
            continue
        out.append((number, parts[0], module_name(parts[1]), rest.replace("\t", " ")))
    return out


def _params(options):
    """``[(param, value)]`` of an options string with the kernel's word and quote rules (``next_arg()``); a bare
    parameter has the value ``""``; names with ``-`` folded to ``_``."""
    out = []
    for token in _cmdline.kernel_args(options):
        name, value = _cmdline._next_arg(token)  # pylint: disable=protected-access
        out.append((name.replace("-", "_"), "" if value is None else value))
    return out


def option_values(text, module, param):
    """Values given to ``module``'s ``param`` by ``options`` lines of one file, in order."""
    wanted = param.replace("-", "_")
    return [value for dummy, value in _file_options(directives(text), module) if dummy == wanted]


def _file_options(found, module):
    return [pair for dummy, command, name, rest in found if command == "options" and name == module_name(module)
            for pair in _params(rest)]


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


# -- the planner: which file's setting the module gets, and what stops it loading ----------------------------------
def with_ours(layers, ours, found):
    """``layers`` (``[(path, directives)]`` in reading order) with our file's directives in its place: ours hides a
    file of the same name in a less important directory and sorts by name among the others."""
    if os.path.dirname(ours) != CONFIG_DIRS[0]:
        raise ValueError("our file must be directly in %s, got %r" % (CONFIG_DIRS[0], ours))
    name = os.path.basename(ours)
    kept = [(path, entries) for path, entries in layers if os.path.basename(path) != name]
    kept.append((ours, found))
    return sorted(kept, key=lambda layer: os.path.basename(layer[0]))


def settings_of(layers, module, param, cmdline=None):
    """``[(value, path, line)]`` of every setting of ``module``'s ``param``, in the order the kernel applies them:
    ``options`` lines in kmod's reading order, then the kernel command line's ``module.param=`` (path
    ``/proc/cmdline`` or the boot entry given as ``cmdline = (source, text)``).  The last one wins."""
    wanted = param.replace("-", "_")
    out = []
    for path, entries in layers:
        for number, command, name, rest in entries:
            if command == "options" and name == module_name(module):
                out.extend((value, path, number) for key, value in _params(rest) if key == wanted)
    if cmdline is not None:
        source, text = cmdline
        prefix = module_name(module) + "."
        for token in _cmdline.kernel_args(text or ""):
            name, value = _cmdline._next_arg(token)  # pylint: disable=protected-access
            if name.replace("-", "_") == prefix + wanted:
                out.append(("" if value is None else value, source, None))
    return out


def blacklisted(layers, module, cmdline=None):
    """``[(path, line)]`` of what makes kmod's blacklist skip ``module``: ``blacklist`` lines and the command line's
    ``modprobe.blacklist=a,b`` (path ``/proc/cmdline`` or the given source)."""
    name = module_name(module)
    out = [(path, number) for path, entries in layers for number, command, mod, dummy in entries
           if command == "blacklist" and mod == name]
    if cmdline is not None:
        source, text = cmdline
        for token in _cmdline.kernel_args(text or ""):
            key, value = _cmdline._next_arg(token)  # pylint: disable=protected-access
            if key.replace("-", "_") == "modprobe.blacklist" and value is not None \
                    and name in [module_name(item) for item in value.split(",")]:
                out.append((source, None))
    return out


def install_command(layers, module):
    """``(path, line, command)`` of the ``install`` line kmod runs instead of inserting ``module`` (the first whose
    pattern matches), or None."""
    name = module_name(module)
    for path, entries in layers:
        for number, command, pattern, rest in entries:
            if command == "install" and fnmatch.fnmatchcase(name, pattern):
                return path, number, rest
    return None
