"""report.md and report.html (``_audit_report``): the inventory summary on realistic inventories (hundreds of hosts,
mixed statuses), hostile text (host names and node files' contents are untrusted), and the HTML held to
markdown-it-py's rendering of report.md (CommonMark with tables, raw HTML off)."""

import copy
import json
import re
from html.parser import HTMLParser

import pytest

import hwsim
from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.modules.rdma_facts import layer_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit, _audit_report

markdown_it = pytest.importorskip("markdown_it")

HOSTILE = ["<script>alert(1)</script>", "a|b", "`code` and ``` fence", "line\nbreak\r\nand\u2028sep",
           "[click](javascript:alert(1))", "<http://evil.example/>", "*star* _under_ ~~strike~~", "&amp; &#60;",
           "back\\slash\\|", "# not a heading", "<img src=x onerror=alert(1)>", "\x1b[31mansi\x00nul"]


@pytest.fixture(scope="module", name="facts")
def fixture_facts(tmp_path_factory):
    root = tmp_path_factory.mktemp("roce")
    hwsim.render("roce-cx6dx", str(root))
    host = HostRoot(str(root))
    out = gather(host)
    out["persisted"] = persisted_facts(host, [n for n in out["sysctl"] if n not in ("all", "default")])
    out["layers"] = layer_facts(host, out["problems"])
    return json.loads(json.dumps(out))


def desired(**changes):
    out = dict(role_defaults())
    out.update(changes)
    return dict((var, out.get(var)) for var in _audit.DESIRED_VARS)


def pending_reboot(facts):
    """The kernel arguments written to the boot configuration, the node not rebooted yet."""
    facts = copy.deepcopy(facts)
    facts["persisted"]["kernel_cmdline"] = {"source": "/boot/grub/grub.cfg", "kernel": "/boot/vmlinuz",
                                            "args": ["ro", "iommu=pt"]}
    facts["layers"]["kernel"]["persisted"] = facts["persisted"]["kernel_cmdline"]  # the kernel room's copy
    return facts


@pytest.fixture(scope="module", name="fleet")
def fixture_fleet(facts):
    """400 hosts: 300 as the simulator powers on, 60 waiting for a reboot, 25 unreachable, 15 with unreadable files."""
    hosts = {}
    rebooting = pending_reboot(facts)
    unreadable = copy.deepcopy(facts)
    unreadable["problems"] = [{"path": "/sys/class/net/x/mtu", "error": "Permission denied"}]
    for index in range(400):
        name = "gpu-%03d" % index
        if index < 300:
            spec = {"facts": facts}
        elif index < 360:
            spec = {"facts": rebooting}
        elif index < 385:
            spec = {"facts": None, "error": "unreachable: ssh: connect to host %s port 22: No route to host" % name}
        else:
            spec = {"facts": unreadable}
        spec.update(desired=desired(), layers=["kernel", "netns", "sysctl", "topology", "health"])
        hosts[name] = spec
    return _audit.audit(hosts, generated="2026-12-02T00:00:00Z")


def _section(text, title):
    """The lines of report.md from a paragraph or heading starting with ``title`` to the next blank line after its
    table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = start + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def _rows(lines):
    """The body rows of the first table in ``lines``, as lists of cells."""
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("|---")) + 1:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in body if line.startswith("| ")]


def test_summary_counts_hosts_checks_reboots_and_unknown_hosts(fleet):
    text = _audit_report.markdown(fleet)
    assert text.index("## Summary") < text.index("## Inventory") < text.index("## gpu-000: ")
    by_status = dict((row[0].strip("*"), int(row[1])) for row in _rows(_section(text, "| status | hosts")))
    assert by_status == dict((s.upper() if s in ("fail", "drift") else s, n)
                             for s, n in fleet["summary"]["hosts_by_status"].items())
    assert sum(by_status.values()) == 400

    # the top checks: one row per (check, status), hosts counted once each, the most widespread first
    top = _rows(_section(text, "Checks not ok, by the number of hosts"))
    assert 0 < len(top) <= _audit_report.TOP_CHECKS
    counts = [int(row[3]) for row in top]
    assert counts == sorted(counts, reverse=True)
    for row in top:
        check_id, status = row[0].replace("\\", ""), row[2].strip("*").lower()
        expected = sum(1 for host in fleet["hosts"].values() if host["summary"] is not None and any(
            c["id"] == check_id and c["status"] == status for c in host["checks"]))
        assert int(row[3]) == expected, row
    assert "gpu-000, gpu-001" in top[0][5] and top[0][5].endswith("and %d more" % (int(top[0][3]) - 10))
    # unreachable hosts are not counted once per layer in the top checks: they have their own table
    assert not any(row[0].endswith(".facts") for row in top)

    waiting = _rows(_section(text, "Waiting for a reboot or a restart"))
    assert waiting == [["reboot", "60", "gpu-300, gpu-301, gpu-302, gpu-303, gpu-304, gpu-305, gpu-306, gpu-307, "
                                        "gpu-308, gpu-309 and 50 more"]]
    assert "(60 hosts; provisioning has done its part)" in text

    unknown = _rows(_section(text, "Not audited or not fully readable (40 hosts)"))
    assert len(unknown) == _audit_report.UNKNOWN_ROWS + 1 and unknown[-1][0] == "... and 20 more"
    assert unknown[0][:2] == ["gpu-360", "no facts"] and "No route to host" in unknown[0][2]
    readable = [row for row in unknown if row[1] != "no facts" and not row[0].startswith("...")]
    assert readable == [] or readable[0][1].startswith("1 checks unknown, first facts.read")


def test_host_sections_show_what_is_not_ok_and_count_the_rest(fleet):
    text = _audit_report.markdown(fleet)
    host = fleet["hosts"]["gpu-300"]
    section = text[text.index("## gpu-300: "):text.index("## gpu-301: ")]
    bad = [c for c in host["checks"] if c["status"] != "ok"]
    assert section.count("\n| ") == len(bad) + 1  # the header and one row per check not ok
    assert "%d checks ok (" % host["counts"]["ok"] in section
    assert "kernel.cmdline\\[iommu=pt\\] | kernel | **DRIFT**" in section


@pytest.mark.parametrize("check,action", [
    ({"id": "kernel.cmdline", "status": "drift", "remedy": "reboot the node to apply it (provision.yml with x)"},
     "reboot"),
    ({"id": "containerd.memlock", "status": "drift", "remedy": "restart containerd (containerd_rdma_restart_ok=true)"},
     "restart containerd"),
    ({"id": "drivers.ofed_running", "status": "drift",
      "remedy": "restart openibd in a maintenance window (doca_ofed_restart_ok=true) or reboot"}, "restart openibd"),
    ({"id": "kubelet.override", "status": "drift", "remedy": "restart the kubelet (kubelet_topology_restart_ok=true): its"},
     "restart the kubelet"),
    ({"id": "firmware.pending", "status": "drift", "remedy": "reset the card's firmware"}, "firmware reset or power cycle"),
    ({"id": "netns.mode", "status": "drift", "desired": "exclusive", "persisted": "exclusive", "remedy": "run the role"},
     "reboot"),
    ({"id": "netns.mode", "status": "drift", "desired": "exclusive", "persisted": "shared", "remedy": "run the role"},
     None),
    ({"id": "kernel.cmdline", "status": "drift", "remedy": "run the rdma_kernel role (x), then reboot"}, None),
    ({"id": "kernel.cmdline", "status": "ok", "remedy": "reboot the node"}, None),
])
def test_pending_action(check, action):
    assert _audit_report.pending_action(check) == action


def test_the_judges_remedies_that_start_with_reboot_or_restart_are_all_recognised():
    """Every remedy text in the controller's judges (the audit's and the rooms') that names a restart or reboot first
    maps to an action."""
    import inspect  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry  # pylint: disable=import-outside-toplevel
    source = inspect.getsource(_audit) + "".join(inspect.getsource(inspect.getmodule(layer.judge))
                                                 for layer in _registry.LAYERS if layer.judge_ref)
    remedies = re.findall(r'"((?:restart|reboot) [^"]*)"', source)
    assert len(remedies) >= 4
    for remedy in remedies:
        action = _audit_report.pending_action({"id": "x", "status": "drift", "remedy": remedy % (("x",) * remedy.count("%s"))})
        assert action and action.split()[0] in ("restart", "reboot"), remedy


class _Blocks(HTMLParser):
    """The text of each block element (headings, paragraphs, cells, code blocks) and the inline marks in them."""

    BLOCKS = {"h1", "h2", "h3", "p", "th", "td", "pre"}
    MARKS = {"strong", "em", "code", "a", "script", "img"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self.tags, self._open = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in self.BLOCKS:
            self._open = [tag, ""]
        elif tag in self.MARKS and self._open is not None and self._open[0] != "pre":
            self._open[1] += "<%s>" % tag

    def handle_endtag(self, tag):
        if tag in self.BLOCKS and self._open is not None:
            self.blocks.append((self._open[0], self._open[1].strip()))
            self._open = None
        elif tag in self.MARKS and self._open is not None and self._open[0] != "pre":
            self._open[1] += "</%s>" % tag

    def handle_data(self, data):
        if self._open is not None:
            self._open[1] += data


def blocks_of(page):
    parser = _Blocks()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module", name="hostile")
def fixture_hostile(facts):
    hosts = {}
    for index, text in enumerate(HOSTILE):
        broken = copy.deepcopy(facts)
        broken["problems"] = [{"path": "/sys/%s" % text, "error": text}]
        hosts["n%02d %s" % (index, text)] = {"facts": broken, "desired": desired(rdma_netns_mode="exclusive"),
                                             "layers": ["netns", "topology"]}
    hosts["down " + HOSTILE[0]] = {"facts": None, "desired": None, "layers": None, "error": "unreachable: " + HOSTILE[4]}
    report = _audit.audit(hosts, generated="2026-12-02T00:00:00Z")
    for host in report["hosts"].values():  # the GPU-NIC matrix is node text too
        if host["summary"] and host["summary"]["topo_matrix"]:
            host["summary"]["topo_matrix"] += "\n```\n" + HOSTILE[0] + "\n````\n"
    return report


def test_html_is_markdown_it_rendering_of_report_md(hostile, fleet):
    renderer = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")
    for report in (hostile, fleet):
        text = _audit_report.markdown(report)
        theirs, ours = blocks_of(renderer.render(text)), blocks_of(_audit_report.html(report))
        assert ours.blocks == theirs.blocks
        assert len(ours.blocks) > 50


def test_hostile_text_stays_text(hostile):
    page = _audit_report.html(hostile)
    parsed = blocks_of(page)
    # no element but the page's own: no script, image or link from a host name or a node's file
    assert set(parsed.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "strong", "em",
                                "code", "pre", "table", "thead", "tbody", "tr", "th", "td"}
    assert "<script" not in page.lower() and "javascript:" not in page.split("</head>")[1].replace(
        "[click](javascript:alert(1))", "")
    assert "default-src 'none'" in page and "src=" not in page.replace("onerror", "").split("<body>")[1].replace(
        "&lt;img src=x", "")
    cells = [text for tag, text in parsed.blocks if tag == "td"]
    for hostile_text in HOSTILE[:9]:
        shown = re.sub(r"[\r\n\u2028]+", " ", hostile_text)
        assert any(shown in cell for cell in cells), hostile_text  # shown as written, on one line
    # every table row has as many cells as its header: no | in a value split a cell
    md = _audit_report.markdown(hostile)
    for table in re.findall(r"((?:^\|.*\n)+)", md, re.M):
        widths = set(len(re.split(r"(?<!\\)\|", line)) for line in table.splitlines())
        assert len(widths) == 1, table
    # the matrix's fence is longer than any backtick run in it
    assert "\n`````\n" in md
    # junit.xml stays well-formed XML with control characters in a value
    import xml.etree.ElementTree as ET  # pylint: disable=import-outside-toplevel
    assert ET.fromstring(_audit_report.junit(hostile)).tag == "testsuites"


def test_page_is_self_contained(fleet):
    page = _audit_report.html(fleet)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    head = page.split("<body>", maxsplit=1)[0]
    assert "<style>" in head and "<link" not in page and "<script" not in page
    assert "<title>RDMA node audit: 400 hosts, %s</title>" % fleet["summary"]["status"] in head


def test_table_cells_are_the_same_text_cached_or_not():
    """The cells' caches are typed and leave floats (0.0 == -0.0) and unhashable values alone: every cell is written
    as the uncached writer writes it, in any order."""
    row = [0.0, -0.0, 1, True, 1.0, False, 0, None, "", "x|y", ("strong", "FAIL"), {"a": [1]}, [0.0], -0.0, 1]
    expected_md = "| " + " | ".join(_audit_report._md_cell(value) for value in row) + " |"
    expected_html = "<tr>%s</tr>" % "".join("<td>%s</td>" % _audit_report._html_cell(value) for value in row)
    assert "| 0.0 | -0.0 | 1 | yes | 1.0 | no | 0 | - | - | x\\|y | **FAIL** |" in expected_md
    header = ["c%d" % index for index in range(len(row))]
    for cells in (row, row[::-1], [c for c in row if not isinstance(c, (dict, list))], [-0.0, 0.0], [True, 1]):
        blocks = [("table", header[:len(cells)], [cells, list(cells)])]
        md_rows = _audit_report.to_markdown(blocks).splitlines()[2:]
        html_rows = [line for line in _audit_report.to_html(blocks).splitlines() if line.startswith("<tr><td>")]
        one_md = "| " + " | ".join(_audit_report._md_cell(value) for value in cells) + " |"
        one_html = "<tr>%s</tr>" % "".join("<td>%s</td>" % _audit_report._html_cell(value) for value in cells)
        assert md_rows == [one_md, one_md] and html_rows == [one_html, one_html]
    assert _audit_report.to_markdown([("table", header, [row])]).splitlines()[2] == expected_md
    assert expected_html in _audit_report.to_html([("table", header, [row])])
