"""ib_vf_guids with sriov-network-operator on the node: its config daemon is detected (units, binary, modprobe file,
state in /etc/sriov-operator, process), the pool file is then written by default, exactly as the operator's code
reads it, and a file the operator would refuse is refused.  Real files: the operator's systemd-mode units and its
unit-test and documentation pool files (tests/fixtures/realworld/sriov-network-operator), read at test time."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, host as _sriov_host, rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.realworld_trees import corpus
from unit.plugins.modules.simnode import sim_node

IB_PF = "0000:18:00.0"
POOL = "sriov-operator/infiniband/guids"
UNITS = ("sriov-config.service", "sriov-config-post-network.service")


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as sim:
        run_module(monkeypatch, sriov_vfs.main, {"host_root": str(sim.root), "netdev": "ibp24s0", "num_vfs": 2,
                                                 "vf_defaults": {"link_state": "auto"}})
        yield sim


def run(monkeypatch, sim, check=False, expect=None, **args):
    args.setdefault("host_root", str(sim.root))
    args.setdefault("netdev", "ibp24s0")
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, ib_vf_guids.main, args, check=check, diff=True, **kwargs)


def systemd_mode(sim):
    """The units sriov-network-config-daemon writes in systemd mode, from the corpus."""
    for unit in UNITS:
        path = sim.etc / "systemd/system" / unit
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(corpus("sriov-network-operator/etc/systemd/system/" + unit))


def pool(sim):
    return sim.etc / POOL


def test_no_operator_no_pool_file(monkeypatch, dgx):
    result = run(monkeypatch, dgx)
    assert result["sriov_network_operator"] == {"present": False, "mode": None, "running": False, "evidence": []}
    assert result["export_pool_file"] is False and not pool(dgx).exists()


def test_systemd_mode_operator_gets_our_guids_by_default(monkeypatch, dgx):
    systemd_mode(dgx)
    check = run(monkeypatch, dgx, check=True)
    assert check["sriov_network_operator"]["mode"] == "systemd"
    assert check["sriov_network_operator"]["evidence"] == ["/etc/systemd/system/" + unit for unit in UNITS]
    assert check["export_pool_file"] is True and not pool(dgx).exists()
    assert any(a["action"] == "create_file" and a["target"] == "/etc/" + POOL for a in check["actions"])
    result = run(monkeypatch, dgx)
    entries = json.loads(pool(dgx).read_text())
    assert entries == [{"pciAddress": IB_PF, "guids": [row["guid"] for row in result["guids"]]}]
    # the operator's rules read it back to exactly our GUIDs (ParseGUID = net.ParseMAC of 8 octets, map by PCI address)
    parsed = _guid.parse_pool(pool(dgx).read_text())
    assert _guid.pool_guids(_guid.pool_entry_for(parsed, IB_PF, []), 2) == [
        _guid.parse_go_guid(row["guid"]) for row in result["guids"]]
    # the pool file it wrote is no evidence by itself, and idempotent
    again = run(monkeypatch, dgx)
    assert again["changed"] is False and again["export_pool_file"] is True
    # a node whose other IB PFs could have VFs is told that the operator now needs their entries too
    assert any("fails VFs of a PF without an entry" in w for w in result.get("warnings", []))


def test_the_pool_file_alone_is_no_evidence(monkeypatch, dgx):
    pool(dgx).parent.mkdir(parents=True)
    pool(dgx).write_text(corpus("sriov-network-operator/unit-test/etc/sriov-operator/infiniband/guids"))
    result = run(monkeypatch, dgx)
    assert result["sriov_network_operator"]["present"] is False and result["export_pool_file"] is False


@pytest.mark.parametrize("evidence", ["/etc/sriov-operator/pci/0000:18:00.0", _sriov.OPERATOR_MODPROBE])
def test_daemon_mode_state_or_rdma_mode_file_is_evidence(monkeypatch, dgx, evidence):
    path = dgx.root / evidence.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    result = run(monkeypatch, dgx, check=True)
    assert result["sriov_network_operator"]["mode"] == "daemon" and result["export_pool_file"] is True


def test_explicit_false_wins_over_detection(monkeypatch, dgx):
    systemd_mode(dgx)
    assert run(monkeypatch, dgx, export_pool_file=False)["export_pool_file"] is False and not pool(dgx).exists()


def test_other_entries_kept_in_place_ours_last(monkeypatch, dgx):
    systemd_mode(dgx)
    pool(dgx).parent.mkdir(parents=True)
    original = corpus("sriov-network-operator/unit-test/etc/sriov-operator/infiniband/guids")
    pool(dgx).write_text(original)
    result = run(monkeypatch, dgx)
    entries = json.loads(pool(dgx).read_text())
    assert entries[0] == json.loads(original)[0] and entries[1]["pciAddress"] == IB_PF
    assert result["changed"] is True and run(monkeypatch, dgx)["changed"] is False


def test_a_file_the_operator_refuses_is_refused_untouched(monkeypatch, dgx):
    systemd_mode(dgx)
    pool(dgx).parent.mkdir(parents=True)
    doc = corpus("sriov-network-operator/doc-example/etc/sriov-operator/infiniband/guids")
    pool(dgx).write_text(doc)
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert "entry 0 has neither pciAddress nor pfGuid" in failure["msg"]
    assert "'pci_address', which the operator's code does not read" in failure["msg"]
    assert pool(dgx).read_text() == doc


def test_a_running_daemon_is_told_to_restart(monkeypatch, dgx):
    real = _sriov_host.detect_sriov_operator
    monkeypatch.setattr(_sriov_host, "detect_sriov_operator", lambda host: dict(real(host), running=True, present=True))
    result = run(monkeypatch, dgx)
    assert result["sriov_network_operator"]["running"] is True
    assert any("reads /etc/sriov-operator/infiniband/guids only when it starts: restart its pod" in w
               for w in result["warnings"])


def test_process_detection_on_a_tree(tmp_path):
    for pid, comm in (("1", "systemd"), ("77", "sriov-network-c"), ("x", "sriov-network-c")):
        (tmp_path / "proc" / pid).mkdir(parents=True)
        (tmp_path / "proc" / pid / "comm").write_text(comm + "\n")
    found = _sriov_host.detect_sriov_operator(HostRoot(str(tmp_path)))
    assert found == {"present": True, "mode": "daemon", "running": True, "evidence": ["process sriov-network-c"]}


@pytest.mark.parametrize("existing, state, running, present, mode", [
    ([], [], False, False, None),
    ([], ["infiniband"], False, False, None),
    ([], ["infiniband", "sriov_config.json"], False, True, "daemon"),
    ([_sriov.OPERATOR_BINARY], [], False, True, "systemd"),
    ([], [], True, True, "daemon"),
])
def test_operator_presence_planner(existing, state, running, present, mode):
    found = _sriov.operator_presence(existing, state, running)
    assert (found["present"], found["mode"]) == (present, mode)


def test_an_entry_for_a_link_not_there_yet_is_kept_with_a_warning(monkeypatch, dgx):
    """At boot the IPoIB netdev of another PF may not exist yet; the operator resolves pfGuid when it starts."""
    systemd_mode(dgx)
    pool(dgx).parent.mkdir(parents=True)
    later = "00:00:10:87:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:bb:cc"
    other = {"pfGuid": later, "guids": ["06:00:00:00:00:00:00:01"]}
    pool(dgx).write_text(json.dumps([other]))
    result = run(monkeypatch, dgx)
    assert json.loads(pool(dgx).read_text())[0] == other
    assert any("names pfGuid %s" % later in w for w in result["warnings"])
