# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd's configuration as containerd reads it: pure parsers the observer needs (no I/O, no planning).

Limits (``LimitMEMLOCK`` of the unit, ``/proc/<pid>/limits``, a base spec's rlimits), ``containerd --version``, the
effective configuration of ``containerd config dump`` in version-free terms, which config file sets each key the
collection owns, the collection's derived copies of base specs, and the configs k3s/rke2 (or a header) say are
regenerated.  The observer (``observe.py``) imports only this module and ``tomledit.py``, so ``rdma_facts`` does
not compile the planner's rules (``rules.py``, which imports these names back for the planner, the judge and their
tests).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

RLIM_INFINITY = 18446744073709551615  # ~0UL: the kernel's and the OCI spec's "unlimited" (uint64)
RUNC_TYPE = "io.containerd.runc.v2"
CRI_V2 = ("plugins", "io.containerd.grpc.v1.cri")
CRI_V3 = ("plugins", "io.containerd.cri.v1.runtime")
_SIZE = re.compile(r"^([0-9]+)\s*([KMGT]?)(i?B?)?$", re.IGNORECASE)
#: a byte count of more digits is beyond 2^64 (and int() refuses more than 4,300)
_MAX_DIGITS = 20
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


def render_limit(value):
    """A limit for people and for systemd: ``infinity`` or the byte count."""
    return "infinity" if value == RLIM_INFINITY else str(value)


def parse_version(text):
    """``(major, minor, patch)`` from ``containerd --version`` (Debian, upstream, or ``2.1.9+unknown`` builds)."""
    for line in (text or "").splitlines():
        match = re.search(r"(?:^|\s)v?(\d+)\.(\d+)(?:\.(\d+))?", line)
        if match and "containerd" in line.lower() and all(len(part or "") <= 9 for part in match.groups()):
            return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    raise ParseError("cannot read a containerd version from %r" % (text or "").strip()[:200])


def parse_systemd_limit(text):
    """A ``LimitMEMLOCK=`` value as bytes: ``infinity``, ``8M``, ``8388608``, ``soft:hard`` (the hard part)."""
    value = text.strip()
    if ":" in value:
        value = value.split(":", 1)[1]
    if value.lower() in ("infinity", str(RLIM_INFINITY)):
        return RLIM_INFINITY
    match = _SIZE.match(value)
    if not match or len(match.group(1)) > _MAX_DIGITS:
        raise ParseError("cannot read LimitMEMLOCK=%s" % text[:200])
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def unit_limit(unit_files):
    """The ``LimitMEMLOCK`` that systemd applies: ``unit_files`` is [(path, text)] in systemd's order
    (the unit, then drop-ins sorted by file name).  Returns ``(bytes or None, path that set it)``."""
    value, source = None, None
    for path, text in unit_files:
        section = None
        for raw in (text or "").splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            if section == "Service" and line.split("=", 1)[0].strip() == "LimitMEMLOCK":
                setting = line.split("=", 1)[1].strip()
                if setting == "":
                    value, source = None, path
                else:
                    value, source = parse_systemd_limit(setting), path
    return value, source


def parse_proc_limits(text):
    """``{"soft": bytes, "hard": bytes}`` of "Max locked memory" in /proc/PID/limits (None when absent)."""
    for line in (text or "").splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory"):].split()[:2]
            if len(fields) < 2 or not all(f == "unlimited" or re.match(r"^[0-9]{1,20}\Z", f) for f in fields):
                raise ParseError("unexpected 'Max locked memory' line in /proc/<pid>/limits: %r" % line[:200])
            values = [RLIM_INFINITY if f == "unlimited" else int(f) for f in fields]
            return {"soft": values[0], "hard": values[1]}
    return None


#: the prefix of a derived copy's name: ``rdma-k8s-node.<name of the owner's spec>`` beside it
DERIVED_PREFIX = "rdma-k8s-node."


def spec_rlimit(spec_text, kind):
    """``{"soft", "hard"}`` of one rlimit in a spec's text, or None (also for unreadable JSON)."""
    try:
        spec = json.loads(spec_text or "")
    except (ValueError, RecursionError):
        return None
    process = spec.get("process") if isinstance(spec, dict) else None
    rlimits = process.get("rlimits") if isinstance(process, dict) else None
    for entry in rlimits if isinstance(rlimits, list) else []:
        if isinstance(entry, dict) and entry.get("type") == kind:
            return {"soft": entry.get("soft"), "hard": entry.get("hard")}
    return None


def derived_path(source):
    """Where the derived copy of the owner's spec ``source`` lives: next to it, named ``rdma-k8s-node.<name>``."""
    head, tail = source.rsplit("/", 1)
    return "%s/%s%s" % (head, DERIVED_PREFIX, tail)


def derived_source(path):
    """The owner's spec a derived copy was made from, or None when ``path`` is no derived copy."""
    head, tail = path.rsplit("/", 1) if "/" in path else ("", path)
    if tail.startswith(DERIVED_PREFIX) and len(tail) > len(DERIVED_PREFIX):
        return "%s/%s" % (head, tail[len(DERIVED_PREFIX):])
    return None


def needs_generated(current, generated):
    """True when some runtime in ``current`` ({runtime: its base_runtime_spec}) gets the generated spec."""
    return any(path in ("", generated) for path in current.values())


def cri_paths(config_version):
    """``(cdi table, runtimes table)`` for a config file version (4, containerd 2.3's, moved only server settings)."""
    if config_version == 2:
        return CRI_V2, CRI_V2 + ("containerd", "runtimes")
    if config_version in (3, 4):
        return CRI_V3, CRI_V3 + ("containerd", "runtimes")
    raise ConflictError("containerd config version %r is not supported: version 1 files (no 'version' key) were "
                        "deprecated in containerd 1.x and removed in 2.0; migrate with `containerd config migrate` "
                        "(2.x) or rewrite it as version 2" % (config_version,))


def max_config_version(containerd_version):
    """The highest config version containerd reads: 2 on 1.x, 3 on 2.0-2.2, 4 from 2.3 (version.ConfigVersion)."""
    if containerd_version < (2, 0):
        return 2
    return 4 if containerd_version >= (2, 3) else 3


def file_version(doc, containerd_version, imported=False):
    """A config file's ``version``; None for an empty file (it takes the running containerd's native version).

    A non-empty file without ``version`` is a version 1 file when it is the main config.  An *imported* file
    without one is read with version 2 plugin names: 1.x merges it into the main file's version 2 config (a zero
    version does not override), and 2.x migrates it from version 1, which only renames short plugin names.
    """
    version = doc.data.get("version")
    if version is None:
        if not doc.data:
            return None
        return 2 if imported else 1
    if isinstance(version, bool) or not isinstance(version, int):
        raise ParseError("'version' must be an integer, got %r" % (version,))
    highest = max_config_version(containerd_version)
    if version > highest and version in (3, 4):
        raise ConflictError("config version %d needs containerd %s or later; this node runs containerd %s"
                            % (version, "2.0" if version == 3 else "2.3", ".".join(str(p) for p in containerd_version)))
    return version


def native_version(containerd_version):
    """The config version a new file gets: 2 on containerd 1.x, 3 on 2.0-2.2, 4 from 2.3."""
    return max_config_version(containerd_version)


def effective(dump_doc):
    """What ``containerd config dump`` says, in version-free terms."""
    version = dump_doc.data.get("version", 2)
    cdi_table, runtimes_table = cri_paths(3 if isinstance(version, int) and version >= 3 else 2)
    runtimes = dump_doc.get(runtimes_table, {}) or {}
    cri = dump_doc.get(cdi_table, {}) or {}
    runtimes, cri = (table if isinstance(table, dict) else {} for table in (runtimes, cri))  # e.g. runtimes = 5
    return {
        "config_version": version,
        "runtimes": dict((name, {"runtime_type": (rt or {}).get("runtime_type"),
                                 "base_runtime_spec": (rt or {}).get("base_runtime_spec") or ""})
                         for name, rt in sorted(runtimes.items()) if isinstance(rt, dict)),
        # everything else a runtime is set to, for the "nothing but our keys changed" check and for seeding a
        # runtime table that only containerd's built-in defaults define (see seed_runtime)
        "runtime_settings": dict((name, runtime_settings(rt)) for name, rt in sorted(runtimes.items())
                                 if isinstance(rt, dict)),
        "runtime_options": dict((name, rt["options"]) for name, rt in sorted(runtimes.items())
                                if isinstance(rt, dict) and isinstance(rt.get("options"), dict)),
        "enable_cdi": cri.get("enable_cdi"),
        "cdi_spec_dirs": cri.get("cdi_spec_dirs"),
        "cdi_known": "enable_cdi" in cri,
    }


def _meaningful(value):
    """``value`` without its zero values ("", 0, false, [], {}): what containerd treats as unset."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = _meaningful(item)
            if item is None or item is False or item in ("", [], {}) or (isinstance(item, int) and item == 0):
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [_meaningful(item) for item in value]
    return value


def runtime_settings(table):
    """The keys a runtime table sets, besides ``base_runtime_spec``, with containerd's zero values dropped.

    ``containerd config dump`` prints every field, set or not; an empty string, 0, false or an empty
    ``options`` table means the same as an absent key, so only the rest says what the runtime is.
    """
    table = dict(table or {})
    table.pop("base_runtime_spec", None)
    return _meaningful(table)


def target_runtimes(eff, requested):
    """The runtimes to point at the base spec: the requested ones, else every runc-type runtime."""
    runtimes = eff["runtimes"]
    if requested:
        missing = [name for name in requested if name not in runtimes]
        if missing:
            raise InputError("runtimes: %s not configured in containerd (configured: %s)"
                             % (", ".join(missing), ", ".join(sorted(runtimes)) or "none"))
        wrong = [name for name in requested if runtimes[name]["runtime_type"] != RUNC_TYPE]
        if wrong:
            raise InputError("runtimes: %s not of type %s; a base runtime spec only applies to runc-type runtimes"
                             % (", ".join(wrong), RUNC_TYPE))
        return list(requested)
    return [name for name, rt in sorted(runtimes.items()) if rt["runtime_type"] == RUNC_TYPE]


def _key_path(version, kind, name, key):
    cdi_table, runtimes_table = cri_paths(version)
    if kind == "runtime":
        return runtimes_table + (name, key)
    return cdi_table + (key,)


def _defines(doc, version, kind, name, key):
    if version not in (2, 3, 4):
        return False
    path = _key_path(version, kind, name, key)
    return doc.get(path) is not None


def _defines_cri(doc, version):
    if version not in (2, 3, 4):
        return False
    return doc.get(cri_paths(version)[0]) is not None


def file_versions(files, containerd_version, new_version=None):
    """The version of each config file (``files`` = [(path, Document)], the main file first): an empty main file
    takes containerd's native version, an empty imported file (one the module is about to create) ``new_version``."""
    versions = []
    for index, (path, doc) in enumerate(files):
        try:
            version = file_version(doc, containerd_version, imported=index > 0)
        except (ConflictError, ParseError) as exc:
            raise type(exc)("%s: %s" % (path, exc.msg), dict(exc.details, path=path)) from exc
        if version is None:
            version = native_version(containerd_version) if index == 0 else (new_version or native_version(containerd_version))
        versions.append(version)
    return versions


def _label(kind, name, key):
    return "runtimes.%s.%s" % (name, key) if kind == "runtime" else key


def key_origins(files, containerd_version, eff):
    """{key label: {"file", "value", "how"}} for the keys the collection sets in containerd's config
    (``base_runtime_spec`` of every runc-type runtime, ``enable_cdi``, ``cdi_spec_dirs``): the file whose value
    containerd keeps (``how`` ``set``); on 1.x, when the last file that names the CRI section does not set the key,
    that file (``how`` ``section``, ``value`` None: its section replaced the earlier ones, so containerd's default
    applies); None (``how`` None) when no file sets it.  ``files`` = [(path, Document)] in load order."""
    versions = file_versions(files, containerd_version)
    keys = [("runtime", name, "base_runtime_spec") for name in target_runtimes(eff, [])] + \
        [("cri", None, "enable_cdi"), ("cri", None, "cdi_spec_dirs")]
    out = {}
    for kind, name, key in keys:
        origin = {"file": None, "value": None, "how": None}
        for index, (path, doc) in enumerate(files):
            if _defines(doc, versions[index], kind, name, key):
                origin = {"file": path, "value": doc.get(_key_path(versions[index], kind, name, key)), "how": "set"}
            elif containerd_version < (2, 0) and _defines_cri(doc, versions[index]):
                origin = {"file": path, "value": None, "how": "section"}
        out[_label(kind, name, key)] = origin
    return out


def rancher_bin_dirs(config):
    """Where k3s or rke2 keep their own containerd and ctr when ``config`` is their containerd config (they are not
    on PATH): ``<data-dir>/data/current/bin`` (k3s), ``<data-dir>/bin`` (rke2); [] otherwise."""
    match = _RANCHER.match(config or "")
    if not match:
        return []
    return [match.group("data") + "/data/current/bin", match.group("data") + "/bin"]


_REGENERATED = re.compile(r"do not (edit|modify)|will be (overwritten|regenerated|replaced)|is regenerated|"
                          r"file generated by|automatically generated|auto-generated", re.IGNORECASE)
_RANCHER = re.compile(r"^(?P<data>/.+/(?P<tool>k3s|rke2))/agent/etc/containerd/config\.toml$")
#: the drop-in this collection writes into the directory a generated config imports
GENERATED_DROPIN = "50-rdma-k8s-node.toml"


def generated_config(path, text):
    """None, or what regenerates the config file: ``{"tool": "k3s"|"rke2"|None, "header": the line saying so}``.

    A file is regenerated when a comment before its first statement says so ("DO NOT EDIT", "file generated
    by", ...) or when it is k3s's or rke2's containerd config (``<data-dir>/agent/etc/containerd/config.toml``,
    rendered at every start of k3s/rke2 from their template, or from ``config(-v3).toml.tmpl`` beside it).
    """
    header = None
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if header is None and _REGENERATED.search(stripped):
            header = stripped
    tool = None
    match = re.search(r"\b(k3s|rke2)\b", header or "", re.IGNORECASE)
    if match:
        tool = match.group(1).lower()
    else:
        rancher = _RANCHER.match(path or "")
        if rancher:
            tool = rancher.group("tool")
    if header is None and tool is None:
        return None
    return {"tool": tool, "header": header}


def dropin_dir(main_doc, main_path):
    """The directory of ``<dir>/*.toml`` drop-ins the (generated) main config imports, or None.  k3s and rke2
    render ``imports = ["<template dir>/config-v3.toml.d/*.toml"]`` (``config.toml.d`` for a version 2 config)
    since k3s-io/k3s#13680; any other ``<dir>/*.toml`` import of the file would do the same job."""
    imports = main_doc.data.get("imports") or []
    candidates = []
    for entry in imports if isinstance(imports, list) else []:
        if not isinstance(entry, str):
            continue
        entry = entry if entry.startswith("/") else main_path.rsplit("/", 1)[0] + "/" + entry
        head, tail = entry.rsplit("/", 1)
        if tail == "*.toml" and not any(c in head for c in "*?["):
            candidates.append(head)
    preferred = [d for d in candidates if d.rsplit("/", 1)[-1] in ("config-v3.toml.d", "config.toml.d")]
    return (preferred or candidates or [None])[-1]


def rancher_dropin(generated, main_doc, main_path, containerd_version):
    """The collection's drop-in (:data:`GENERATED_DROPIN`) in the directory a k3s/rke2 config generated for
    containerd 2.x imports (``generated``: :func:`generated_config` of the main file), or None: another file, containerd
    1.x or an unknown version, or a config that imports no drop-in directory (then the module refuses)."""
    if not generated or generated.get("tool") not in ("k3s", "rke2") or containerd_version is None:
        return None
    if tuple(containerd_version) < (2, 0):
        return None
    directory = dropin_dir(main_doc, main_path)
    return "%s/%s" % (directory, GENERATED_DROPIN) if directory is not None else None
