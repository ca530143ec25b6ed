"""The qos layer (one room): the mlnx_qos/dcb parsers on real outputs (tests/fixtures/realworld/mlnx_qos, README.md),
the planner (pure), the judge (the planner on the facts, and one DSCP/priority across the inventory) and the module on
simulated nodes: a ConnectX-7 RoCE card with DOCA-OFED (dgx-h100's storage ports: mlnx_qos, ECN sysfs, traffic class),
a ConnectX-6 Dx with the inbox driver (roce-cx6dx: dcb, no ECN sysfs) and an InfiniBand-only node (numa-split: a clean
skip).  Check mode, diff, idempotence, clear errors, all-or-nothing, and the boot script after a simulated power-on."""

import copy
import os
import pathlib
import shutil
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import judge, observe, plan, tools
from ansible_collections.rdma.k8s_node.plugins.modules import roce_qos
from unit.plugins.modules.harness import ModuleFail, run_module

REPO = pathlib.Path(__file__).resolve().parents[5]
REAL = REPO / "tests" / "fixtures" / "realworld" / "mlnx_qos"
DESIRED = dict(plan.DEFAULTS)
MANAGED = {"roce_qos_manage": True}
ROCE_CX7 = ["enp170s0f0np0", "enp170s0f1np1", "enp41s0f0np0", "enp41s0f1np1"]


# -- the parsers on real outputs -----------------------------------------------------------------------------------
def test_mlnx_qos_real_outputs():
    trusted = tools.parse_mlnx_qos((REAL / "netarbiter-trust-dscp.txt").read_text(encoding="utf-8"))
    assert trusted["trust"] == "dscp" and trusted["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0] and trusted["cable_len"] == 7
    assert len(trusted["dscp2prio"]) == 64 and trusted["dscp2prio"]["26"] == 3 and trusted["dscp2prio"]["48"] == 6
    assert all(trusted["dscp2prio"][str(d)] == d >> 3 for d in range(64))
    community = tools.parse_mlnx_qos((REAL / "mellanox-community-doc-2792.txt").read_text(encoding="utf-8"))
    assert community["trust"] == "dscp" and community["pfc"] == [1, 0, 1, 0, 0, 0, 1, 1] and community["cable_len"] == 10
    with pytest.raises(ParseError, match="trust state"):
        tools.parse_mlnx_qos("ETS features are not supported on your system\n")


def test_dcb_parsers():
    assert tools.parse_dcb_pfc("prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n") == [0, 0, 0, 1, 0, 0, 0, 0]
    assert tools.parse_dcb_app("dscp-prio 26:3 48:6 \n") == {"26": 3, "48": 6} and tools.parse_dcb_app("") == {}
    with pytest.raises(ParseError, match="-N"):
        tools.parse_dcb_app("dscp-prio AF31:3 \n")
    with pytest.raises(ParseError, match="not 8"):
        tools.parse_dcb_pfc("prio-pfc 0:off 1:on\n")


# -- the planner, pure ---------------------------------------------------------------------------------------------
def _port(**over):
    item = {"rdma_device": "mlx5_0", "port": 1, "pci": "0000:01:00.0", "trust": "pcp", "dscp2prio": {},
            "pfc": [0] * 8, "ecn": {"roce_np": [1] * 8, "roce_rp": [0] * 8}, "cnp": {"cnp_dscp": 48, "cnp_802p_prio": 6},
            "roce_tos": None, "roce_tos_group": False, "traffic_class": -1}
    item.update(over)
    return item


def _observed(ports, tool="mlnx_qos", configfs=True):
    return {"tool": {"ofed": tool == "mlnx_qos", "paths": {"mlnx_qos": "/usr/bin/mlnx_qos", "dcb": "/usr/sbin/dcb"}},
            "configfs": {"path": observe.CMA, "exists": configfs}, "ports": ports, "ib_ports": [], "problems": [],
            "unit": {"path": observe.UNIT, "exists": False, "text": None},
            "script": {"path": observe.SCRIPT, "exists": False, "text": None}}


def test_plan_fresh_port_with_mlnx_qos():
    planned = plan.plan(DESIRED, _observed({"eth0": _port()}))
    kinds = [(a["action"], a.get("protocol") or a.get("attribute")) for a in planned["actions"]]
    assert kinds == [("set_trust", None), ("set_pfc", None), ("set_ecn", "roce_rp"), ("set_roce_tos", None),
                     ("set_traffic_class", None), ("write_script", None), ("write_unit", None)]
    trust, pfc = planned["actions"][0], planned["actions"][1]
    assert trust["argv"] == ["/usr/bin/mlnx_qos", "-i", "eth0", "--trust", "dscp"]
    assert pfc["argv"][-2:] == ["--pfc", "0,0,0,1,0,0,0,0"]
    tos = planned["actions"][3]
    assert tos["after"] == 104 and tos["mkdir"] == "/sys/kernel/config/rdma_cm/mlx5_0" and tos["before"] == 0
    assert "ExecStart=/bin/sh /etc/rdma-k8s-node/roce-qos.sh" in planned["unit"]
    assert "PartOf=openibd.service" in planned["unit"] and "sys-subsystem-net-devices-eth0.device" in planned["unit"]
    assert "put /sys/class/net/eth0/ecn/roce_rp/enable/3 1 1" in planned["script"]


def test_plan_dcb_sets_trust_with_the_entries_and_remaps():
    inbox = _port(ecn={"roce_np": None, "roce_rp": None}, cnp=None, traffic_class=None)
    planned = plan.plan(dict(DESIRED, priority=5, tool="dcb"), _observed({"eth0": inbox}))
    trust = planned["actions"][0]
    assert trust["argv"] == ["/usr/sbin/dcb", "app", "replace", "dev", "eth0", "dscp-prio", "26:5", "48:6"]
    assert [a["action"] for a in planned["actions"]][:3] == ["set_trust", "set_pfc", "set_roce_tos"]
    assert len(planned["notes"]) == 2 and "ROCE_CC_PRIO_MASK_P1" in planned["notes"][0]
    # mlnx_qos on a DSCP port whose map sends 26 elsewhere: only the entry is changed
    remap = plan.plan(DESIRED, _observed({"eth0": _port(trust="dscp", dscp2prio={"26": 5}, pfc=[0, 0, 0, 1, 0, 0, 0, 0])}))
    step = remap["actions"][0]
    assert step["action"] == "set_dscp2prio" and step["before"] == {"26": 5} and step["after"] == {"26": 3}
    assert step["argv"] == ["/usr/bin/mlnx_qos", "-i", "eth0", "--dscp2prio", "set,26,3"]


def test_plan_problems_and_skip():
    assert plan.plan(DESIRED, _observed({}) | {"ib_ports": ["mlx5_0/1"]})["skip"].startswith("no RoCE port")
    broken = plan.plan(DESIRED, _observed({"eth0": _port()}, configfs=False))
    assert broken["actions"] == [a for a in broken["actions"] if a["action"].startswith("write_")]
    assert any("modprobe rdma_cm" in p for p in broken["problems"])
    failed = plan.plan(DESIRED, _observed({"eth0": _port(error="mlnx_qos failed (rc=1): x")}))
    assert failed["problems"] == ["eth0: mlnx_qos failed (rc=1): x"]
    unknown = plan.plan(dict(DESIRED, interfaces=["eth9"]), _observed({"eth0": _port()}))
    assert unknown["problems"][0] == "interfaces: eth9 is not a RoCE netdev of this node (RoCE netdevs: eth0)"


def test_plan_two_ports_of_one_device_make_its_configfs_group_once():
    # one RDMA device with two Ethernet ports (rdma_cm/<device> is one configfs group with ports/1 and ports/2):
    # the first port's step makes the group, the second only writes its port's ToS
    ports = {"eth0": _port(), "eth1": _port(port=2)}
    planned = plan.plan(DESIRED, _observed(ports))
    tos = [a for a in planned["actions"] if a["action"] == "set_roce_tos"]
    assert [(a["target"], a["port"], a["mkdir"], a["path"]) for a in tos] == [
        ("eth0", 1, "/sys/kernel/config/rdma_cm/mlx5_0", "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"),
        ("eth1", 2, None, "/sys/kernel/config/rdma_cm/mlx5_0/ports/2/default_roce_tos")]
    assert [a["before"] for a in tos] == [0, 0]
    # two devices still make one group each; a group that exists is never made
    other = plan.plan(DESIRED, _observed({"eth0": _port(), "eth1": _port(rdma_device="mlx5_1", pci="0000:01:00.1")}))
    assert [a["mkdir"] for a in other["actions"] if a["action"] == "set_roce_tos"] == [
        "/sys/kernel/config/rdma_cm/mlx5_0", "/sys/kernel/config/rdma_cm/mlx5_1"]
    made = plan.plan(DESIRED, _observed({"eth0": _port(roce_tos=0, roce_tos_group=True),
                                         "eth1": _port(port=2, roce_tos=0, roce_tos_group=True)}))
    assert [a["mkdir"] for a in made["actions"] if a["action"] == "set_roce_tos"] == [None, None]


def test_desired_of_and_the_judge_follow_the_variables():
    assert plan.desired_of({"roce_qos_manage": False}) is None and plan.desired_of({}) is None  # opt-in
    assert plan.desired_of({"roce_qos_manage": True, "roce_qos_dscp": 40})["dscp"] == 40
    section = _observed({"eth0": _port()})
    assert judge.judge(section, {"roce_qos_manage": False}) == [] and judge.judge(section, {}) == []
    checks = judge.judge(section, MANAGED)
    assert {c["id"]: c["status"] for c in checks} == {
        "qos.trust": "drift", "qos.dscp2prio": "ok", "qos.pfc": "drift", "qos.ecn": "drift", "qos.cnp": "ok",
        "qos.roce_tos": "drift", "qos.traffic_class": "drift", "qos.boot_unit": "drift"}


def test_inventory_one_dscp_and_priority():
    good = _observed({"eth0": _port(trust="dscp", pfc=[0, 0, 0, 1, 0, 0, 0, 0], roce_tos=104, roce_tos_group=True)})
    odd = copy.deepcopy(good)
    odd["ports"]["eth0"]["roce_tos"] = 160
    out = judge.inventory_judge({"a": good, "b": copy.deepcopy(good), "c": odd, "ib": _observed({})})
    assert out["ib"] == [] and [c["status"] for c in out["a"]] == ["ok"]
    assert out["c"][0]["status"] == "drift" and "DSCP 40" in out["c"][0]["live"]["eth0"]
    assert "DSCP 26" in out["c"][0]["desired"]
    same = judge.inventory_judge({"a": good, "c": copy.deepcopy(good)})
    assert [c["status"] for c in same["c"]] == ["ok"]


# -- the module on simulated nodes ---------------------------------------------------------------------------------
def run(monkeypatch, root, check=False, expect=None, **args):
    args.setdefault("host_root", str(root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, roce_qos.main, args, check=check, diff=True, **kwargs)


def test_bad_arguments_name_the_option_and_value(monkeypatch, tmp_path):
    assert "priority must be 0..7, got 9" in run(monkeypatch, tmp_path, priority=9, expect=ModuleFail)["msg"]
    assert "dscp must be 0..63, got 64" in run(monkeypatch, tmp_path, dscp=64, expect=ModuleFail)["msg"]
    failed = run(monkeypatch, tmp_path, cnp_dscp=26, expect=ModuleFail)
    assert "cnp_dscp 26 is the RoCE dscp" in failed["msg"]
    assert "unit must be a file under /etc" in run(monkeypatch, tmp_path, unit="/tmp/x.service", expect=ModuleFail)["msg"]
    failed = run(monkeypatch, tmp_path, tool="lldptool", expect=ModuleFail)
    assert "tool" in failed["msg"] and "lldptool" in failed["msg"]


def _sim(spec, tmp_path, monkeypatch):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    return sim_node(spec, tmp_path, monkeypatch)


class _Commands:
    """HostCommands' kernel-tool half for the observer outside a module: the shims on PATH."""

    module = type("M", (), {"get_bin_path": staticmethod(shutil.which)})

    @staticmethod
    def run_kernel(argv):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr


def facts(root):
    """``layers.qos`` as rdma_facts gathers it (the observer with the node's tools)."""
    return observe.facts(HostRoot(str(root)), _Commands())


def _files(root):
    return (root / observe.UNIT.lstrip("/")), (root / observe.SCRIPT.lstrip("/"))


def run_boot_script(root):
    """The boot script as the unit runs it, with the node's /sys under the test's root (the only change)."""
    text = (root / observe.SCRIPT.lstrip("/")).read_text()
    local = text.replace(" /sys/", " %s/sys/" % root).replace("\"/sys/", "\"%s/sys/" % root)
    return subprocess.run(["sh", "-c", local], capture_output=True, text=True, check=False)


def test_ofed_connectx7_check_apply_idempotent_then_power_on(monkeypatch, tmp_path):
    with _sim("dgx-h100", tmp_path, monkeypatch) as node:
        assert "/hwsim/shims/" in (shutil.which("mlnx_qos") or "")
        host = HostRoot(str(node.root))
        before = facts(node.root)
        assert sorted(before["ports"]) == ROCE_CX7 and len(before["ib_ports"]) == 8
        checked = run(monkeypatch, node.root, check=True)
        assert checked["changed"] is True and checked["tool"]["name"] == "mlnx_qos" and checked["tos"] == 104
        assert not _files(node.root)[0].exists()
        assert node.call({"cmd": "dcb_show", "dev": "enp41s0f0np0"})["trust"] == "pcp"
        per_port = [a["action"] for a in checked["actions"] if a["target"] == "enp41s0f0np0"]
        # a fresh CX-7: ECN on every priority already (ROCE_CC_PRIO_MASK 255), CNP 48/6 from firmware
        assert per_port == ["set_trust", "set_pfc", "set_roce_tos", "set_traffic_class"]
        assert isinstance(checked["diff"], list) and len(checked["diff"]) == len(checked["actions"])
        applied = run(monkeypatch, node.root)
        assert applied["actions"] == checked["actions"] and applied["unit_changed"] is True
        state = node.call({"cmd": "dcb_show", "dev": "enp41s0f0np0"})
        assert state["trust"] == "dscp" and state["pfc_en"] == 0b1000
        assert (node.root / "sys/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos").read_text() == "104\n"
        assert (node.root / "sys/class/infiniband/mlx5_1/tc/1/traffic_class").read_text() == "Global tclass=104\n"
        again = run(monkeypatch, node.root)
        assert again["changed"] is False and again["actions"] == []
        desired = {"roce_qos_manage": True, "roce_qos_priority": 3}
        assert {c["status"] for c in judge.judge(facts(node.root), desired)} == {"ok"}
        # power-on: everything is gone; the boot script (the unit's ExecStart) brings it back
        node.reboot()
        lost = judge.judge(facts(node.root), desired)
        drifted = {c["id"] for c in lost if c["status"] == "drift"}
        assert drifted == {"qos.trust", "qos.pfc", "qos.roce_tos", "qos.traffic_class"}
        done = run_boot_script(node.root)
        assert done.returncode == 0, done.stderr
        assert {c["status"] for c in judge.judge(facts(node.root), desired)} == {"ok"}
        assert run_boot_script(node.root).returncode == 0  # twice: nothing written twice (no EPERM on ECN)


def test_audit_drift_on_one_setting_is_the_check_mode_plan(monkeypatch, tmp_path):
    with _sim("dgx-h100", tmp_path, monkeypatch) as node:
        run(monkeypatch, node.root, priority=3)
        host = HostRoot(str(node.root))
        ecn = node.root / "sys/class/net/enp41s0f1np1/ecn/roce_np/enable/3"
        ecn.write_text("0")
        checks = judge.judge(facts(node.root), MANAGED)
        drift = [c for c in checks if c["status"] != "ok"]
        assert [(c["id"], c["subject"]) for c in drift] == [("qos.ecn", "enp41s0f1np1 (mlx5_2 port 1)")]
        checked = run(monkeypatch, node.root, check=True)
        assert drift[0]["detail"] == "planned: %s" % checked["actions"]
        assert checked["actions"] == [{"action": "set_ecn", "target": "enp41s0f1np1", "protocol": "roce_np", "priority": 3,
                                       "before": 0, "after": 1, "path": "/sys/class/net/enp41s0f1np1/ecn/roce_np/enable/3"}]


def test_inbox_connectx6dx_with_dcb(monkeypatch, tmp_path):
    with _sim("roce-cx6dx", tmp_path, monkeypatch) as node:
        checked = run(monkeypatch, node.root, check=True)
        assert checked["tool"]["name"] == "dcb"  # no OFED driver: dcb although mlnx_qos is on PATH
        assert any("ROCE_CC_PRIO_MASK" in w for w in checked["warnings"])
        applied = run(monkeypatch, node.root, priority=4, dscp=34)
        assert [a["action"] for a in applied["actions"] if a["target"] == "ens1f0np0"] == ["set_trust", "set_pfc",
                                                                                           "set_roce_tos"]
        state = node.call({"cmd": "dcb_show", "dev": "ens1f1np1"})
        assert state["trust"] == "dscp" and sorted(state["apps"]) == [[5, 34, 4], [5, 48, 6]] and state["pfc_en"] == 16
        assert (node.root / "sys/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos").read_text() == "136\n"
        assert run(monkeypatch, node.root, priority=4, dscp=34)["changed"] is False
        node.reboot()
        assert run_boot_script(node.root).returncode == 0
        assert run(monkeypatch, node.root, priority=4, dscp=34, check=True)["changed"] is False


def test_backup_files_always_returned_and_map_the_boot_files_to_their_old_copies(monkeypatch, tmp_path):
    """backup_files is ``{edited path: backup path}`` on a run that replaces the boot files with backup=true, ``{}``
    otherwise: check mode, new files, a no-op run, live settings only (RETURN)."""
    with _sim("roce-cx6dx", tmp_path, monkeypatch) as node:
        check = run(monkeypatch, node.root, check=True, backup=True)
        assert check["changed"] is True and check["backup_files"] == {}
        created = run(monkeypatch, node.root, backup=True)
        assert created["changed"] is True and created["backup_files"] == {}, "new files have nothing to back up"
        again = run(monkeypatch, node.root, backup=True)
        assert again["changed"] is False and again["backup_files"] == {}
        node.reboot()  # the live settings are gone, the boot files stay
        live = run(monkeypatch, node.root, backup=True)
        assert live["changed"] is True and live["unit_changed"] is False and live["backup_files"] == {}
        old_script = _files(node.root)[1].read_text()
        changed = run(monkeypatch, node.root, priority=4, dscp=34, backup=True)
        assert changed["unit_changed"] is True and observe.SCRIPT in changed["backup_files"]
        assert set(changed["backup_files"]) <= {observe.SCRIPT, observe.UNIT}
        for edited, saved in changed["backup_files"].items():
            assert saved.startswith(str(node.root) + edited + ".")
        assert pathlib.Path(changed["backup_files"][observe.SCRIPT]).read_text() == old_script
        assert _files(node.root)[1].read_text() != old_script


def test_infiniband_only_node_is_a_clean_skip(monkeypatch, tmp_path):
    with _sim("numa-split", tmp_path, monkeypatch) as node:
        result = run(monkeypatch, node.root)
        assert result["changed"] is False and result["actions"] == []
        assert result["skipped_reason"].startswith("no RoCE port on this node: every RDMA port is InfiniBand")
        assert not _files(node.root)[0].exists()
        assert judge.judge(facts(node.root), MANAGED) == []


def test_a_refused_step_puts_everything_back(monkeypatch, tmp_path):
    with _sim("roce-cx6dx", tmp_path, monkeypatch) as node:
        node.call({"cmd": "fault_add", "path": "sys/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos",
                   "op": "write", "action": "errno", "errno": "EIO"})
        failed = run(monkeypatch, node.root, tool="dcb", expect=ModuleFail)
        assert "set_roce_tos of ens1f1np1 failed" in failed["msg"] and "put back" in failed["msg"]
        for dev in ("ens1f0np0", "ens1f1np1"):
            state = node.call({"cmd": "dcb_show", "dev": dev})
            assert state["trust"] == "pcp" and state["pfc_en"] == 0
        assert os.listdir(node.root / "sys/kernel/config/rdma_cm") == []
        assert not _files(node.root)[0].exists() and not _files(node.root)[1].exists()


def test_rdma_facts_and_the_audit_get_the_layer_from_the_registry(monkeypatch, tmp_path):
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    with _sim("roce-cx6dx", tmp_path, monkeypatch) as node:
        facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]
        section = facts["layers"]["qos"]
        assert section["ports"]["ens1f0np0"]["trust"] == "pcp" and section["used"] == "dcb"
        assert [c for c in _audit.audit_host(facts, {}, ["qos"]) if c["layer"] == "qos"] == []  # opt-in
        checks = [c for c in _audit.audit_host(facts, MANAGED, ["qos"]) if c["layer"] == "qos"]
        assert {c["id"] for c in checks if c["status"] == "drift"} >= {"qos.trust", "qos.pfc", "qos.roce_tos"}
        run(monkeypatch, node.root)
        facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]
        assert {c["status"] for c in _audit.audit_host(facts, MANAGED, ["qos"]) if c["layer"] == "qos"} == {"ok"}
