"""report.json's writer (``_audit_report.json_document``) gives ``json.dumps(indent=2, sort_keys=True,
separators=(",", ": "), ensure_ascii=False)`` down to the checks and each value at depth 4 (a check) on one compact
line (``json.dumps(sort_keys=True, separators=(", ", ": "), ensure_ascii=False)``): on real audit reports of the
simulator's archetypes, on every JSON type and odd string, and it leaves what is not plain JSON (other key types,
other value types) to the json module, errors included.  The Markdown and JUnit cells keep json.dumps' text too."""

import gc
import json
import math
from xml.sax.saxutils import quoteattr

import pytest

import hwsim
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.modules.rdma_facts import layer_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit, _audit_report


def indented(value):
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def reference(value):
    """The json module's indented text with every dict or list at depth 4 swapped for its compact text."""
    compact = []

    def swap(item, depth):
        # pylint: disable=unidiomatic-typecheck
        if depth >= 4 and type(item) in (dict, list, tuple):
            compact.append(json.dumps(item, sort_keys=True, separators=(", ", ": "), ensure_ascii=False))
            return "\x00%d\x00" % (len(compact) - 1)
        if type(item) is dict:
            return dict((k, swap(v, depth + 1)) for k, v in item.items())
        if type(item) in (list, tuple):
            return [swap(v, depth + 1) for v in item]
        return item

    try:
        text = indented(swap(value, 0))
    except TypeError:  # keys the json module sorts or writes differently: it writes all of it
        return indented(value)
    for index, line in enumerate(compact):
        text = text.replace('"\\u0000%d\\u0000"' % index, line)
    return text


@pytest.fixture(scope="module", name="report")
def fixture_report(tmp_path_factory):
    hosts = {}
    for name in ("dgx-h100-degraded", "roce-cx6dx", "no-rdma"):
        root = tmp_path_factory.mktemp(name)
        hwsim.render(name, str(root))
        host = HostRoot(str(root))
        facts = gather(host)
        facts["layers"] = layer_facts(host, facts["problems"])
        hosts[name] = {"facts": json.loads(json.dumps(facts)), "desired": None, "layers": None, "error": None}
    hosts["down"] = {"facts": None, "desired": None, "layers": None, "error": "unreachable: ssh: no route"}
    return _audit.audit(hosts, generated="2026-12-01T00:00:00Z")


def test_real_reports_are_written_as_json_dumps_writes_them(report):
    text = _audit_report.json_document(report)
    assert text == reference(report)
    assert json.loads(text) == report and report["hosts"]["dgx-h100-degraded"]["checks"]
    # one line per check, indented under its host's "checks"
    checks = [check for host in report["hosts"].values() for check in host["checks"]]
    lines = [line for line in text.splitlines() if line.startswith("        {")]
    assert len(lines) == sum(len(h["checks"]) for h in report["hosts"].values())
    assert all(json.loads(line.rstrip(",")) in checks for line in lines)


ODD = [
    {},
    [],
    "",
    None,
    {"b": [1, 2.5, -0.0, 1e300, 5e-324, True, False, None], "a": {"z": {}, "y": [], "x": [[]]}},
    {"é": "ünïcode \u2028 \u2029 \x00 \x1f \x7f \"quoted\" back\\slash\nnew\ttab", "emoji": "\U0001f600"},
    [float("nan"), float("inf"), -float("inf")],
    (1, (2, 3), []),
    {"nested": [{"k": [{"k": [{}]}]}]},
    {"hosts": {"h": {"checks": [{"id": "a", "live": [{"x": 1}, None, {"y": 2}]}, "not a check", ["x"], None, 1.5, {}]}}},
    12345678901234567890123,
]


@pytest.mark.parametrize("value", ODD, ids=range(len(ODD)))
def test_every_json_type_and_odd_strings(value):
    assert _audit_report.json_document(value) == reference(value)


class Subclass(dict):
    pass


@pytest.mark.parametrize("value", [{1: "int key", 2: "b"}, {None: 1}, {"a": Subclass(b=1)}, {"a": 1.5}, {True: 0}],
                         ids=["int keys", "none key", "dict subclass", "plain float", "bool key"])
def test_what_is_not_plain_json_goes_to_the_json_module(value):
    assert _audit_report.json_document(value) == indented(value)


def test_errors_are_the_json_modules():
    with pytest.raises(TypeError):
        _audit_report.json_document({"a": object()})
    with pytest.raises(TypeError):
        _audit_report.json_document({"a": 1, 2: "mixed keys cannot be sorted"})
    circular = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        _audit_report.json_document(circular)
    assert math.isnan(json.loads(_audit_report.json_document([float("nan")]))[0])


def test_markdown_and_junit_keep_json_dumps_text(report, monkeypatch):
    """The shared encoders give what a json.dumps() per cell gave (the text before they were shared)."""
    text = _audit_report.markdown(report), _audit_report.junit(report)
    assert "failure" in text[1] and "```" in text[0]
    monkeypatch.setattr(_audit_report, "_CELL_JSON", lambda v: json.dumps(v, sort_keys=True, separators=(", ", ": ")))
    monkeypatch.setattr(_audit_report, "_JUNIT_JSON", lambda v: json.dumps(v, sort_keys=True))
    assert (_audit_report.markdown(report), _audit_report.junit(report)) == text


def test_writers_share_a_structures_text_and_write_the_same_files(report, monkeypatch):
    """write_reports gives report_blocks and junit one dict: a structure's text is made once for report.md,
    report.html and junit.xml (the same encoder settings), and every file is what it is without sharing."""
    alone = (_audit_report.markdown(report), _audit_report.html(report), _audit_report.junit(report))
    shared = {}
    blocks = _audit_report.report_blocks(report, shared)
    assert shared and all(text == json.dumps(value, sort_keys=True, separators=(", ", ": "))
                          for value, text in shared.values())
    encoded = []
    cell_json = _audit_report._CELL_JSON
    monkeypatch.setattr(_audit_report, "_CELL_JSON", lambda v: encoded.append(v) or cell_json(v))
    assert _audit_report.junit(report, shared=shared) == alone[2]
    with_sharing = len(encoded)
    del encoded[:]
    _audit_report.junit(report)
    assert with_sharing < len(encoded)
    assert (_audit_report.to_markdown(blocks), _audit_report.to_html(blocks, _audit_report.html_title(report))) == alone[:2]


def test_the_report_is_built_with_the_garbage_collector_paused(report, monkeypatch):
    """The comparison and every writer run with gc disabled (full collections walk the whole report for nothing
    at fleet scale) and leave it as they found it, enabled or not."""
    seen = []
    cell_json, audit_host = _audit_report._CELL_JSON, _audit.audit_host
    monkeypatch.setattr(_audit_report, "_CELL_JSON", lambda v: seen.append(gc.isenabled()) or cell_json(v))
    monkeypatch.setattr(_audit_report, "_LINE_JSON", lambda v: seen.append(gc.isenabled()) or json.dumps(v))
    monkeypatch.setattr(_audit, "audit_host", lambda *a: seen.append(gc.isenabled()) or audit_host(*a))
    assert gc.isenabled()
    _audit.audit({"h": {"facts": None, "desired": None, "layers": None, "error": "down"}})
    blocks = _audit_report.report_blocks(report)
    for write in (lambda: _audit_report.json_document(report), lambda: _audit_report.junit(report),
                  lambda: _audit_report.to_markdown(blocks), lambda: _audit_report.to_html(blocks)):
        write()
        assert gc.isenabled()
    assert len(seen) > 10 and not any(seen)
    gc.disable()
    try:
        _audit_report.junit(report)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_write_reports_writes_each_writers_text(report, tmp_path):
    """The rdma_audit_report action's files (sharing the structures' text between them) are the writers' texts."""
    from ansible_collections.rdma.k8s_node.plugins.action.rdma_audit_report import write_reports  # pylint: disable=import-outside-toplevel

    files = write_reports(report, str(tmp_path / "out"))
    expected = {"json": _audit_report.json_document(report) + "\n", "md": _audit_report.markdown(report),
                "html": _audit_report.html(report), "junit": _audit_report.junit(report)}
    assert sorted(files) == sorted(expected)
    for kind, path in files.items():
        with open(path, encoding="utf-8") as handle:
            assert handle.read() == expected[kind], kind
    assert sorted(write_reports(report, str(tmp_path / "two"), ["junit", "md"])) == ["junit", "md"]


def test_the_parts_are_the_text(report):
    """The writers' pieces (what write_reports writes) join to their texts."""
    blocks = _audit_report.report_blocks(report)
    assert "".join(_audit_report.json_parts(report)) == _audit_report.json_document(report)
    assert "".join(_audit_report.json_parts({1: "int key"})) == indented({1: "int key"})
    for lines, text in ((_audit_report.markdown_lines(blocks), _audit_report.to_markdown(blocks)),
                        (_audit_report.html_lines(blocks, "t"), _audit_report.to_html(blocks, "t")),
                        (_audit_report.junit_lines(report), _audit_report.junit(report))):
        assert len(lines) > 50 and _audit_report.text_of(lines) == text
        assert "".join(_audit_report.text_parts(lines, size=7)) == text
    assert list(_audit_report.text_parts([])) == []


def test_every_writer_takes_a_subject_that_is_no_hashable_value(report):
    """A check's subject can come from an inventory variable (drivers.doca_version's is the DOCA profile as given),
    so a list or a mapping must reach every file as text, through the writers' caches or around them."""
    report = json.loads(json.dumps(report))
    checks = next(iter(report["hosts"].values()))["checks"]
    subjects = {"drift": ["host", "kernel"], "ok": {"profile": "host"}, "fail": [1], "unknown": [2]}
    changed = []
    for check in checks:
        if check["status"] in subjects:
            check["subject"] = subjects.pop(check["status"])
            changed.append(check)
    assert len(changed) >= 2
    junit = _audit_report.junit(report)
    for check in changed:
        assert "name=%s" % quoteattr(_audit_report.check_name(check)) in junit
    markdown = _audit_report.markdown(report)
    assert all(_audit_report.check_name(c).replace("[", "\\[").replace("]", "\\]") in markdown
               for c in changed if c["status"] != "ok")
    assert json.loads(_audit_report.json_document(report)) == report
