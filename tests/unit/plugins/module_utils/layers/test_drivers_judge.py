# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drivers room's judgement: the checks moved from ``_audit`` judge the room's section as they judged the older
keys (and still judge facts without ``layers.drivers``); ``gpudirect.config`` is nvidia_peermem's planner on
``layers.drivers.observed`` (ok, drift with the plan's actions as evidence, fail where the module refuses, unknown
where the facts lack what the plan reads); facts of another shape never raise; and, on simulated nodes, the audit's
evidence equals nvidia_peermem's check-mode actions."""

from __future__ import absolute_import, annotations, division, print_function

import copy
import json
import pathlib

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import judge as _judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.modules.realworld_trees import DOCA_MODPROBE, build
from unit.plugins.module_utils.layers.hostile import DROP, mutated

REPO = pathlib.Path(__file__).resolve().parents[5]
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.42.02  Release Build  (dvs-builder@x)\n"
CONF = _observe.CONF_FILE
DROPIN = _observe.DROPIN_FILE
OPENIBD = {"/etc/systemd/system/openibd.service": "[Service]\nExecStart=/etc/init.d/openibd start\n"}


class _Commands(object):
    """What rdma_facts' HostCommands answers about modprobe (the only tool the observer asks for)."""

    def __init__(self, path="/usr/sbin/modprobe"):
        self.path = path

    def find(self, name):
        assert name == "modprobe"
        return self.path


def node(tmp_path, extra=None, banner=PROPRIETARY, links=None):
    files = {"/proc/driver/nvidia/version": banner, "/proc/sys/kernel/osrelease": "6.1.0-28-amd64\n",
             "/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro quiet\n",
             "/proc/modules": "mlx5_ib 1 0 - Live\nmlx5_core 1 0 - Live\nib_core 1 0 - Live\nib_uverbs 1 0 - Live\n",
             "/sys/module/ib_core/version": "24.10-1.1.4\n", "/sys/module/mlx5_core/version": "24.10-1.1.4\n"}
    if banner is None:
        del files["/proc/driver/nvidia/version"]
    files.update(extra or {})
    return HostRoot(build(tmp_path, files, links))


def section(host, commands=_Commands(), gpus=("0000:1b:00.0",)):
    """``layers.drivers`` as rdma_facts returns it (through JSON), with the GPUs of the node the tree stands for."""
    out = json.loads(json.dumps(_observe.facts(host, commands)))
    out["gpus"] = list(gpus)
    return out


def desired(**overrides):
    """The audit's desired state: the roles' defaults, with the nvidia_peermem role in provisioning."""
    out = dict(role_defaults(), rdma_k8s_node_gpudirect=True)
    out.update(overrides)
    return out


def by_id(checks):
    found = {}
    for item in checks:
        found.setdefault(item["id"], []).append(item)
    return found


def config(checks):
    [found] = [item for item in checks if item["id"] == "gpudirect.config"]
    return found


def provisioned(modprobe="/usr/sbin/modprobe"):
    """The module's own files as it writes them for nvidia_peermem on an openibd node."""
    return dict(OPENIBD, **{CONF: _gpudirect.render_modules_load(), DROPIN: _gpudirect.render_openibd_dropin(modprobe)})


# -- the registry and the role ---------------------------------------------------------------------------------------
def test_registry_entry_and_role_options():
    layer = _registry.by_name("drivers")
    assert layer.judge is _judge.judge and layer.legacy_section is _judge.section_of
    assert layer.observe is _observe.facts and layer.runs_tools and "layers" in layer.facts_keys
    assert set(var for var, dummy in _judge.ROLE_OPTIONS) <= set(layer.variables)
    defaults = yaml.safe_load((REPO / "roles/nvidia_peermem/defaults/main.yml").read_text(encoding="utf-8"))
    tasks = (REPO / "roles/nvidia_peermem/tasks/main.yml").read_text(encoding="utf-8")
    spec = _plan.argument_spec()
    for var, option in _judge.ROLE_OPTIONS:
        assert "%s: \"{{ %s }}\"" % (option, var) in tasks, var
        assert defaults[var] == spec[option]["default"], var  # the role's default is the module's
    assert "conf_file" not in tasks and "dropin_file" not in tasks  # the module's default files, which the facts hold


# -- the observer ----------------------------------------------------------------------------------------------------
def test_observer_on_a_tree_reads_what_the_older_readers_read(tmp_path):
    host = node(tmp_path, dict(provisioned(), **{"/etc/modprobe.d/zz.conf": "blacklist nvidia-peermem\n"}))
    facts = _observe.facts(host, _Commands(), modules=["ib_core"])
    assert _observe.drivers_key(facts) == _gpudirect.drivers_facts(host)
    assert facts["modules"] == ["ib_core"] and facts["devices"] == [] and facts["gpus"] == []
    assert json.loads(json.dumps(facts)) == facts
    observed = facts["observed"]
    assert observed["nvidia"] == {"version": "550.127.05", "open": False, "arch": "x86_64"}
    assert observed["modprobe_path"] == "/usr/sbin/modprobe" and observed["errors"] == {}
    assert observed["files"][CONF]["content"] == _gpudirect.render_modules_load()
    assert observed["files"][DROPIN]["exists"] and observed["files"][DROPIN]["mode"] == 0o644
    assert observed["modprobe"][-1] == ["/etc/modprobe.d/zz.conf", [[1, "blacklist", "nvidia_peermem", ""]]]
    assert observed["cmdline"] == "BOOT_IMAGE=/vmlinuz ro quiet"
    assert [path for path, dummy in observed["dropins"]] == [DROPIN]
    # without node tools: no modprobe path (the plan needs it only for the drop-in); /proc/modules read here
    bare = _observe.facts(host)
    assert "modprobe_path" not in bare["observed"]
    assert bare["modules"] == ["ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib"]


def test_observer_keeps_an_unreadable_banner_as_a_problem_and_an_error(tmp_path):
    host = node(tmp_path, banner=None)
    (tmp_path / "proc/driver/nvidia/version").mkdir(parents=True)  # reading it fails (EISDIR)
    facts = _observe.facts(host, _Commands())
    assert [p["path"] for p in facts["problems"]] == ["/proc/driver/nvidia/version"]
    assert facts["observed"]["nvidia"] is None and "nvidia" in facts["observed"]["errors"]
    assert facts["gpudirect"]["nvidia_driver"] is None
    check = config(_judge.judge(section(host), desired()))
    assert check["status"] == "unknown" and "NVIDIA driver banner" in check["detail"]


def test_collect_raises_an_unreadable_banner_as_the_module_did(tmp_path):
    host = node(tmp_path, banner=None)
    (tmp_path / "proc/driver/nvidia/version").mkdir(parents=True)
    with pytest.raises(Exception, match="/proc/driver/nvidia/version"):
        _observe.collect(host, _Commands())


# -- the moved checks: the room's section judged as the older keys -----------------------------------------------------
def older_facts(host, gpus=("0000:1b:00.0",)):
    """The keys the audit judged the layer on before the room, as rdma_facts returned them."""
    room = _observe.facts(host, _Commands())
    return json.loads(json.dumps({
        "drivers": _gpudirect.drivers_facts(host), "persisted": persisted_facts(host, []), "modules": room["modules"],
        "devices": [], "gpus": [{"pci_address": gpu} for gpu in gpus],
        "kernel_cmdline": {"args": host.read_attr("/proc/cmdline").split()}}))


MOVED = ("drivers.modules", "drivers.ofed_version", "drivers.doca_version", "drivers.ofed_running", "drivers.dkms",
         "gpudirect.path", "gpudirect.override")


@pytest.mark.parametrize("extra, wanted", [
    ({}, {}),
    (provisioned(), {"nvidia_peermem_method": "peermem"}),
    (dict(provisioned(), **{"/etc/modprobe.d/blacklist-gpudirect.conf": "blacklist nvidia_peermem\n",
                            "/etc/systemd/system/openibd.service.d/99-site.conf": "[Service]\nExecStartPost=\n"}),
     {"nvidia_peermem_method": "peermem"}),
    (dict(DOCA_MODPROBE, **provisioned()), {"rdma_audit_ofed_version": "24.10", "rdma_k8s_node_doca_ofed": True}),
    ({"/etc/modules-load.d/gpu.conf": "nvidia-peermem\n"}, {"nvidia_peermem_method": "dmabuf"}),
])
def test_moved_checks_judge_the_room_as_they_judged_the_older_keys(tmp_path, extra, wanted):
    host = node(tmp_path, extra)
    older = older_facts(host)
    room = section(host)
    for facts_desired in (desired(**wanted), None):
        before = [c for c in _judge.judge(_judge.section_of(older), facts_desired) if c["id"] in MOVED]
        after = [c for c in _judge.judge(room, facts_desired) if c["id"] in MOVED]
        assert after == before and before
    # and the audit: facts without layers.drivers are judged from the older keys (no gpudirect.config)
    ids = set(c["id"] for c in _audit.audit_host(older, desired(**wanted), ["drivers"]))
    assert "gpudirect.path" in ids and "gpudirect.config" not in ids
    ids = set(c["id"] for c in _audit.audit_host(dict(older, layers={"drivers": room}), desired(**wanted), ["drivers"]))
    assert "gpudirect.config" in ids


def test_override_checks_name_the_blacklist_and_the_reset(tmp_path):
    host = node(tmp_path, dict(provisioned(), **{
        "/etc/modprobe.d/blacklist-gpudirect.conf": "blacklist nvidia_peermem\n",
        "/etc/systemd/system/openibd.service.d/99-site.conf": "[Service]\nExecStartPost=\n"}))
    found = by_id(_judge.judge(section(host), desired(nvidia_peermem_method="peermem")))
    assert [(c["subject"], c["live"]) for c in found["gpudirect.override"]] == [
        ("modules-load.d", "blacklist"), ("openibd.service", "reset")]
    # the module refuses the same overrides (on_conflict=fail): gpudirect.config is its refusal
    [check] = found["gpudirect.config"]
    assert check["status"] == "fail" and "would not be loaded at boot as persisted" in check["detail"]
    wanted = desired(nvidia_peermem_method="peermem", nvidia_peermem_on_conflict="ignore")
    ignored = config(_judge.judge(section(host), wanted))
    assert ignored["status"] == "drift" and "load_module" in ignored["detail"]


# -- gpudirect.config ------------------------------------------------------------------------------------------------
def test_config_drift_is_the_plan_and_provisioned_is_ok(tmp_path):
    host = node(tmp_path, OPENIBD)
    check = config(_judge.judge(section(host), desired()))
    planned = [{"action": "load_module", "target": "nvidia_peermem"},
               {"action": "create_file", "target": CONF, "mode": "0644"},
               {"action": "create_file", "target": DROPIN, "mode": "0644"}]
    assert check["status"] == "drift" and check["detail"] == "planned: %s" % planned, check
    assert check["desired"] == "auto" and check["live"] == {"method": "peermem", "active": "none"}
    assert "nvidia_peermem role" in check["remedy"]
    # provisioned: the files and the module loaded
    host = node(tmp_path / "done", provisioned())
    (tmp_path / "done/sys/module/nvidia_peermem").mkdir(parents=True)
    check = config(_judge.judge(section(host), desired()))
    assert check["status"] == "ok" and check["live"] == {"method": "peermem", "active": "peermem"}, check
    # openibd_dropin=never removes our drop-in; persist=false leaves the files alone
    check = config(_judge.judge(section(host), desired(nvidia_peermem_openibd_dropin="never")))
    assert check["detail"] == "planned: %s" % [{"action": "delete_file", "target": DROPIN}]
    assert config(_judge.judge(section(host), desired(nvidia_peermem_persist=False)))["status"] == "ok"


@pytest.mark.parametrize("dropin_names, executable", [
    ("/sbin/modprobe", True),              # sudo's secure_path found /sbin/modprobe: kept
    ("/opt/gone/sbin/modprobe", False),    # names a modprobe the node no longer has: rewritten
])
def test_the_drop_ins_modprobe_is_kept_whatever_path_a_run_finds(tmp_path, dropin_names, executable):
    """Which modprobe a run finds depends on its PATH (the role under RHEL's sudo: /sbin first; the systemd timer and
    the DaemonSet's /host view: /usr/sbin). The drop-in the role wrote with one must not be drift for the other (it
    never cleared: helper-49's review): a drop-in naming an executable modprobe is kept; one naming a missing
    modprobe is rewritten with the found one."""
    host = node(tmp_path, provisioned(dropin_names), links={"/sbin": "usr/sbin"})
    modprobe = tmp_path / "usr/sbin/modprobe"
    modprobe.parent.mkdir(parents=True)
    modprobe.write_text("#!/bin/sh\n", encoding="utf-8")
    modprobe.chmod(0o755)
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    assert host.is_executable(dropin_names) is executable
    check = config(_judge.judge(section(host, _Commands("/usr/sbin/modprobe")), desired()))
    if executable:
        assert check["status"] == "ok", check
    else:
        assert check["status"] == "drift" and check["detail"] == "planned: %s" % [
            {"action": "update_file", "target": DROPIN, "mode": "0644"}], check


def test_config_on_the_open_modules_removes_the_peermem_files(tmp_path):
    host = node(tmp_path, {CONF: "nvidia_peermem\n"}, banner=OPEN)
    check = config(_judge.judge(section(host), desired()))
    assert check["status"] == "drift" and check["detail"] == "planned: %s" % [{"action": "delete_file", "target": CONF}]
    assert check["live"] == {"method": "dmabuf", "active": "dmabuf"}


def test_config_fails_where_the_module_refuses(tmp_path):
    host = node(tmp_path)
    check = config(_judge.judge(section(host), desired(nvidia_peermem_method="dmabuf")))
    assert check["status"] == "fail" and "DMA-BUF GPUDirect RDMA is not possible here" in check["detail"]
    # no OFED (inbox modules without a version) and the proprietary driver: auto has no path
    bare = node(tmp_path / "inbox", {"/sys/module/ib_core/version": "", "/sys/module/mlx5_core/version": ""})
    check = config(_judge.judge(section(bare), desired()))
    assert check["status"] == "fail" and "no GPUDirect RDMA path" in check["detail"]
    # variables the module refuses: the role fails before any change
    check = config(_judge.judge(section(host), desired(nvidia_peermem_method="gdr")))
    assert check["status"] == "fail" and "nvidia_peermem_" in check["detail"]


def test_config_is_unknown_where_the_facts_lack_what_the_plan_reads(tmp_path):
    host = node(tmp_path, OPENIBD)
    # rdma_facts without node tools: the drop-in's modprobe is not known
    check = config(_judge.judge(section(host, commands=None), desired()))
    assert check["status"] == "unknown" and "modprobe" in check["detail"]
    # ... which the plan needs only for the drop-in
    assert config(_judge.judge(section(host, commands=None), desired(nvidia_peermem_openibd_dropin="never")))[
        "status"] == "drift"
    # a modprobe.d file that could not be read
    room = section(host)
    room["observed"]["modprobe_problems"] = [{"path": "/etc/modprobe.d/x.conf", "error": "EIO"}]
    check = config(_judge.judge(room, desired()))
    assert check["status"] == "unknown" and "/etc/modprobe.d/x.conf" in check["detail"]
    # one of the module's files could not be read
    room = section(host)
    room["observed"]["files"][CONF] = {"error": "Permission denied"}
    check = config(_judge.judge(room, desired()))
    assert check["status"] == "unknown" and "Permission denied" in check["detail"]


def test_no_config_without_gpus_desired_state_or_planner_input(tmp_path):
    host = node(tmp_path, OPENIBD)
    assert "gpudirect.config" not in by_id(_judge.judge(section(host, gpus=()), desired()))
    assert "gpudirect.config" not in by_id(_judge.judge(section(host), None))
    room = section(host)
    del room["observed"]
    assert "gpudirect.config" not in by_id(_judge.judge(room, desired()))
    room["observed"] = None
    assert config(_judge.judge(room, desired()))["status"] == "unknown"


@pytest.mark.parametrize("opted_in", (None, False, "false", "no", 0))
def test_no_config_when_the_nvidia_peermem_role_is_not_provisioned(tmp_path, opted_in):
    """rdma_k8s_node_gpudirect is opt-in (playbooks/provision.yml): without it the role's configuration is not
    judged; gpudirect.path still says whether the GPUs have a GPUDirect path."""
    checks = by_id(_judge.judge(section(node(tmp_path, OPENIBD)), desired(rdma_k8s_node_gpudirect=opted_in)))
    assert "gpudirect.config" not in checks and "gpudirect.path" in checks
    assert "gpudirect.config" in by_id(_judge.judge(section(node(tmp_path, OPENIBD)), desired(rdma_k8s_node_gpudirect="yes")))


def test_a_gpudirect_switch_of_another_kind_is_unknown_not_a_crash(tmp_path):
    found = by_id(_judge.judge(section(node(tmp_path, OPENIBD)), desired(rdma_k8s_node_gpudirect="maybe")))
    [check] = found["gpudirect.config"]
    assert check["status"] == "unknown", check


def test_docs_list_gpudirect_config():
    text = (REPO / "docs/audit.md").read_text(encoding="utf-8")
    assert "| `gpudirect.config` | drivers |" in text
    assert "gpudirect.config" in (REPO / "docs/drivers.md").read_text(encoding="utf-8")


# -- facts of another shape --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", (None, [], "x", 5, ["drivers"]))
def test_a_section_that_is_not_a_mapping_is_unknown(value):
    checks = _judge.judge(value, desired())
    assert [(c["id"], c["status"]) for c in checks] == [("drivers.facts", "unknown")]


_HOSTILE = [
    (("modules",), "mlx5_core"), (("modules",), [1, None]), (("devices",), ["mlx5_0"]), (("devices",), [None]),
    (("devices",), {"name": "mlx5_0"}), (("gpus",), 5), (("ofed",), []), (("ofed",), "x"), (("ofed", "dkms_failed"), ["x"]),
    (("ofed", "packages"), ["doca-ofed"]), (("gpudirect",), ["peermem"]), (("gpudirect", "openibd_dropins"), [None]),
    (("gpudirect", "openibd_dropins"), "x"), (("observed",), "x"), (("observed",), []), (("observed", "files"), None),
    (("observed", "files", CONF), "x"), (("observed", "files", CONF), {"exists": True, "mode": "0644"}),
    (("observed", "modprobe"), [None]), (("observed", "modprobe"), [["/etc/modprobe.d/a.conf", [None]]]),
    (("observed", "dropins"), [[1]]), (("observed", "ofed"), None), (("observed", "ofed"), DROP),
    (("observed", "nvidia"), "550"), (("observed", "errors"), ["nvidia"]), (("observed", "cmdline"), 7),
    (("observed", "release"), 6), (("observed", "modprobe_problems"), "x"), (("observed", "peermem_loaded"), None),
]


@pytest.mark.parametrize("path, value", _HOSTILE)
def test_facts_of_another_shape_never_raise(tmp_path, path, value):
    """Facts of another shape (a bug, a hostile node) give unknown checks, never an exception that stops the audit
    of every host."""
    room = section(node(tmp_path, dict(OPENIBD, **{"/etc/modprobe.d/zz.conf": "blacklist nvidia_peermem\n"})))
    room["devices"] = [{"name": "mlx5_0", "driver": "mlx5_core"}]
    room["ofed"]["dkms_failed"] = [{"module": "mlnx-ofed-kernel", "state": "failed"}]
    room = mutated(room, path, value)
    for wanted in (desired(nvidia_peermem_method="peermem", rdma_audit_ofed_version="24.10",
                           rdma_k8s_node_doca_ofed=True), None):
        checks = _judge.judge(copy.deepcopy(room), wanted)
        assert checks and all(c["status"] in ("ok", "drift", "unknown", "fail") for c in checks), checks
        # and through the audit
        checks = _audit.audit_host({"layers": {"drivers": copy.deepcopy(room)}}, wanted, ["drivers"])
        assert all(c["layer"] == "drivers" for c in checks if c["id"] != "facts.read")


@pytest.mark.parametrize("older", (
    {"drivers": "x"}, {"drivers": {"ofed": [], "gpudirect": "x"}, "gpus": [{}]}, {"modules": 5, "devices": [None]},
    {"persisted": [], "gpus": [1], "drivers": {"gpudirect": {"openibd_dropins": None, "openibd": True}}},
))
def test_older_facts_of_another_shape_never_raise(older):
    checks = _judge.judge(_judge.section_of(older), desired(nvidia_peermem_method="peermem"))
    assert all(c["status"] in ("ok", "drift", "unknown", "fail") for c in checks)


# -- simulated nodes: the audit's evidence is nvidia_peermem's check-mode plan -----------------------------------------
@pytest.mark.parametrize("variant", ("peermem", "peermem-openibd", "open-modules"))
def test_simulated_node_evidence_is_the_modules_check_mode_plan(tmp_path, monkeypatch, variant):
    from unit.plugins.modules.harness import run_module  # pylint: disable=import-outside-toplevel
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    from unit.plugins.modules.test_nvidia_peermem import spec_variant  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.modules import nvidia_peermem, rdma_facts  # pylint: disable=import-outside-toplevel

    spec = "dgx-h100"
    if variant == "open-modules":
        spec = spec_variant(tmp_path, "dgx-h100", "open", nvidia_kernel_module="open")
    with sim_node(spec, tmp_path, monkeypatch) as sim:
        if variant == "peermem-openibd":
            unit = sim.etc / "systemd/system/openibd.service"
            unit.parent.mkdir(parents=True)
            unit.write_text("[Service]\nExecStart=/etc/init.d/openibd start\n", encoding="utf-8")
        if variant == "open-modules":
            (sim.etc / "modules-load.d/nvidia-peermem.conf").write_text("nvidia_peermem\n", encoding="utf-8")
        args = {"method": "auto", "persist": True, "openibd_dropin": "auto", "on_conflict": "fail", "backup": False,
                "host_root": str(sim.root)}

        def audit():
            facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(sim.root)})["ansible_facts"]["rdma"]
            assert facts["layers"]["drivers"] is not None and facts["gpus"], facts["problems"]
            assert facts["drivers"] == _observe.drivers_key(facts["layers"]["drivers"])
            return config(_audit.audit_host(facts, desired(), ["drivers"]))

        def check_mode_actions():
            return run_module(monkeypatch, nvidia_peermem.main, args, check=True)["actions"]

        actions = check_mode_actions()
        check = audit()
        assert actions and check["status"] == "drift" and check["detail"] == "planned: %s" % actions, (check, actions)
        run_module(monkeypatch, nvidia_peermem.main, args)
        assert check_mode_actions() == [] and audit()["status"] == "ok"
        if variant != "open-modules":  # the modules-load.d file removed behind the module's back
            (sim.etc / "modules-load.d/nvidia-peermem.conf").unlink()
            actions = check_mode_actions()
            check = audit()
            assert [a["action"] for a in actions] == ["create_file"] and check["status"] == "drift"
            assert check["detail"] == "planned: %s" % actions
