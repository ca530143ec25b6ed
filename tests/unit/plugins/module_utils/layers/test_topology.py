"""The topology room (module_utils/layers/topology): GPU-NIC affinity, NUMA, MTUs and the RDMA cgroup, judged and not
provisioned.

The checks are the ones ``_audit`` made before the layer was a room: a differential test holds the room's judgement
and its inventory judgement to that code (topology_before.py, kept verbatim as the oracle) on the simulator's
archetypes as rdma_facts gathers them and on hand-made edge cases (topology_cases.py), exceptions included (facts of
another shape raise what they raised, and the audit makes that host unknown as before).  Through the audit: its report
holds the room's checks where it held the old ones, ``mtu.inventory`` first among a host's inventory checks."""

import copy
import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.topology import judge
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit

from unit.plugins.module_utils.layers import topology_before as before
from unit.plugins.module_utils.layers import topology_cases

_MALFORMED = _audit._MALFORMED  # pylint: disable=protected-access


@pytest.fixture(scope="module", name="inventories")
def fixture_inventories(tmp_path_factory):
    facts = dict((name, topology_cases.node_facts(name, tmp_path_factory.mktemp(name)))
                 for name in topology_cases.ARCHETYPES)
    return topology_cases.cases(facts)


def _outcome(func, *args):
    """``func(*args)``, or what it raised of the exceptions the audit catches (type and text)."""
    try:
        return func(*args)
    except _MALFORMED as exc:
        return ("raised", type(exc).__name__, str(exc))


def _without_layer(checks):
    return [dict((k, v) for k, v in check.items() if k != "layer") for check in checks]


def _hosts(inventories):
    """``(case, host, spec)`` of every host with facts, in a stable order."""
    return [(case, name, spec) for case, hosts in sorted(inventories.items()) for name, spec in sorted(hosts.items())
            if spec["facts"] is not None]


def _section(facts):
    return _registry.by_name("topology").legacy_section(facts)


def test_registry_entry_is_a_room_without_an_observer():
    layer = _registry.by_name("topology")
    assert layer.judge is judge.judge and layer.inventory_judge is judge.inventory_judge
    assert layer.legacy_section is judge.section_of and layer.observe is None and not layer.runs_tools
    assert layer.facts_keys == judge.KEYS and "layers" not in layer.facts_keys
    assert layer not in _registry.rooms()  # rdma_facts runs no observer for it
    assert _audit.AFFINITY_ORDER is judge.AFFINITY_ORDER  # one list: the audit checks the option against it
    assert [_audit.layer_of(i) for i in ("topology.gpu_nic", "topology.numa", "mtu.node", "mtu.inventory",
                                         "cgroup.rdma")] == ["topology"] * 5


# -- the differential test: the room against the audit's judgement before it ----------------------------------------
def test_the_rooms_checks_are_the_audits_before(inventories):
    """Per host: the same checks (ids, subjects, statuses, texts, order), or the same exception."""
    compared = raised = 0
    for case, name, spec in _hosts(inventories):
        facts = spec["facts"]
        desired = _audit.option_problems(copy.deepcopy(spec["desired"]))[1]
        want = _outcome(before.host_checks, copy.deepcopy(facts), desired)
        want = want if isinstance(want, tuple) else _without_layer(want)
        kept = json.dumps(facts, sort_keys=True)
        got = _outcome(judge.judge, _section(facts), desired)
        assert got == want, (case, name)
        assert json.dumps(facts, sort_keys=True) == kept, "the judgement changed the facts"
        compared += 1
        raised += isinstance(got, tuple)
    assert compared >= 70 and raised >= 10, (compared, raised)


def test_the_rooms_inventory_checks_are_the_audits_before(inventories):
    """Across each inventory: the same mtu.inventory checks on the hosts that audit the layer (every host's MTUs
    count), or the same exception."""
    compared = 0
    for case, hosts in sorted(inventories.items()):
        work = dict((name, {"facts": copy.deepcopy(spec["facts"]), "checks": [],
                            "layers": _audit.host_layers(spec["layers"])[0]}) for name, spec in sorted(hosts.items()))
        want = _outcome(before._inventory_checks, work)  # pylint: disable=protected-access
        sections = dict((name, _section(host["facts"])) for name, host in work.items() if host["facts"] is not None)
        got = _outcome(judge.inventory_judge, sections)
        if isinstance(want, tuple) or isinstance(got, tuple):
            assert got == want, case
            continue
        for name, host in work.items():
            mine = got.get(name, []) if "topology" in host["layers"] else []
            assert mine == _without_layer(host["checks"]), (case, name)
            compared += len(mine)
    assert compared >= 20


# -- through the audit ------------------------------------------------------------------------------------------------
def test_the_audit_reports_the_rooms_checks(inventories):
    """The report's topology checks of each host are the room's judgement of the host's section, then the room's
    inventory checks; hosts without facts have topology.facts unknown, hosts that do not audit the layer none."""
    for case, hosts in sorted(inventories.items()):
        if case.startswith("hostile-"):
            continue  # below
        report = _audit.audit(copy.deepcopy(hosts))
        sections = dict((name, _section(spec["facts"])) for name, spec in hosts.items() if spec["facts"] is not None)
        across = judge.inventory_judge(sections)
        for name, spec in hosts.items():
            found = _without_layer(c for c in report["hosts"][name]["checks"] if c["layer"] == "topology")
            if "topology" not in _audit.host_layers(spec["layers"])[0]:
                assert found == [], (case, name)
            elif spec["facts"] is None:
                assert [(c["id"], c["status"]) for c in found] == [("topology.facts", "unknown")], (case, name)
            else:
                desired = _audit.option_problems(spec["desired"])[1]
                assert found == judge.judge(sections[name], desired) + across.get(name, []), (case, name)


def test_mtu_inventory_comes_first_among_a_hosts_inventory_checks(inventories):
    """Where the audit put it before the layer was a room: right after the host's own checks, before the other
    rooms' inventory checks (sriov.guid_inventory, qos.inventory, health.firmware)."""
    report = _audit.audit(copy.deepcopy(inventories["inventory-order"]))
    seen = set()
    for name, host in report["hosts"].items():
        ids = [c["id"] for c in host["checks"]]
        own = len(_audit.audit_host(inventories["inventory-order"][name]["facts"],
                                    inventories["inventory-order"][name]["desired"]))
        after = ids[own:]
        assert after and set(after[:after.count("mtu.inventory")]) == {"mtu.inventory"}, (name, after)
        seen.update(after)
    assert {"mtu.inventory", "sriov.guid_inventory", "qos.inventory", "health.firmware"} <= seen


def _whole_report_fails(facts):
    """Facts with which the whole report fails, before the room as after it: GPUs without ``devices`` or
    ``gpu_nic_affinity`` (the summary's ``rdma_topo_matrix`` raises an error outside ``_MALFORMED``), or an MTU that
    cannot be counted (a list) on a host that does not audit the layer (the inventory's count raises TypeError)."""
    if facts.get("gpus") and not ("devices" in facts and "gpu_nic_affinity" in facts):
        return True
    groups = _outcome(judge.mtu_groups, facts)
    return isinstance(groups, dict) and any(isinstance(m, (list, dict)) for v in groups.values() for m in v.values())


def test_facts_of_another_shape_make_that_host_unknown(inventories):
    """What the room's judgement raises makes the host unknown with the reason, the other hosts are judged; a host
    that does not audit the layer is unknown when its MTUs cannot be grouped (the inventory judgement reads them)."""
    judged = 0
    for case, hosts in sorted(inventories.items()):
        if not case.startswith("hostile-"):
            continue
        bad = hosts["bad"]["facts"]
        if _whole_report_fails(bad):
            continue
        report = _audit.audit(copy.deepcopy(hosts))["hosts"]
        assert [c for c in report["good"]["checks"] if c["id"] == "cgroup.rdma"], case
        if isinstance(_outcome(judge.judge, _section(bad), None), tuple):
            assert report["bad"]["status"] == "unknown" and report["bad"]["summary"] is None, case
            assert all("another shape" in c["detail"] for c in report["bad"]["checks"]), case
            judged += 1
        if isinstance(_outcome(judge.mtu_groups, bad), tuple):
            assert all("another shape" in c["detail"] for c in report["bad-no-topology"]["checks"]), case
    assert judged >= 8


@pytest.mark.parametrize("section", (None, [], "x", 5))
def test_a_section_that_is_not_a_mapping_is_unknown(section):
    checks = judge.judge(section, None)
    assert [(c["id"], c["status"]) for c in checks] == [("topology.facts", "unknown")]
    assert _audit.layer_of("topology.facts") == "topology"


def test_an_edited_layers_topology_is_not_read():
    """The layer has no observer: its section is always the discovery's keys (a hand-edited cache cannot replace it)."""
    facts = {"layers": {"topology": "x"}, "rdma_cgroup": {"/": {"mlx5_0": {"hca_handle": 1, "hca_object": "max"}}}}
    checks = _audit.audit_host(facts, None, ["topology"])
    assert [(c["id"], c["status"]) for c in checks] == [("cgroup.rdma", "drift")]


# -- the rules, on hand-made sections ----------------------------------------------------------------------------------
def _node(**overrides):
    """Two GPUs and three PFs (one a RoCE port, one on NUMA node 1) and a VF."""
    section = {
        "gpus": [{"pci_address": "g0", "numa_node": 0}, {"pci_address": "g1", "numa_node": 1}],
        "devices": [
            {"name": "mlx5_0", "numa_node": 0, "netdevs": ["ib0"], "ports": [{"link_layer": "InfiniBand"}]},
            {"name": "mlx5_1", "numa_node": 1, "netdevs": ["ib1"], "ports": [{"link_layer": "InfiniBand"}]},
            {"name": "mlx5_2", "numa_node": 1, "netdevs": ["eth2"], "ports": [{"link_layer": "Ethernet"}]},
            {"name": "mlx5_3", "numa_node": 0, "netdevs": ["ib0v0"], "ports": [{"link_layer": "InfiniBand"}],
             "is_vf": True},
        ],
        "gpu_nic_affinity": {"g0": {"mlx5_0": "PXB", "mlx5_1": "SYS", "mlx5_2": "SYS", "mlx5_3": "PIX"},
                             "g1": {"mlx5_0": "SYS", "mlx5_1": "NODE", "mlx5_2": "NODE"}},
        "numa_nodes": {"online": [0, 1]},
        "mtu": {"ib0": 4092, "ib1": 4092, "eth2": 9000, "ib0v0": 1500},
        "rdma_cgroup": {"/kubepods.slice": {"mlx5_0": {"hca_handle": "max", "hca_object": "max"}}},
    }
    section.update(overrides)
    return section


def _by_key(checks):
    return dict(((c["id"], c["subject"]), c) for c in checks)


def test_closest_pf_within_the_limit_and_numa():
    checks = judge.judge(_node(), {"rdma_audit_gpu_nic_max_class": "PXB"})
    assert [(c["id"], c["subject"], c["status"]) for c in checks] == [
        ("topology.gpu_nic", "g0", "ok"), ("topology.numa", "g0", "ok"),
        ("topology.gpu_nic", "g1", "fail"), ("topology.numa", "g1", "ok"),
        ("mtu.node", "Ethernet", "ok"), ("mtu.node", "InfiniBand", "ok"), ("cgroup.rdma", None, "ok")]
    found = _by_key(checks)
    assert found[("topology.gpu_nic", "g0")]["live"] == {"mlx5_0": "PXB"}  # the VF at PIX is not the GPU's NIC
    assert found[("topology.gpu_nic", "g1")]["live"] == {"mlx5_1": "NODE"}  # NODE before NODE by name
    assert "across NODE it copies through host memory" in found[("topology.gpu_nic", "g1")]["detail"]
    assert found[("mtu.node", "InfiniBand")]["live"] == {"ib0": 4092, "ib1": 4092}  # the VF's netdev is not counted
    assert all(c["remedy"] is None for c in checks if c["status"] == "ok")


def test_map_unknown_class_and_unknown_numa():
    section = _node(gpus=[{"pci_address": "g0", "numa_node": None}, {"pci_address": "g1", "numa_node": 1}])
    section["gpu_nic_affinity"]["g1"] = {"mlx5_1": "NV12", "mlx5_2": "NV12"}
    found = _by_key(judge.judge(section, {"rdma_audit_gpu_nic_map": {"g0": "mlx5_9"}}))
    assert found[("topology.gpu_nic", "g0")]["status"] == "unknown"
    assert found[("topology.gpu_nic", "g0")]["detail"] == "no affinity for the expected NIC mlx5_9"
    assert ("topology.numa", "g0") not in found
    assert found[("topology.gpu_nic", "g1")]["status"] == "fail"  # a class nvidia-smi does not rank is never good
    found = _by_key(judge.judge(section, {"rdma_audit_gpu_nic_map": {"g0": "mlx5_1"}}))
    assert found[("topology.numa", "g0")]["status"] == "unknown"
    # one NUMA node online: no NUMA check
    assert not [c for c in judge.judge(_node(numa_nodes={"online": [0]}), None) if c["id"] == "topology.numa"]


def test_mtu_rules():
    assert _by_key(judge.judge(_node(), {"rdma_audit_mtu": 4200}))[("mtu.node", "Ethernet")]["status"] == "drift"
    mixed = _by_key(judge.judge(_node(mtu={"ib0": 4092, "ib1": 2044, "eth2": None}), None))
    assert mixed[("mtu.node", "InfiniBand")]["detail"] == "RDMA netdevs of one node with MTUs [2044, 4092]"
    assert mixed[("mtu.node", "Ethernet")]["status"] == "unknown"
    limited = _node(rdma_cgroup={"/a": {"mlx5_0": {"hca_handle": 4, "hca_object": "max"}}})
    assert _by_key(judge.judge(limited, None))[("cgroup.rdma", None)]["live"] == {"/a": {"mlx5_0": {"hca_handle": 4}}}


def test_inventory_majority_and_hosts_without_facts():
    odd = _node(mtu={"ib0": 2044, "ib1": 4092, "eth2": 9000})
    found = judge.inventory_judge({"a": _node(), "b": _node(), "c": odd, "d": None})
    assert sorted(found) == ["a", "b", "c"]
    [check] = found["c"]  # Ethernet: one MTU in the inventory, no check
    assert (check["id"], check["subject"], check["status"], check["desired"], check["live"]) == (
        "mtu.inventory", "InfiniBand", "drift", 4092, {"ib0": 2044})
    assert found["a"][0]["status"] == "ok" and found["a"][0]["live"] == {"ib0": 4092, "ib1": 4092}
    assert judge.inventory_judge({"a": _node()}) == {}
