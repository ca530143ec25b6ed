"""The netns layer (one room): the pure planner, the judge (the planner run on the facts), the observer rdma_facts and
the module share, and the judgement of facts gathered before the room existed (``section_of``)."""

import copy
import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import judge, mode, observe, plan

hwsim = pytest.importorskip("hwsim")

CONF = observe.CONF_FILE
LATER = "/etc/modprobe.d/zz-operator.conf"


def observed(live="shared", loaded=True, conf=None, others=(), cmdline=None, plugins=()):
    """:func:`observe.observe`'s shape; ``conf`` is our file's text (None: absent)."""
    state = FileState(CONF, True, conf, 0o644, 0, 0) if conf is not None else FileState(CONF)
    return {"ib_core_loaded": loaded, "live": live if loaded else None, "cmdline_value": cmdline,
            "cmdline": mode.mode_of(cmdline), "conf": state,
            "modprobe": [(path, plan._modprobe.directives(text)) for path, text in others],  # pylint: disable=protected-access
            "shared_device_plugin": list(plugins)}


# -- the planner ------------------------------------------------------------------------------------------------------
def test_plan_writes_the_file_and_switches_live():
    planned = plan.plan("exclusive", observed(), CONF)
    assert planned["actions"] == [{"action": "create_file", "target": CONF, "mode": "0644"},
                                  {"action": "run", "target": "rdma system set netns exclusive"}]
    assert planned["live_decision"] == "switch" and planned["reboot_required"] and planned["overrides"] == []
    assert planned["content"] == mode.render_conf("exclusive")
    assert planned["switch"] == ["rdma", "system", "set", "netns", "exclusive"]


def test_plan_without_live_switch_needs_a_reboot_and_a_converged_node_needs_nothing():
    planned = plan.plan("exclusive", observed(), CONF, live=False)
    assert [a["target"] for a in planned["actions"]] == [CONF]
    assert planned["live_decision"] == "reboot" and planned["reboot_required"]
    done = plan.plan("exclusive", observed("exclusive", conf=mode.render_conf("exclusive")), CONF)
    assert (done["actions"], done["reboot_required"], done["live_decision"]) == ([], False, "none")


def test_plan_not_loaded_ib_core_takes_the_option_at_load():
    planned = plan.plan("exclusive", observed(loaded=False, conf=mode.render_conf("shared")), CONF)
    assert planned["actions"] == [{"action": "update_file", "target": CONF, "mode": "0644"}]
    assert planned["live_decision"] == "none" and not planned["reboot_required"]


def test_plan_regenerates_the_initramfs_only_with_a_file_change():
    argv = ["update-initramfs", "-u", "-k", "6.1.0"]
    planned = plan.plan("shared", observed(), CONF, regenerate=argv)
    assert planned["actions"][1] == {"action": "run", "target": "update-initramfs -u -k 6.1.0"}
    assert planned["regenerate"] == argv
    same = plan.plan("shared", observed(conf=mode.render_conf("shared")), CONF, regenerate=argv)
    assert same["actions"] == [] and same["regenerate"] is None


def test_plan_names_a_later_file_and_warns():
    planned = plan.plan("exclusive", observed(others=[(LATER, "options ib_core netns_mode=1\n")],
                                              cmdline="1", plugins=["k8s-rdma-shared"]), CONF)
    assert planned["overrides"] == [{"file": LATER, "line": 1, "value": "1", "mode": "shared"}]
    assert planned["observed"]["persisted"] == "shared" and planned["observed"]["persisted_by"] == LATER
    assert len(planned["warnings"]) == 3
    assert "booted with ib_core.netns_mode=1" in planned["warnings"][1] and "shared device plugin" in planned["warnings"][2]
    # an earlier file is overridden by ours, and a file of the same name elsewhere is hidden by ours
    early = plan.plan("exclusive", observed(others=[("/etc/modprobe.d/00-a.conf", "options ib_core netns_mode=1\n"),
                                                    ("/lib/modprobe.d/rdma-k8s-node-ib_core.conf",
                                                     "options ib_core netns_mode=1\n")]), CONF)
    assert early["overrides"] == [] and early["observed"]["persisted_by"] == CONF


# -- the judge --------------------------------------------------------------------------------------------------------
def section(live="shared", conf=None, effective=None, others=(), plugins=(), loaded=True):
    """A ``layers.netns`` section as :func:`observe.facts` returns it."""
    files, modprobe = {}, []
    for path, text in sorted(([(CONF, conf)] if conf is not None else []) + list(others)):
        modprobe.append({"path": path, "directives": [list(d) for d in plan._modprobe.directives(text)]})  # pylint: disable=protected-access
        files[path] = {"content": text, "mode": 0o644, "uid": 0, "gid": 0}
    return json.loads(json.dumps({
        "ib_core_loaded": loaded, "live": live if loaded else None, "cmdline_value": None, "cmdline": None,
        "modprobe": modprobe, "files": files,
        "persisted": {"modprobe": effective, "modprobe_file": None, "cmdline": None, "effective": effective},
        "shared_device_plugin": list(plugins), "problems": []}))


def desired(want="exclusive", **more):
    return dict({"rdma_netns_mode": want, "rdma_netns_conf_file": CONF}, **more)


def by_id(checks):
    return dict((c["id"], c) for c in checks)


def test_judge_converged_is_ok():
    checks = judge.judge(section("exclusive", mode.render_conf("exclusive"), "exclusive"), desired())
    assert [(c["id"], c["status"]) for c in checks] == [("netns.mode", "ok")]


def test_judge_drift_evidence_is_the_plan():
    sect = section("shared", mode.render_conf("exclusive"), "exclusive")
    check = by_id(judge.judge(sect, desired()))["netns.mode"]
    planned = plan.plan("exclusive", judge.observed_of(sect, CONF, "exclusive"), CONF)
    assert planned["actions"] == [{"action": "run", "target": "rdma system set netns exclusive"}]
    assert check["status"] == "drift" and check["detail"] == "planned: %s" % planned["actions"]
    assert "reboot" in check["remedy"]  # persisted already: the live switch was refused
    # our file rewritten behind the module's back: the file step is the evidence
    sect = section("exclusive", "options ib_core netns_mode=1\n", "shared")
    check = by_id(judge.judge(sect, desired()))["netns.mode"]
    assert check["detail"] == "planned: [{'action': 'update_file', 'target': '%s', 'mode': '0644'}]" % CONF
    assert "rdma_netns_mode=exclusive" in check["remedy"]


def test_judge_plans_as_the_role_calls_the_module_with_rdma_netns_live():
    """rdma_netns_live is a registry variable (the audit resolves it per host): the evidence is the plan the role's
    module call makes, a live switch only when the role would try one."""
    assert "rdma_netns_live" in _registry.by_name("netns").variables
    sect = section("shared", mode.render_conf("exclusive"), "exclusive")
    switch = [{"action": "run", "target": "rdma system set netns exclusive"}]
    assert by_id(judge.judge(sect, desired(rdma_netns_live=True)))["netns.mode"]["detail"] == "planned: %s" % switch
    # the module would change nothing and say reboot_required: only a reboot fixes it (also with the string an
    # `-e rdma_netns_live=false` gives, which the module's argument spec converts)
    for off in (False, "false", "no"):
        check = by_id(judge.judge(sect, desired(rdma_netns_live=off)))["netns.mode"]
        assert (check["status"], check["detail"]) == ("drift", "planned: []") and "reboot" in check["remedy"], off
    assert by_id(judge.judge(sect, desired(rdma_netns_live="true")))["netns.mode"]["detail"] == "planned: %s" % switch


def test_judge_pinning_the_default_is_not_drift():
    """ib_core's default is shared: no file on a shared node is the desired mode, though the module writes its file."""
    sect = section("shared")
    assert by_id(judge.judge(sect, desired("shared")))["netns.mode"]["status"] == "ok"
    assert plan.plan("shared", judge.observed_of(sect, CONF, "shared"), CONF)["actions"][0]["action"] == "create_file"


def test_judge_unknown_not_loaded_plugin_and_override():
    assert by_id(judge.judge(section(None), desired()))["netns.mode"]["status"] == "unknown"
    check = by_id(judge.judge(section(loaded=False, effective="exclusive"), desired()))["netns.mode"]
    assert (check["status"], check["detail"]) == ("ok", "ib_core is not loaded")
    # without a desired state only the known-bad plugin condition is judged
    assert [c["id"] for c in judge.judge(section("exclusive", plugins=["k8s-rdma-shared"]), None)] == [
        "netns.shared_device_plugin"]
    assert judge.judge(section("shared", plugins=["k8s-rdma-shared"]), None) == []
    checks = by_id(judge.judge(section("exclusive", mode.render_conf("exclusive"), "shared",
                                       others=[(LATER, "options ib_core netns_mode=1\n")]), desired()))
    assert (checks["netns.override"]["status"], checks["netns.override"]["subject"]) == ("fail", LATER)
    assert checks["netns.override"]["persisted"] == "%s:1 netns_mode=1" % LATER
    bad = by_id(judge.judge(section("shared"), desired(rdma_netns_conf_file="/etc/ib_core.conf")))
    assert bad["netns.override"]["status"] == "unknown" and "/etc/modprobe.d" in bad["netns.override"]["detail"]


def test_registry_entry_is_a_room():
    layer = _registry.by_name("netns")
    assert layer in _registry.rooms() and layer.judge is judge.judge and layer.legacy_section is judge.section_of


# -- the observer, on simulated nodes ----------------------------------------------------------------------------------
@pytest.fixture(scope="module", name="roots")
def fixture_roots(tmp_path_factory):
    return dict((name, hwsim.render(name, tmp_path_factory.mktemp(name))) for name in ("roce-cx6dx", "no-rdma"))


@pytest.mark.parametrize("name", ["roce-cx6dx", "no-rdma"])
@pytest.mark.parametrize("want", ["shared", "exclusive"])
def test_room_and_older_facts_judge_alike(roots, name, want):
    """The room's section and the one ``section_of`` builds from rdma_facts' other keys give the same checks."""
    host = HostRoot(str(roots[name]))
    facts = gather(host)
    facts["persisted"] = persisted_facts(host, [])
    room = judge.judge(json.loads(json.dumps(observe.facts(host))), desired(want))
    older = judge.judge(judge.section_of(json.loads(json.dumps(facts))), desired(want))
    assert [(c["id"], c["status"]) for c in room] == [(c["id"], c["status"]) for c in older]
    assert room[0].get("live") == older[0].get("live") and room[0]["status"] == ("ok" if want == "shared" else "drift")


def test_facts_read_the_files_and_the_next_boot(roots, tmp_path):
    root = tmp_path / "node"
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.copytree(roots["roce-cx6dx"], root, symlinks=True)
    (root / "etc/modprobe.d").mkdir(parents=True, exist_ok=True)
    (root / CONF.lstrip("/")).write_text(mode.render_conf("exclusive"), encoding="utf-8")
    (root / LATER.lstrip("/")).write_text("# other\nblacklist foo\n", encoding="utf-8")
    found = observe.facts(HostRoot(str(root)))
    assert (found["ib_core_loaded"], found["live"]) == (True, "shared")
    assert found["persisted"]["effective"] == "exclusive" and found["persisted"]["modprobe_file"] == CONF
    assert list(found["files"]) == [CONF] and found["files"][CONF]["content"] == mode.render_conf("exclusive")
    assert {"path": LATER, "directives": []} in found["modprobe"]
    check = by_id(judge.judge(copy.deepcopy(found), desired()))["netns.mode"]
    assert check["status"] == "drift" and check["detail"].endswith(
        "planned: [{'action': 'run', 'target': 'rdma system set netns exclusive'}]")
