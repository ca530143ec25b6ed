"""The topology room (module_utils/layers/topology): GPU-NIC affinity, NUMA, MTUs and the RDMA cgroup, judged and not
provisioned.

The checks are the ones ``_audit`` made before the layer was a room: a differential test holds the room's judgement
and its inventory judgement to that code (topology_before.py, kept verbatim as the oracle) on the simulator's
archetypes as rdma_facts gathers them and on hand-made edge cases (topology_cases.py), exceptions included (facts of
another shape raise what they raised, and the audit makes that host unknown as before), except MTUs of another type,
which the room rejects where the code before it judged them or failed the whole report.  Through the audit: its
report holds the room's checks where it held the old ones, ``mtu.inventory`` first among a host's inventory checks,
and no host's facts fail the whole report (one of another shape is unknown with the reason, the summary raises
nothing)."""

import copy
import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.topology import judge
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._summary import topo_matrix

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


def _rejected(case, name):
    """The reason the room gives for the MTUs of host ``name`` of ``case`` (a ``mtu-type-`` case's bad hosts), or
    None: the room rejects them (TypeError) where the code before it judged them or raised something else."""
    if case.startswith("mtu-type-") and name.startswith("bad"):
        return topology_cases.MTU_OF_ANOTHER_TYPE[int(case.rsplit("-", 1)[1])][1]
    return None


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
    """Per host: the same checks (ids, subjects, statuses, texts, order), or the same exception; MTUs of another type
    raise TypeError with the reason."""
    compared = raised = rejected = 0
    for case, name, spec in _hosts(inventories):
        facts = spec["facts"]
        desired = _audit.option_problems(copy.deepcopy(spec["desired"]))[1]
        want = _outcome(before.host_checks, copy.deepcopy(facts), desired)
        want = want if isinstance(want, tuple) else _without_layer(want)
        if _rejected(case, name):
            want = ("raised", "TypeError", _rejected(case, name))
            rejected += 1
        kept = json.dumps(facts, sort_keys=True)
        got = _outcome(judge.judge, _section(facts), desired)
        assert got == want, (case, name)
        assert json.dumps(facts, sort_keys=True) == kept, "the judgement changed the facts"
        compared += 1
        raised += isinstance(got, tuple)
    assert compared >= 70 and raised >= 10 and rejected == 2 * len(topology_cases.MTU_OF_ANOTHER_TYPE), (
        compared, raised, rejected)


def test_the_rooms_inventory_checks_are_the_audits_before(inventories):
    """Across each inventory: the same mtu.inventory checks on the hosts that audit the layer (every host's MTUs
    count), or the same exception.  MTUs of another type raise TypeError with the reason (the audit leaves that host
    out: it is unknown); without those hosts, the same checks."""
    compared = 0
    for case, hosts in sorted(inventories.items()):
        rejected = [_rejected(case, name) for name in hosts if _rejected(case, name)]
        if rejected:
            sections = dict((name, _section(spec["facts"])) for name, spec in hosts.items())
            assert _outcome(judge.inventory_judge, sections) == ("raised", "TypeError", rejected[0]), case
            hosts = dict((name, spec) for name, spec in hosts.items() if not _rejected(case, name))
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
        if case.startswith(("hostile-", "mtu-type-")):
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


def _alone(hosts, name):
    """Host ``name``'s part of the report of ``hosts`` without the hosts whose facts are of another shape."""
    kept = dict((n, spec) for n, spec in hosts.items() if not n.startswith("bad"))
    return _audit.audit(copy.deepcopy(kept))["hosts"][name]


def _unknown_with(host, reason):
    """The host is unknown (every check, with ``reason``) and has no summary."""
    assert host["status"] == "unknown" and host["summary"] is None, host
    assert host["checks"] and all(c["status"] == "unknown" and c["detail"] == (
        "its rdma_facts result has another shape (%s)" % reason) for c in host["checks"]), host["checks"]


def _host_outcome(spec):
    """What the audit makes of one host alone: its own checks, after every room's inventory judgement of it alone, or
    what that raised."""
    def judged():
        desired = _audit.option_problems(copy.deepcopy(spec["desired"]))[1]
        checks = _audit.audit_host(spec["facts"], desired, _audit.host_layers(spec["layers"])[0])
        for layer in _registry.LAYERS:
            if layer.inventory_judge_ref is not None:
                layer.inventory_judge({"host": _audit._section(layer, spec["facts"])})  # pylint: disable=protected-access
        return checks
    return _outcome(judged)


def test_facts_of_another_shape_make_that_host_unknown(inventories):
    """What the room's judgement raises makes the host unknown with the reason, the other host is judged as without
    it; a host that does not audit the layer is unknown when its MTUs cannot be grouped (the inventory judgement reads
    them), else judged with a summary of what can be read.  No facts fail the whole report: the summary raises
    nothing (GPUs without devices or affinity matrix, values of another type)."""
    judged = unknown = by_the_room = 0
    for case, hosts in sorted(inventories.items()):
        if not case.startswith("hostile-"):
            continue
        report = _audit.audit(copy.deepcopy(hosts))["hosts"]
        assert report["good"] == _alone(hosts, "good"), case
        by_the_room += isinstance(_outcome(judge.judge, _section(hosts["bad"]["facts"]), None), tuple)
        for name in ("bad", "bad-no-topology"):
            outcome = _host_outcome(hosts[name])
            if isinstance(outcome, tuple):
                _unknown_with(report[name], "%s: %s" % outcome[1:])
                unknown += 1
            else:  # judged, with a summary
                assert report[name]["summary"] is not None, (case, name)
                assert report[name]["checks"][:len(outcome)] == outcome, (case, name)
                assert not [c for c in report[name]["checks"] if "another shape" in (c["detail"] or "")], (case, name)
                judged += 1
    assert by_the_room >= 15 and unknown >= 20 and judged >= 20, (by_the_room, unknown, judged)


def test_mtus_of_another_type_make_that_host_unknown(inventories):
    """An MTU that is not an integer (a list, a mapping, a string, a boolean, a float), an ``mtu`` that is not a
    mapping, a link layer that is not a name: that host is unknown with the reason, also when it does not audit the
    layer (the whole report used to fail on a list, or on two link layers of different types); the others are judged
    as without it (its MTUs do not count)."""
    for index, (_facts, reason) in enumerate(topology_cases.MTU_OF_ANOTHER_TYPE):
        hosts = inventories["mtu-type-%d" % index]
        report = _audit.audit(copy.deepcopy(hosts))["hosts"]
        # the host that audits every layer may fail another room's reading first (a list as link layer): its reason
        _unknown_with(report["bad"], "%s: %s" % _host_outcome(hosts["bad"])[1:])
        assert _host_outcome(hosts["bad"])[1] == "TypeError", index
        _unknown_with(report["bad-no-topology"], "TypeError: " + reason)
        for name in ("good", "odd"):
            assert report[name] == _alone(hosts, name), (index, name)
            assert [c["id"] for c in report[name]["checks"]].count("mtu.inventory") == 1, (index, name)


@pytest.mark.parametrize("value", ("4092", True, 4092.0, [4092], {"mtu": 4092}))
def test_only_integer_mtus_count_across_the_inventory(inventories, value):
    """Two hosts agree on their InfiniBand MTUs; a third that does not audit the layer has one that is not an integer:
    it is unknown, and the two have no mtu.inventory check (a string used to count as a second MTU, a list or a
    mapping to fail the whole report; True and 4092.0 made no unknown host)."""
    facts = copy.deepcopy(inventories["archetype-dgx-h100"]["node"]["facts"])
    netdev = sorted(judge.mtu_groups(facts)["InfiniBand"])[0]
    facts["mtu"][netdev] = value
    hosts = dict((name, {"facts": copy.deepcopy(inventories["archetype-dgx-h100"]["node"]["facts"]), "desired": None,
                         "layers": None}) for name in ("a", "b"))
    hosts["c"] = {"facts": facts, "desired": None, "layers": ["kernel"]}
    report = _audit.audit(hosts)["hosts"]
    _unknown_with(report["c"], "TypeError: the MTU of %s is %r, not an integer" % (netdev, value))
    for name in ("a", "b"):
        assert "mtu.inventory" not in [c["id"] for c in report[name]["checks"]], name
        assert report[name]["status"] != "unknown", name
    with pytest.raises(TypeError, match="not an integer"):
        judge.inventory_judge({"a": _section(hosts["a"]["facts"]), "c": _section(facts)})


@pytest.mark.parametrize("mtu", (4092, None, 0, 9000))
def test_integer_and_unreadable_mtus_are_grouped(mtu):
    section = _node(mtu={"ib0": mtu, "ib1": 4092, "eth2": 9000})
    assert judge.mtu_groups(section)["InfiniBand"] == {"ib0": mtu, "ib1": 4092}


def test_the_summary_of_gpus_without_devices_or_affinity(inventories):
    """GPUs the judgement accepts without ``devices`` or ``gpu_nic_affinity`` (rows without NICs): the summary's
    matrix has one row per GPU without NIC columns, the host is judged (the whole report used to fail with
    AnsibleTemplatePluginError: rdma_topo_matrix's input check)."""
    hosts = inventories["hostile-%d" % topology_cases.HOSTILE.index(
        {"gpus": [{"pci_address": "0000:1b:00.0", "numa_node": 0, "local_cpulist": "0-15"}]})]
    report = _audit.audit(copy.deepcopy(hosts))["hosts"]
    for name in ("bad", "bad-no-topology"):
        summary = report[name]["summary"]
        assert (summary["gpus"], summary["rdma_devices"], summary["gpu_nic_affinity"]) == (1, 0, {}), name
        lines = summary["topo_matrix"].splitlines()
        assert lines[0].split() == ["CPU", "Affinity", "NUMA", "Affinity"] and lines[1].split() == ["GPU0", "0-15", "0"]
        assert "  GPU0: 0000:1b:00.0" in lines and "NIC Legend:" not in lines
        assert report[name]["labels"]["rdma.k8s-node.io/gpudirect"] == "none"
    assert [(c["id"], c["status"]) for c in report["bad"]["checks"] if c["layer"] == "topology"] == [
        ("cgroup.rdma", "ok")]


def test_the_summary_shows_what_it_can_read():
    """Values of another type in what only the summary reads: absent or their text, never an exception."""
    facts = {"gpus": [{"pci_address": "0000:1b:00.0", "local_cpulist": 7, "numa_node": "x"}, {"pci_address": "b"},
                      None, "x"],
             "devices": [{"name": "m", "pci_address": "p", "vfs": 5}, {"name": "n", "pci_address": "q", "vfs": [1, 2]},
                         {"name": "v", "pci_address": "r", "is_vf": True}, "x", None],
             "gpu_nic_affinity": {"0000:1b:00.0": {"m": 3, "n": None, "v": "PIX"}, "b": ["PIX"]},
             "modules": "nvidia_peermem", "drivers": {"gpudirect": "x"}, "netns_mode": 5}
    summary = _audit._host_summary(facts)  # pylint: disable=protected-access
    assert (summary["gpus"], summary["rdma_devices"], summary["vfs"], summary["netns_mode"], summary["gpudirect"]) == (
        2, 2, 2, None, None)
    rows = [line.split() for line in summary["topo_matrix"].splitlines()[1:3]]
    assert rows == [["GPU0", "3", "?", "7", "x"], ["GPU1", "?", "?", "N/A", "N/A"]]
    assert _audit.node_labels("ok", summary) == {"rdma.k8s-node.io/audit": "ok", "rdma.k8s-node.io/netns-mode": "unknown",
                                                 "rdma.k8s-node.io/gpudirect": "none"}
    facts["modules"] = ["nvidia_peermem"]
    facts["drivers"] = [1]
    assert _audit._host_summary(facts)["gpudirect"] == "peermem"  # pylint: disable=protected-access


@pytest.mark.parametrize("value", (None, "", "x", 5, True, [], {}, [None], ["x"], {"a": 1}, [{"pci_address": ["u"]}],
                                   [{"pci_address": "a", "name": ["u"]}], {"a": ["PIX"]}, {"a": {"m": {"x": 1}}}))
def test_the_matrix_raises_on_nothing(value):
    """``_summary.topo_matrix`` of any value as GPUs, devices or affinity matrix: text (the filter checks its input
    first; the audit's summary calls it directly)."""
    gpus, devices, affinity = [{"pci_address": "a"}], [{"name": "m", "pci_address": "p"}], {"a": {"m": "PIX"}}
    for args in ((value, devices, affinity), (gpus, value, affinity), (gpus, devices, value)):
        assert "Legend:" in topo_matrix(*args, include_vfs=True)


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
