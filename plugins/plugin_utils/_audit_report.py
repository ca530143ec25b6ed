# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.md and junit.xml of an audit report (the dict of _audit.audit).  Pure: text in, text out."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import math
from json.encoder import encode_basestring
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._audit import STATUSES

_MARK = {"ok": "ok", "drift": "**DRIFT**", "fail": "**FAIL**", "unknown": "*unknown*"}
# one encoder each instead of one per json.dumps() call (a report has thousands of cells): the same text
_CELL_JSON = json.JSONEncoder(sort_keys=True, separators=(", ", ": ")).encode
_JUNIT_JSON = json.JSONEncoder(sort_keys=True).encode
_INF = float("inf")


class _Unusual(Exception):
    """A value :func:`json_document`'s writer leaves to the json module."""


def _float_text(value):
    if math.isnan(value):
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


def _write_json(value, out, indent):
    kind = type(value)
    if kind is str:
        out.append(encode_basestring(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        first = True
        for key in sorted(value):
            if type(key) is not str:  # pylint: disable=unidiomatic-typecheck
                raise _Unusual()
            out.append(("{" if first else ",") + inner + encode_basestring(key) + ": ")
            first = False
            _write_json(value[key], out, inner)
        out.append(indent + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        first = True
        for item in value:
            out.append(("[" if first else ",") + inner)
            first = False
            _write_json(item, out, inner)
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
    else:
        raise _Unusual()


def json_document(value):
    """``json.dumps(value, indent=2, sort_keys=True, separators=(",", ": "), ensure_ascii=False)``, the same text
    about 2.5 times faster: with an indent, Python's json module encodes in Python through generators (its C encoder
    takes no indent before 3.13), and report.json has some 1,000 values per host.  Anything but plain JSON types
    with string keys (and a structure too deep to recurse) goes to the json module, which decides as before."""
    out = []
    try:
        _write_json(value, out, "\n")
    except (_Unusual, RecursionError):
        return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": "), ensure_ascii=False)
    return "".join(out)


def _cell(value):
    """A value in one Markdown table cell: compact JSON for structures, ``-`` for nothing, pipes escaped."""
    if value is None or value == "":
        text = "-"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = _CELL_JSON(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for dummy in header) + "|"]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def check_name(check):
    """``id`` or ``id[subject]``: the name of a check in the tables and in JUnit."""
    return check["id"] + ("[%s]" % check["subject"] if check.get("subject") else "")


def markdown(report):
    """report.md: the inventory summary, then per host a table of checks (problems first) and its GPU-NIC matrix."""
    summary = report["summary"]
    out = ["# RDMA node audit", ""]
    if report.get("generated"):
        out.append("Generated %s. " % report["generated"])
    out.append("Hosts: %d, status **%s**. Hosts by status: %s. Checks by status: %s." % (
        summary["hosts"], summary["status"],
        ", ".join("%s %d" % (s, summary["hosts_by_status"][s]) for s in STATUSES),
        ", ".join("%s %d" % (s, summary["checks_by_status"][s]) for s in STATUSES)))
    out.extend(["", "## Inventory", ""])
    rows = []
    for name, host in report["hosts"].items():
        info = host.get("summary") or {}
        rows.append([name, _MARK[host["status"]], host["counts"]["ok"], host["counts"]["drift"], host["counts"]["fail"],
                     host["counts"]["unknown"], info.get("netns_mode"), info.get("gpudirect"),
                     info.get("gpus"), info.get("rdma_devices"), info.get("vfs")])
    out.extend(_table(["host", "status", "ok", "drift", "fail", "unknown", "netns", "GPUDirect", "GPUs", "NICs", "VFs"],
                      rows))
    for name, host in report["hosts"].items():
        out.extend(["", "## %s: %s" % (name, host["status"]), ""])
        if host.get("audit") == "facts_only":
            out.extend(["Facts-only audit (no desired state): known-bad conditions only.", ""])
        order = {"fail": 0, "unknown": 1, "drift": 2, "ok": 3}
        checks = sorted(host["checks"], key=lambda c: order[c["status"]])
        out.extend(_table(["check", "layer", "status", "desired", "live", "persisted", "remedy / detail"],
                          [[check_name(c), c["layer"], _MARK[c["status"]], c["desired"], c["live"], c["persisted"],
                            "; ".join(t for t in (c.get("remedy"), c.get("detail")) if t)] for c in checks]))
        matrix = (host.get("summary") or {}).get("topo_matrix")
        if matrix:
            out.extend(["", "GPU to NIC affinity (as `nvidia-smi topo -m`):", "", "```", matrix.rstrip("\n"), "```"])
    return "\n".join(out) + "\n"


def junit(report, suite="rdma.k8s_node audit"):
    """junit.xml: one test suite per host, one test case per check; drift and fail are failures, unknown errors."""
    totals = report["summary"]["checks_by_status"]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<testsuites name=%s tests=\"%d\" failures=\"%d\" errors=\"%d\">" % (
                 quoteattr(suite), sum(totals.values()), totals["drift"] + totals["fail"], totals["unknown"])]
    for name, host in report["hosts"].items():
        counts = host["counts"]
        lines.append('  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="0">' % (
            quoteattr(name), len(host["checks"]), counts["drift"] + counts["fail"], counts["unknown"]))
        for check in host["checks"]:
            classname = quoteattr("%s.%s" % (name, check["layer"]))
            lines.append('    <testcase classname=%s name=%s>' % (classname, quoteattr(check_name(check))))
            body = "desired: %s\nlive: %s\npersisted: %s\nremedy: %s\ndetail: %s" % tuple(
                _JUNIT_JSON(check.get(k)) for k in ("desired", "live", "persisted", "remedy", "detail"))
            message = check.get("remedy") or check.get("detail") or check["status"]
            if check["status"] in ("drift", "fail"):
                lines.append('      <failure type=%s message=%s>%s</failure>' % (
                    quoteattr(check["status"]), quoteattr(message), escape(body)))
            elif check["status"] == "unknown":
                lines.append('      <error type="unknown" message=%s>%s</error>' % (quoteattr(message), escape(body)))
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


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
