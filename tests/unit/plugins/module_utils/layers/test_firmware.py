"""The firmware layer (one room): the mlxconfig/mstconfig parser on real outputs (tests/fixtures/realworld/mlxconfig,
INDEX.md), the planner (pure), the judge (the planner on the facts) and the module on simulated ConnectX-6 Dx (RoCE)
and ConnectX-7 (InfiniBand) nodes: check mode, diff, staging, idempotence, refusal of parameters a model does not
have, all-or-nothing, and a pending change the audit reports until the simulated firmware reset."""

import copy
import pathlib
import re
import shutil

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import judge, mlxconfig, plan
from ansible_collections.rdma.k8s_node.plugins.modules import nic_firmware
from unit.plugins.modules.harness import ModuleFail, run_module

REPO = pathlib.Path(__file__).resolve().parents[5]
REAL = REPO / "tests" / "fixtures" / "realworld"


def _lines(path):
    """Parameter lines of a fixture, counted without the parser: indented, an upper-case name, then values."""
    return [line for line in path.read_text(encoding="utf-8").splitlines()
            if re.match(r"^\*?\s+\*?\s*[A-Z][A-Za-z0-9_]+\s+\S", line)]


# -- the parser on real outputs ------------------------------------------------------------------------------------
def test_connectx7_query_next_boot_only():
    path = REAL / "mlxconfig" / "connectx7-q-next-boot.txt"
    parsed = mlxconfig.parse_query(path.read_text(encoding="utf-8"))
    assert parsed["columns"] == ("next",)
    assert parsed["device"] == {"device_type": "ConnectX7", "name": "MCX75310AAS-NEA_Ax", "device": "/dev/mst/mt4129_pciconf1",
                                "description": "NVIDIA ConnectX-7 HHHL Adapter card; 400GbE / NDR IB (default mode); "
                                               "Single-port OSFP; PCIe 5.0 x16; Crypto Disabled; Secure Boot Enabled;"}
    params = parsed["params"]
    assert len(params) == len(_lines(path))
    assert params["LINK_TYPE_P1"] == {"next": "IB(1)"} and params["ATS_ENABLED"] == {"next": "False(0)"}
    assert params["ROCE_CC_PRIO_MASK_P1"] == {"next": "255"} and params["DPA_AUTHENTICATION"] == {"next": "True(1)"}
    # a value that fills its column is followed by nothing; an array; a lower-case letter in a name
    assert params["MEMIC_ATOMIC"] == {"next": "MEMIC_ATOMIC_ENABLE(2)"}
    assert mlxconfig.is_array(params["MODULE_SPLIT_M0"]["next"]) and params["EXP_ROM_UEFI_x86_ENABLE"] == {"next": "True(1)"}


def test_connectx6lx_extended_query_old_layout():
    path = REAL / "mlxconfig" / "connectx6lx-e-q.txt"
    parsed = mlxconfig.parse_query(path.read_text(encoding="utf-8"))
    assert parsed["columns"] == ("default", "current", "next") and parsed["device"] == {}
    assert len(parsed["params"]) == len(_lines(path))
    assert parsed["params"]["PROG_PARSE_GRAPH"] == {"default": "False(0)", "current": "False(0)", "next": "False(0)"}
    assert parsed["params"]["NUM_OF_VL_P2"]["default"] == "_4_VLs(3)"


def test_connectx4lx_marks_and_a_value_wider_than_its_column():
    path = REAL / "tool-output" / "mstconfig-query-connectx4lx.txt"
    parsed = mlxconfig.parse_query(path.read_text(encoding="utf-8"))
    params = parsed["params"]
    assert len(params) == len(_lines(path)) and parsed["device"]["device_type"] == "ConnectX4LX"
    assert params["SRIOV_EN"] == {"default": "False(0)", "current": "True(1)", "next": "True(1)"}
    assert params["ROCE_CONTROL"] == {"default": "ROCE_ENABLE(2)", "current": "DEVICE_DEFAULT(0)", "next": "ROCE_ENABLE(2)"}
    assert params["PCI_ATOMIC_MODE"]["next"] == "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)"
    assert params["LINK_TYPE_P1"] == {"default": "ETH", "current": "ETH", "next": "ETH"}
    # the legend line is not a parameter
    assert "The" not in params


def test_set_outputs_errors_and_no_table():
    refused = (REAL / "mlxconfig" / "connectx6dx-set-unknown-parameter.txt").read_text(encoding="utf-8")
    assert mlxconfig.errors_of(refused) == ["Unknown Parameter: PROG_PARSE_GRAPH"]
    parsed = mlxconfig.parse_query(refused)
    assert parsed["params"] == {} and parsed["errors"] == ["Unknown Parameter: PROG_PARSE_GRAPH"]
    applied = (REAL / "mlxconfig" / "connectx6-set-boot-options.txt").read_text(encoding="utf-8")
    assert mlxconfig.errors_of(applied) == [] and mlxconfig.parse_query(applied)["device"]["device"] == "c2:00.0"
    with pytest.raises(ParseError, match="Failed to open"):
        mlxconfig.parse_query("-E- Failed to open the device: 0000:99:00.0\n")
    with pytest.raises(ParseError):
        mlxconfig.parse_query("")


@pytest.mark.parametrize("desired, printed, same", [
    ("ETH", "ETH(2)", True), ("eth", "ETH(2)", True), ("2", "ETH(2)", True), ("1", "ETH(2)", False),
    ("IB", "ETH(2)", False), ("ETH", "ETH", True), ("True", "True(1)", True), ("False", "True(1)", False),
    ("0x30", "48", True), ("48", "48", True), ("47", "48", False), ("5", "N/A", False), ("ROCE_ENABLE", "ROCE_ENABLE(2)", True),
])
def test_value_comparison(desired, printed, same):
    assert mlxconfig.same(desired, printed) is same


# -- the planner, pure ------------------------------------------------------------------------------------------------
def _card(device, device_type, params, functions=None):
    functions = functions or {device: {"rdma_devices": ["mlx5_0"], "netdevs": ["ibp24s0"], "link_layers": ["InfiniBand"],
                                       "vendor": "0x15b3"}}
    return {"device": device, "functions": functions, "device_type": device_type,
            "params": dict((name, list(values)) for name, values in params.items())}


def _observed():
    cx7 = _card("0000:18:00.0", "ConnectX7", {
        "SRIOV_EN": ("False(0)", "True(1)", "True(1)"), "NUM_OF_VFS": ("0", "16", "16"),
        "LINK_TYPE_P1": ("IB(1)", "IB(1)", "IB(1)"), "ROCE_CC_PRIO_MASK_P1": ("255", "255", "255"),
        "CNP_DSCP_P1": ("48", "48", "48"), "CNP_802P_PRIO_P1": ("6", "6", "6"), "ATS_ENABLED": ("False(0)", "False(0)", "True(1)"),
        "ADVANCED_PCI_SETTINGS": ("False(0)", "False(0)", "False(0)"), "MODULE_SPLIT_M0": ("Array[0..15]",) * 3})
    cx6dx = _card("0000:01:00.0", "ConnectX6DX", {
        "SRIOV_EN": ("False(0)", "False(0)", "False(0)"), "NUM_OF_VFS": ("0", "0", "0"),
        "ROCE_CC_PRIO_MASK_P1": ("255", "255", "255"), "ROCE_CC_PRIO_MASK_P2": ("255", "255", "255"),
        "CNP_DSCP_P1": ("48", "48", "48"), "CNP_DSCP_P2": ("48", "48", "48"),
        "ADVANCED_PCI_SETTINGS": ("False(0)", "True(1)", "True(1)")},
        {"0000:01:00.0": {"rdma_devices": ["mlx5_1"], "netdevs": ["ens1f0np0"], "link_layers": ["Ethernet"], "vendor": "0x15b3"},
         "0000:01:00.1": {"rdma_devices": ["mlx5_2"], "netdevs": ["ens1f1np1"], "link_layers": ["Ethernet"], "vendor": "0x15b3"}})
    intel = {"device": "0000:5a:00.0", "error": "not an NVIDIA (Mellanox) card (PCI vendor 0x8086): no mlxconfig parameters",
             "functions": {"0000:5a:00.0": {"rdma_devices": ["irdma0"], "netdevs": ["ens5"], "link_layers": ["Ethernet"],
                                            "vendor": "0x8086"}}}
    return {"tool": {"name": "mlxconfig", "path": "/usr/bin/mlxconfig", "reset": "mlxfwreset", "reset_path": "/usr/bin/mlxfwreset"},
            "cards": {"0000:18:00": cx7, "0000:01:00": cx6dx, "0000:5a:00": intel}}


def _plan(nics, observed=None, **kwargs):
    return plan.plan(plan.normalize(nics), observed or _observed(), **kwargs)


def test_selection_by_address_netdev_rdma_device_model_and_all():
    for selector in (["18:00.0"], ["0000:18:00.0"], ["ibp24s0"], ["mlx5_0"]):
        assert list(_plan([{"devices": selector, "cnp_dscp": 26}])["cards"]) == ["0000:18:00"]
    assert list(_plan([{"devices": ["ens1f1np1"], "cnp_dscp": 26}])["cards"]) == ["0000:01:00"]
    assert list(_plan([{"model": "ConnectX-6 Dx", "cnp_dscp": 26}])["cards"]) == ["0000:01:00"]
    # every NVIDIA card, not the Intel one
    assert sorted(_plan([{"cnp_dscp": 26}])["cards"]) == ["0000:01:00", "0000:18:00"]
    planned = _plan([{"model": "ConnectX-8", "cnp_dscp": 26}])
    assert planned["cards"] == {} and "matches no RDMA NIC" in planned["notes"][0] and "ConnectX7" in planned["notes"][0]
    planned = _plan([{"devices": ["mlx5_9"], "cnp_dscp": 26}])
    assert "nics[0].devices: 'mlx5_9' is not" in planned["problems"][0] and "mlx5_0" in planned["problems"][0]
    planned = _plan([{"devices": ["irdma0"], "cnp_dscp": 26}])
    assert "not an NVIDIA (Mellanox) card" in planned["problems"][0]


def test_sets_compare_with_next_boot_and_report_pending():
    planned = _plan([{"devices": ["mlx5_0"], "link_type": "ETH", "ats_enabled": False, "cnp_dscp": 26, "num_of_vfs": 16}])
    [step] = planned["actions"]
    assert step["action"] == "set" and step["target"] == "0000:18:00.0" and step["phase"] == 1
    # NUM_OF_VFS 16 is in Next Boot already: not staged again; ATS_ENABLED's Next Boot True(1) is
    assert step["params"] == {"LINK_TYPE_P1": {"before": "IB(1)", "after": "ETH", "undo": "1", "current": "IB(1)"},
                              "ATS_ENABLED": {"before": "True(1)", "after": "False", "undo": "1", "current": "False(0)"},
                              "CNP_DSCP_P1": {"before": "48", "after": "26", "undo": "48", "current": "48"}}
    card = planned["cards"]["0000:18:00"]
    assert card["params"]["NUM_OF_VFS"] == {"desired": "16", "default": "0", "current": "16", "next": "16"}
    # pending after the plan: what differs from Current (ATS_ENABLED goes back to its Current value: not pending)
    assert card["pending"] == {"LINK_TYPE_P1": {"current": "IB(1)", "next": "ETH"}, "CNP_DSCP_P1": {"current": "48", "next": "26"}}
    assert planned["reset_required"] == ["0000:18:00.0"] and planned["problems"] == []


def test_a_staged_value_equal_to_current_is_no_longer_pending():
    planned = _plan([{"devices": ["mlx5_0"], "ats_enabled": False}])
    [step] = planned["actions"]
    assert step["params"] == {"ATS_ENABLED": {"before": "True(1)", "after": "False", "undo": "1", "current": "False(0)"}}
    assert planned["cards"]["0000:18:00"]["pending"] == {} and planned["reset_required"] == []
    # leaving it: ATS_ENABLED stays pending (Current False, Next Boot True), whatever the entry sets
    planned = _plan([{"devices": ["mlx5_0"], "cnp_dscp": 48}])
    assert planned["actions"] == [] and planned["cards"]["0000:18:00"]["pending"] == {
        "ATS_ENABLED": {"current": "False(0)", "next": "True(1)"}}
    assert planned["reset_required"] == ["0000:18:00.0"]
    planned = _plan([{"devices": ["mlx5_0"], "cnp_dscp": 48}], reset=True)
    assert planned["actions"] == [{"action": "reset", "target": "0000:18:00.0", "level": 3, "pending": ["ATS_ENABLED"]}]
    assert planned["reset_required"] == [] and planned["problems"] == []
    # asked to reset without the reset tool: refused before anything is staged
    observed = _observed()
    observed["tool"]["reset_path"] = None
    planned = _plan([{"devices": ["mlx5_0"], "cnp_dscp": 26}], observed, reset=True)
    assert planned["problems"] == ["reset=true needs mlxfwreset, which is not installed on the node (the staged values "
                                   "would stay pending until a reboot)"]


def test_ports_and_link_types():
    planned = _plan([{"model": "ConnectX6DX", "roce_cc_prio_mask": 8, "cnp_802p_prio": 3}])
    problems = planned["problems"]
    assert problems == ["nics[0].cnp_802p_prio: 0000:01:00.0 (mlx5_1, mlx5_2) has no CNP_802P_PRIO_P<n> parameter"]
    planned = _plan([{"model": "ConnectX6DX", "roce_cc_prio_mask": 8}])
    assert sorted(planned["actions"][0]["params"]) == ["ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"]
    # an Ethernet-only card has no LINK_TYPE: ETH is what it is, IB is impossible
    assert _plan([{"model": "ConnectX6DX", "link_type": "ETH"}])["actions"] == []
    planned = _plan([{"model": "ConnectX6DX", "link_type": ["ETH", "IB"]}])
    assert "has no LINK_TYPE parameter (its ports are fixed: Ethernet)" in planned["problems"][0]
    planned = _plan([{"devices": ["mlx5_0"], "link_type": ["IB", "ETH"]}])
    assert planned["problems"] == ["nics[0].link_type gives 2 port(s), 0000:18:00.0 (mlx5_0) has 1 (LINK_TYPE_P1)"]


def test_parameters_the_card_does_not_list_arrays_and_conflicts():
    planned = _plan([{"model": "ConnectX6DX", "raw": {"PROG_PARSE_GRAPH": True}}])
    assert planned["problems"] == ["nics[0]: 0000:01:00.0 (mlx5_1, mlx5_2) (ConnectX6DX) has no firmware parameter "
                                   "PROG_PARSE_GRAPH (its mlxconfig query does not list it)"]
    planned = _plan([{"devices": ["mlx5_0"], "raw": {"MODULE_SPLIT_M0": 1}}])
    assert "array parameter" in planned["problems"][0]
    planned = _plan([{"cnp_dscp": 26}, {"devices": ["mlx5_0"], "raw": {"CNP_DSCP_P1": 24}}])
    assert planned["problems"] == ["nics[0] and nics[1] want CNP_DSCP_P1 of 0000:18:00.0 (mlx5_0) as 26 and 24"]
    # the same value twice is no conflict (case of an enum name, or IB twice)
    assert _plan([{"link_type": "ETH", "devices": ["mlx5_0"]}, {"devices": ["mlx5_0"], "raw": {"LINK_TYPE_P1": "eth"}}])["problems"] == []


def test_max_acc_out_read_stages_advanced_pci_settings_first():
    planned = _plan([{"devices": ["mlx5_0"], "max_acc_out_read": 44}])
    assert [(s["phase"], sorted(s["params"])) for s in planned["actions"]] == [
        (1, ["ADVANCED_PCI_SETTINGS"]), (2, ["MAX_ACC_OUT_READ"])]
    assert planned["actions"][1]["params"]["MAX_ACC_OUT_READ"] == {"before": None, "after": "44", "undo": None, "current": None}
    assert sorted(planned["cards"]["0000:18:00"]["pending"]) == ["ADVANCED_PCI_SETTINGS", "ATS_ENABLED", "MAX_ACC_OUT_READ"]
    # ADVANCED_PCI_SETTINGS already set and still no MAX_ACC_OUT_READ: the firmware does not offer it
    planned = _plan([{"model": "ConnectX6DX", "max_acc_out_read": 44}])
    assert "has no firmware parameter MAX_ACC_OUT_READ" in planned["problems"][0]


def test_no_tool_is_one_problem():
    observed = _observed()
    observed["tool"] = {"name": None, "path": None, "reset": None, "reset_path": None}
    assert _plan([{"cnp_dscp": 26}], observed)["problems"] == [
        "mlxconfig or mstconfig is not installed on the node (install mstflint, or MFT/DOCA for mlxconfig)"]


@pytest.mark.parametrize("nics, message", [
    ("x", "nics must be a list"), ([1], "nics[0] must be a dict"), ([{"cnp_dscp": 64}], "nics[0].cnp_dscp must be from 0 to 63"),
    ([{"cnp_dscp": True}], "nics[0].cnp_dscp must be an integer"), ([{"link_type": "RoCE"}], "nics[0].link_type must be IB or ETH"),
    ([{"sriov_en": "yes"}], "nics[0].sriov_en must be true or false"), ([{"model": "ConnectX7"}], "nics[0] sets nothing"),
    ([{"devices": ["mlx5_0"], "model": "ConnectX7", "cnp_dscp": 1}], "give devices or model, not both"),
    ([{"bogus": 1}], "unknown option(s) bogus"), ([{"raw": {"cnp_dscp_p1": 1}}], "is not a firmware parameter name"),
    ([{"raw": {"CNP_DSCP_P1": "1 2"}}], "nics[0].raw.CNP_DSCP_P1 must be a number or a value name"),
    ([{"roce_cc_prio_mask": 256}], "must be from 0 to 255"), ([{"cnp_802p_prio": 8}], "must be from 0 to 7"),
])
def test_normalize_refuses_with_the_option_and_value(nics, message):
    with pytest.raises(InputError, match=re.escape(message)):
        plan.normalize(nics)


# -- the judge, pure -----------------------------------------------------------------------------------------------
def test_judge_params_pending_and_options():
    observed = _observed()
    checks = judge.judge(observed, {"nic_firmware_nics": [{"devices": ["mlx5_0"], "cnp_dscp": 26}]})
    by_id = [(c["id"], c["subject"], c["status"]) for c in checks]
    assert by_id == [("firmware.params", "0000:18:00.0 (mlx5_0)", "drift"),
                     ("firmware.pending", "0000:01:00.0 (mlx5_1, mlx5_2)", "ok"),
                     ("firmware.pending", "0000:18:00.0 (mlx5_0)", "drift")]
    params = checks[0]
    assert params["desired"] == {"CNP_DSCP_P1": "26"} and params["live"] == {"CNP_DSCP_P1": "48"}
    assert params["persisted"] == {"CNP_DSCP_P1": "48"} and "CNP_DSCP_P1" in params["detail"]
    assert checks[2]["live"] == {"ATS_ENABLED": "False(0)"} and checks[2]["persisted"] == {"ATS_ENABLED": "True(1)"}
    assert "mlxfwreset" in checks[2]["remedy"] and "ATS_ENABLED False(0) -> True(1)" in checks[2]["detail"]
    # a parameter the card lacks is a fail naming the card; a bad option a fail of the options
    checks = judge.judge(observed, {"nic_firmware_nics": [{"model": "ConnectX6DX", "raw": {"PROG_PARSE_GRAPH": 1}}]})
    assert (checks[0]["id"], checks[0]["status"], checks[0]["subject"]) == (
        "firmware.params", "fail", "0000:01:00.0 (mlx5_1, mlx5_2)")
    checks = judge.judge(observed, {"nic_firmware_nics": [{"cnp_dscp": 99}]})
    assert (checks[0]["id"], checks[0]["status"]) == ("firmware.options", "fail") and "0 to 63" in checks[0]["detail"]
    # facts-only: the pending checks only; no facts: unknown when managed
    assert [c["id"] for c in judge.judge(observed, None)] == ["firmware.pending"] * 2
    assert judge.judge(None, {"nic_firmware_nics": [{"cnp_dscp": 1}]})[0]["status"] == "unknown"
    assert judge.judge(None, None) == []
    observed["tool"]["path"] = None
    checks = judge.judge(observed, {"nic_firmware_nics": [{"cnp_dscp": 1}]})
    assert (checks[0]["id"], checks[0]["status"]) == ("firmware.tool", "fail")


def test_inventory_one_configuration_per_model():
    one = _observed()
    two = copy.deepcopy(one)
    three = copy.deepcopy(one)
    three["cards"]["0000:18:00"]["params"]["CNP_DSCP_P1"] = ["48", "26", "26"]
    found = judge.inventory_judge({"a": one, "b": two, "c": three, "d": None})
    assert [(c["subject"], c["status"]) for c in found["a"]] == [("ConnectX6DX", "ok"), ("ConnectX7", "ok")]
    [cx6, cx7] = found["c"]
    assert cx6["status"] == "ok" and cx7["status"] == "drift" and cx7["live"] == {"0000:18:00.0 (mlx5_0)": {"CNP_DSCP_P1": "26"}}
    assert cx7["desired"]["CNP_DSCP_P1"] == "48" and "a, b" in cx7["detail"] and found["d"] == []
    # unmanaged parameters do not count
    two["cards"]["0000:18:00"]["params"]["MODULE_SPLIT_M0"] = ["x", "y", "y"]
    assert all(c["status"] == "ok" for c in judge.inventory_judge({"a": one, "b": two})["b"])


# -- the module on simulated nodes ---------------------------------------------------------------------------------
@pytest.fixture
def sim(tmp_path, monkeypatch):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel

    def make(spec):
        return sim_node(spec, tmp_path, monkeypatch)
    return make


def run(monkeypatch, root, check=False, expect=None, diff=True, **args):
    args.setdefault("host_root", str(root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, nic_firmware.main, args, check=check, diff=diff, **kwargs)


def query(node, device, tool="mlxconfig"):
    """The card's parameters as the simulator's own tool prints them (not through the module)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    out = subprocess.run([shutil.which(tool), "-e", "-d", device, "q"], capture_output=True, text=True, check=True).stdout
    assert "/hwsim/shims/" in shutil.which(tool)
    return dict((name, (row["current"], row["next"])) for name, row in mlxconfig.parse_query(out)["params"].items())


ROCE = [{"model": "ConnectX-6 Dx", "ats_enabled": False, "roce_cc_prio_mask": 8, "cnp_dscp": 24, "cnp_802p_prio": 3,
         "max_acc_out_read": 44}]


def test_roce_node_check_stage_idempotent_pending_until_reset(monkeypatch, sim):
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    with sim("roce-cx6dx") as node:
        before = query(node, "0000:01:00.0")
        checked = run(monkeypatch, node.root, check=True, nics=ROCE)
        assert [(a["action"], a["phase"], sorted(a["params"])) for a in checked["actions"]] == [
            ("set", 1, ["ADVANCED_PCI_SETTINGS", "CNP_802P_PRIO_P1", "CNP_802P_PRIO_P2", "CNP_DSCP_P1", "CNP_DSCP_P2",
                        "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"]),
            ("set", 2, ["MAX_ACC_OUT_READ"])]
        assert checked["changed"] is True and checked["reboot_required"] is True
        assert checked["reset_required"] == ["0000:01:00.0"] and query(node, "0000:01:00.0") == before
        assert checked["diff"][0]["before"].startswith("ADVANCED_PCI_SETTINGS=False(0) (current False(0))\n")
        assert "CNP_DSCP_P1=24\n" in checked["diff"][0]["after"]
        card = checked["firmware"]["0000:01:00"]
        assert card["device_type"] == "ConnectX6DX" and card["params"]["CNP_DSCP_P1"] == {
            "desired": "24", "default": "48", "current": "48", "next": "48"}

        applied = run(monkeypatch, node.root, nics=ROCE)
        assert applied["actions"] == checked["actions"] and applied["reboot_required"] is True
        now = query(node, "0000:01:00.0")
        assert now["CNP_DSCP_P2"] == ("48", "24") and now["MAX_ACC_OUT_READ"] == ("0", "44")
        assert now["ROCE_CC_PRIO_MASK_P1"] == ("255", "8") and now["ATS_ENABLED"] == ("False(0)", "False(0)")
        again = run(monkeypatch, node.root, nics=ROCE)
        assert again["changed"] is False and again["actions"] == [] and again["reboot_required"] is True

        # the audit: the parameters are staged (ok), the change is pending (drift) until the firmware reset
        desired = {"nic_firmware_nics": ROCE}
        facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]
        checks = [c for c in _audit.audit_host(facts, desired, ["firmware"]) if c["layer"] == "firmware"]
        assert [(c["id"], c["status"]) for c in checks] == [("firmware.params", "ok"), ("firmware.pending", "drift")]
        assert checks[1]["live"]["MAX_ACC_OUT_READ"] == "0" and checks[1]["persisted"]["MAX_ACC_OUT_READ"] == "44"
        assert "mlxfwreset" in checks[1]["remedy"]

        reset = run(monkeypatch, node.root, nics=ROCE, reset=True)
        assert reset["actions"] == [{"action": "reset", "target": "0000:01:00.0", "level": 3, "pending": sorted(
            ["ADVANCED_PCI_SETTINGS", "CNP_802P_PRIO_P1", "CNP_802P_PRIO_P2", "CNP_DSCP_P1", "CNP_DSCP_P2",
             "MAX_ACC_OUT_READ", "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"])}]
        assert reset["changed"] is True and reset["reboot_required"] is False
        assert query(node, "0000:01:00.0")["CNP_DSCP_P1"] == ("24", "24")
        facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]
        checks = [c for c in _audit.audit_host(facts, desired, ["firmware"]) if c["layer"] == "firmware"]
        assert [(c["id"], c["status"]) for c in checks] == [("firmware.params", "ok"), ("firmware.pending", "ok")]
        final = run(monkeypatch, node.root, nics=ROCE, reset=True)
        assert final["changed"] is False and final["reboot_required"] is False


def test_power_on_applies_the_staged_values_too(monkeypatch, sim):
    with sim("roce-cx6dx") as node:
        run(monkeypatch, node.root, nics=[{"devices": ["ens1f1np1"], "sriov_en": True, "num_of_vfs": 4}])
        assert query(node, "0000:01:00.0")["NUM_OF_VFS"] == ("8", "4")
        assert (node.root / "sys/bus/pci/devices/0000:01:00.0/sriov_totalvfs").read_text() == "8\n"
        node.reboot()
        assert query(node, "0000:01:00.0")["NUM_OF_VFS"] == ("4", "4")
        assert (node.root / "sys/bus/pci/devices/0000:01:00.0/sriov_totalvfs").read_text() == "4\n"


def test_connectx6dx_refuses_what_it_does_not_have(monkeypatch, sim):
    with sim("roce-cx6dx") as node:
        before = query(node, "0000:01:00.0")
        failed = run(monkeypatch, node.root, nics=[{"link_type": "IB"}], expect=ModuleFail)
        assert "nothing was staged" in failed["msg"] and "has no LINK_TYPE parameter" in failed["msg"]
        failed = run(monkeypatch, node.root, nics=[{"cnp_dscp": 10, "raw": {"PROG_PARSE_GRAPH": True}}], expect=ModuleFail)
        assert "has no firmware parameter PROG_PARSE_GRAPH" in failed["msg"] and failed["changed"] is False
        assert query(node, "0000:01:00.0") == before
        # ETH on an Ethernet-only card is what it has
        assert run(monkeypatch, node.root, nics=[{"link_type": "ETH"}])["changed"] is False
        # the simulated tool itself refuses too, as the real one (NVIDIA/5t5g#3)
        import subprocess  # pylint: disable=import-outside-toplevel
        done = subprocess.run([shutil.which("mlxconfig"), "-d", "0000:01:00.0", "-y", "set", "PROG_PARSE_GRAPH=1"],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 1 and mlxconfig.errors_of(done.stdout) == ["Unknown Parameter: PROG_PARSE_GRAPH"]


def test_dgx_connectx7_link_types_tools_and_all_or_nothing(monkeypatch, sim):
    with sim("dgx-h100") as node:
        # mstconfig's older layout and mlxconfig's newer one read the same
        assert query(node, "0000:29:00.0", "mstconfig") == query(node, "0000:29:00.0", "mlxconfig")
        eth = [{"devices": ["enp41s0f0np0"], "link_type": ["IB", "ETH"]}]
        checked = run(monkeypatch, node.root, check=True, tool="mstconfig", nics=eth)
        assert [sorted(a["params"]) for a in checked["actions"]] == [["LINK_TYPE_P1"]]
        assert checked["actions"][0]["params"]["LINK_TYPE_P1"]["before"] == "ETH(2)"
        assert run(monkeypatch, node.root, tool="mstconfig", nics=eth)["changed"] is True
        assert query(node, "0000:29:00.0")["LINK_TYPE_P1"] == ("ETH(2)", "IB(1)")
        # a raw value the device refuses (CNP_DSCP is 6 bits) after another card was staged: that card is staged back
        nics = [{"devices": ["mlx5_0"], "cnp_dscp": 26}, {"devices": ["mlx5_9"], "raw": {"CNP_DSCP_P1": 64}}]
        failed = run(monkeypatch, node.root, nics=nics, expect=ModuleFail)
        assert "The value 64 is not valid,  as its size is 6 bits" in failed["msg"]
        assert "the values staged before were staged back" in failed["msg"]
        assert query(node, "0000:18:00.0")["CNP_DSCP_P1"] == ("48", "48")
        # a set that does not read back: undone as well
        real = nic_firmware._apply._run_set  # pylint: disable=protected-access
        calls = []

        def lossy(commands, tool, device, values):
            calls.append((device, values))
            if device == "0000:c0:00.0":
                return None  # claims success, stages nothing
            return real(commands, tool, device, values)
        monkeypatch.setattr(nic_firmware._apply, "_run_set", lossy)  # pylint: disable=protected-access
        failed = run(monkeypatch, node.root, nics=[{"devices": ["mlx5_0", "mlx5_9"], "ats_enabled": True}], expect=ModuleFail)
        assert "0000:c0:00.0: Next Boot does not hold the staged values" in failed["msg"]
        assert query(node, "0000:18:00.0")["ATS_ENABLED"] == ("False(0)", "False(0)")
        assert calls[-1] == ("0000:18:00.0", [("ATS_ENABLED", "0")])


def test_the_module_refuses_bad_options(monkeypatch, sim):
    with sim("roce-cx6dx") as node:
        failed = run(monkeypatch, node.root, nics=[{"cnp_dscp": 64}], expect=ModuleFail)
        assert "nics[0].cnp_dscp must be from 0 to 63, got 64" in failed["msg"]
        failed = run(monkeypatch, node.root, nics=[{"cnp_dscp": 1}], reset_level=4, expect=ModuleFail)
        assert "reset_level" in failed["msg"]
        failed = run(monkeypatch, node.root, nics=[{"devices": ["mlx5_7"], "cnp_dscp": 1}], expect=ModuleFail)
        assert "'mlx5_7' is not the PCI address, netdev or RDMA device" in failed["msg"]


@pytest.mark.parametrize("bad", [48, 4.8, None, ["48"], True])
def test_a_parameter_of_another_type_on_one_host_fails_no_other_host(bad):
    """Signatures are sorted across the inventory: a value that is not a text next to texts raised TypeError and
    failed every host's report; such a card takes no part in the comparison, the other hosts are judged."""
    one = _observed()
    two = copy.deepcopy(one)
    odd = copy.deepcopy(one)
    odd["cards"]["0000:18:00"]["params"]["CNP_DSCP_P1"] = ["48", bad, bad]
    found = judge.inventory_judge({"a": one, "b": two, "c": odd})
    assert [(c["subject"], c["status"]) for c in found["a"]] == [("ConnectX6DX", "ok"), ("ConnectX7", "ok")]
    assert [(c["subject"], c["status"]) for c in found["c"]] == [("ConnectX6DX", "ok")]
    odd["cards"]["0000:18:00"]["device_type"] = 7
    assert [c["subject"] for c in judge.inventory_judge({"a": one, "c": odd})["c"]] == ["ConnectX6DX"]
