"""The pool file ib_vf_guids exports, read by sriov-network-operator's OWN code, and ``_guid.parse_pool`` checked
against that code.

``rdma-k8s-node-guidpool`` (scripts/build-sriov-operator-check) is built inside the operator's published module
(github.com/k8snetworkplumbingwg/sriov-network-operator v1.6.0): for each file it runs the operator's
``infiniband.New()`` (``newIbGUIDPool`` -> ``getIbGUIDConfig``: ``readJSONConfig``, ``ParseGUID``, the pfGuid lookup
through netlink's link list and the operator's network helper) and then ``ConfigureVfGUID`` for each VF asked for,
recording the node and port GUIDs it sets through netlink.  One process serves every file of this module (JSON lines).

1. Real scenarios: the module on the simulated dgx-h100 (one PF, every IB PF, merged into the operator's own unit-test
   pool file and into an entry naming another PF by its pfGuid): the operator accepts the file and sets exactly our
   GUIDs on each VF, node and port.
2. Differential: for hand-picked edge cases and generated files (the fuzz suite's pool strategies and a structured
   one), ``parse_pool`` on the bytes as the module reads them accepts exactly when the operator accepts, and gives
   the same GUID list or range per PCI address.  Where they disagreed, the operator was right and ``_guid`` changed.

Without the binary the tests skip, naming the script; under scripts/test (RDMA_REQUIRE_SRIOV_OPERATOR_CHECK=1,
scripts/setup built it) they fail.
"""

import base64
import json
import os
import pathlib
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, host as _sriov_host
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.fuzz.test_guid import ANYTHING, GUID_TEXT, POOL_TEXT
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.realworld_trees import corpus
from unit.plugins.modules.simnode import sim_node

REPO = pathlib.Path(__file__).resolve().parents[4]
BUILD = REPO / "scripts" / "build-sriov-operator-check"
REQUIRE = "RDMA_REQUIRE_SRIOV_OPERATOR_CHECK"
POOL = "sriov-operator/infiniband/guids"
UNITS = ("sriov-config.service", "sriov-config-post-network.service")
UNIT_TEST_POOL = "sriov-network-operator/unit-test/etc/sriov-operator/infiniband/guids"
DOC_POOL = "sriov-network-operator/doc-example/etc/sriov-operator/infiniband/guids"

#: links of the differential's node: (netdev, address as Linux prints it, PCI address or None)
IPOIB = "00:00:10:87:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:55:1e:20"
LINKS = (("lo", "00:00:00:00:00:00", None), ("ibp24s0", IPOIB, "0000:18:00.0"),
         ("enp41s0f0np0", "a0:88:c2:55:2a:40", "0000:29:00.0"),
         ("ib-virt", "00:00:10:87:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:01", None))
SETTINGS = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example, HealthCheck.filter_too_much])


def binary():
    """The built program, or a skip naming the script (a failure under scripts/test)."""
    done = subprocess.run([str(BUILD), "--path"], capture_output=True, text=True, check=False, timeout=60)
    path = pathlib.Path(done.stdout.strip())
    if done.returncode != 0 or not os.access(str(path), os.X_OK):
        why = "no %s (build it: scripts/build-sriov-operator-check)" % path
        if os.environ.get(REQUIRE) == "1":
            pytest.fail("%s, and scripts/setup builds it for scripts/test (%s=1)" % (why, REQUIRE))
        pytest.skip(why)
    return path


class Operator:
    """One rdma-k8s-node-guidpool process: :meth:`read` sends a file, returns the operator's reading of it."""

    def __init__(self, path):
        self.errors = tempfile.TemporaryFile()  # pylint: disable=consider-using-with
        self.proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                                     stderr=self.errors)
        self.count = 0

    def read(self, data, links=(), vfs=None):
        """``data`` (bytes, None: no file) read by the operator on a node with ``links``; ``vfs`` {PF PCI: count}."""
        self.count += 1
        request = {"id": self.count, "data": None if data is None else base64.b64encode(data).decode("ascii"),
                   "links": [{"name": name, "address": address, "pci": pci or ""} for name, address, pci in links],
                   "vfs": vfs or {}}
        self.proc.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.errors.seek(0)
            pytest.fail("rdma-k8s-node-guidpool ended: %s" % self.errors.read().decode("utf-8", "replace")[-2000:])
        answer = json.loads(line)
        assert answer["id"] == self.count
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.errors.close()


@pytest.fixture(scope="module")
def operator():
    proc = Operator(binary())
    yield proc
    proc.close()


def test_a_missing_binary_fails_under_scripts_test_and_skips_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("SRIOV_OPERATOR_CHECK_CACHE", str(tmp_path))
    monkeypatch.delenv(REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="build it: scripts/build-sriov-operator-check"):
        binary()
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="scripts/setup builds it"):
        binary()


# -- what the module exports, read by the operator -----------------------------------------------------------------
@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as sim:
        for unit in UNITS:  # the operator's systemd mode: the module exports the pool file by default
            path = sim.etc / "systemd/system" / unit
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(corpus("sriov-network-operator/etc/systemd/system/" + unit))
        yield sim


def with_vfs(monkeypatch, sim, netdev, count):
    run_module(monkeypatch, sriov_vfs.main, {"host_root": str(sim.root), "netdev": netdev, "num_vfs": count,
                                             "vf_defaults": {"link_state": "auto"}})


def export(monkeypatch, sim, netdev, **args):
    args.update(host_root=str(sim.root), netdev=netdev)
    result = run_module(monkeypatch, ib_vf_guids.main, args, diff=True)
    assert result["export_pool_file"] is True
    return result


def pool_bytes(sim):
    return (sim.etc / POOL).read_bytes()


def node_links(sim):
    return _sriov_host.node_links(HostRoot(str(sim.root)))


def ours_for(result):
    return [row["guid"] for row in result["guids"]]


def test_operator_sets_our_guids_on_each_vf(monkeypatch, dgx, operator):
    with_vfs(monkeypatch, dgx, "ibp24s0", 4)
    result = export(monkeypatch, dgx, "ibp24s0")
    pci = result["observed"]["pf"]["pci_address"]
    read = operator.read(pool_bytes(dgx), node_links(dgx), {pci: 4})
    assert read["ok"] is True and read["pools"] == {pci: {"guids": ours_for(result)}}
    assert read["assigned"][pci] == {"node": ours_for(result), "port": ours_for(result)}
    # a fifth VF has no GUID in the pool: the operator fails it (the module exports one GUID per VF it has)
    assert "no guid allocation found for VF id: 4" in operator.read(pool_bytes(dgx), node_links(dgx), {pci: 5})[
        "assigned"][pci]["error"]


def args_of(netdev):
    return {"scheme": "list", "guids": ["02:AA:00:00:00:00:00:01"]} if netdev == "ibp79s0" else {"scheme": "pf_guid"}


def test_every_ib_pf_of_the_node_in_one_file(monkeypatch, dgx, operator):
    netdevs = {"ibp24s0": 2, "ibp79s0": 1, "ibp220s0": 3}
    expected, pcis = {}, {}
    for netdev, count in netdevs.items():
        with_vfs(monkeypatch, dgx, netdev, count)
        result = export(monkeypatch, dgx, netdev, **args_of(netdev))
        pcis[netdev] = result["observed"]["pf"]["pci_address"]
        expected[pcis[netdev]] = ours_for(result)
    read = operator.read(pool_bytes(dgx), node_links(dgx),
                         dict((pci, len(guids)) for pci, guids in expected.items()))
    assert read["ok"] is True
    assert read["pools"] == dict((pci, {"guids": guids}) for pci, guids in expected.items())
    assert read["assigned"] == dict((pci, {"node": guids, "port": guids}) for pci, guids in expected.items())
    assert read["pools"][pcis["ibp79s0"]] == {"guids": ["02:aa:00:00:00:00:00:01"]}  # the list, as Go prints it


def test_a_second_pass_over_every_pf_changes_nothing(monkeypatch, dgx, operator):
    for netdev in ("ibp24s0", "ibp79s0"):
        with_vfs(monkeypatch, dgx, netdev, 1)
        export(monkeypatch, dgx, netdev, **args_of(netdev))
    read = operator.read(pool_bytes(dgx), node_links(dgx))
    for netdev in ("ibp24s0", "ibp79s0"):
        assert export(monkeypatch, dgx, netdev, **args_of(netdev))["changed"] is False
    assert operator.read(pool_bytes(dgx), node_links(dgx))["pools"] == read["pools"]


def test_merged_into_the_operators_unit_test_file(monkeypatch, dgx, operator):
    original = corpus(UNIT_TEST_POOL)
    assert operator.read(original.encode())["pools"] == {"0000:d8:00.0": {"guids": ["00:01:02:03:04:05:06:07"]}}
    (dgx.etc / POOL).parent.mkdir(parents=True)
    (dgx.etc / POOL).write_text(original)
    with_vfs(monkeypatch, dgx, "ibp24s0", 2)
    result = export(monkeypatch, dgx, "ibp24s0")
    read = operator.read(pool_bytes(dgx), node_links(dgx), {"0000:18:00.0": 2, "0000:d8:00.0": 1})
    assert read["pools"] == {"0000:d8:00.0": {"guids": ["00:01:02:03:04:05:06:07"]},
                             "0000:18:00.0": {"guids": ours_for(result)}}
    assert read["assigned"]["0000:18:00.0"]["node"] == ours_for(result)
    assert read["assigned"]["0000:d8:00.0"]["node"] == ["00:01:02:03:04:05:06:07"]


def test_merged_beside_a_pfguid_entry_the_operator_resolves(monkeypatch, dgx, operator):
    """Another PF named by its IPoIB netdev's address (pfGuid) and a range: the operator resolves the link through
    netlink and the netdev's device symlink, as our parse_pool does with the node's links."""
    links = node_links(dgx)
    other_name, other_address, other_pci = next(link for link in links if link[0] == "ibp64s0")
    entry = {"pfGuid": other_address, "guidsRange": {"start": "02:00:00:00:00:aa:00:02", "end": "02:00:00:00:00:aa:00:0a"}}
    (dgx.etc / POOL).parent.mkdir(parents=True)
    (dgx.etc / POOL).write_text(json.dumps([entry]))
    with_vfs(monkeypatch, dgx, "ibp24s0", 3)
    result = export(monkeypatch, dgx, "ibp24s0")
    read = operator.read(pool_bytes(dgx), links, {"0000:18:00.0": 3, other_pci: 2})
    assert other_name == "ibp64s0" and read["ok"] is True
    assert read["pools"] == {other_pci: {"range": ["02:00:00:00:00:aa:00:02", "02:00:00:00:00:aa:00:0a"]},
                             "0000:18:00.0": {"guids": ours_for(result)}}
    assert read["assigned"][other_pci]["node"] == ["02:00:00:00:00:aa:00:02", "02:00:00:00:00:aa:00:03"]
    assert same(operator, pool_bytes(dgx), links)


def test_render_pool_for_the_dgx_archetype_read_by_the_operator(operator):
    """render_pool on the pf_guid scheme's GUIDs of the archetype's eight rails (16 VFs each, as its firmware allows),
    one rail after the other into the same file, as eight ib_vf_guids runs would."""
    rails = {"0000:18:00.0": 0xA088C20300551E20, "0000:40:00.0": 0xA088C20300551E28}
    text = None
    for pci, pf_guid in rails.items():
        text = _guid.render_pool(text, pci, [_guid.derive(pf_guid, vf) for vf in range(16)])
    read = operator.read(text.encode(), (), dict((pci, 16) for pci in rails))
    for pci, pf_guid in rails.items():
        wanted = [_guid.format_guid(_guid.derive(pf_guid, vf)) for vf in range(16)]
        assert read["pools"][pci] == {"guids": wanted} and read["assigned"][pci]["node"] == wanted


def test_the_documented_example_is_refused_by_both(monkeypatch, dgx, operator):
    doc = corpus(DOC_POOL)
    read = operator.read(doc.encode(), node_links(dgx))
    assert read["ok"] is False and "either PCI address or PF GUID required" in read["error"]
    (dgx.etc / POOL).parent.mkdir(parents=True)
    (dgx.etc / POOL).write_text(doc)
    with_vfs(monkeypatch, dgx, "ibp24s0", 1)
    failure = run_module(monkeypatch, ib_vf_guids.main, {"host_root": str(dgx.root), "netdev": "ibp24s0"},
                         expect=ModuleFail)
    assert "has neither pciAddress nor pfGuid" in failure["msg"]


def test_bare_hex_is_refused_as_released_operators_do(operator):
    """Go 1.26's net.ParseMAC added bare hex digits (src/net/mac.go); the operator's v1.6.0 images are built with
    golang:1.23 (its Dockerfiles), which refuses them: parse_pool refuses them by default, and agrees with the program
    built here when told which Go built it."""
    data = entry(pciAddress="0000:18:00.0", guids=["02aabbccddeeff01"])
    read = operator.read(data)
    assert ours(data, ())["ok"] is False and "is not a GUID sriov-network-operator accepts" in ours(data, ())["error"]
    assert read["ok"] is go_bare_hex(read["go"])
    if read["ok"]:
        assert read["pools"] == ours(data, (), True)["pools"] == {"0000:18:00.0": {"guids": ["02:aa:bb:cc:dd:ee:ff:01"]}}


def test_no_file_means_random_guids(operator):
    read = operator.read(None, (), {"0000:18:00.0": 2})
    assert read["ok"] is True and read.get("missing") is True
    assert len(set(read["assigned"]["0000:18:00.0"]["node"])) == 2


# -- differential: parse_pool against the operator's code ------------------------------------------------------------
def go_bare_hex(version):
    """Whether the program's Go (``go1.26.8``) has the bare-hex form of ``net.ParseMAC`` (added in Go 1.26)."""
    major, minor = version[2:].split(".")[:2]
    return (int(major), int(minor.split("rc")[0].split("beta")[0])) >= (1, 26)


def ours(data, links, bare_hex=False):
    """What parse_pool makes of the file's bytes (as the module passes them), in the program's shape: ``{"ok": True,
    "pools": {pci: {"guids": [..]} | {"range": [start, end]}}}`` or ``{"ok": False}``.  An entry parse_pool keeps as
    ``unresolved`` (a link that may appear later) is one the operator refuses now."""
    try:
        entries = _guid.parse_pool(data, links=list(links), bare_hex=bare_hex)
    except ParseError as exc:
        return {"ok": False, "error": exc.msg}
    if any(entry.get("unresolved") for entry in entries):
        return {"ok": False, "error": "unresolved pfGuid"}
    pools = {}
    for entry in entries:  # the operator's map by PCI address: the last entry wins
        pools[entry["pci_address"]] = ({"guids": [_guid.format_guid(g) for g in entry["guids"]]} if "guids" in entry
                                       else {"range": [_guid.format_guid(g) for g in entry["range"]]})
    return {"ok": True, "pools": pools}


def same(operator, data, links=LINKS):
    """parse_pool agrees with the operator's code on ``data``; GUID spellings as the Go the program was built with
    reads them (the released operator's Go 1.23 has no bare-hex form: test_bare_hex_is_refused_as_released_operators_do)."""
    theirs = operator.read(data, links)
    mine = ours(data, links, go_bare_hex(theirs["go"]))
    if theirs["ok"] and theirs.get("missing"):
        # the operator took an error for a missing file (fs.ErrNotExist wrapped with %w): it ignores the pool
        assert not mine["ok"] and "as if it did not exist" in mine["error"], (theirs, mine, data[:500])
        return True
    assert theirs["ok"] == mine["ok"], "operator: %s, parse_pool: %s, file %r" % (
        theirs.get("error") or "accepts", mine.get("error") or "accepts", data[:500])
    if theirs["ok"]:
        assert theirs.get("pools", {}) == mine["pools"], "file %r" % data[:500]
    return True


def entry(**fields):
    return json.dumps([fields]).encode()


G1, G2 = "02:00:00:00:00:00:00:01", "02:00:00:00:00:00:00:02"
EDGE_CASES = {
    "empty file": b"",
    "blank file": b" \n\t\r\n",
    "null": b"null",
    "empty list": b"[]",
    "object, not a list": b'{"pciAddress": "0000:18:00.0", "guids": ["%s"]}' % G1.encode(),
    "string": b'"x"',
    "null entry": b"[null]",
    "empty entry": b"[{}]",
    "unit-test file": corpus(UNIT_TEST_POOL).encode(),
    "documented example": corpus(DOC_POOL).encode(),
    "uppercase GUID": entry(pciAddress="0000:18:00.0", guids=["02:AA:BB:CC:DD:EE:FF:01"]),
    "dashes": entry(pciAddress="0000:18:00.0", guids=["02-aa-bb-cc-dd-ee-ff-01"]),
    "dotted groups": entry(pciAddress="0000:18:00.0", guids=["02aa.bbcc.ddee.ff01"]),
    "mixed separators": entry(pciAddress="0000:18:00.0", guids=["02:aa-bb:cc:dd:ee:ff:01"]),
    "sysfs groups": entry(pciAddress="0000:18:00.0", guids=["02aa:bbcc:ddee:ff01"]),
    "16 hex digits": entry(pciAddress="0000:18:00.0", guids=["02aabbccddeeff01"]),
    "0x hex": entry(pciAddress="0000:18:00.0", guids=["0x02aabbccddeeff01"]),
    "one-digit octets": entry(pciAddress="0000:18:00.0", guids=["2:0:0:0:0:0:0:1"]),
    "6-octet MAC": entry(pciAddress="0000:18:00.0", guids=["02:00:00:00:00:01"]),
    "20-octet address": entry(pciAddress="0000:18:00.0", guids=[IPOIB]),
    "spaces around": entry(pciAddress="0000:18:00.0", guids=[" %s " % G1]),
    "zero GUID": entry(pciAddress="0000:18:00.0", guids=["00:00:00:00:00:00:00:00"]),
    "all-FF GUID": entry(pciAddress="0000:18:00.0", guids=["ff:ff:ff:ff:ff:ff:ff:ff"]),
    "empty GUID": entry(pciAddress="0000:18:00.0", guids=[""]),
    "null GUID": b'[{"pciAddress": "0000:18:00.0", "guids": [null]}]',
    "number GUID": b'[{"pciAddress": "0000:18:00.0", "guids": [1]}]',
    "no GUIDs": entry(pciAddress="0000:18:00.0", guids=[]),
    "duplicate PCI address, last wins": json.dumps([{"pciAddress": "0000:18:00.0", "guids": [G1]},
                                                    {"pciAddress": "0000:18:00.0", "guids": [G2]}]).encode(),
    "same PF, two spellings": json.dumps([{"pciAddress": "0000:3b:00.0", "guids": [G1]},
                                          {"pciAddress": "0000:3B:00.0", "guids": [G2]}]).encode(),
    "duplicate key": b'[{"pciAddress": "a", "pciAddress": "0000:18:00.0", "guids": ["%s"]}]' % G1.encode(),
    "key case": b'[{"PCIADDRESS": "0000:18:00.0", "Guids": ["%s"]}]' % G1.encode(),
    "key case, both spellings": b'[{"pciAddress": "a", "PciAddress": "b", "guids": ["%s"]}]' % G1.encode(),
    "long s in guids": '[{"pciAddress": "x", "guid\u017f": ["%s"]}]'.replace("%s", G1).encode(),
    "Kelvin sign": '[{"pciAddress": "x", "guidsRange": {"start": "%s", "end": "%s"}, "\u212a": 1}]'.replace(
        "%s", G1).encode(),
    "snake case keys": entry(pci_address="0000:18:00.0", guids=[G1]),
    "unknown keys": entry(pciAddress="0000:18:00.0", guids=[G1], vendor="x", rangeStart=G1),
    "range": entry(pciAddress="0000:18:00.0", guidsRange={"start": G1, "end": G2}),
    "range of one": entry(pciAddress="0000:18:00.0", guidsRange={"start": G1, "end": G1}),
    "range backwards": entry(pciAddress="0000:18:00.0", guidsRange={"start": G2, "end": G1}),
    "range start only": entry(pciAddress="0000:18:00.0", guidsRange={"start": G1}),
    "range, key case": b'[{"pciAddress": "x", "GUIDSRANGE": {"START": "%s", "End": "%s"}}]' % (G1.encode(), G2.encode()),
    "empty range and guids": entry(pciAddress="0000:18:00.0", guids=[G1], guidsRange={}),
    "null range and guids": b'[{"pciAddress": "x", "guids": ["%s"], "guidsRange": null}]' % G1.encode(),
    "empty guids and range": entry(pciAddress="x", guids=[], guidsRange={"start": G1, "end": G2}),
    "guids and range": entry(pciAddress="x", guids=[G1], guidsRange={"start": G1, "end": G2}),
    "range as a list": entry(pciAddress="x", guidsRange=[G1, G2]),
    "pciAddress and pfGuid": entry(pciAddress="0000:18:00.0", pfGuid=IPOIB, guids=[G1]),
    "pciAddress null": b'[{"pciAddress": null, "guids": ["%s"]}]' % G1.encode(),
    "pciAddress number": b'[{"pciAddress": 5, "guids": ["%s"]}]' % G1.encode(),
    "pfGuid of an IPoIB link": entry(pfGuid=IPOIB, guids=[G1]),
    "pfGuid uppercase": entry(pfGuid=IPOIB.upper(), guids=[G1]),
    "pfGuid of an Ethernet link": entry(pfGuid="a0:88:c2:55:2a:40", guids=[G1]),
    "pfGuid of a link without a device": entry(pfGuid=LINKS[3][1], guids=[G1]),
    "pfGuid of loopback": entry(pfGuid="00:00:00:00:00:00", guids=[G1]),
    "pfGuid, node GUID": entry(pfGuid="a0:88:c2:03:00:55:1e:20", guids=[G1]),
    "pfGuid of no link": entry(pfGuid="00:00:10:87:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:55:1e:99", guids=[G1]),
    "trailing garbage": entry(pciAddress="x", guids=[G1]) + b" x",
    "trailing newlines": entry(pciAddress="x", guids=[G1]) + b"\n\n",
    "two documents": entry(pciAddress="x", guids=[G1]) * 2,
    "BOM": b"\xef\xbb\xbf" + entry(pciAddress="x", guids=[G1]),
    "NaN": b"[NaN]",
    "comment": b"// pool\n" + entry(pciAddress="x", guids=[G1]),
    "trailing comma": b'[{"pciAddress": "x", "guids": ["%s",]}]' % G1.encode(),
    "single quotes": b"[{'pciAddress': 'x', 'guids': ['%s']}]" % G1.encode(),
    "control character in a string": b'[{"pciAddress": "a\tb", "guids": ["%s"]}]' % G1.encode(),
    "escaped PCI address": b'[{"pciAddress": "0000:18:00.\\u0030", "guids": ["%s"]}]' % G1.encode(),
    "non-ASCII PCI address": entry(pciAddress="0000:18:00.\u0660", guids=[G1]),
    "lone surrogate escape": b'[{"pciAddress": "\\ud800", "guids": ["%s"]}]' % G1.encode(),
    "invalid UTF-8 in a string": b'[{"pciAddress": "a\xe2\x82b\xff", "guids": ["%s"]}]' % G1.encode(),
    "invalid UTF-8 outside strings": b'[\xff{"pciAddress": "x", "guids": ["%s"]}]' % G1.encode(),
    "deep unknown value": b'[{"pciAddress": "x", "guids": ["%s"], "z": %s}]' % (G1.encode(), b"[" * 500 + b"]" * 500),
    "big number elsewhere": b'[{"pciAddress": "x", "guids": ["%s"], "z": %s}]' % (G1.encode(), b"9" * 5000),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_parse_pool_agrees_with_the_operator(operator, name):
    assert same(operator, EDGE_CASES[name])


def as_bytes(text):
    """A generated text as file bytes: surrogate escapes back to the bytes they stand for, lone surrogates as the
    (invalid) UTF-8 a careless writer would produce."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


@SETTINGS
@given(POOL_TEXT)
def test_fuzz_pool_texts_agree_with_the_operator(operator, text):
    same(operator, as_bytes(text))


def key(name):
    """A field name as a writer might spell it: as the code has it, another case, the documentation's snake_case."""
    return st.sampled_from([name, name.lower(), name.upper(), name[0].upper() + name[1:],
                            {"pciAddress": "pci_address", "pfGuid": "pf_guid"}.get(name, name + "x")])


ADDRESS = st.one_of(st.sampled_from(["0000:18:00.0", "0000:29:00.0", "0000:3B:00.1", "", "x"]),
                    st.text(max_size=4))
PF_GUID = st.one_of(st.sampled_from([link[1] for link in LINKS] + [IPOIB.upper(), "a0:88:c2:03:00:55:1e:20", ""]),
                    GUID_TEXT)
GUID = st.one_of(st.integers(0, 2 ** 64 - 1).map(_guid.format_guid), st.integers(0, 2 ** 64 - 1).map(
    lambda v: "-".join(("%016X" % v)[i:i + 2] for i in range(0, 16, 2))), GUID_TEXT, st.none())


@st.composite
def structured_entry(draw):
    pairs = []
    for name, value in (("pciAddress", ADDRESS), ("pfGuid", PF_GUID), ("guids", st.lists(GUID, max_size=4)),
                        ("guidsRange", st.one_of(st.none(), st.dictionaries(
                            st.sampled_from(["start", "end", "START", "End", "rangeStart"]), GUID, max_size=3))),
                        ("extra", ANYTHING)):
        if draw(st.booleans()):
            pairs.append((draw(key(name)), draw(value)))
    return "{%s}" % ", ".join("%s: %s" % (json.dumps(k), json.dumps(v)) for k, v in draw(st.permutations(pairs)))


@SETTINGS
@given(st.lists(structured_entry(), max_size=4), st.sampled_from(["", "\n", " x", "\n\n"]))
def test_structured_pool_files_agree_with_the_operator(operator, entries, tail):
    same(operator, ("[%s]%s" % (", ".join(entries), tail)).encode("utf-8", "surrogatepass"))
