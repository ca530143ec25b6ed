"""The sysctl layer (one room): the pure planner, the judge (the planner run on the facts), the observer rdma_facts and
the module share, and the judgement of facts gathered before the room existed (``section_of``)."""

import json
import shutil

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import judge, observe, plan, rules, settings

hwsim = pytest.importorskip("hwsim")

CONF = observe.CONF_FILE
LATER = "/etc/sysctl.d/99-zz-site.conf"
SETTINGS = rules.validate({"net.ipv4.conf.all.arp_ignore": 1, "net.ipv4.conf.all.rp_filter": 2,
                           "net.ipv4.conf.ib0.arp_ignore": 2, "net.ipv4.conf.ib0.rp_filter": 0})


def files_of(*items):
    """:func:`observe.read_files`' shape from ``(path, text)`` pairs in reading order."""
    return {"files": [{"path": path, "link": None, "entries": [list(e) for e in rules.parse_file(text)]}
                      for path, text in items], "conf": None}


def observed(live=None, conf=None, others=(), all_live=None):
    """:func:`observe.observe`'s shape; ``conf`` is our file's text (None: absent)."""
    state = FileState(CONF, True, conf, 0o644, 0, 0) if conf is not None else FileState(CONF)
    values = dict((key, "0") for key in SETTINGS)
    values.update(live or {})
    items = ([(CONF, conf)] if conf is not None else []) + list(others)
    return {"live": values, "all": dict(all_live or {}), "file": state, "files": files_of(*sorted(items))}


# -- the planner ------------------------------------------------------------------------------------------------------
def test_plan_writes_the_file_then_the_live_values_that_differ():
    planned = plan.plan(SETTINGS, observed({"net.ipv4.conf.ib0.rp_filter": "0"}), CONF)
    assert planned["actions"] == [
        {"action": "create_file", "target": CONF, "mode": "0644"},
        {"action": "set_live", "target": "net.ipv4.conf.all.arp_ignore", "before": "0", "after": "1"},
        {"action": "set_live", "target": "net.ipv4.conf.all.rp_filter", "before": "0", "after": "2"},
        {"action": "set_live", "target": "net.ipv4.conf.ib0.arp_ignore", "before": "0", "after": "2"}]
    assert planned["to_set"] == [("net.ipv4.conf.all.arp_ignore", "1"), ("net.ipv4.conf.all.rp_filter", "2"),
                                 ("net.ipv4.conf.ib0.arp_ignore", "2")]
    assert planned["effective"] == {"ib0": {"arp_ignore": 2, "rp_filter": 2}}  # max(all, ib0)
    assert planned["file"].content == rules.render(SETTINGS)


def test_plan_of_a_converged_node_is_empty_and_live_false_plans_no_live_write():
    live = dict(SETTINGS)
    done = plan.plan(SETTINGS, observed(live, rules.render(SETTINGS)), CONF)
    assert (done["actions"], done["to_set"], done["overrides"]) == ([], [], [])
    planned = plan.plan(SETTINGS, observed({"net.ipv4.conf.all.arp_ignore": "8"}, rules.render(SETTINGS)), CONF,
                        live=False)
    assert planned["actions"] == [] and planned["to_set"] == []


def test_plan_skips_missing_keys_and_reports_overrides_with_links():
    planned = plan.plan(SETTINGS, observed({"net.ipv4.conf.ib0.arp_ignore": None}), CONF)
    assert planned["missing"] == ["net.ipv4.conf.ib0.arp_ignore"]
    assert "net.ipv4.conf.ib0.arp_ignore" not in [a["target"] for a in planned["actions"]]
    seen = observed(others=[(LATER, "net.ipv4.conf.all.rp_filter = 1\n")])
    seen["files"]["files"][-1]["link"] = "../sysctl.conf"
    planned = plan.plan(SETTINGS, seen, CONF)
    assert [(o["key"], o["value"], o["reader"], o.get("link")) for o in planned["overrides"]] == [
        ("net.ipv4.conf.all.rp_filter", "1", rules.BOOT_READER, "../sysctl.conf")]
    assert planned["boot_overrides"] == planned["overrides"]


def test_effective_uses_the_live_all_value_the_settings_leave_alone():
    only_if = rules.validate({"net.ipv4.conf.ib0.rp_filter": 0})
    assert observe.needed_all(only_if) == list(rules.MAX_RULE)
    assert observe.needed_all(rules.validate({"net.ipv4.conf.all.rp_filter": 1})) == []
    assert plan.effective_after(only_if, {"rp_filter": "1"}) == {"ib0": {"rp_filter": 1}}


def test_role_settings_are_the_filters():
    assert list(settings.role_settings([], {"rp_filter": 2}, {"arp_ignore": 2}, ["ib0", "eth0.100"])) == [
        "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter", "net.ipv4.conf.ib0.arp_ignore",
        "net/ipv4/conf/eth0.100/arp_ignore"]
    with pytest.raises(InputError, match="not an RDMA interface"):
        settings.role_settings(["lo"], {}, {}, [])


# -- the judge --------------------------------------------------------------------------------------------------------
def section(live, ours=None, others=(), netdevs=("ib0",)):
    """A ``layers.sysctl`` section as :func:`observe.facts` returns it; ``ours`` is our file's text."""
    items = sorted(([(CONF, ours)] if ours is not None else []) + list(others))
    return json.loads(json.dumps({
        "netdevs": list(netdevs), "live": live, "files": files_of(*items),
        "ours": {CONF: {"content": ours, "mode": 0o644, "uid": 0, "gid": 0}} if ours is not None else {},
        "problems": []}))


def desired(**more):
    return dict({"rdma_sysctl_host": {"arp_ignore": 1, "rp_filter": 2}, "rdma_sysctl_per_interface": {"arp_ignore": 2},
                 "rdma_sysctl_interfaces": [], "rdma_sysctl_file": CONF}, **more)


LIVE = {"all": {"arp_ignore": "1", "arp_announce": "0", "rp_filter": "2"},
        "default": {"arp_ignore": "1", "arp_announce": "0", "rp_filter": "2"},
        "ib0": {"arp_ignore": "2", "arp_announce": "0", "rp_filter": "0"}}


def ours_text(want=None):
    return rules.render(judge.settings_of(want or desired(), ["ib0"])[0])


def by_id(checks):
    return dict(((c["id"], c.get("subject")), c) for c in checks)


def test_judge_converged_is_ok():
    checks = judge.judge(section(LIVE, ours_text()), desired())
    assert sorted((c["id"], c["status"]) for c in checks) == [("sysctl.arp", "ok")] * 3 + [("sysctl.dropin", "ok")]


def test_judge_drift_evidence_is_the_plan():
    live = json.loads(json.dumps(LIVE))
    live["all"]["rp_filter"] = "1"
    sect = section(live, ours_text())
    checks = by_id(judge.judge(sect, desired()))
    wanted, dummy = judge.settings_of(desired(), ["ib0"])
    planned = plan.plan(wanted, judge.observed_of(sect, CONF, wanted), CONF)
    assert planned["actions"] == [{"action": "set_live", "target": "net.ipv4.conf.all.rp_filter", "before": "1",
                                   "after": "2"}]
    assert checks[("sysctl.dropin", CONF)]["detail"] == "planned: %s" % planned["actions"]
    assert checks[("sysctl.arp", "all")]["status"] == "drift" and checks[("sysctl.arp", "ib0")]["status"] == "ok"
    # with rdma_sysctl_live false the role writes no live value: the file is right, the plan is empty; given as
    # `-e rdma_sysctl_live=false` it is a string, which the module's argument spec takes as False too
    for off in (False, "false", "no", "0"):
        assert by_id(judge.judge(sect, desired(rdma_sysctl_live=off)))[("sysctl.dropin", CONF)]["status"] == "ok", off
    assert by_id(judge.judge(sect, desired(rdma_sysctl_live="yes")))[("sysctl.dropin", CONF)]["status"] == "drift"


def test_judge_a_file_the_module_did_not_write_is_rewritten():
    """Our path holding another tool's text (no header: not in ``ours``) is an update, as the module plans it."""
    sect = section(LIVE, others=[(CONF, "net.ipv4.conf.all.arp_ignore = 1\n")])
    check = by_id(judge.judge(sect, desired()))[("sysctl.dropin", CONF)]
    assert check["detail"] == "planned: [{'action': 'update_file', 'target': '%s', 'mode': '0644'}]" % CONF
    # and a missing one is created
    check = by_id(judge.judge(section(LIVE), desired()))[("sysctl.dropin", CONF)]
    assert check["detail"].startswith("planned: [{'action': 'create_file'")


def test_judge_overrides_unknown_and_host_arp_ignore():
    sect = section(LIVE, ours_text(), others=[(LATER, "net.ipv4.conf.all.rp_filter = 1\n")])
    checks = by_id(judge.judge(sect, desired()))
    assert checks[("sysctl.override", "net.ipv4.conf.all.rp_filter")]["status"] == "fail"
    assert checks[("sysctl.arp", "all")]["persisted"] == {"arp_ignore": 1, "rp_filter": 1}
    # an interface the facts did not read: the plan cannot be made
    checks = by_id(judge.judge(section(LIVE, ours_text()), desired(rdma_sysctl_interfaces=["bond0"])))
    assert checks[("sysctl.dropin", CONF)]["status"] == "unknown" and checks[("sysctl.arp", "bond0")]["status"] == "unknown"
    checks = by_id(judge.judge(section(LIVE, ours_text()), desired(rdma_sysctl_interfaces=["lo"])))
    assert checks[("sysctl.override", None)]["status"] == "unknown"
    live = json.loads(json.dumps(LIVE))
    live["all"]["arp_ignore"] = "2"
    assert [c["id"] for c in judge.judge(section(live), None)] == ["sysctl.host_arp_ignore"]


def test_registry_entry_is_a_room():
    layer = _registry.by_name("sysctl")
    assert layer in _registry.rooms() and layer.judge is judge.judge and layer.legacy_section is judge.section_of
    assert "rdma_sysctl_live" in layer.variables


# -- the observer, on simulated nodes ----------------------------------------------------------------------------------
@pytest.fixture(scope="module", name="roots")
def fixture_roots(tmp_path_factory):
    return dict((name, hwsim.render(name, tmp_path_factory.mktemp(name))) for name in ("roce-cx6dx", "no-rdma"))


def provisioned(roots, name, tmp_path, want):
    root = tmp_path / name
    shutil.copytree(roots[name], root, symlinks=True)
    host = HostRoot(str(root))
    wanted, text = judge.settings_of(want, settings.rdma_netdevs(gather(host)))
    (root / "etc/sysctl.d").mkdir(parents=True, exist_ok=True)
    (root / CONF.lstrip("/")).write_text(text, encoding="utf-8")
    (root / LATER.lstrip("/")).write_text("# site\nnet.ipv4.conf.all.rp_filter = 1\n", encoding="utf-8")
    return host, wanted


@pytest.mark.parametrize("name", ["roce-cx6dx", "no-rdma"])
def test_the_module_and_the_facts_observe_alike(roots, tmp_path, name):
    """The judge's plan from ``layers.sysctl`` is the module's plan from its own observation of the node."""
    host, wanted = provisioned(roots, name, tmp_path, desired(rdma_sysctl_interfaces=[]))
    section_ = json.loads(json.dumps(observe.facts(host)))
    assert list(section_["ours"]) == [CONF] and section_["ours"][CONF]["mode"] == 0o644
    from_facts = plan.plan(wanted, judge.observed_of(section_, CONF, wanted), CONF)
    from_node = plan.plan(wanted, observe.observe(host, CONF, wanted), CONF)
    assert from_facts["actions"] == from_node["actions"] and from_facts["overrides"] == from_node["overrides"]
    assert from_node["overrides"][0]["file"] == LATER
    assert from_facts["actions"] == [a for a in from_facts["actions"] if a["action"] == "set_live"]  # the file is ours


@pytest.mark.parametrize("name", ["roce-cx6dx", "no-rdma"])
def test_room_and_older_facts_judge_alike(roots, tmp_path, name):
    """The room's section and the one ``section_of`` builds from rdma_facts' other keys give the same checks, but
    for ``sysctl.dropin``, which needs our file's content (older facts do not have it)."""
    host, dummy = provisioned(roots, name, tmp_path, desired())
    facts = gather(host)
    facts["persisted"] = persisted_facts(host, [n for n in facts["sysctl"] if n not in ("all", "default")])
    room = judge.judge(json.loads(json.dumps(observe.facts(host))), desired())
    older = judge.judge(judge.section_of(json.loads(json.dumps(facts))), desired())
    assert [c for c in room if c["id"] != "sysctl.dropin"] == older
    assert [c["id"] for c in room].count("sysctl.dropin") == 1


def test_components_are_kept_but_each_caller_gets_its_own_list():
    """rules.components is asked for the same keys for every interface of every host: kept per key string, a bad
    key refused every time, and a caller that changes its list changes nobody else's."""
    first = rules.components("net.ipv4.conf.ibp24s0.arp_ignore")
    first.append("tampered")
    assert rules.components("net.ipv4.conf.ibp24s0.arp_ignore") == ["net", "ipv4", "conf", "ibp24s0", "arp_ignore"]
    assert rules.components("net/ipv4/conf/eth0.100/rp_filter")[3] == "eth0.100"
    for bad in ("net..x", " net.ipv4", "-net.ipv4.ip_forward", "", None, 5, ["net"]):
        with pytest.raises(InputError, match="is not a sysctl key"):
            rules.components(bad)
        with pytest.raises(InputError, match="is not a sysctl key"):  # asked again: refused again, not kept
            rules.components(bad)
