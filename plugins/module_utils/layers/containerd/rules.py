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

What containerd reads and how (limits, versions, ``config dump``, which file sets a key, generated configs) is
``config.py``: the observer imports only that; its names are imported here too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError
# containerd's configuration as it reads it (the observer's part): here too for the planner, the judge and the tests
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd.config import (  # pylint: disable=unused-import
    _MAX_DIGITS, _SIZE, _UNITS, CRI_V2, CRI_V3, DERIVED_PREFIX, GENERATED_DROPIN, RLIM_INFINITY, RUNC_TYPE, _defines,
    _defines_cri, _key_path, _label, cri_paths, derived_path, derived_source, dropin_dir, effective, file_version,
    file_versions, generated_config, key_origins, max_config_version, native_version, needs_generated,
    parse_proc_limits, parse_systemd_limit, parse_version, rancher_bin_dirs, rancher_dropin, render_limit,
    runtime_settings, spec_rlimit, target_runtimes, unit_limit,
)

DEFAULT_CDI_DIRS = ["/etc/cdi", "/var/run/cdi"]


# -- inputs ---------------------------------------------------------------------------------------
def parse_limit(value, option="memlock"):
    """``unlimited``/``infinity`` -> RLIM_INFINITY; ``4194304``, ``4M``, ``64K`` -> bytes (powers of 1024)."""
    text = str(value).strip()
    if text.lower() in ("unlimited", "infinity"):
        return RLIM_INFINITY
    match = _SIZE.match(text)
    if not match or len(match.group(1)) > _MAX_DIGITS:
        raise InputError("%s must be 'unlimited' or a byte count such as 4194304 or 64M, got %r" % (option, value))
    number = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if number <= 0 or number >= RLIM_INFINITY:
        raise InputError("%s must be more than 0 and less than 2^64-1 bytes (use 'unlimited'), got %r" % (option, value))
    return number


def cdi_support(version):
    """``absent`` (1.6 has no CDI), ``optional`` (1.7: off by default) or ``default`` (2.x: on by default)."""
    if version < (1, 7):
        return "absent"
    if version < (2, 0):
        return "optional"
    return "default"


# -- systemd -------------------------------------------------------------------------------------------
def render_unit_dropin(memlock):
    """The drop-in this collection owns for containerd.service."""
    return ("# Managed by rdma.k8s_node.containerd_rdma: RDMA needs to pin (mlock) its buffers.\n"
            "# CRI containers without their own rlimits inherit containerd's.\n"
            "[Service]\n"
            "LimitMEMLOCK=%s\n" % render_limit(memlock))


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


# -- base runtime spec ---------------------------------------------------------------------------
# With ``base_runtime_spec`` set, CRI takes the file as the whole starting spec and skips its default security
# settings (``WithoutDefaultSecuritySettings``, internal/cri/server/container_create.go), so the file must be a
# complete spec.  Three cases per runtime (docs/containerd.md "Whose base spec"):
#   - no base spec: the collection generates one from ``ctr oci spec`` at ``base_runtime_spec`` (the option);
#   - an owner's spec (nodeadm, kubespray, a person): the collection writes a *derived copy* next to it,
#     ``rdma-k8s-node.<name>``, that is the owner's bytes with only RLIMIT_MEMLOCK changed, and points the runtime
#     at the copy; the owner's file is never written (its tool may rewrite it at any time, and then the next run
#     derives again);
#   - a derived copy already: derived again from its source, so the owner's later changes are carried over.
DEFAULT_NOFILE = 1048576
#: who writes a base spec at a well-known path (for the result and the diff: whose file it is)
KNOWN_SPEC_WRITERS = {
    "/etc/containerd/base-runtime-spec.json": "EKS AL2023 nodeadm (rewritten by nodeadm init at boot)",
    "/etc/containerd/cri-base.json": "kubespray's containerd role (rewritten at every kubespray run), or made by "
                                     "hand after containerd's docs",
}

_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON = json.JSONDecoder()


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


def load_spec(text, name):
    """A base spec's JSON as data; ParseError naming the file when it is not a JSON object with a process object."""
    try:
        spec = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError("%s is not JSON (containerd could not load it either): %s" % (name, exc), {"path": name}) from None
    if not isinstance(spec, dict):
        raise ParseError("%s is not a JSON object, so it is no OCI runtime spec" % name, {"path": name})
    if "process" in spec and not isinstance(spec["process"], dict):
        raise ParseError("%s: 'process' is not an object" % name, {"path": name})
    rlimits = (spec.get("process") or {}).get("rlimits")
    if rlimits is not None and (not isinstance(rlimits, list) or not all(isinstance(r, dict) for r in rlimits)):
        raise ParseError("%s: process.rlimits is not a list of objects" % name, {"path": name})
    return spec


def _owned_rlimits(memlock, nofile):
    """The rlimits the collection sets in a spec it derives: RLIMIT_MEMLOCK, and RLIMIT_NOFILE only when asked."""
    return [("RLIMIT_MEMLOCK", memlock)] + ([("RLIMIT_NOFILE", nofile)] if nofile is not None else [])


def spec_satisfies(spec, memlock, nofile=None):
    """True when every rlimit the collection owns already has soft = hard = the wanted value in ``spec`` (data)."""
    rlimits = (spec.get("process") or {}).get("rlimits") or []
    for kind, value in _owned_rlimits(memlock, nofile):
        entries = [r for r in rlimits if r.get("type") == kind]
        if not entries or any(r.get("soft") != value or r.get("hard") != value for r in entries):
            return False
    return True


class _Json:
    """Spans of one JSON text's members and elements: (key, key start, value start, value end) / (start, end)."""

    def __init__(self, text, name):
        self.text = text
        self.name = name

    def error(self, what):
        return ParseError("%s: cannot edit the JSON in place (%s)" % (self.name, what), {"path": self.name})

    def skip(self, pos):
        return _JSON_WS.match(self.text, pos).end()

    def value_end(self, pos):
        try:
            return _JSON.raw_decode(self.text, pos)[1]
        except (ValueError, RecursionError):
            raise self.error("no value at offset %d" % pos) from None

    def members(self, start):
        """The members of the object whose ``{`` is at ``start``, in order."""
        text, out = self.text, []
        if text[start:start + 1] != "{":
            raise self.error("no object at offset %d" % start)
        pos = self.skip(start + 1)
        if text[pos:pos + 1] == "}":
            return out
        while True:
            pos = self.skip(pos)
            if text[pos:pos + 1] != '"':
                raise self.error("no key at offset %d" % pos)
            key, after = json.decoder.scanstring(text, pos + 1)
            colon = self.skip(after)
            if text[colon:colon + 1] != ":":
                raise self.error("no ':' at offset %d" % colon)
            value_start = self.skip(colon + 1)
            value_end = self.value_end(value_start)
            out.append((key, pos, value_start, value_end, text[after:value_start]))
            pos = self.skip(value_end)
            if text[pos:pos + 1] == ",":
                pos += 1
                continue
            if text[pos:pos + 1] == "}":
                return out
            raise self.error("no ',' or '}' at offset %d" % pos)

    def elements(self, start):
        """The ``(start, end)`` of each element of the array whose ``[`` is at ``start``."""
        text, out = self.text, []
        pos = self.skip(start + 1)
        if text[pos:pos + 1] == "]":
            return out
        while True:
            pos = self.skip(pos)
            end = self.value_end(pos)
            out.append((pos, end))
            pos = self.skip(end)
            if text[pos:pos + 1] == ",":
                pos += 1
                continue
            if text[pos:pos + 1] == "]":
                return out
            raise self.error("no ',' or ']' at offset %d" % pos)

    def line_indent(self, pos):
        start = self.text.rfind("\n", 0, pos) + 1
        head = self.text[start:pos]
        return head if not head.strip() else head[:len(head) - len(head.lstrip())]

    def style(self, open_pos, members):
        """How the object opened at ``open_pos`` is written: (multi-line?, child indent, item separator, key separator)."""
        if not members:
            return False, "", ", ", ": "
        between = self.text[open_pos + 1:members[0][1]]
        key_sep = members[0][4] if "\n" not in members[0][4] else ": "
        if len(members) > 1:
            item_sep = self.text[members[0][3]:members[1][1]]
        elif "\n" in between:
            item_sep = "," + between
        else:  # one member on one line: items spaced as keys are (json.dumps: ", " with ": ")
            item_sep = ", " if key_sep.endswith(" ") else ","
        if "\n" in between:
            return True, between[between.rfind("\n") + 1:], item_sep, key_sep
        return False, "", item_sep, key_sep


def _render(value, multiline, indent, unit, item_sep, key_sep):
    """``value`` as JSON in the file's style: one item a line, indented by ``unit`` below ``indent``, or on one line."""
    if multiline:
        lines = json.dumps(value, indent=unit, separators=(",", key_sep)).split("\n")
        return lines[0] + "".join("\n" + indent + line for line in lines[1:])
    return json.dumps(value, separators=(item_sep if "\n" not in item_sep else ", ", key_sep))


def _set_rlimit(text, kind, value, name):
    """``text`` with every ``kind`` entry of process.rlimits at soft = hard = ``value`` (one added when there is
    none), every other byte as it was."""
    doc = _Json(text, name)
    root = doc.skip(0)
    top = doc.members(root)
    process = [m for m in top if m[0] == "process"]
    if not process or text[process[-1][2]:process[-1][2] + 1] != "{":
        raise doc.error("no process object")
    proc_open = process[-1][2]
    members = doc.members(proc_open)
    multiline, indent, item_sep, key_sep = doc.style(proc_open, members)
    unit = indent[len(doc.line_indent(process[-1][1])):] if multiline else ""
    unit = unit or "  "
    entry = {"type": kind, "hard": value, "soft": value}
    rlimits = [m for m in members if m[0] == "rlimits"]
    if rlimits and text[rlimits[-1][2]:rlimits[-1][2] + 1] == "[":
        arr_open = rlimits[-1][2]
        elements = doc.elements(arr_open)
        edits = []  # (start, end, replacement), applied from the end
        for start, end in elements:
            if text[start:start + 1] != "{":
                continue
            fields = dict((m[0], (m[2], m[3])) for m in doc.members(start))
            if "type" not in fields or json.loads(text[slice(*fields["type"])]) != kind:
                continue
            if "hard" in fields and "soft" in fields:
                edits.extend((vs, ve, str(value)) for vs, ve in (fields["hard"], fields["soft"]))
            else:
                elem_multi, elem_indent, elem_sep, elem_key_sep = doc.style(start, doc.members(start))
                edits.append((start, end, _render(entry, elem_multi, doc.line_indent(start), unit, elem_sep, elem_key_sep)))
        if not edits:
            if elements:
                last_start, last_end = elements[-1]
                if len(elements) > 1:
                    sep = text[elements[-2][1]:last_start]
                elif "\n" in text[arr_open + 1:last_start]:
                    sep = "," + text[arr_open + 1:last_start]
                else:  # one element on one line: separate as the file separates other items
                    sep = item_sep if "\n" not in item_sep else ", "
                template = text[last_start:last_end]
                fields = dict((m[0], (m[2] - last_start, m[3] - last_start)) for m in doc.members(last_start)) \
                    if template.startswith("{") else {}
                if all(k in fields for k in ("type", "hard", "soft")):
                    new_elem = template
                    for field, (vs, ve) in sorted(fields.items(), key=lambda f: -f[1][0]):
                        if field in entry:
                            new_elem = new_elem[:vs] + json.dumps(entry[field]) + new_elem[ve:]
                else:
                    new_elem = _render(entry, "\n" in sep, doc.line_indent(last_start), unit, item_sep, key_sep)
                edits.append((last_end, last_end, sep + new_elem))
            else:
                arr_end = doc.value_end(arr_open)
                edits.append((arr_open, arr_end, _render([entry], multiline, indent, unit, item_sep, key_sep)))
        for start, end, replacement in sorted(edits, key=lambda e: -e[0]):
            text = text[:start] + replacement + text[end:]
        return text
    if rlimits:  # "rlimits": null
        vs, ve = rlimits[-1][2], rlimits[-1][3]
        return text[:vs] + _render([entry], multiline, indent, unit, item_sep, key_sep) + text[ve:]
    rendered = '"rlimits"' + key_sep + _render([entry], multiline, indent, unit, item_sep, key_sep)
    if not members:
        close = doc.value_end(proc_open) - 1
        if multiline:
            inner = "\n" + doc.line_indent(process[-1][1]) + unit
            return text[:proc_open + 1] + inner + rendered + "\n" + doc.line_indent(process[-1][1]) + text[close:]
        return text[:proc_open + 1] + rendered + text[close:]
    last_end = members[-1][3]
    return text[:last_end] + item_sep + rendered + text[last_end:]


def derive_spec(text, memlock, nofile=None, name="base runtime spec"):
    """The owner's spec ``text`` with only the collection's rlimits changed: RLIMIT_MEMLOCK soft = hard = ``memlock``
    (and RLIMIT_NOFILE when ``nofile`` is given).  Every other byte stays: the values are replaced where they are,
    a missing entry is added after the last one in the style of that entry (or of the file), and the file's
    indentation, key order, trailing newline or its absence are kept.  The result is parsed again and must be the
    owner's data with exactly that change."""
    spec = load_spec(text, name)
    if not isinstance(spec.get("process"), dict):
        raise ParseError("%s has no process object, so it cannot carry rlimits" % name, {"path": name})
    expected = json.loads(text)
    rlimits = expected["process"].get("rlimits")
    if not isinstance(rlimits, list):
        rlimits = expected["process"]["rlimits"] = []
    new = text
    for kind, value in _owned_rlimits(memlock, nofile):
        entries = [r for r in rlimits if r.get("type") == kind]
        for entry in entries:
            entry["hard"] = entry["soft"] = value
        if not entries:
            rlimits.append({"type": kind, "hard": value, "soft": value})
        new = _set_rlimit(new, kind, value, name)
    try:
        got = json.loads(new)
    except ValueError as exc:
        raise ParseError("%s: the in-place edit made invalid JSON (%s); nothing was written" % (name, exc)) from None
    if got != expected:
        raise ParseError("%s: the in-place edit changed more than the rlimits; nothing was written" % name, {"path": name})
    return new


def plan_specs(current, texts, want, oci_spec_text=None):
    """Which spec each runtime gets, and the files to write (pure).

    ``current``: {runtime: its effective base_runtime_spec ("" for none)}; ``texts``: {path: content or None when
    absent} for every current spec and, for a derived copy, its source; ``want``: ``memlock``, ``nofile`` (None:
    1048576 in a generated spec, untouched in an owner's), ``base_runtime_spec`` (where the generated spec goes).
    Returns ``(files, pointers, report, warnings)``: ``files`` {path: {"content", "kind", "source"}} to write,
    ``pointers`` {runtime: path} the runtime must point at, ``report`` {runtime: whose file it is and what is done}.
    """
    generated = want["base_runtime_spec"]
    files, pointers, report, warnings = {}, {}, {}, []
    for name in sorted(current):
        path = current[name] or ""
        entry = {"path": path or None}
        if path and not path.startswith("/"):
            raise ConflictError("runtime %s: base_runtime_spec %r is not an absolute path; containerd would read it "
                                "relative to its working directory: make it absolute" % (name, path),
                                {"runtime": name, "path": path})
        if path in ("", generated):
            if oci_spec_text is None:
                raise ParseError("runtime %s needs a generated spec, and `ctr oci spec` gave none" % name)
            nofile = want["nofile"] if want.get("nofile") is not None else DEFAULT_NOFILE
            files[generated] = {"content": build_base_spec(oci_spec_text, want["memlock"], nofile),
                                "kind": "generated", "source": None}
            entry.update(owner="rdma.k8s_node", action="generate", spec=generated,
                         note="generated from `ctr oci spec` (the runtime had %s)"
                              % ("no base spec" if not path else "this collection's generated spec"))
        else:
            source = derived_source(path)
            origin = source if source is not None and texts.get(source) is not None else path
            text = texts.get(origin)
            if text is None:
                raise ConflictError("runtime %s: its base_runtime_spec %s does not exist, so containerd cannot load it "
                                    "(and this module has nothing to keep): create it, or remove the setting so that "
                                    "a spec is generated" % (name, path), {"runtime": name, "path": path})
            spec = load_spec(text, origin)
            if source is not None:
                if origin != source:
                    warnings.append("runtime %s: %s was derived from %s, which is gone; the copy is kept as it is, "
                                    "with only the collection's rlimits set" % (name, path, source))
                files[path] = {"content": derive_spec(text, want["memlock"], want.get("nofile"), origin),
                               "kind": "derived", "source": origin}
                entry.update(owner="rdma.k8s_node", action="derive", spec=path, derived_from=origin,
                             source_written_by=KNOWN_SPEC_WRITERS.get(origin),
                             note="this collection's derived copy of %s (that file is not written)" % origin)
            elif spec_satisfies(spec, want["memlock"], want.get("nofile")):
                entry.update(owner="other", written_by=KNOWN_SPEC_WRITERS.get(path), action="keep", spec=path,
                             note="the owner's spec already has the rlimits this collection sets: kept as it is")
            else:
                target = derived_path(path)
                files[target] = {"content": derive_spec(text, want["memlock"], want.get("nofile"), path),
                                 "kind": "derived", "source": path}
                entry.update(owner="other", written_by=KNOWN_SPEC_WRITERS.get(path), action="derive", spec=target,
                             derived_from=path,
                             note="the owner's file is not written: %s is that file with only the collection's "
                                  "rlimits changed, and the runtime points at it" % target)
        if entry["spec"] != path:
            pointers[name] = entry["spec"]
        report[name] = entry
    return files, pointers, report, warnings


# -- config -----------------------------------------------------------------------------------------------
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

    settings = dict(eff.get("runtime_settings", {}).get(name, {}))
    # ``options`` is a map in containerd 1.x: the built-in runc's lists every field (zero values too) while a
    # table from a file holds only what it sets, so the whole map is re-stated and `config dump` stays the same
    options = dict((key, value) for key, value in (eff.get("runtime_options", {}).get(name) or {}).items()
                   if isinstance(value, (str, bool, int)) and (not isinstance(value, int) or -2 ** 63 <= value < 2 ** 63))
    if options:
        settings["options"] = dict(settings.get("options") or {}, **options)
    walk((), settings)
    return out


def desired_keys(eff, want, containerd_version):
    """``[(kind, name, key, value)]`` that must change, in version-free terms, plus warnings.

    ``kind`` is ``runtime`` (key under runtimes.<name>) or ``cri`` (key of the CDI table).  ``want`` has
    ``runtimes`` (list), ``cdi`` (bool), ``cdi_spec_dirs`` (list) and ``spec_paths`` ({runtime: the spec it must
    point at}, from :func:`plan_specs`; without it every runtime points at ``base_runtime_spec``).
    """
    changes, warnings = [], []
    paths = want.get("spec_paths")
    for name in target_runtimes(eff, want["runtimes"]):
        wanted = paths.get(name, eff["runtimes"][name]["base_runtime_spec"]) if paths is not None \
            else want["base_runtime_spec"]
        if eff["runtimes"][name]["base_runtime_spec"] != wanted:
            changes.append(("runtime", name, "base_runtime_spec", wanted))
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


def winning_file(files, versions, containerd_version, kind, name, key, target):
    """``(index, reason)`` of the file whose value of the key containerd keeps once ``target`` sets it.

    containerd loads the main file, then its imports (cmd/containerd/server/config/config.go LoadConfig, breadth
    first), merging each over what came before.  1.x (mergeConfig: ``to.Plugins[k] = v``) replaces a whole plugin
    section, so the last file that names the CRI plugin at all owns every CRI key.  2.x (mergo.Merge with
    override) merges plugin sections key by key, so the last file that sets the key wins.
    """
    if containerd_version < (2, 0):
        owner = target
        for index, (dummy_path, doc) in enumerate(files):
            if index > target and _defines_cri(doc, versions[index]):
                owner = index
        return owner, "section"
    winner = target
    for index, (dummy_path, doc) in enumerate(files):
        if index > target and _defines(doc, versions[index], kind, name, key):
            winner = index
    return winner, "key"


def choose_files(files, changes, containerd_version, eff=None, target=0, edit_imports=False, new_version=None):
    """``(edits, versions, overrides)``: which file each change goes into (``{file index: [(table, key, value)]}``).

    ``files`` is [(path, Document)] in containerd's load order (the main config first).  A change goes into
    ``target`` (the main file, or the collection's own drop-in under a generated config) unless a file loaded
    after it would override it (:func:`winning_file`): that is an *override*, reported in ``overrides``; with
    ``edit_imports`` the change goes into the overriding file instead, else it is not planned (the caller refuses).
    On 1.x a runtime table the chosen file does not have yet starts with the runtime's current settings from
    ``eff`` (:func:`seed_runtime`).
    """
    versions = file_versions(files, containerd_version, new_version)
    edits, overrides = {}, []
    for kind, name, key, value in changes:
        chosen, reason = winning_file(files, versions, containerd_version, kind, name, key, target)
        if chosen != target:
            path, doc = files[chosen]
            if reason == "section":
                why = ("containerd 1.x replaces the whole [%s] section with the one of the last file that names it"
                       % _toml.render_path(cri_paths(versions[chosen])[0]))
            else:
                why = "it is loaded after %s and sets the key (containerd 2.x: the last file wins)" % files[target][0]
            entry = {"file": path, "key": _label(kind, name, key), "wanted": value,
                     "value": doc.get(_key_path(versions[chosen], kind, name, key)), "why": why}
            overrides.append(entry)
            if not edit_imports:
                continue
        version = versions[chosen]
        if version not in (2, 3, 4):
            try:
                cri_paths(version)  # raises the version-1 explanation
            except ConflictError as exc:
                raise ConflictError("%s: %s" % (files[chosen][0], exc.msg), {"path": files[chosen][0]}) from exc
        table = _key_path(version, kind, name, key)[:-1]
        file_edits = edits.setdefault(chosen, [])
        if kind == "runtime" and containerd_version < (2, 0) and files[chosen][1].get(table) is None \
                and not any(edit[0][:len(table)] == table for edit in file_edits):
            if eff is None or name not in eff.get("runtime_settings", {}):
                raise ConflictError("runtime %s: containerd's current settings are unknown, so a new [%s] table "
                                    "would replace them" % (name, _toml.render_path(table)), {"runtime": name})
            file_edits.extend((table + sub, seed_key, seed_value) for sub, seed_key, seed_value in seed_runtime(eff, name))
        file_edits.append((table, key, value))
    return edits, versions, overrides


def key_sources(files, containerd_version, eff):
    """{key label: the file whose value containerd keeps} for the keys the collection sets, or None where no file
    sets it (containerd's default); see :func:`key_origins`."""
    return dict((label, origin["file"] if origin["how"] == "set" else None)
                for label, origin in key_origins(files, containerd_version, eff).items())


# -- overrides: a later file wins over the collection's -----------------------------------------------------------
def _later(order, ours, winner, main=None):
    """True when ``winner`` is read after ``ours`` in ``order`` (paths in load order).  When ``ours`` is not there
    yet: the main file (``main``, or the first of ``order``) is read before it, a file of the same directory after it
    when its name sorts after (or is ours: a same-named file elsewhere hides it), any other later file after it."""
    if not winner or winner == ours:
        return False
    if ours in order and winner in order:
        return order.index(winner) > order.index(ours)
    if winner == (main if main is not None else (order[0] if order else None)):
        return False
    same_dir = winner.rsplit("/", 1)[0] == ours.rsplit("/", 1)[0]
    return winner.rsplit("/", 1)[-1] >= ours.rsplit("/", 1)[-1] if same_dir or winner.endswith(".conf") else True


def _memlock_of(limits):
    value = (limits or {}).get("hard")
    if value is None:
        return None
    try:
        return parse_systemd_limit(str(value))
    except ParseError:
        return None


def containerd_override_checks(facts_containerd, desired):
    """Settings the collection needs that a file read after the collection's own one overrides (pure).

    ``facts_containerd`` is ``rdma_facts``' ``runtime.containerd``; ``desired`` the role's variables
    (``containerd_rdma_memlock``, ``containerd_rdma_cdi``, ``containerd_rdma_cdi_spec_dirs``,
    ``containerd_rdma_runtimes``, ``containerd_rdma_base_runtime_spec``, ``containerd_rdma_unit_dropin``; the role's
    defaults where absent).  The collection's own files are the unit drop-in
    ``/etc/systemd/system/<service>.service.d/50-rdma-k8s-node-memlock.conf`` and the main config (or, under k3s's or
    rke2's generated config, its drop-in ``config_target``).  Returns ``[{"key", "winner", "wanted", "found",
    "detail"}]``: ``winner`` is the file containerd or systemd takes the value from, ``found`` the value in effect.
    A key whose effective value is already the wanted one is no finding, nor one that the collection's own file
    (or an earlier one) sets wrong: that is drift, not an override.
    """
    facts = facts_containerd or {}
    desired = desired or {}
    sources = facts.get("key_sources") or {}
    findings = []
    try:
        memlock = parse_limit(desired.get("containerd_rdma_memlock", "unlimited"))
    except InputError:
        memlock = None
    service = facts.get("service") or "containerd"
    ours = desired.get("containerd_rdma_unit_dropin") or \
        "/etc/systemd/system/%s.service.d/50-rdma-k8s-node-memlock.conf" % service
    units = list(facts.get("unit_files") or [])
    unit_file = units[0] if units and not units[0].endswith(".conf") else ""
    origin = sources.get("LimitMEMLOCK") or {}
    winner = origin.get("file")
    if memlock is not None and winner and winner.endswith(".conf") and _later(units, ours, winner, unit_file):
        found = origin.get("value")
        try:
            found_bytes = parse_systemd_limit(found) if found else None
        except ParseError:
            found_bytes = None
        if found_bytes != memlock:
            findings.append({"key": "LimitMEMLOCK", "winner": winner, "wanted": render_limit(memlock),
                             "found": found if found else None,
                             "detail": "%s is read after %s and sets LimitMEMLOCK=%s" % (winner, ours, found or "")})
    order = list(facts.get("config_files") or [])
    main = facts.get("config_path") or facts.get("config_file") or (order[0] if order else None)
    target = facts.get("config_target") or main
    version = tuple(int(p) for p in str(facts.get("version") or "0").split(".")[:2] if p.isdigit())
    wanted = {}
    if desired.get("containerd_rdma_cdi", True) and version >= (1, 7):
        wanted["enable_cdi"] = (True, facts.get("enable_cdi"))
        dirs = facts.get("cdi_spec_dirs")
        wanted["cdi_spec_dirs"] = (list(desired.get("containerd_rdma_cdi_spec_dirs", DEFAULT_CDI_DIRS)),
                                   list(dirs) if dirs is not None else list(DEFAULT_CDI_DIRS))
    generated = desired.get("containerd_rdma_base_runtime_spec", "/etc/containerd/rdma-k8s-node-base-spec.json")
    named = desired.get("containerd_rdma_runtimes") or []
    for name, runtime in sorted((facts.get("runtimes") or {}).items()):
        if named and name not in named or not named and runtime.get("runtime_type") != RUNC_TYPE:
            continue
        spec = runtime.get("base_runtime_spec") or ""
        ours_spec = spec == generated or derived_source(spec) is not None
        if memlock is not None and not ours_spec and _memlock_of(runtime.get("base_spec_memlock")) != memlock:
            wanted["runtimes.%s.base_runtime_spec" % name] = (derived_path(spec) if spec else generated, spec or None)
    for key in sorted(wanted):
        want, found = wanted[key]
        origin = sources.get(key) or {}
        winner = origin.get("file")
        if want == found or not _later(order, target, winner, main):
            continue
        how = ("on containerd 1.x the last file that names the CRI section replaces it whole, and this one does not "
               "set the key" if origin.get("how") == "section" else "it is read after %s and sets the key" % target)
        findings.append({"key": key, "winner": winner, "wanted": want, "found": found,
                         "detail": "%s wins: %s" % (winner, how)})
    return findings


def override_message(overrides, target_path):
    """Why the module refuses when imported files would override its keys, and what to do."""
    lines = []
    for entry in overrides:
        value = entry["value"]
        lines.append("%s %s (%s)" % (entry["file"], "sets %s = %s" % (entry["key"], json.dumps(value, default=str))
                                     if value is not None else "overrides %s" % entry["key"], entry["why"]))
    files = sorted(set(e["file"] for e in overrides))
    return ("the collection would write %s into %s, but %s; imported files are other tools' (nvidia-ctk rewrites "
            "conf.d/99-nvidia.toml whenever it runs) and are not edited by default. Set the value%s there yourself, or "
            "let this module write it there with edit_imports=true (then run it again after that tool runs)"
            % (", ".join(sorted(set(e["key"] for e in overrides))), target_path, "; ".join(lines),
               " in %s" % ", ".join(files) if files else ""))


# -- generated configs (k3s, rke2, anything whose header says it is regenerated) --------------------------------
def generated_refusal(path, info, containerd_version, changes=()):
    """The message when the module cannot configure containerd through a generated file, saying what to do.
    ``changes`` are the keys the module would set ([(kind, runtime, key, value)]): the message lists them."""
    tool = info.get("tool")
    said = ' (its header: "%s")' % info["header"] if info.get("header") else ""
    keys = "; ".join("%s = %s" % (_label(kind, name, key), json.dumps(value)) for kind, name, key, value in changes)
    wanted = " The settings it needs: %s." % keys if keys else ""
    if tool in ("k3s", "rke2"):
        base = path.rsplit("/", 1)[0]
        if containerd_version < (2, 0):
            return ("%s is regenerated by %s at every start%s, and this is containerd %s: a drop-in that names the CRI "
                    "plugin would replace %s's whole CRI section (containerd 1.x merges imports per plugin), and a "
                    "config.toml.tmpl built on {{ template \"base\" . }} cannot add keys to the runc table that the "
                    "base template already defines (TOML forbids defining a table twice; k3s-io/docs#566). Write a "
                    "full %s/config.toml.tmpl from %s's ContainerdConfigTemplate with these settings in it, restart "
                    "%s and run this module again (it then only maintains the spec files), or upgrade %s to a release "
                    "with containerd 2.x.%s"
                    % (path, tool, said, ".".join(str(p) for p in containerd_version), tool, base, tool, tool, tool,
                       wanted))
        return ("%s is regenerated by %s at every start%s and does not import a drop-in directory (%s releases since "
                "k3s-io/k3s#13680 import %s/config-v3.toml.d/*.toml, where this module writes %s). Upgrade %s, or add "
                "the import yourself with a full %s/config-v3.toml.tmpl (a template built on {{ template \"base\" . }} "
                "cannot add keys to the runc table the base already defines: k3s-io/docs#566), then run this module "
                "again.%s" % (path, tool, said, tool, base, GENERATED_DROPIN, tool, base, wanted))
    return ("%s says it is regenerated%s: edits there would be lost when its generator runs again. Change the "
            "generator's input, point `config` at the file containerd really reads, or set edit_generated=true to edit "
            "it anyway (the result and the diff say so).%s" % (path, said, wanted))


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
