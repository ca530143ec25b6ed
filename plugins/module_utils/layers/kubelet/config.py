# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the kubelet reads and how it merges it: pure parsers the observer needs (no I/O, no planning).

KubeletConfiguration documents (JSON or YAML), the command-line flags that set the fields the collection looks at,
the layers (config file, drop-ins, flags) and their merge, CPU lists, the kubelet's version, the names of the
collection's drop-in.  The observer (``observe.py``, ``host.py``, ``rancher.py``) imports only this module, so
``rdma_facts`` does not compile the planner's rules (``rules.py``, which imports these names back for the planner, the
judge and their tests).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import posixpath
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._untrusted import MAX_BYTES, MAX_DEPTH, load_yaml

STATE_FILES = {"cpuManagerPolicy": "/var/lib/kubelet/cpu_manager_state",
               "memoryManagerPolicy": "/var/lib/kubelet/memory_manager_state"}
MANAGED_KEYS = ("topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions", "cpuManagerPolicy",
                "reservedSystemCPUs", "memoryManagerPolicy", "reservedMemory")
DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container", "cpuManagerPolicy": "none",
            "memoryManagerPolicy": "None"}
#: CPU numbers above this are refused: Linux supports at most 8192 CPUs (NR_CPUS), and a range such as 0-4294967295
#: would build a set that fills the memory
MAX_CPU = 65535


def parse_kubelet_version(text):
    """``(major, minor, patch)`` from ``kubelet --version`` (``Kubernetes v1.30.2``)."""
    # (?<!\d): a match starts where a run of digits starts (tried at each digit of a long run, it was quadratic)
    match = re.search(r"(?<!\d)v?(\d+)\.(\d+)\.(\d+)", text or "")
    if not match:
        raise ParseError("cannot read a kubelet version from %r" % (text or "").strip()[:200])
    if any(len(part) > 9 for part in match.groups()):  # int() refuses more than 4,300 digits
        raise ParseError("cannot read a kubelet version from %r: a number is too long" % (text or "").strip()[:200])
    return tuple(int(part) for part in match.groups())


def parse_cpuset(text, what):
    """The CPU numbers of a Linux cpuset list (``0-3,8``)."""
    cpus = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        match = re.match(r"^(\d+)(?:-(\d+))?\Z", part)
        if not match:
            raise InputError("%s: %r is not a CPU list such as 0-1,32-33" % (what, text))
        if any(len(number.lstrip("0")) > 5 or int(number) > MAX_CPU for number in match.groups() if number):
            raise InputError("%s: %s... names a CPU above %d, more than Linux supports" % (what, part[:40], MAX_CPU))
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise InputError("%s: range %s is backwards" % (what, part))
        cpus.update(range(low, high + 1))
    return cpus


def merge(base, overlay):
    """The kubelet's drop-in merge (a JSON merge patch, RFC 7386): mappings merge key by key at every depth, everything
    else (lists too) is replaced.  A ``null`` in the overlay changes nothing: the kubelet deletes the key from the
    merged JSON and then unmarshals it into the configuration it already has, which keeps the earlier value."""
    out = dict(base)
    for key, value in overlay.items():
        if value is None:
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def format_cpuset(cpus):
    """``0-3,8`` from a set of CPU numbers."""
    cpus = sorted(cpus)
    out, start = [], None
    for index, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if index + 1 == len(cpus) or cpus[index + 1] != cpu + 1:
            out.append(str(start) if start == cpu else "%d-%d" % (start, cpu))
            start = None
    return ",".join(out)


OWN_HEADER = "# Managed by rdma.k8s_node.kubelet_topology"
DEFAULT_DROPIN_NAME = "50-rdma-k8s-node-topology.conf"


class DependencyError(RdmaNodeError):
    """The node lacks a library a file needs (PyYAML to read a YAML KubeletConfiguration)."""


def yaml_module():
    """PyYAML, or None on a node without it (imported when first needed: about 8 ms)."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return yaml


def _json_object(path):
    def hook(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise ParseError("%s has the key %r twice: it is ambiguous which one the kubelet takes; remove one"
                                 % (path, key), {"path": path})
            out[key] = value
        return out
    return hook


def _json_constant(name):
    raise ValueError("%s is not JSON" % name)


def _loads_json(text, path):
    """JSON of node text (bounded as ``_untrusted.load_json``) that also refuses duplicate keys and NaN/Infinity
    (Go's decoder does); ValueError for text that is not JSON at all."""
    if len(text) > MAX_BYTES:
        raise ParseError("%s is larger than %d bytes" % (path, MAX_BYTES), {"path": path})
    try:
        data = json.loads(text, object_pairs_hook=_json_object(path), parse_constant=_json_constant)
    except RecursionError:
        raise ParseError("%s nests deeper than Python can read" % path, {"path": path}) from None
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ParseError("%s nests deeper than %d levels" % (path, MAX_DEPTH), {"path": path})
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return data


def load_document(text, path):
    """``(data, fmt)`` of a KubeletConfiguration file: ``fmt`` is ``json`` when the whole text is JSON (read without
    PyYAML, edited as JSON), else ``yaml``.  The kubelet reads both (its decoder turns YAML into JSON).  A JSON body
    after comment lines (the collection's own drop-in on a node without PyYAML) is read without PyYAML too.
    Malformed text is a :class:`ParseError` naming the file; YAML without PyYAML a :class:`DependencyError`."""
    body = text or ""
    if body.startswith("\ufeff"):
        body = body[1:]
    stripped = body.strip()
    candidates = []
    if stripped.startswith("{"):
        candidates.append((body, "json"))
    else:
        rest = "".join(line for line in body.splitlines(True) if line.strip() and not line.lstrip().startswith("#"))
        if rest.strip().startswith("{") and rest.strip() != stripped:
            candidates.append((rest, "yaml"))
    for candidate, fmt in candidates:
        try:
            data = _loads_json(candidate, path)
        except ValueError:
            continue
        if not isinstance(data, dict):
            raise ParseError("%s must hold a mapping (a KubeletConfiguration), not %s" % (path, type(data).__name__),
                             {"path": path})
        return data, fmt
    if not stripped:
        return {}, "yaml"
    yaml = yaml_module()
    if yaml is None:
        raise DependencyError("%s is YAML: reading it needs PyYAML (python3-yaml) on the node" % path, {"path": path})
    try:
        data = load_yaml(body, path, yaml)
    except ParseError as exc:
        raise ParseError(exc.msg.replace("\n", " "), exc.details) from None
    except TypeError as exc:  # YAML values Python cannot build (an unhashable key)
        raise ParseError("%s cannot be read: %s" % (path, exc), {"path": path}) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParseError("%s must hold a YAML mapping (a KubeletConfiguration)" % path, {"path": path})
    return data, "yaml"


def is_own_dropin(text):
    """True when a file is one the collection wrote (its first line is the collection's header)."""
    return (text or "").startswith(OWN_HEADER)


#: kubelet flags that set a KubeletConfiguration field the collection sets or checks (cmd/kubelet/app/options/
#: options.go): flag -> (field, how the kubelet parses the value).  ``string``: last one wins; ``pair``: one
#: ``key=value`` per flag (MapStringStringNoSplit); ``pairs``: ``k=v,k=v`` (MapStringString); ``langle``: ``k<v,...``;
#: ``gates``: ``Name=true,...``; ``reserved_memory``: ``0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi``.  The first
#: occurrence of a map flag replaces the file's map, later ones add to it; feature gates from flags are merged over
#: the file's (kubeletConfigFlagPrecedence in cmd/kubelet/app/server.go).
FLAG_FIELDS = {
    "topology-manager-policy": ("topologyManagerPolicy", "string"),
    "topology-manager-scope": ("topologyManagerScope", "string"),
    "topology-manager-policy-options": ("topologyManagerPolicyOptions", "pair"),
    "cpu-manager-policy": ("cpuManagerPolicy", "string"),
    "cpu-manager-policy-options": ("cpuManagerPolicyOptions", "pair"),
    "reserved-cpus": ("reservedSystemCPUs", "string"),
    "memory-manager-policy": ("memoryManagerPolicy", "string"),
    "reserved-memory": ("reservedMemory", "reserved_memory"),
    "kube-reserved": ("kubeReserved", "pairs"),
    "system-reserved": ("systemReserved", "pairs"),
    "eviction-hard": ("evictionHard", "langle"),
    "feature-gates": ("featureGates", "gates"),
}
#: flags whose value is always the next word when not given with '='
VALUE_FLAGS = frozenset(list(FLAG_FIELDS) + ["config", "config-dir", "kubeconfig", "bootstrap-kubeconfig", "v",
                                             "container-runtime-endpoint", "node-ip", "hostname-override"])
#: the fields facts, the audit and the planner look at: the managed ones and those their validation needs
RELEVANT_KEYS = MANAGED_KEYS + ("cpuManagerPolicyOptions", "kubeReserved", "systemReserved", "evictionHard",
                                "featureGates")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def flag_name(word):
    """The kubelet's name of a flag word (``--topology_manager_policy`` and ``--topology-manager-policy`` are one:
    cliflag.WordSepNormalizeFunc)."""
    return word.replace("_", "-")


def parse_command(words, start=1):
    """Flags of a command line: ``words`` is ``[(word, origin)]`` (argv, ``start`` skips argv[0]); each flag is
    ``{"name", "value", "text", "origin", "words": [indexes]}``, in order, as pflag reads them (``--name=value``,
    ``--name value``; ``--`` ends the flags)."""
    out = []
    index = start
    while index < len(words):
        word, origin = words[index]
        if word == "--":
            break
        if word.startswith("--") and len(word) > 2:
            body = word[2:]
            used = [index]
            if "=" in body:
                name, value = body.split("=", 1)
                name = flag_name(name)
            else:
                name = flag_name(body)
                nxt = words[index + 1][0] if index + 1 < len(words) else None
                if nxt is not None and (name in VALUE_FLAGS or not nxt.startswith("-")):
                    value = nxt
                    used.append(index + 1)
                    if words[index + 1][1] != origin:  # the value word comes from elsewhere ($A ends in the flag)
                        origin = dict(origin or {}, split=True)
                    index += 1
                else:
                    value = "" if name in VALUE_FLAGS else "true"
            out.append({"name": name, "value": value, "text": "--%s=%s" % (name, value), "origin": origin,
                        "words": used})
        elif len(word) == 2 and word[0] == "-" and word[1] != "-" and index + 1 < len(words) and \
                not words[index + 1][0].startswith("-"):
            index += 1  # a shorthand with its value (-v 2)
        index += 1
    return out


def _bool(text, what):
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ParseError("%s: %r is not a boolean; the kubelet refuses to start" % (what, text))


def _flag_value(kind, value, what):
    """The pieces one flag adds: a string, or a list of ``(key, value)``, or a list of reserved-memory entries."""
    if kind == "string":
        return value
    if kind == "pair":
        if "=" not in value:
            raise ParseError("%s: %r is not key=value; the kubelet refuses to start" % (what, value))
        key, val = value.split("=", 1)
        return [(key.strip(), val.strip())]
    if kind in ("pairs", "gates", "langle"):
        sep = "<" if kind == "langle" else "="
        out = []
        for item in value.split(","):
            if not item:
                continue
            if sep not in item:
                raise ParseError("%s: %r is not key%svalue; the kubelet refuses to start" % (what, item, sep))
            key, val = item.split(sep, 1)
            out.append((key.strip(), _bool(val.strip(), what) if kind == "gates" else val.strip()))
        return out
    entries = []  # reserved_memory
    for reservation in value.split(";") if value else []:
        node, sep, limits = reservation.partition(":")
        if not sep or not (node.strip().isascii() and node.strip().isdigit()) or len(node.strip()) > 9:
            raise ParseError("%s: %r is not numaNode:type=quantity[,type=quantity]; the kubelet refuses to start"
                             % (what, reservation))
        pairs = {}
        for item in limits.split(","):
            key, sep, val = item.partition("=")
            if not sep:
                raise ParseError("%s: %r is not type=quantity; the kubelet refuses to start" % (what, item))
            pairs[key.strip()] = val.strip()
        entries.append({"numaNode": int(node), "limits": pairs})
    return entries


def flag_settings(flags):
    """``{field: value}`` the relevant ``flags`` (from :func:`parse_command`) set, as the kubelet applies them."""
    settings = {}
    for flag in flags:
        if flag["name"] not in FLAG_FIELDS:
            continue
        field, kind = FLAG_FIELDS[flag["name"]]
        what = "--%s from %s" % (flag["name"], flag.get("source") or "the kubelet's command line")
        piece = _flag_value(kind, flag["value"], what)
        if kind == "string":
            settings[field] = piece
        elif kind == "reserved_memory":
            settings[field] = (settings.get(field) or []) + piece if flag["value"] else []
        else:
            current = settings.setdefault(field, {})
            current.update(piece)
    return settings


def relevant_flags(flags, describe=None):
    """The flags that set a field the collection looks at, as plain data for facts and the planner:
    ``{"flag", "name", "value", "key", "source", "origin"}``."""
    out = []
    for flag in flags:
        if flag["name"] in FLAG_FIELDS:
            origin = flag.get("origin") or {}
            out.append({"flag": flag["text"], "name": flag["name"], "value": flag["value"],
                        "key": FLAG_FIELDS[flag["name"]][0], "origin": origin,
                        "source": describe(origin) if describe else (origin.get("file") or "the command line")})
    return out


def absolute(path, base="/"):
    """A path as the kubelet resolves it (relative to its working directory, ``/`` under systemd)."""
    return posixpath.normpath(posixpath.join(base, path)) if path else path


_STRING_KEYS = ("topologyManagerPolicy", "topologyManagerScope", "cpuManagerPolicy", "memoryManagerPolicy",
                "reservedSystemCPUs")
_MAP_KEYS = ("topologyManagerPolicyOptions", "cpuManagerPolicyOptions", "kubeReserved", "systemReserved",
             "evictionHard", "featureGates")


def check_shapes(data, path):
    """Refuse (ParseError naming ``path``) a relevant field of the wrong type: the kubelet's decoder refuses it too
    (a string field given a number or a list, a map given a list, a reservation that is not a list of
    ``{numaNode, limits}``)."""
    def bad(key, what):
        raise ParseError("%s: %s must be %s, got %s; the kubelet refuses this file" % (path, key, what, repr(data[key])[:200]),
                         {"path": path, "key": key})
    for key in _STRING_KEYS:
        if data.get(key) is not None and not isinstance(data[key], str):
            bad(key, "a string")
    for key in _MAP_KEYS:
        value = data.get(key)
        if value is not None and (not isinstance(value, dict) or
                                  any(isinstance(v, (dict, list)) for v in value.values())):
            bad(key, "a mapping of plain values")
    entries = data.get("reservedMemory")
    if entries is not None:
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("numaNode"), int) and not isinstance(e.get("numaNode"), bool)
                and isinstance(e.get("limits"), dict) for e in entries):
            bad("reservedMemory", "a list of {numaNode: <int>, limits: {memory: <quantity>}}")
    return data


def relevant(data):
    """The fields of a configuration the collection looks at (``null`` ones left out: they change nothing)."""
    return dict((k, data[k]) for k in RELEVANT_KEYS if k in data and data[k] is not None)


def flags_layer(flags, path):
    """A layer of command-line flags (``flags`` from :func:`relevant_flags`)."""
    return {"kind": "flags", "path": path, "flags": list(flags), "settings": flag_settings(flags)}


def effective(layers):
    """What the kubelet runs with: the config file, the drop-ins merged in order, then the command-line flags (a map
    flag replaces the file's map, except feature gates, which are merged)."""
    merged = {}
    for layer in layers:
        if layer["kind"] == "flags":
            for key, value in layer["settings"].items():
                if key == "featureGates" and isinstance(merged.get(key), dict):
                    gates = dict(merged[key])
                    gates.update(value)
                    merged[key] = gates
                else:
                    merged[key] = value
        else:
            merged = merge(merged, layer["settings"])
    return merged


def walk_key(name):
    """Sort key of a drop-in's path relative to --config-dir in the kubelet's walk (filepath.WalkDir: each directory's
    entries by name, a subdirectory's files when its name comes)."""
    return tuple(name.split("/"))


def own_names(dropin_name):
    """The names the collection's drop-in can have: ``dropin_name``, then names that sort later (on_conflict=override
    moves it after a drop-in that overrides it)."""
    base = re.sub(r"^[0-9]+-", "", dropin_name)
    return [dropin_name, "99-" + base] + ["z" * n + "-" + base for n in (2, 4, 8, 16)]
