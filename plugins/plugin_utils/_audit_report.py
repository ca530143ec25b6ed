# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.md and junit.xml of an audit report (the dict of _audit.audit).  Pure: text in, text out."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import functools
import json
import math
import re
from html import escape as _html_escape
from json.encoder import encode_basestring, encode_basestring_ascii
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._audit import STATUSES, gc_paused

try:
    from json.encoder import c_make_encoder
except ImportError:  # pragma: no cover - a Python without the _json accelerator
    c_make_encoder = None


class _Unusual(Exception):
    """A value :func:`json_document`'s writer leaves to the json module."""


def _unusual(value):
    raise _Unusual(type(value).__name__)


def _encoder(sort_keys, ensure_ascii, separators):
    """``json.JSONEncoder(...).encode`` for plain JSON values, by the json module's C encoder made once: the
    ``encode`` method builds it on every call (a report encodes a million values in small pieces: 1/3 of the time).
    A value json would pass to ``default`` raises :class:`_Unusual`; callers fall back to the json module."""
    fallback = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=separators).encode
    if c_make_encoder is None:  # a Python without the _json accelerator
        return fallback
    # markers None: no circular-reference bookkeeping (a report is a tree; a cycle ends in RecursionError)
    raw = c_make_encoder(None, _unusual, encode_basestring_ascii if ensure_ascii else encode_basestring, None,
                         separators[1], separators[0], sort_keys, False, True)

    def encode(value):
        try:
            return "".join(raw(value, 0))
        except (_Unusual, RecursionError):
            return fallback(value)  # the json module decides (its text or its error)

    return encode


# one encoder each instead of one per json.dumps() call (a report has thousands of cells): the same text (and the
# same settings: report.md's cells and junit.xml's bodies share a structure's text, _structure_json)
_CELL_JSON = _encoder(True, True, (", ", ": "))
_JUNIT_JSON = _CELL_JSON
_INF = float("inf")


def _float_text(value):
    if math.isnan(value):
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


# report.json: the document indented as json.dumps(indent=2) writes it down to the checks, each check (and every
# other value that deep) on one line, compact, by the json module's C encoder: the indenting encoder is pure Python
# before Python 3.13 and report.json has about 1,000 values per host (67 KB a host indented, 43 KB this way)
COMPACT_DEPTH = 4  # the document 0, "hosts" 1, a host 2, its "checks" 3, one check 4
_LINE_JSON = _encoder(True, False, (", ", ": "))


def _write_lines(value, out, indent):
    """A dict or a list one level above :data:`COMPACT_DEPTH`: each of its values on one compact line."""
    inner = indent + "  "
    if type(value) is dict:  # pylint: disable=unidiomatic-typecheck
        keys = sorted(value)
        if not all(isinstance(key, str) for key in keys):
            raise _Unusual()
        out.append("{" + ",".join(inner + encode_basestring(key) + ": " + _LINE_JSON(value[key]) for key in keys)
                   + indent + "}")
    else:
        out.append("[" + inner + ("," + inner).join(map(_LINE_JSON, value)) + indent + "]")


def _write_json(value, out, indent, depth):
    kind = type(value)
    if kind is str:
        out.append(encode_basestring(value))
    elif kind is dict or kind is list or kind is tuple:
        if not value:
            out.append("{}" if kind is dict else "[]")
        elif depth + 1 == COMPACT_DEPTH:
            _write_lines(value, out, indent)
        elif kind is dict:
            inner = indent + "  "
            first = True
            for key in sorted(value):
                if not isinstance(key, str):
                    raise _Unusual()
                out.append(("{" if first else ",") + inner + encode_basestring(key) + ": ")
                first = False
                _write_json(value[key], out, inner, depth + 1)
            out.append(indent + "}")
        else:
            inner = indent + "  "
            first = True
            for item in value:
                out.append(("[" if first else ",") + inner)
                first = False
                _write_json(item, out, inner, depth + 1)
            out.append(indent + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        out.append(_float_text(value))
    elif isinstance(value, str):  # tagged strings and numbers (ansible-core 2.19's variables) write as the json
        out.append(encode_basestring(value))  # module writes them
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float_text(value))
    elif isinstance(value, dict):
        _write_json(dict(value), out, indent, depth)
    elif isinstance(value, (list, tuple)):
        _write_json(list(value), out, indent, depth)
    else:
        raise _Unusual()


@gc_paused  # a report's texts at fleet scale (see gc_paused)
def json_parts(value):
    """:func:`json_document` in pieces (about one a host): a file is written from them without the whole text in
    memory twice (the text, then its UTF-8 bytes)."""
    out = []
    try:
        _write_json(value, out, "\n", 0)
    except (_Unusual, RecursionError, TypeError, ValueError):
        return [json.dumps(value, indent=2, sort_keys=True, separators=(",", ": "), ensure_ascii=False)]
    return out


def json_document(value):
    """report.json's text: ``json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)`` down to depth
    :data:`COMPACT_DEPTH` (a check of a host), one compact line (``", "`` and ``": "``, sorted keys) for each value
    that deep.  Anything but plain JSON types with string keys (and a structure too deep to recurse) goes to the
    json module's indented form, which decides as before (errors included)."""
    return "".join(json_parts(value))


def text_of(lines):
    """The text of :func:`markdown_lines`, :func:`html_lines` or :func:`junit_lines`: each line and a newline."""
    return "\n".join(lines) + "\n"


def text_parts(lines, size=4096):
    """:func:`text_of` in pieces of ``size`` lines (to write a file from, as :func:`json_parts`)."""
    for start in range(0, len(lines), size):
        yield "\n".join(lines[start:start + size]) + "\n"


# -- the human-readable report: one document model, written as Markdown (report.md) and as HTML (report.html) --------
#
# markdown() builds a list of blocks -- ("h", level, inline), ("p", inline), ("table", header, rows), ("pre", text) --
# and each writer serialises them; inline content is a list of text and (mark, text) pairs, a table cell one value
# (text, number, structure: compact JSON) or one (mark, text) pair.  The HTML is report.md's rendering without
# parsing Markdown back (a Markdown parser in Python renders about 0.6 MB/s here, report.md is 1 to 30 KB per host);
# the tests hold it to markdown-it-py's rendering of report.md.  Every text is untrusted (host names, node files'
# contents): escaped for Markdown (backslash escapes, no raw HTML, no links) and for HTML (html.escape).

_MARK = {"ok": ("", "ok"), "drift": ("strong", "DRIFT"), "fail": ("strong", "FAIL"), "unknown": ("em", "unknown")}
_ORDER = {"fail": 0, "unknown": 1, "drift": 2, "ok": 3}
# summary lists: at most this many host names in one cell, this many rows of top checks and of unknown hosts
NAMES_SHOWN = 10
TOP_CHECKS = 10
UNKNOWN_ROWS = 20
# Markdown: characters that start inline syntax (code, emphasis, links, raw HTML, strikethrough, table cells) and
# the backslash itself; "_" only where it can open or close emphasis (not inside a word: rdma_audit_mtu stays)
_MD_SPECIAL = re.compile(r"[\\`*\[\]<>|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|&(?=#?[0-9A-Za-z]+;)")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def _text(value):
    """A cell's value as text: compact JSON for structures, ``-`` for nothing, yes/no for booleans.  Idempotent: the
    text of a text is itself (report_blocks stores the checks' values as their text, written twice: .md and .html)."""
    kind = type(value)
    if kind is str:
        return value or "-"
    if kind is int:
        return int.__repr__(value)  # what the json module writes for an int
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _CELL_JSON(value)


def _structure_json(value, shared):
    """``_CELL_JSON(value)`` of a dict or a list, made once per object for one report's writers when ``shared`` (a
    dict they pass along) is given: report.md's cells and junit.xml's bodies hold the same values in the same text.
    The object is kept with its text, so its id cannot be reused while ``shared`` lives."""
    if shared is None:
        return _CELL_JSON(value)
    hit = shared.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    text = _CELL_JSON(value)
    shared[id(value)] = (value, text)
    return text


def _cell_text(value, shared=None):
    """:func:`_text`, a structure's text shared with the other writers (:func:`_structure_json`)."""
    kind = type(value)
    if kind is dict or kind is list:
        return _structure_json(value, shared) if value else _text(value)
    return _text(value)


@functools.lru_cache(maxsize=1 << 16)  # a report repeats most cell texts (layers, statuses, values, remedies)
def md_escape(text):
    """``text`` as literal Markdown inline text on one line (CommonMark backslash escapes)."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), _LINE_BREAKS.sub(" ", text))


def html_escape(text):
    """``text`` for HTML: escaped, NUL as U+FFFD (as CommonMark and HTML parsers read it)."""
    return _html_escape(text.replace("\x00", "\ufffd"))


@functools.lru_cache(maxsize=1 << 16)
def _html_text(text):
    """``text`` escaped for HTML, on one line as in report.md's table cells."""
    return html_escape(_LINE_BREAKS.sub(" ", text))


def _cell(value):
    """A value in one Markdown table cell of the validate report (``_table``): pipes escaped, one line."""
    return _text(value).replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    """Markdown table lines (the validate report's; the audit's tables go through :func:`to_markdown`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for dummy in header) + "|"]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def _md_inline(parts):
    out = []
    for part in parts:
        if isinstance(part, tuple):
            mark, text = part
            if mark == "code":
                fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
                out.append("%s %s %s" % (fence, _LINE_BREAKS.sub(" ", text), fence))
                continue
            text = md_escape(text)
            out.append("**%s**" % text if mark == "strong" else "*%s*" % text if mark == "em" else text)
        else:
            out.append(md_escape(part))
    return "".join(out)


def _md_cell(value):
    if isinstance(value, str) and value:
        return md_escape(value)
    if isinstance(value, tuple):
        return _md_inline([value])
    return md_escape(_text(value))


def _cells(cell, row):
    """The texts of a table row's cells, each by ``cell``'s cache (a report repeats most cells: layers, statuses,
    counts, values, remedies) when every cell is text, an int, nothing or a (mark, text) pair; else uncached (a
    float: ``0.0 == -0.0``; a structure cannot be a key)."""
    if set(map(type, row)) <= _CACHED_CELLS:
        return list(map(cell, row))
    return [cell.__wrapped__(value) for value in row]


# cell types whose equal values have the same text (the caches are typed: 1 and True are different keys)
_CACHED_CELLS = {str, int, type(None), tuple}
# a few thousand cells: what repeats from host to host stays, the caches stay small (a cell can be kilobytes)
TEXT_CACHE = 1 << 12
_md_cell_cached = functools.lru_cache(maxsize=TEXT_CACHE, typed=True)(_md_cell)


def _fence(text):
    """A code fence longer than any run of backticks in ``text`` (so the text cannot close it)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


@gc_paused  # a report's texts at fleet scale (see gc_paused)
def markdown_lines(blocks):
    """report.md's lines of the blocks (:func:`text_of`)."""
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.extend(["#" * block[1] + " " + _md_inline(block[2]), ""])
        elif kind == "p":
            out.extend([_md_inline(block[1]), ""])
        elif kind == "table":
            header, rows = block[1], block[2]
            out.append("| " + " | ".join(md_escape(h) for h in header) + " |")
            out.append("|" + "|".join("---" for dummy in header) + "|")
            out.extend("| " + " | ".join(_cells(_md_cell_cached, row)) + " |" for row in rows)
            out.append("")
        elif kind == "pre":
            fence = _fence(block[1])
            out.extend([fence, block[1].rstrip("\n"), fence, ""])
    while out and out[-1] == "":
        out.pop()
    return out


def to_markdown(blocks):
    """report.md's text of the blocks."""
    return text_of(markdown_lines(blocks))


_STATUS_CLASS = {"FAIL": "fail", "DRIFT": "drift", "unknown": "unknown"}


def _html_inline(parts):
    out = []
    for part in parts:
        if isinstance(part, tuple):
            mark, text = part
            css = _STATUS_CLASS.get(text)
            attr = ' class="%s"' % css if css else ""
            out.append("<%s%s>%s</%s>" % (mark, attr, _html_text(text), mark) if mark else _html_text(text))
        else:
            out.append(_html_text(part))
    return "".join(out)


def _html_cell(value):
    if isinstance(value, str) and value:
        return _html_text(value)
    if isinstance(value, tuple):
        return _html_inline([value])
    return _html_text(_text(value))


@functools.lru_cache(maxsize=TEXT_CACHE, typed=True)
def _html_td(value):
    """A table cell of :func:`to_html` (see :func:`_cells`)."""
    return "<td>%s</td>" % _html_cell(value)


HTML_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5em; color: #1b1f24; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 1.6em; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f3f5f7; } tr:nth-child(even) td { background: #fafbfc; }
pre { background: #f6f8fa; padding: .6em; overflow-x: auto; font-size: 12px; }
.fail { color: #b42318; } .drift { color: #9a6700; } .unknown { color: #57606a; }
"""


@gc_paused  # a report's texts at fleet scale (see gc_paused)
def html_lines(blocks, title="RDMA node audit"):
    """The lines of :func:`to_html`."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           # no script, no remote resource, whatever a value holds: only this page's own inline style applies
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>%s</title>" % html_escape(title), "<style>%s</style>" % HTML_STYLE, "</head>", "<body>"]
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append("<h%d>%s</h%d>" % (block[1], _html_inline(block[2]), block[1]))
        elif kind == "p":
            out.append("<p>%s</p>" % _html_inline(block[1]))
        elif kind == "table":
            out.append("<table>\n<thead>\n<tr>%s</tr>\n</thead>\n<tbody>" % "".join(
                "<th>%s</th>" % html_escape(h) for h in block[1]))
            out.extend("<tr>%s</tr>" % "".join(_cells(_html_td, row)) for row in block[2])
            out.append("</tbody>\n</table>")
        elif kind == "pre":
            out.append("<pre><code>%s</code></pre>" % html_escape(block[1].rstrip("\n")))
    out.extend(["</body>", "</html>"])
    return out


def to_html(blocks, title="RDMA node audit"):
    """A self-contained HTML page of the blocks (inline CSS, nothing loaded, no script may run)."""
    return text_of(html_lines(blocks, title))


def check_name(check):
    """``id`` or ``id[subject]``: the name of a check in the tables and in JUnit."""
    return check["id"] + ("[%s]" % check["subject"] if check.get("subject") else "")


_RESTART = re.compile(r"^(restart [a-z][a-z ]*?)(?= \(|:| in |,|$)")


def pending_action(check):
    """What a drifting check waits for when provisioning already did its part: ``"reboot"``, ``"restart <unit>"``,
    ``"firmware reset"``, or None (the check needs a role run, or is not drift).  Read from the judges' remedies,
    which name the reboot or restart first when nothing else is left to do (tests hold the judges to it)."""
    if check.get("status") != "drift":
        return None
    if check.get("id") == "firmware.pending":
        return "firmware reset or power cycle"
    remedy = check.get("remedy") or ""
    if remedy.startswith("reboot"):
        return "reboot"
    match = _RESTART.match(remedy)
    if match:
        return match.group(1)
    if check.get("id") == "netns.mode" and check.get("desired") is not None and check.get("persisted") == check.get("desired"):
        return "reboot"  # persisted, not live: the role switches only a node without network namespaces
    return None


def _names(names, total=None):
    """At most NAMES_SHOWN host names, then how many more."""
    total = len(names) if total is None else total
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (" and %d more" % (total - NAMES_SHOWN) if total > NAMES_SHOWN else "")


def _hosts(count):
    return "1 host" if count == 1 else "%d hosts" % count


def summary_blocks(report):
    """The inventory at a glance: hosts by status, the checks not ok by how many hosts they concern, the hosts
    waiting for a reboot or a restart, the hosts that could not be audited."""
    hosts = report["hosts"]
    by_status = dict((s, []) for s in STATUSES)
    groups = {}
    pending = {}
    unknown = []
    for name, host in hosts.items():
        by_status[host["status"]].append(name)
        if host.get("summary") is None:  # no facts: every layer unknown, listed once below with the reason
            unknown.append((name, host, host["checks"][0] if host["checks"] else None))
            continue
        seen = set()
        waits = set()
        first_unknown = None
        for check in host["checks"]:
            status = check["status"]
            if status == "ok":
                continue
            key = (check["id"], status)
            group = groups.get(key)
            if group is None:
                group = groups[key] = {"layer": check["layer"], "hosts": [], "remedies": {}}
            if key not in seen:
                seen.add(key)
                group["hosts"].append(name)
            remedy = check.get("remedy") or check.get("detail")
            if remedy:
                group["remedies"][remedy] = group["remedies"].get(remedy, 0) + 1
            action = pending_action(check)
            if action:
                waits.add(action)
            if status == "unknown" and first_unknown is None:
                first_unknown = check
        for action in waits:
            pending.setdefault(action, []).append(name)
        if first_unknown is not None:
            unknown.append((name, host, first_unknown))
    out = [("h", 2, ["Summary"])]
    out.append(("table", ["status", "hosts", "which"], [
        [_MARK[s] if s != "ok" else "ok", len(by_status[s]), _names(by_status[s]) if s != "ok" else None]
        for s in ("fail", "unknown", "drift", "ok")]))
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]["hosts"]), _ORDER[kv[0][1]], kv[0][0]))
    if ranked:
        out.append(("p", ["Checks not ok, by the number of hosts (%s of %d):" % (
            "top %d" % TOP_CHECKS if len(ranked) > TOP_CHECKS else "all", len(ranked))]))
        out.append(("table", ["check", "layer", "status", "hosts", "remedy / detail (most common)", "which"], [
            [check_id, group["layer"], _MARK[status], len(group["hosts"]),
             max(sorted(group["remedies"]), key=lambda r: group["remedies"][r]) if group["remedies"] else None,
             _names(group["hosts"])]
            for (check_id, status), group in ranked[:TOP_CHECKS]]))
    else:
        out.append(("p", ["Every check of every host is ok."]))
    waiting = sorted(set(n for names in pending.values() for n in names))
    if waiting:
        out.append(("p", ["Waiting for a reboot or a restart (%s; provisioning has done its part):" % _hosts(len(waiting))]))
        out.append(("table", ["action", "hosts", "which"],
                    [[action, len(pending[action]), _names(pending[action])] for action in sorted(pending)]))
    if unknown:
        out.append(("p", ["Not audited or not fully readable (%s):" % _hosts(len(unknown))]))
        rows = []
        for name, host, check in unknown[:UNKNOWN_ROWS]:
            reason = (check.get("detail") or check.get("remedy") or check_name(check)) if check else host["status"]
            what = "no facts" if host.get("summary") is None else "%d checks unknown, first %s" % (
                host["counts"]["unknown"], check_name(check) if check else "-")
            rows.append([name, what, reason])
        if len(unknown) > UNKNOWN_ROWS:
            rows.append(["... and %d more" % (len(unknown) - UNKNOWN_ROWS), None, "see the inventory table"])
        out.append(("table", ["host", "what", "reason"], rows))
    return out


def _remedy_detail(remedy, detail):
    """``remedy; detail``, either alone, or empty (``"; ".join`` of the texts given)."""
    if isinstance(remedy, str) and isinstance(detail, str) and remedy and detail:
        return remedy + "; " + detail
    return "; ".join(t for t in (remedy, detail) if t)


@gc_paused  # a report's texts at fleet scale (see gc_paused)
def report_blocks(report, shared=None):
    """The blocks of report.md: title, summary, the inventory table, then per host its checks that are not ok
    (the ok ones counted by layer; report.json and junit.xml have every check) and its GPU-NIC matrix.  ``shared``:
    a dict the same report's :func:`junit` gets too (its structures are encoded once for both)."""
    summary = report["summary"]
    intro = []
    if report.get("generated"):
        intro.append("Generated %s. " % report["generated"])
    intro.extend(["Hosts: %d, status " % summary["hosts"], ("strong", summary["status"]),
                  ". Hosts by status: %s. Checks by status: %s." % (
                      ", ".join("%s %d" % (s, summary["hosts_by_status"][s]) for s in STATUSES),
                      ", ".join("%s %d" % (s, summary["checks_by_status"][s]) for s in STATUSES))])
    out = [("h", 1, ["RDMA node audit"]), ("p", intro)]
    out.extend(summary_blocks(report))
    out.append(("h", 2, ["Inventory"]))
    rows = []
    for name, host in report["hosts"].items():
        info = host.get("summary") or {}
        counts = host["counts"]
        rows.append([name, _MARK[host["status"]], counts["ok"], counts["drift"], counts["fail"], counts["unknown"],
                     info.get("netns_mode"), info.get("gpudirect"), info.get("gpus"), info.get("rdma_devices"),
                     info.get("vfs")])
    out.append(("table", ["host", "status", "ok", "drift", "fail", "unknown", "netns", "GPUDirect", "GPUs", "NICs",
                          "VFs"], rows))
    header = ["check", "layer", "status", "desired", "live", "persisted", "remedy / detail"]
    for name, host in report["hosts"].items():
        out.append(("h", 2, ["%s: %s" % (name, host["status"])]))
        if host.get("audit") == "facts_only":
            out.append(("p", ["Facts-only audit (no desired state): known-bad conditions only."]))
        bad = []
        good = {}
        for check in host["checks"]:
            if check["status"] == "ok":
                good[check["layer"]] = good.get(check["layer"], 0) + 1
            else:
                bad.append(check)
        if bad:
            bad.sort(key=lambda c: _ORDER[c["status"]])
            # the values as their cell text, made once for report.md and report.html
            out.append(("table", header, [
                [check_name(c), c["layer"], _MARK[c["status"]], _cell_text(c["desired"], shared),
                 _cell_text(c["live"], shared), _cell_text(c["persisted"], shared),
                 _remedy_detail(c.get("remedy"), c.get("detail"))] for c in bad]))
        if good:
            out.append(("p", ["%d checks ok (%s)." % (sum(good.values()), ", ".join(
                "%s %d" % (layer, count) for layer, count in sorted(good.items())))]))
        matrix = (host.get("summary") or {}).get("topo_matrix")
        if matrix:
            out.append(("p", ["GPU to NIC affinity (as ", ("code", "nvidia-smi topo -m"), "):"]))
            out.append(("pre", matrix))
    return out


def markdown(report):
    """report.md (see :func:`report_blocks`)."""
    return to_markdown(report_blocks(report))


def html_title(report):
    """The HTML page's title: the verdict at a glance (a browser tab, a CI artefact list)."""
    return "RDMA node audit: %d hosts, %s" % (report["summary"]["hosts"], report["summary"]["status"])


def html(report):
    """report.html: report.md as one self-contained HTML page."""
    return to_html(report_blocks(report), html_title(report))


# characters XML 1.0 does not allow, even escaped (a node file's control characters): written as U+FFFD
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_chars(text):
    return _XML_INVALID.sub("\ufffd", text)


@functools.lru_cache(maxsize=1 << 16)
def _xml_attr(text):
    """``text`` as a quoted XML attribute value (check names repeat on every host)."""
    return quoteattr(_xml_chars(text))


@functools.lru_cache(maxsize=1 << 16)
def _name_attr(check_id, subject):
    """A check's ``name`` attribute (:func:`check_name`), quoted: one per check of the catalogue and subject."""
    return _xml_attr(check_name({"id": check_id, "subject": subject}))


def _testcase_name(check):
    """:func:`_name_attr` of a check; a subject that is no hashable value (a list or a mapping from an inventory
    variable) is quoted without the cache."""
    try:
        return _name_attr(check["id"], check.get("subject"))
    except TypeError:
        return _xml_attr(check_name(check))


@functools.lru_cache(maxsize=TEXT_CACHE)
def _xml_text(text):
    """``text`` as XML character data (a failure's body: the same drift on many hosts has the same body)."""
    return escape(_xml_chars(text))


_STATUS_ATTR = {"drift": quoteattr("drift"), "fail": quoteattr("fail")}


def _junit_value(value, shared=None):
    """A value in a JUnit failure's body: :data:`_JUNIT_JSON`'s text (strings and nothing without the encoder; a
    structure's text is report.md's, the same encoder: :func:`_structure_json`)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if (kind is dict or kind is list) and value:
        return _structure_json(value, shared)
    return _JUNIT_JSON(value)


def _junit_failure(check, status, shared):
    """The failure (drift, fail) or error (unknown) element of a check that is not ok, on one line."""
    body = "desired: %s\nlive: %s\npersisted: %s\nremedy: %s\ndetail: %s" % (
        _junit_value(check.get("desired"), shared), _junit_value(check.get("live"), shared),
        _junit_value(check.get("persisted"), shared), _junit_value(check.get("remedy"), shared),
        _junit_value(check.get("detail"), shared))
    message = _xml_attr(check.get("remedy") or check.get("detail") or status)
    if status == "unknown":
        return '      <error type="unknown" message=%s>%s</error>' % (message, _xml_text(body))
    return '      <failure type=%s message=%s>%s</failure>' % (_STATUS_ATTR[status], message, _xml_text(body))


@gc_paused  # a report's texts at fleet scale (see gc_paused)
def junit_lines(report, suite="rdma.k8s_node audit", shared=None):
    """The lines of :func:`junit`."""
    totals = report["summary"]["checks_by_status"]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<testsuites name=%s tests=\"%d\" failures=\"%d\" errors=\"%d\">" % (
                 quoteattr(suite), sum(totals.values()), totals["drift"] + totals["fail"], totals["unknown"])]
    append = lines.append
    for name, host in report["hosts"].items():
        counts = host["counts"]
        append('  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="0">' % (
            _xml_attr(name), len(host["checks"]), counts["drift"] + counts["fail"], counts["unknown"]))
        starts = {}  # layer: the test case's start, up to its name (the class name is the host's and the layer's)
        for check in host["checks"]:
            layer = check["layer"]
            start = starts.get(layer)
            if start is None:
                start = starts[layer] = "    <testcase classname=%s name=" % _xml_attr("%s.%s" % (name, layer))
            status = check["status"]
            if status == "ok":  # nothing but the name: the body is written for failures and errors only
                append(start + _testcase_name(check) + "/>")
            elif status in _JUNIT_FAILURES:
                append(start + _testcase_name(check) + ">")
                append(_junit_failure(check, status, shared))
                append("    </testcase>")
            else:
                append(start + _testcase_name(check) + ">\n    </testcase>")
        append("  </testsuite>")
    append("</testsuites>")
    return lines


def junit(report, suite="rdma.k8s_node audit", shared=None):
    """junit.xml: one test suite per host, one test case per check; drift and fail are failures, unknown errors.
    ``shared``: see :func:`report_blocks`."""
    return text_of(junit_lines(report, suite, shared))


_JUNIT_FAILURES = ("drift", "fail", "unknown")


def short_summary(report, limit=20):
    """A few lines for the end of the play: the verdict and the worst checks."""
    summary = report["summary"]
    lines = ["audit: %d hosts, status %s (hosts: %s)" % (
        summary["hosts"], summary["status"],
        ", ".join("%s %d" % (s, summary["hosts_by_status"][s]) for s in STATUSES if summary["hosts_by_status"][s]))]
    shown = 0
    for name, host in report["hosts"].items():
        for check in host["checks"]:
            if check["status"] == "ok":
                continue
            if shown == limit:
                lines.append("... more in the report")
                return lines
            lines.append("%s %s %s: %s" % (name, check["status"].upper(), check_name(check),
                                           check.get("remedy") or check.get("detail") or ""))
            shown += 1
    return lines
