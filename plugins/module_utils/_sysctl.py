# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl settings, pure: key spelling, the drop-in file we own, and the kernel's rules for effective values.

Keys are written with dots (``net.ipv4.conf.all.arp_ignore``) or, when a component itself holds dots (an
interface such as ``eth0.100``), with slashes (``net/ipv4/conf/eth0.100/arp_ignore``), as procps and
systemd-sysctl both accept.  For ``arp_ignore``, ``arp_announce`` and ``rp_filter`` the kernel uses the
*maximum* of ``conf/all`` and ``conf/<interface>`` (Documentation/networking/ip-sysctl.rst), so a setting on one
interface can never be lower than what ``all`` says; :func:`effective` applies that rule.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

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
    """The path components of a key under /proc/sys; refuses anything that could leave it."""
    if not isinstance(key, str) or not key or key != key.strip():
        raise InputError("settings: %r is not a sysctl key" % (key,))
    parts = key.strip("/").split("/") if "/" in key else key.split(".")
    for part in parts:
        if part in ("", ".", "..") or not _COMPONENT_RE.match(part):
            raise InputError("settings: %r is not a sysctl key (bad component %r)" % (key, part))
    if parts[0].startswith("-"):
        # a drop-in line "-key = value" is key with "ignore failure" to systemd-sysctl, not the key "-key"
        raise InputError("settings: %r is not a sysctl key (it cannot start with '-')" % (key,))
    return parts


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
