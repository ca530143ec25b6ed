# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's rules, pure: key spelling, the drop-in file we own, the kernel's rules for effective values,
and how systemd-sysctl (boot) and procps' ``sysctl --system`` read the other sysctl.d files.

Keys are written with dots (``net.ipv4.conf.all.arp_ignore``) or, when a component itself holds dots (an
interface such as ``eth0.100``), with slashes (``net/ipv4/conf/eth0.100/arp_ignore``), as procps and
systemd-sysctl both accept.  For ``arp_ignore``, ``arp_announce`` and ``rp_filter`` the kernel uses the
*maximum* of ``conf/all`` and ``conf/<interface>`` (Documentation/networking/ip-sysctl.rst), so a setting on one
interface can never be lower than what ``all`` says; :func:`effective` applies that rule.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import os
import re
from functools import lru_cache

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError

HEADER = "# Managed by rdma.k8s_node.sysctl_dropin. Do not edit: change the module's settings instead.\n"
MAX_RULE = ("arp_ignore", "arp_announce", "rp_filter")
_COMPONENT_RE = re.compile(r"^[A-Za-z0-9_.:@+-]+$")
_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:,/ +-]*$")
#: the per-interface keys this collection exists to set, with the values the kernel gives a meaning
#: (Documentation/networking/ip-sysctl.rst: arp_ignore 0-3 and 8, arp_announce 0-2, rp_filter 0-2)
TYPED = {"arp_ignore": frozenset((0, 1, 2, 3, 8)), "arp_announce": frozenset((0, 1, 2)),
         "rp_filter": frozenset((0, 1, 2))}


def components(key):
    """The path components of a key under /proc/sys (a new list); refuses anything that could leave it."""
    if not isinstance(key, str):
        raise InputError("settings: %r is not a sysctl key" % (key,))
    return list(_components(key))


@lru_cache(maxsize=4096)
def _components(key):
    """:func:`components` of a string, kept: the planner and the audit's judge ask for the same keys of every
    interface of every host (an exception is not kept: a bad key is refused every time)."""
    if not key or key != key.strip():
        raise InputError("settings: %r is not a sysctl key" % (key,))
    parts = key.strip("/").split("/") if "/" in key else key.split(".")
    for part in parts:
        if part in ("", ".", "..") or not _COMPONENT_RE.match(part):
            raise InputError("settings: %r is not a sysctl key (bad component %r)" % (key, part))
    if parts[0].startswith("-"):
        # a drop-in line "-key = value" is key with "ignore failure" to systemd-sysctl, not the key "-key"
        raise InputError("settings: %r is not a sysctl key (it cannot start with '-')" % (key,))
    return tuple(parts)


def proc_path(key):
    """The node path of a key's file."""
    return "/proc/sys/" + "/".join(components(key))


def display(key):
    """The spelling used in files and on the command line: dotted, unless a component holds a dot."""
    parts = components(key)
    return "/".join(parts) if any("." in part for part in parts) else ".".join(parts)


def normalize_value(key, value):
    """A value as the kernel prints it back: integers without leading zeros, runs of blanks folded to one tab."""
    if isinstance(value, bool) or value is None:
        raise InputError("settings: %s needs a number or a string, got %r" % (key, value))
    text = str(value).strip()
    if not text:
        raise InputError("settings: %s has an empty value (systemd-sysctl would skip it, sysctl -w would fail)" % key)
    if len(text) > 4096:
        raise InputError("settings: %s has a value of %d characters (at most 4096)" % (key, len(text)))
    if not _VALUE_RE.match(text):
        raise InputError("settings: %s=%r holds characters a sysctl value cannot" % (key, value))
    words = text.split()
    if any(len(w) > 20 and re.match(r"^-?\d+$", w) for w in words):
        raise InputError("settings: %s=%r: a number longer than any the kernel accepts" % (key, text[:64]))
    last = components(key)[-1] if components(key) else ""
    if last in TYPED and len(words) == 1:
        allowed = TYPED[last]
        if not re.match(r"^-?\d+$", words[0]) or int(words[0]) not in allowed:
            raise InputError("settings: %s must be one of %s (Documentation/networking/ip-sysctl.rst), got %r"
                             % (key, ", ".join(str(v) for v in sorted(allowed)), value))
    elif last in TYPED:
        raise InputError("settings: %s takes one integer, got %r" % (key, value))
    return "\t".join(str(int(w)) if re.match(r"^-?\d+$", w) else w for w in words)


def validate(settings):
    """``{display key: normalized value}`` in the given order; duplicate keys under two spellings are an error."""
    if not isinstance(settings, dict) or not settings:
        raise InputError("settings must be a non-empty dictionary of sysctl keys and values")
    out = {}
    for key, value in settings.items():
        name = display(key)
        if name in out:
            raise InputError("settings: %s is given twice (as %r and another spelling)" % (name, key))
        out[name] = normalize_value(name, value)
    return out


def render(settings):
    """The drop-in text for validated settings: a header, then ``key = value`` lines in the given order."""
    return HEADER + "".join("%s = %s\n" % (key, value.replace("\t", " ")) for key, value in settings.items())


def differs(live, wanted):
    """Compare a value read from /proc/sys with a wanted one the way sysctl tools do (blank-separated words)."""
    return live is None or live.split() != wanted.split()


def effective(values, param, interface):
    """The value the kernel acts on for ``param`` on ``interface``: max(all, interface) for the max-rule keys,
    the interface's own value otherwise.  ``values`` maps ``"all"``/``<interface>`` to ``{param: int}``."""
    own = (values.get(interface) or {}).get(param)
    if param not in MAX_RULE:
        return own
    both = [v for v in (own, (values.get("all") or {}).get(param)) if v is not None]
    return max(both) if both else None


# -- the other files: how systemd-sysctl (boot) and procps' sysctl --system read sysctl.d -----------------------------
# Read in upstream code: systemd src/sysctl/sysctl.c (parse_line, apply_all, apply_glob_option_with_prefix),
# src/basic/conf-files.c (conf_files_list_strv: a file name found in an earlier directory hides the same name in later
# ones; the surviving files are read sorted by name across directories), src/shared/sysctl-util.c (sysctl_normalize);
# procps sysctl.c (PreloadSystem: the same directories and order, then /etc/sysctl.conf last; write_setting_list).
#: CONF_PATHS("sysctl.d"), most important first (/lib/sysctl.d only on split-/usr systems)
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
#: read by ``sysctl --system`` after every sysctl.d file; systemd-sysctl reads it only through a sysctl.d link
#: (Debian's procps and systemd's own packaging ship ``/etc/sysctl.d/99-sysctl.conf -> ../sysctl.conf``)
SYSCTL_CONF = "/etc/sysctl.conf"
BOOT_READER = "systemd-sysctl"
SYSTEM_READER = "sysctl --system"
_BLANKS = " \t\n\r"  # systemd's WHITESPACE, what strstrip() removes
_GLOB_CHARS = "*?["
#: at most this many assignments are kept per file (a node's sysctl.d files hold tens)
MAX_ENTRIES = 5000
_SWAP = str.maketrans("./", "/.")


def normalize_key(key):
    """systemd's ``sysctl_normalize()``: the key as a path below /proc/sys.  When the first separator is a dot, dots
    and slashes swap (``net.ipv4.conf.eth0/100.rp_filter`` is ``net/ipv4/conf/eth0.100/rp_filter``); empty and ``.``
    components and a leading slash go (``path_simplify``)."""
    first = re.search(r"[/.]", key)
    if first is not None and first.group() == ".":
        key = key.translate(_SWAP)
    parts = [part for part in key.split("/") if part not in ("", ".")]
    return "/".join(parts) or ("/" if key.startswith("/") else "")


def is_glob(key):
    """systemd's ``string_is_glob()``."""
    return any(char in key for char in _GLOB_CHARS)


def glob_matches(pattern, key):
    """Whether a normalized glob key names the normalized key ``key`` (glob(3) on /proc/sys: per path component, a
    wildcard never matches ``/`` nor a leading dot)."""
    parts, names = pattern.split("/"), key.split("/")
    if len(parts) != len(names):
        return False
    for part, name in zip(parts, names):
        if name.startswith(".") and not part.startswith("."):
            return False
        if not fnmatch.fnmatchcase(name, part.replace("[^", "[!")):
            return False
    return True


def parse_file(text):
    """``[(key, value, line)]`` of one sysctl.d file as systemd-sysctl reads it: ``#``/``;`` comment lines and blank
    lines skipped, ``-key = value`` is key (failure ignored), a bare ``-key`` is a negative match (value None: globs
    skip the key and nothing is written), other lines without ``=`` are ignored; keys normalized."""
    out = []
    for number, raw in enumerate((text or "").split("\n"), 1):
        line = raw.strip(_BLANKS)
        if not line or line[0] in "#;":
            continue
        if "=" in line:
            key, dummy, value = line.partition("=")
            if key.startswith("-"):
                key = key[1:]
            value = value.strip(_BLANKS)
        elif line.startswith("-"):
            key, value = line[1:], None
        else:
            continue  # "Line is not an assignment, ignoring"
        key = normalize_key(key.strip(_BLANKS))
        if key:
            out.append((key, value, number))
            if len(out) >= MAX_ENTRIES:
                break
    return out


def read_order(listing):
    """The files systemd-sysctl reads, in its order, from ``{directory: [names]}``: ``*.conf`` not hidden, a name
    taken from the most important directory that has it, sorted by name.  Returns node paths."""
    chosen = {}
    for directory in SYSCTL_DIRS:
        for name in listing.get(directory) or []:
            if isinstance(name, str) and name.endswith(".conf") and not name.startswith(".") and name not in chosen:
                chosen[name] = directory
    return ["%s/%s" % (chosen[name], name) for name in sorted(chosen)]


def with_ours(layers, ours, entries):
    """``layers`` (``[(path, entries)]`` in reading order) with our file's entries in their place: a file of the same
    name in a less important directory is hidden by ours, and ours sorts by name among the others."""
    if os.path.dirname(ours) != SYSCTL_DIRS[0]:
        raise InputError("path must be a file directly in %s, got %r" % (SYSCTL_DIRS[0], ours))
    name = os.path.basename(ours)
    kept = [(path, found) for path, found in layers if os.path.basename(path) != name]
    kept.append((ours, entries))
    return sorted(kept, key=lambda layer: os.path.basename(layer[0]))


def boot_values(layers):
    """systemd-sysctl's options after reading ``layers``: ``{key: (value, path, line)}`` in its (ordered hashmap)
    order.  A later assignment with another value replaces the entry and moves it to the end; the same value again
    keeps the first one (``parse_line``)."""
    options = {}
    for path, entries in layers:
        for key, value, line in entries:
            old = options.get(key)
            if old is not None:
                if old[0] == value:
                    continue
                del options[key]
            options[key] = (value, path, line)
    return options


def boot_value(options, key):
    """``(value, path, line)`` systemd-sysctl writes to the normalized ``key`` at boot, or None: an explicit entry
    decides alone (globs skip any key that has one, "explicit setting exists"); otherwise the last glob in the map's
    order that matches it (each glob writes every match)."""
    if key in options:
        return options[key]
    found = None
    for pattern, hit in options.items():
        if hit[0] is not None and is_glob(pattern) and glob_matches(pattern, key):
            found = hit
    return found


def system_value(layers, key):
    """``(value, path, line)`` ``sysctl --system`` (procps) leaves in the normalized ``key``: every explicit
    assignment is written in reading order, so the last one wins; globs skip keys that any line names."""
    explicit, named, glob = None, False, None
    for path, entries in layers:
        for entry_key, value, line in entries:
            if entry_key == key:
                named = True
                if value is not None:
                    explicit = (value, path, line)
            elif value is not None and is_glob(entry_key) and glob_matches(entry_key, key):
                glob = (value, path, line)
    return explicit if explicit is not None else (None if named else glob)


@lru_cache(maxsize=1024)
def _setting_key(name):
    """``normalize_key(display(name))``, cached: the audit asks it for the same few keys on every host of a fleet."""
    return normalize_key(display(name))


def overrides(layers, ours, settings, conf=None):
    """Files that beat ours for a key we set: ``[{key, want, value, file, line, reader, kind}]``.

    ``layers``: ``[(path, entries)]`` in systemd-sysctl's reading order *with ours in place* (:func:`with_ours`);
    ``settings``: our validated ``{display key: value}``; ``conf``: ``(path, entries)`` of /etc/sysctl.conf, which
    ``sysctl --system`` reads last.  ``reader`` says who applies the other value: ``systemd-sysctl`` (at every boot,
    and for each interface udev adds) or ``sysctl --system`` (only when someone runs it: never at boot).  ``kind``:
    ``later_file`` (a file read after ours assigns another value), ``excluded`` (a later ``-key`` line: systemd-sysctl
    then writes nothing to the key), ``sysctl_conf`` (/etc/sysctl.conf read last by procps).
    """
    found = []
    options = boot_values(layers)
    for name, value in settings.items():
        key = _setting_key(name)
        want = value.replace("\t", " ")
        hit = boot_value(options, key)
        if hit is not None and hit[1] != ours and (hit[0] is None or differs(hit[0], value)):
            found.append({"key": name, "want": want, "value": hit[0], "file": hit[1], "line": hit[2],
                          "reader": BOOT_READER, "kind": "excluded" if hit[0] is None else "later_file"})
            continue
        if conf is None:
            continue
        hit = system_value(list(layers) + [conf], key)
        if hit is not None and hit[1] != ours and hit[0] is not None and differs(hit[0], value):
            found.append({"key": name, "want": want, "value": hit[0], "file": hit[1], "line": hit[2],
                          "reader": SYSTEM_READER, "kind": "sysctl_conf" if hit[1] == conf[0] else "later_file"})
    return found


def layers_of(files):
    """``(layers, conf)`` for :func:`overrides` from :func:`observe.read_files`' result (or rdma_facts' copy of it)."""
    layers = [(f["path"], [tuple(e) for e in f["entries"]]) for f in files.get("files") or []]
    conf = files.get("conf")
    return layers, ((conf["path"], [tuple(e) for e in conf["entries"]]) if conf else None)


def boot_table(layers, interfaces):
    """``{interface: {param: {"value": int|str, "file": path}}}`` for ``all``, ``default`` and ``interfaces``: the
    max-rule keys (:data:`MAX_RULE`) as systemd-sysctl applies them at boot from ``layers`` (``[(path, entries)]`` in
    its order): the last assignment of a key wins, an explicit key is never touched by a glob whatever the order, a
    glob sets every other matching interface, and a ``-key`` line keeps globs (and so this table) off it."""
    names = ["all", "default"] + [i for i in interfaces if i not in ("all", "default")]
    out = dict((name, {}) for name in names)
    options = boot_values(layers)
    for name in names:
        for param in MAX_RULE:
            hit = boot_value(options, "net/ipv4/conf/%s/%s" % (name, param))
            if hit is not None and hit[0] is not None:
                value = hit[0]
                out[name][param] = {"value": int(value) if re.match(r"^-?\d{1,20}$", value) else value, "file": hit[1]}
    return out


def describe_override(item):
    """One line for a warning or an error message."""
    if item["kind"] == "excluded":
        return "%s:%s excludes %s ('-%s' read after ours): %s writes nothing to it at boot, not the wanted %s" % (
            item["file"], item["line"], item["key"], item["key"], item["reader"], item["want"])
    when = "at every boot" if item["reader"] == BOOT_READER else "whenever 'sysctl --system' runs (not at boot)"
    return "%s:%s sets %s = %s and is read after ours, so %s applies it %s instead of %s" % (
        item["file"], item["line"], item["key"], item["value"], item["reader"], when, item["want"])
