# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sriov room's judgement: ``sriov.config`` is the planners of sriov_vfs and ib_vf_guids run on rdma_facts'
``layers.sriov`` (ok, drift with the plan's actions as evidence, fail where a module refuses, unknown where the facts
lack what a plan reads); the checks moved from ``_audit`` are judged as before, also on facts of an older collection;
and, on simulated nodes, the audit's evidence equals the modules' check-mode plans."""

from __future__ import absolute_import, annotations, division, print_function

import copy
import json
import pathlib

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import judge as _judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.module_utils.layers.hostile import DROP, mutated

REPO = pathlib.Path(__file__).resolve().parents[5]
BDF = "0000:18:00.0"
PF_PATH = "/sys/devices/pci0000:17/0000:17:00.0/" + BDF


def _vf(index, node=None, port=None, rdma=True):
    return {"index": index, "pci_address": "0000:18:00.%d" % (index + 2), "driver": "mlx5_core",
            "netdevs": ["ens1f0v%d" % index], "rdma_device": "mlx5_%d" % (index + 2) if rdma else None,
            "node_guid": node, "port_guid": port, "path": "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.%d" % (index + 2)}


def _entry(link_layer="Ethernet", numvfs=0, totalvfs=8, admin=None, in_use=None, eswitch="legacy", vfs=None,
           admin_error=None, guids=None):
    netdev = "ibp24s0" if link_layer == "InfiniBand" else "ens1f0"
    return {"pf": {"pci_address": BDF, "path": PF_PATH, "netdev": netdev, "rdma_device": "mlx5_0",
                   "link_layer": link_layer},
            "netdevs": [netdev], "rdma_devices": ["mlx5_0"], "eswitch_mode": eswitch,
            "state": {"numvfs": numvfs, "totalvfs": totalvfs, "vfs": [_vf(i) for i in range(numvfs)] if vfs is None else vfs},
            "in_use": _observe.pairs(in_use or {}), "admin": _observe.pairs(admin or {}), "admin_error": admin_error,
            "guids": guids}


def _section(entry, operator=None, pool=None, links=()):
    """A ``layers.sriov`` section around one PF entry, through JSON as rdma_facts returns it."""
    section = {"pfs": [_observe._report(entry)], "persisted": None,  # pylint: disable=protected-access
               "observed": {"pfs": {BDF: entry}, "operator": operator, "links": [list(link) for link in links],
                            "pool_file": pool}, "problems": []}
    return json.loads(json.dumps(section))


def _config(section, spec, **desired):
    checks = _judge.judge(section, dict(desired, sriov_pfs=[spec]))
    [config] = [check for check in checks if check["id"] == "sriov.config"]
    return config


def _vfs_params(**kw):
    params = {"netdev": "ens1f0", "rdma_device": None, "pci_address": None, "num_vfs": 2, "allow_vf_reset": False,
              "vf_defaults": None, "vfs": None, "firmware_check": "auto", "timeout": 120, "host_root": "/"}
    params.update(kw)
    return params


def test_role_defaults_are_the_roles():
    defaults = yaml.safe_load((REPO / "roles/sriov/defaults/main.yml").read_text(encoding="utf-8"))
    assert dict((key, defaults[key]) for key in _judge.ROLE_DEFAULTS) == _judge.ROLE_DEFAULTS
    layer = _registry.by_name("sriov")
    assert set(_judge.ROLE_DEFAULTS) | {"sriov_pfs"} == set(layer.variables)
    assert layer.judge is _judge.judge and layer.inventory_judge is _judge.inventory_judge
    assert layer.legacy_section is _judge.section_of and layer.observe is _observe.facts and layer.runs_tools


def test_config_drift_is_the_planners_actions_and_converged_is_ok():
    spec = {"netdev": "ens1f0", "num_vfs": 2, "vf_defaults": {"trust": True}}
    entry = _entry()
    config = _config(_section(entry), spec)
    vf_defaults = {"trust": True, "link_state": None, "spoofchk": None, "vlan": None, "qos": None, "mac": None}
    planned = _plan.plan_vfs(_vfs_params(vf_defaults=vf_defaults),
                             dict(entry, pf=dict(entry["pf"], selected_by="netdev"), firmware=None, in_use={}, admin={}))
    assert config["status"] == "drift" and config["detail"] == "planned: %s" % planned["actions"]
    assert [a["action"] for a in planned["actions"]] == ["write", "wait_for_vfs", "set_vf", "set_vf"]
    assert config["desired"] == {"num_vfs": 2} and config["live"] == {"num_vfs": 0} and "sriov role" in config["remedy"]
    done = _entry(numvfs=2, admin=dict((i, {"trust": True}) for i in range(2)))
    assert _config(_section(done), spec)["status"] == "ok"
    # the spec may name the PF by any of its names
    for other in ({"rdma_device": "mlx5_0"}, {"pci_address": "18:00.0"}):
        assert _config(_section(done), dict(other, num_vfs=2, vf_defaults={"trust": True}))["status"] == "ok"


def test_config_fails_where_the_module_refuses():
    spec = {"netdev": "ens1f0", "num_vfs": 4}
    used = {0: "its netdev is not in the host network namespace"}
    refused = _config(_section(_entry(numvfs=2, in_use=used)), spec)
    assert refused["status"] == "fail" and "VF 0 (its netdev is not in the host network namespace)" in refused["detail"]
    # the role's sriov_allow_vf_reset reaches sriov_vfs: the plan then re-creates the VFs
    allowed = _config(_section(_entry(numvfs=2, in_use=used)), spec, sriov_allow_vf_reset=True)
    assert allowed["status"] == "drift" and "'value': '0'" in allowed["detail"]
    switchdev = _config(_section(_entry(eswitch="switchdev")), spec)
    assert switchdev["status"] == "fail" and "switchdev" in switchdev["detail"]
    too_many = _config(_section(_entry()), dict(spec, num_vfs=9), sriov_firmware_check="never")
    assert too_many["status"] == "fail" and "sriov_totalvfs" in too_many["detail"]
    missing = _config(_section(_entry()), {"netdev": "ens9", "num_vfs": 1})
    assert missing["status"] == "fail" and "ens9" in missing["detail"]


def test_config_fails_on_what_the_role_or_the_argument_spec_refuses():
    section = _section(_entry())
    for spec, words in (({"netdev": "ens1f0", "pci_address": BDF, "num_vfs": 1}, "exactly one of"),
                        ({"netdev": "ens1f0", "num_vfs": -1}, "num_vfs"),
                        ({"netdev": "ens1f0", "num_vfs": 1, "guid_scheme": "random"}, "guid_scheme"),
                        ({"netdev": "ens1f0", "num_vfs": 1, "vf_defaults": {"trust": "maybe"}}, "trust"),
                        ("ens1f0", "not a mapping")):
        config = _config(section, spec)
        assert config["status"] == "fail" and words in config["detail"], (spec, config)
    config = _config(section, {"netdev": "ens1f0", "num_vfs": 1}, sriov_firmware_check="sometimes")
    assert config["status"] == "fail" and "sriov_" in config["detail"] and "firmware_check" in config["detail"]


def test_config_is_unknown_where_the_facts_lack_what_the_plan_reads():
    # more VFs than the kernel shows: sriov_vfs asks the firmware, which rdma_facts does not query
    config = _config(_section(_entry(totalvfs=8)), {"netdev": "ens1f0", "num_vfs": 16})
    assert config["status"] == "unknown" and "mstconfig" in config["detail"] and "does not run" in config["detail"]
    # firmware_check=always asks it even then
    config = _config(_section(_entry()), {"netdev": "ens1f0", "num_vfs": 2}, sriov_firmware_check="always")
    assert config["status"] == "unknown" and "firmware" in config["detail"]
    # ip link show of the PF failed: its VF attributes are not known
    config = _config(_section(_entry(numvfs=2, admin_error="ip -j link show ens1f0 failed (rc=1): boom")),
                     {"netdev": "ens1f0", "num_vfs": 2})
    assert config["status"] == "unknown" and "boom" in config["detail"]
    # a PCI address the facts do not hold (a function without netdev or RDMA device)
    config = _config(_section(_entry()), {"pci_address": "0000:99:00.0", "num_vfs": 1})
    assert config["status"] == "unknown" and "0000:99:00.0" in config["detail"]
    # rdma_facts without node tools
    section = _section(_entry())
    section["observed"] = None
    assert _config(section, {"netdev": "ens1f0", "num_vfs": 1})["status"] == "unknown"
    # a PF that could not be read
    section = _section(_entry())
    section["observed"]["pfs"][BDF] = {"error": "EIO"}
    config = _config(section, {"pci_address": BDF, "num_vfs": 1})
    assert config["status"] == "unknown" and "EIO" in config["detail"]


def _ib_entry(numvfs=2, admin_guids=None, vf_guids=None, via="netlink"):
    vfs = [_vf(i, *(vf_guids or {}).get(i, (0x0200000000000000 + i, 0x0200000000000000 + i))) for i in range(numvfs)]
    guids = {"pf_guid": 0x0c42a10300aabb00, "via": via,
             "admin": _observe.pairs(admin_guids or {}), "taken": [], "other_ib_pfs": [],
             "driver": "mlx5_core", "autoprobe": True}
    return _entry("InfiniBand", numvfs=numvfs, vfs=vfs, guids=guids)


def _ib_desired(entry):
    """The GUIDs ib_vf_guids' pf_guid scheme gives the entry's VFs: the admin and live GUIDs of a converged PF."""
    guids = entry["guids"]
    planned = _plan.plan_guids(
        {"netdev": None, "rdma_device": None, "pci_address": BDF, "scheme": "pf_guid", "guid_prefix": "02", "guids": None,
         "pool_file": _observe.POOL_FILE, "export_pool_file": None, "exclude_guids": None, "backup": False,
         "allow_vf_reset": False, "timeout": 60, "host_root": "/"},
        dict(pf=dict(entry["pf"], selected_by="pci_address"), operator={"present": False, "running": False},
             pf_guid=guids["pf_guid"], state=entry["state"], links=None, pool_text=None, via=guids["via"],
             admin={}, taken={}, in_use={}, driver="mlx5_core", autoprobe=True, pool_file=None))
    return planned["desired"]


NO_OPERATOR = {"present": False, "mode": None, "running": False, "evidence": []}
NO_POOL = {"path": _observe.POOL_FILE, "text": None,
           "state": {"path": _observe.POOL_FILE, "exists": False, "content": None, "mode": None, "uid": None, "gid": None,
                     "link": None}}


def test_ib_config_plans_the_guids_and_is_ok_when_they_are_set():
    entry = _ib_entry()
    want = _ib_desired(entry)
    spec = {"netdev": "ibp24s0", "num_vfs": 2}
    section = _section(entry, NO_OPERATOR, NO_POOL)
    config = _config(section, spec)
    assert config["status"] == "drift" and "set_guid" in config["detail"] and "rebind" in config["detail"]
    done = _ib_entry(admin_guids=dict((i, {"admin_node": g, "admin_port": g}) for i, g in enumerate(want)),
                     vf_guids=dict((i, (g, g)) for i, g in enumerate(want)))
    section = _section(done, NO_OPERATOR, NO_POOL)
    assert _config(section, spec)["status"] == "ok"
    # exporting to a pool file the facts did not read: unknown
    config = _config(section, spec, sriov_export_operator_pool=True, sriov_guid_pool_file="/etc/other/guids")
    assert config["status"] == "unknown" and "/etc/other/guids" in config["detail"]
    # the VF GUIDs could not be read
    broken = copy.deepcopy(done)
    broken["guids"] = {"error": "ip -j link show failed (rc=1): boom"}
    config = _config(_section(broken, NO_OPERATOR, NO_POOL), spec)
    assert config["status"] == "unknown" and "boom" in config["detail"]


def test_ib_config_rebinding_vfs_in_use_follows_sriov_allow_vf_reset():
    """The role's planning call of ib_vf_guids passes sriov_allow_vf_reset as its applying call does: a GUID change
    that must re-bind a VF in use fails without it and is planned work with it (before, the planning call passed
    none, and the role failed even with sriov_allow_vf_reset: true)."""
    entry = _ib_entry()
    entry["in_use"] = _observe.pairs({0: "in netns pod-a"})
    section = _section(entry, NO_OPERATOR, NO_POOL)
    spec = {"netdev": "ibp24s0", "num_vfs": 2}
    refused = _config(section, spec)
    assert refused["status"] == "fail" and "VFs in use" in refused["detail"] and "VF 0" in refused["detail"]
    allowed = _config(section, spec, sriov_allow_vf_reset=True)
    assert allowed["status"] == "drift" and "rebind" in allowed["detail"] and "set_guid" in allowed["detail"]


def test_role_plans_the_guids_with_the_reset_it_applies_them_with():
    """roles/sriov: the ib_vf_guids planning call (check mode) and the applying call pass the same allow_vf_reset."""
    tasks = yaml.safe_load((REPO / "roles/sriov/tasks/main.yml").read_text(encoding="utf-8"))
    calls = [task["rdma.k8s_node.ib_vf_guids"] for task in tasks if "rdma.k8s_node.ib_vf_guids" in task]
    assert len(calls) == 2 and set(call.get("allow_vf_reset") for call in calls) == {"{{ sriov_allow_vf_reset }}"}


def test_facts_of_an_older_collection_are_judged_as_before_without_sriov_config():
    facts = {"devices": [
        {"name": "mlx5_0", "pci_address": BDF, "is_vf": False, "netdevs": ["ibp24s0"],
         "ports": [{"link_layer": "InfiniBand"}], "sriov": {"totalvfs": 8, "numvfs": 2},
         "vfs": [{"index": 0, "node_guid": "0000:0000:0000:0000", "port_guid": "0000:0000:0000:0000"},
                 {"index": 1, "node_guid": "0200:0000:0000:0001", "port_guid": "0200:0000:0000:0001"}]},
        {"name": "mlx5_2", "pci_address": "0000:18:00.2", "is_vf": True}],
        "persisted": {"sriov": {"pfs": [{"netdev": "ibp24s0", "num_vfs": 2}], "guid_pfs": [BDF]}}}
    desired = {"sriov_pfs": [{"netdev": "ibp24s0", "num_vfs": 2}]}
    checks = _audit.audit_host(facts, desired, layers=["sriov"])
    by_id = dict((check["id"], check) for check in checks)
    assert sorted(by_id) == ["sriov.num_vfs", "sriov.vf_guids"]
    assert by_id["sriov.num_vfs"]["status"] == "ok" and by_id["sriov.num_vfs"]["persisted"] == 2
    assert by_id["sriov.vf_guids"]["status"] == "drift" and by_id["sriov.vf_guids"]["live"] == {"zero": [0]}
    assert by_id["sriov.vf_guids"]["layer"] == "sriov"
    # the room's section, when there is one, is what is judged
    section = _section(_entry(numvfs=0))
    facts_new = dict(facts, layers={"sriov": section})
    checks = _audit.audit_host(facts_new, {"sriov_pfs": [{"netdev": "ens1f0", "num_vfs": 0}]}, layers=["sriov"])
    assert sorted((c["id"], c["status"]) for c in checks) == [("sriov.config", "ok"), ("sriov.num_vfs", "drift")]


def test_guid_inventory_from_the_rooms_sections_and_older_facts():
    one = _section(_ib_entry())
    other = copy.deepcopy(one)
    ethernet = _section(_entry(numvfs=2))
    found = _judge.inventory_judge({"a": one, "b": other, "c": ethernet, "d": None})
    assert found["a"][0]["status"] == "fail" and found["a"][0]["live"]["also_on"] == ["b"]
    assert sorted(found) == ["a", "b"]
    unique = _section(_ib_entry(vf_guids={0: (7, 7), 1: (8, 8)}))
    assert _judge.inventory_judge({"a": one, "b": unique})["b"][0]["status"] == "ok"
    # through the audit, one host with facts of an older collection (devices only)
    legacy = {"devices": [{"name": "mlx5_0", "pci_address": BDF, "is_vf": False, "netdevs": ["ibp24s0"],
                           "ports": [{"link_layer": "InfiniBand"}], "sriov": {"totalvfs": 8, "numvfs": 2},
                           "vfs": [dict(vf, index=i) for i, vf in enumerate(one["pfs"][0]["vfs"])]}]}
    report = _audit.audit({"a": {"facts": {"layers": {"sriov": one}}, "desired": None, "layers": ["sriov"]},
                           "b": {"facts": legacy, "desired": None, "layers": ["sriov"]}})
    for host in ("a", "b"):
        [inv] = [c for c in report["hosts"][host]["checks"] if c["id"] == "sriov.guid_inventory"]
        assert inv["status"] == "fail" and inv["layer"] == "sriov", host


def test_docs_list_sriov_config():
    text = (REPO / "docs/audit.md").read_text(encoding="utf-8")
    assert "| `sriov.config[pf]` | sriov |" in text
    assert "sriov.config" in (REPO / "docs/sriov.md").read_text(encoding="utf-8")


# -- simulated nodes: the audit's evidence is the modules' check-mode plan ------------------------------------------
def _one_pf_desired(facts, link_layer):
    capable = [d for d in facts["devices"] if not d.get("is_vf") and (d.get("sriov") or {}).get("totalvfs")
               and all(p.get("link_layer") == link_layer for p in d.get("ports") or [])]
    if not capable:
        return None
    spec = {"pci_address": capable[0]["pci_address"], "num_vfs": 2}
    if link_layer == "Ethernet":
        spec["vf_defaults"] = {"trust": True, "spoofchk": False}
    return {"rdma_netns_mode": "exclusive", "rdma_sysctl_host": {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2},
            "rdma_sysctl_per_interface": {}, "sriov_pfs": [spec]}


def _perturb(node, facts, desired, how):
    spec = desired["sriov_pfs"][0]
    [device] = [d for d in facts["devices"] if d.get("pci_address") == spec["pci_address"] and not d.get("is_vf")]
    netdev = [n for n in device["netdevs"] if "." not in n][0]
    if how == "numvfs":
        (node.root / "sys/bus/pci/devices" / spec["pci_address"] / "sriov_numvfs").write_text("0\n", encoding="utf-8")
    elif how == "attr":
        node.call({"cmd": "ip_link_set_vf", "dev": netdev, "vf": 1, "trust": False})
    else:  # a zero GUID set behind the collection's back (VF 0's admin GUIDs, ip link set <pf> vf 0 node_guid ...)
        node.call({"cmd": "ip_link_set_vf", "dev": netdev, "vf": 0, "node_guid": 0, "port_guid": 0})


@pytest.mark.parametrize("archetype, link_layer, how", [
    ("roce-cx6dx", "Ethernet", "numvfs"), ("roce-cx6dx", "Ethernet", "attr"),
    ("dgx-h100", "InfiniBand", "numvfs"), ("dgx-h100", "InfiniBand", "guid"),
])
def test_simulated_node_evidence_is_the_modules_check_mode_plan(archetype, link_layer, how):
    safety = pytest.importorskip("unit.safety.test_converge_audit")
    with pytest.MonkeyPatch.context() as mp:
        import tempfile  # pylint: disable=import-outside-toplevel
        from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
        with tempfile.TemporaryDirectory() as tmp:
            safety.record_sysctl(mp, tmp)
            with sim_node(archetype, pathlib.Path(tmp), mp) as node:
                facts = safety.facts_of(mp, node)
                desired = _one_pf_desired(facts, link_layer)
                if desired is None:
                    pytest.skip("no SR-IOV PF of link layer %s on %s" % (link_layer, archetype))
                made = safety.converge(mp, node, desired)
                # converged: every sriov check ok, sriov.config among them, and the section is plain JSON
                gathered = safety.facts_of(mp, node)
                section = gathered["layers"]["sriov"]
                assert json.loads(json.dumps(section)) == section and section["observed"] is not None
                checks = _audit.audit_host(gathered, dict(safety.DEFAULTS, **desired), layers=["sriov"])
                statuses = dict((check["id"], check["status"]) for check in checks)
                assert statuses["sriov.config"] == "ok" and set(statuses.values()) == {"ok"}, checks
                assert safety.audit(mp, node, desired) == dict((layer, []) for layer in safety.LAYERS + ("facts",))

                _perturb(node, facts, desired, how)
                found = safety.audit(mp, node, desired)
                assert sorted(name for name, bad in found.items() if bad) == ["sriov"], found
                [config] = [check for check in found["sriov"] if check["id"] == "sriov.config"]
                actions = safety.planned_actions(mp, made, "sriov")
                assert actions and config["status"] == "drift" and config["detail"] == "planned: %s" % actions, \
                    (config, actions)


def test_a_pf_the_facts_could_not_read_is_unknown_whatever_names_it():
    """An sriov_pfs entry naming a PF by netdev or RDMA device, on facts where a PF could not be read: unknown (that
    PF may be the one), not the 'no such PF' fail (review of session 14)."""
    section = _section(_entry(numvfs=2))
    section["observed"]["pfs"][BDF] = {"error": "EIO reading sriov_numvfs"}
    section["pfs"] = []
    for spec in ({"netdev": "ens1f0", "num_vfs": 2}, {"rdma_device": "mlx5_0", "num_vfs": 2},
                 {"pci_address": BDF, "num_vfs": 2}):
        checks = dict((c["id"], c) for c in _judge.judge(section, {"sriov_pfs": [spec]}))
        assert checks["sriov.config"]["status"] == "unknown" and "EIO" in checks["sriov.config"]["detail"], spec
        assert checks["sriov.num_vfs"]["status"] == "unknown" and "EIO" in checks["sriov.num_vfs"]["detail"], spec
    # with every PF read, a name that is none of them is still the module's refusal
    checks = dict((c["id"], c) for c in _judge.judge(_section(_entry(numvfs=2)), {"sriov_pfs": [
        {"netdev": "ens9", "num_vfs": 2}]}))
    assert checks["sriov.config"]["status"] == "fail" and checks["sriov.num_vfs"]["status"] == "fail"


_HOSTILE_FACTS = [
    (("observed", "pfs"), []), (("observed", "pfs", BDF, "state"), DROP), (("observed", "pfs", BDF, "netdevs"), None),
    (("observed",), "x"), (("observed", "pfs", BDF, "state", "totalvfs"), "8"),
    (("observed", "pfs", BDF, "in_use"), {"0": "x"}), (("observed", "pool_file"), None),
    (("observed", "operator"), None), (("observed", "pfs", BDF, "guids"), []), (("pfs", 0, "numvfs"), "2"),
    (("pfs",), [None]), (("persisted",), {"pfs": "x"}), (("pfs", 0, "vfs"), "x"),
]


@pytest.mark.parametrize("path,value", _HOSTILE_FACTS)
@pytest.mark.parametrize("ib", (False, True))
def test_facts_of_another_shape_never_raise(path, value, ib):
    """Facts of another shape (a bug, a hostile node) give that host unknown checks, never an exception that stops
    the audit of every host (the report action turns one into a failure of the whole report)."""
    base = _section(_ib_entry(), NO_OPERATOR, NO_POOL) if ib else _section(_entry(numvfs=2))
    spec = {"netdev": "ibp24s0" if ib else "ens1f0", "num_vfs": 2, "vf_defaults": {"trust": True}}
    try:
        section = mutated(base, path, value)
    except (KeyError, IndexError, TypeError):
        pytest.skip("the path does not exist in this section")
    checks = _judge.judge(section, {"sriov_pfs": [spec], "sriov_export_operator_pool": True})
    assert checks and all(c["status"] in ("ok", "drift", "unknown", "fail") for c in checks)


@pytest.mark.parametrize("specs", ("abc", {"netdev": "x"}, 5))
def test_sriov_pfs_that_is_not_a_list_is_one_fail(specs):
    checks = _judge.judge(_section(_entry(numvfs=2)), {"sriov_pfs": specs})
    assert [(c["id"], c["status"]) for c in checks] == [("sriov.config", "fail")]
    assert "must be a list" in checks[0]["detail"]


@pytest.mark.parametrize("spec", (dict(netdev="ens1f0", num_vfs="2", vf_defaults={"trust": True}),
                                  dict(netdev="ens1f0", num_vfs=2, vf_defaults=["trust"])))
def test_entries_the_role_refuses_do_not_raise(spec):
    checks = dict((c["id"], c) for c in _judge.judge(_section(_entry(numvfs=2)), {"sriov_pfs": [spec]}))
    assert checks["sriov.config"]["status"] == "fail"


def _pod_section(admin):
    """An InfiniBand PF with VF 0 visible on the host and VF 1 bound but its RDMA device in a pod's network namespace
    (exclusive mode: the host's sysfs does not list it), with the PF driver's admin GUIDs ``admin``."""
    visible = {"index": 0, "pci_address": "0000:18:00.1", "driver": "mlx5_core", "name": "mlx5_10",
               "node_guid": "0200:0000:0000:0001", "port_guid": "0200:0000:0000:0101"}
    in_pod = {"index": 1, "pci_address": "0000:18:00.2", "driver": "mlx5_core", "name": None,
              "node_guid": None, "port_guid": None}
    pf = {"name": "mlx5_0", "pci_address": BDF, "link_layer": "InfiniBand", "vfs": [visible, in_pod]}
    return {"pfs": [pf], "observed": {"pfs": {BDF: {"guids": {"admin": _observe.pairs(admin)}}}}}


def test_vf_guids_of_a_vf_whose_rdma_device_is_in_a_pod_are_its_admin_guids():
    """Regression (issue 17, VFs in pods): in exclusive mode the RDMA CNI moves a VF's RDMA device into the pod, the
    host's sysfs no longer lists it, and ``sriov.vf_guids`` was ``unknown`` ("VFs not bound to mlx5_core") on a
    converged node.  A bound VF with no visible RDMA device is judged on the GUIDs its PF's driver holds for it."""
    admin = {0: {"admin_node": 0x0200000000000001, "admin_port": 0x0200000000000101},
             1: {"admin_node": 0x0200000000000002, "admin_port": 0x0200000000000102}}
    [guids] = _judge.guid_checks(_pod_section(admin))
    assert guids["status"] == "ok" and guids["live"] == {"vfs": 2, "in_pods": [1]}, guids
    # its admin GUIDs zero: drift, as for a visible VF; the same GUID as another VF: fail
    [guids] = _judge.guid_checks(_pod_section({**admin, 1: {"admin_node": 0, "admin_port": 0}}))
    assert guids["status"] == "drift" and guids["live"] == {"zero": [1]}, guids
    [guids] = _judge.guid_checks(_pod_section({**admin, 1: dict(admin[0])}))
    assert guids["status"] == "fail", guids
    # no admin GUIDs in the facts (an older collection, no node tools) or a VF with no driver: unknown, as before
    [guids] = _judge.guid_checks(dict(_pod_section(admin), observed=None))
    assert guids["status"] == "unknown" and guids["live"] == {"unbound": [1]}, guids
    section = _pod_section(admin)
    section["pfs"][0]["vfs"][1]["driver"] = None
    [guids] = _judge.guid_checks(section)
    assert guids["status"] == "unknown", guids
