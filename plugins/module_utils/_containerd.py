# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd for RDMA pods: pure parsers and planners (no I/O).

Three layers decide what memlock a pod gets (docs/containerd.md):

- the containerd unit's ``LimitMEMLOCK`` (CRI containers without a base spec inherit containerd's limits);
- ``base_runtime_spec`` of each runc-type CRI runtime: with one set, containerd keeps the spec's ``rlimits``, so
  the spec must carry ``RLIMIT_MEMLOCK`` (and a sane ``RLIMIT_NOFILE``: ``ctr oci spec`` caps it at 1024);
- CDI (``enable_cdi``/``cdi_spec_dirs``) for device injection: absent in 1.6, off by default in 1.7, on in 2.x.

Config version 2 (containerd 1.6/1.7) keeps all of this under ``plugins."io.containerd.grpc.v1.cri"``, version 3
(2.x) under ``plugins."io.containerd.cri.v1.runtime"``.  Paths follow the *file's* version (2.x migrates a
version 2 file in memory).  On 1.x an imported file that names the CRI plugin replaces the whole CRI section of
the files before it, so the keys go into the last file that defines the section; on 2.x imports merge key by key,
so a key goes into the last file that sets it, else the main file.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils import _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

RLIM_INFINITY = 18446744073709551615  # ~0UL: the kernel's and the OCI spec's "unlimited" (uint64)
RUNC_TYPE = "io.containerd.runc.v2"
DEFAULT_CDI_DIRS = ["/etc/cdi", "/var/run/cdi"]

CRI_V2 = ("plugins", "io.containerd.grpc.v1.cri")
CRI_V3 = ("plugins", "io.containerd.cri.v1.runtime")

_SIZE = re.compile(r"^([0-9]+)\s*([KMGT]?)(i?B?)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


# -- inputs ---------------------------------------------------------------------------------------
def parse_limit(value, option="memlock"):
    """``unlimited``/``infinity`` -> RLIM_INFINITY; ``4194304``, ``4M``, ``64K`` -> bytes (powers of 1024)."""
    text = str(value).strip()
    if text.lower() in ("unlimited", "infinity"):
        return RLIM_INFINITY
    match = _SIZE.match(text)
    if not match:
        raise InputError("%s must be 'unlimited' or a byte count such as 4194304 or 64M, got %r" % (option, value))
    number = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if number <= 0 or number >= RLIM_INFINITY:
        raise InputError("%s must be more than 0 and less than 2^64-1 bytes (use 'unlimited'), got %r" % (option, value))
    return number


def render_limit(value):
    """A limit for people and for systemd: ``infinity`` or the byte count."""
    return "infinity" if value == RLIM_INFINITY else str(value)


def parse_version(text):
    """``(major, minor, patch)`` from ``containerd --version`` (Debian, upstream, or ``2.1.9+unknown`` builds)."""
    for line in (text or "").splitlines():
        match = re.search(r"(?:^|\s)v?(\d+)\.(\d+)(?:\.(\d+))?", line)
        if match and "containerd" in line.lower():
            return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    raise ParseError("cannot read a containerd version from %r" % (text or "").strip()[:200])


def cdi_support(version):
    """``absent`` (1.6 has no CDI), ``optional`` (1.7: off by default) or ``default`` (2.x: on by default)."""
    if version < (1, 7):
        return "absent"
    if version < (2, 0):
        return "optional"
    return "default"


# -- systemd -------------------------------------------------------------------------------------------
def parse_systemd_limit(text):
    """A ``LimitMEMLOCK=`` value as bytes: ``infinity``, ``8M``, ``8388608``, ``soft:hard`` (the hard part)."""
    value = text.strip()
    if ":" in value:
        value = value.split(":", 1)[1]
    if value.lower() in ("infinity", str(RLIM_INFINITY)):
        return RLIM_INFINITY
    match = _SIZE.match(value)
    if not match:
        raise ParseError("cannot read LimitMEMLOCK=%s" % text)
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def render_unit_dropin(memlock):
    """The drop-in this collection owns for containerd.service."""
    return ("# Managed by rdma.k8s_node.containerd_rdma: RDMA needs to pin (mlock) its buffers.\n"
            "# CRI containers without their own rlimits inherit containerd's.\n"
            "[Service]\n"
            "LimitMEMLOCK=%s\n" % render_limit(memlock))


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


def order_unit_files(unit_path, unit_text, dropins):
    """systemd's order: the unit file, then every ``*.conf`` drop-in by file name (an earlier directory in the
    search path masks a same-named file of a later one).  ``dropins`` is [(directory rank, path, text)]."""
    chosen = {}
    for rank, path, text in dropins:
        name = path.rsplit("/", 1)[-1]
        if name not in chosen or rank < chosen[name][0]:
            chosen[name] = (rank, path, text)
    ordered = [(path, text) for dummy_rank, path, text in (chosen[name] for name in sorted(chosen))]
    return ([(unit_path, unit_text)] if unit_text is not None else []) + ordered


def parse_proc_limits(text):
    """``{"soft": bytes, "hard": bytes}`` of "Max locked memory" in /proc/PID/limits (None when absent)."""
    for line in (text or "").splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory"):].split()
            values = [RLIM_INFINITY if f == "unlimited" else int(f) for f in fields[:2]]
            return {"soft": values[0], "hard": values[1]}
    return None


# -- base runtime spec ---------------------------------------------------------------------------
def build_base_spec(oci_spec_text, memlock, nofile):
    """The base runtime spec: ``ctr oci spec`` output with RLIMIT_MEMLOCK and RLIMIT_NOFILE set (soft = hard).

    Other rlimits of the generated spec are kept in their order.  The text is what gets written: Python's json
    keeps 18446744073709551615 exact (never a float), and runc reads it as uint64.
    """
    try:
        spec = json.loads(oci_spec_text)
    except ValueError as exc:
        raise ParseError("ctr oci spec did not print JSON: %s" % exc) from exc
    if not isinstance(spec, dict) or not isinstance(spec.get("process"), dict):
        raise ParseError("ctr oci spec printed JSON without a 'process' object")
    wanted = {"RLIMIT_MEMLOCK": memlock, "RLIMIT_NOFILE": nofile}
    rlimits = []
    for entry in spec["process"].get("rlimits") or []:
        kind = entry.get("type")
        if kind in wanted:
            if wanted[kind] is None:
                continue
            entry = {"type": kind, "hard": wanted.pop(kind), "soft": None}
            entry["soft"] = entry["hard"]
        rlimits.append(entry)
    for kind in ("RLIMIT_NOFILE", "RLIMIT_MEMLOCK"):
        if wanted.get(kind) is not None:
            rlimits.append({"type": kind, "hard": wanted[kind], "soft": wanted[kind]})
    spec["process"]["rlimits"] = rlimits
    return json.dumps(spec, indent=2) + "\n"


def spec_rlimit(spec_text, kind):
    """``{"soft", "hard"}`` of one rlimit in a spec's text, or None (also for unreadable JSON)."""
    try:
        spec = json.loads(spec_text or "")
    except ValueError:
        return None
    if not isinstance(spec, dict):
        return None
    for entry in (spec.get("process") or {}).get("rlimits") or []:
        if isinstance(entry, dict) and entry.get("type") == kind:
            return {"soft": entry.get("soft"), "hard": entry.get("hard")}
    return None


# -- config -----------------------------------------------------------------------------------------------
def cri_paths(config_version):
    """``(cdi table, runtimes table)`` for a config file version."""
    if config_version == 2:
        return CRI_V2, CRI_V2 + ("containerd", "runtimes")
    if config_version == 3:
        return CRI_V3, CRI_V3 + ("containerd", "runtimes")
    raise ConflictError("containerd config version %r is not supported: version 1 files (no 'version' key) were "
                        "deprecated in containerd 1.x and removed in 2.0; migrate with `containerd config migrate` "
                        "(2.x) or rewrite it as version 2" % (config_version,))


def file_version(doc, containerd_version):
    """A config file's ``version``; None for an empty file (it takes the running containerd's native version)."""
    version = doc.data.get("version")
    if version is None:
        if not doc.data:
            return None
        return 1
    if not isinstance(version, int):
        raise ParseError("'version' must be an integer, got %r" % (version,))
    if containerd_version >= (2, 0) and version not in (2, 3):
        return version
    if containerd_version < (2, 0) and version not in (2,):
        if version == 3:
            raise ConflictError("config version 3 needs containerd 2.0 or later; this node runs containerd %s"
                                % ".".join(str(p) for p in containerd_version))
    return version


def native_version(containerd_version):
    """The config version a new file gets: 2 on containerd 1.x, 3 on 2.x."""
    return 3 if containerd_version >= (2, 0) else 2


def effective(dump_doc):
    """What ``containerd config dump`` says, in version-free terms."""
    version = dump_doc.data.get("version", 2)
    cdi_table, runtimes_table = cri_paths(3 if version == 3 else 2)
    runtimes = dump_doc.get(runtimes_table, {}) or {}
    cri = dump_doc.get(cdi_table, {}) or {}
    return {
        "config_version": version,
        "runtimes": dict((name, {"runtime_type": (rt or {}).get("runtime_type"),
                                 "base_runtime_spec": (rt or {}).get("base_runtime_spec") or ""})
                         for name, rt in sorted(runtimes.items()) if isinstance(rt, dict)),
        # everything else a runtime is set to, for the "nothing but our keys changed" check and for seeding a
        # runtime table that only containerd's built-in defaults define (see seed_runtime)
        "runtime_settings": dict((name, runtime_settings(rt)) for name, rt in sorted(runtimes.items())
                                 if isinstance(rt, dict)),
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


def runtime_drift(before, after):
    """What a config edit changed in the runtimes apart from ``base_runtime_spec`` (list of messages).

    Effective configs ``before`` and ``after`` (from :func:`effective`).  Only ``base_runtime_spec`` may
    change; anything else (a runtime gone, its ``runtime_type`` emptied because the edit created a table
    that replaced containerd's built-in one) breaks every pod of that runtime.
    """
    problems = []
    old, new = before.get("runtime_settings", {}), after.get("runtime_settings", {})
    for name in sorted(set(old) | set(new)):
        if name not in new:
            problems.append("runtime %s disappeared" % name)
        elif name not in old:
            problems.append("runtime %s appeared" % name)
        else:
            for key in sorted(set(old[name]) | set(new[name])):
                if old[name].get(key) != new[name].get(key):
                    problems.append("runtimes.%s.%s changed from %s to %s"
                                    % (name, key, json.dumps(old[name].get(key), default=str),
                                       json.dumps(new[name].get(key), default=str)))
    return problems


def seed_runtime(eff, name):
    """``[(subtable, key, value)]`` re-stating runtime ``name`` as containerd runs it now.

    On containerd 1.x a ``[...runtimes.NAME]`` table in a file does not merge with the built-in default of
    that runtime: it replaces it.  Debian's stock config.toml defines no ``runtimes.runc``, so a table holding
    only ``base_runtime_spec`` would leave runc without ``runtime_type`` (and 1.7 without ``sandbox_mode``):
    containerd starts, and every pod then fails with "Runtime.Name must be set".  A new table therefore
    carries the runtime's current settings first.  ``subtable`` is relative to the runtime's table.
    """
    out = []

    def walk(prefix, table):
        for key, value in sorted(table.items()):
            if isinstance(value, dict):
                walk(prefix + (key,), value)
            else:
                out.append((prefix, key, value))
    walk((), eff.get("runtime_settings", {}).get(name, {}))
    return out


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


def desired_keys(eff, want, containerd_version):
    """``[(kind, name, key, value)]`` that must change, in version-free terms, plus warnings.

    ``kind`` is ``runtime`` (key under runtimes.<name>) or ``cri`` (key of the CDI table).  ``want`` has
    ``base_runtime_spec`` (path), ``runtimes`` (list), ``cdi`` (bool), ``cdi_spec_dirs`` (list).
    """
    changes, warnings = [], []
    for name in target_runtimes(eff, want["runtimes"]):
        if eff["runtimes"][name]["base_runtime_spec"] != want["base_runtime_spec"]:
            changes.append(("runtime", name, "base_runtime_spec", want["base_runtime_spec"]))
    support = cdi_support(containerd_version)
    if want["cdi"]:
        if support == "absent":
            warnings.append("containerd %s has no CDI support (it arrived in 1.7); enable_cdi was not set"
                            % ".".join(str(p) for p in containerd_version))
        else:
            if eff["enable_cdi"] is not True:
                changes.append(("cri", None, "enable_cdi", True))
            dirs = eff["cdi_spec_dirs"] if eff["cdi_spec_dirs"] is not None else DEFAULT_CDI_DIRS
            if list(dirs) != list(want["cdi_spec_dirs"]):
                changes.append(("cri", None, "cdi_spec_dirs", list(want["cdi_spec_dirs"])))
    return changes, warnings


def _key_path(version, kind, name, key):
    cdi_table, runtimes_table = cri_paths(version)
    if kind == "runtime":
        return runtimes_table + (name, key)
    return cdi_table + (key,)


def _defines(doc, version, kind, name, key):
    if version not in (2, 3):
        return False
    path = _key_path(version, kind, name, key)
    return doc.get(path) is not None


def _defines_cri(doc, version):
    if version not in (2, 3):
        return False
    return doc.get(cri_paths(version)[0]) is not None


def choose_files(files, changes, containerd_version, eff=None):
    """``{file index: [(table, key, value)]}``: which file each change goes into.

    ``files`` is [(path, Document)] in containerd's load order (the main config first).  See the module
    docstring for the 1.x whole-section rule and the 2.x per-key rule.  On 1.x a runtime table the target
    file does not have yet starts with the runtime's current settings from ``eff`` (:func:`seed_runtime`).
    """
    versions = []
    for path, doc in files:
        try:
            version = file_version(doc, containerd_version)
        except (ConflictError, ParseError) as exc:
            raise type(exc)("%s: %s" % (path, exc.msg), dict(exc.details, path=path)) from exc
        versions.append(native_version(containerd_version) if version is None and path == files[0][0] else version)
    edits = {}
    owner = 0
    if containerd_version < (2, 0):
        for index, (dummy_path, doc) in enumerate(files):
            if index and _defines_cri(doc, versions[index]):
                owner = index
    for kind, name, key, value in changes:
        target = owner
        if containerd_version >= (2, 0):
            target = 0
            for index, (dummy_path, doc) in enumerate(files):
                if _defines(doc, versions[index], kind, name, key):
                    target = index
        version = versions[target]
        if version not in (2, 3):
            try:
                cri_paths(version)  # raises the version-1 explanation
            except ConflictError as exc:
                raise ConflictError("%s: %s" % (files[target][0], exc.msg), {"path": files[target][0]}) from exc
        table = _key_path(version, kind, name, key)[:-1]
        file_edits = edits.setdefault(target, [])
        if kind == "runtime" and containerd_version < (2, 0) and files[target][1].get(table) is None \
                and not any(edit[0][:len(table)] == table for edit in file_edits):
            if eff is None or name not in eff.get("runtime_settings", {}):
                raise ConflictError("runtime %s: containerd's current settings are unknown, so a new [%s] table "
                                    "would replace them" % (name, _toml.render_path(table)), {"runtime": name})
            file_edits.extend((table + sub, seed_key, seed_value) for sub, seed_key, seed_value in seed_runtime(eff, name))
        file_edits.append((table, key, value))
    return edits, versions


def apply_edits(text, version, edits, name):
    """The new text of one config file with ``edits`` applied (a ``version`` line first for a new file)."""
    new = text or ""
    if not _toml.parse(new, name).data:
        new = _toml.set_key(new, (), "version", version, name)
    for table, key, value in edits:
        new = _toml.set_key(new, table, key, value, name)
    return new


def key_diff(changes, eff):
    """Per-key before/after for diff output and ``changes`` in the result."""
    out = {}
    for kind, name, key, value in changes:
        if kind == "runtime":
            before = eff["runtimes"].get(name, {}).get(key)
            label = "runtimes.%s.%s" % (name, key)
        else:
            before = eff.get(key)
            label = key
        out[label] = {"before": before, "after": value}
    return out


def verify_effective(eff, want, containerd_version):
    """What still differs after a change (empty list when the effective config holds)."""
    changes, dummy_warnings = desired_keys(eff, want, containerd_version)
    return ["%s.%s" % (name, key) if name else key for dummy_kind, name, key, dummy_value in changes]
