"""The health layer (issue 19 item 4, a room judged and not provisioned): its observer on the simulator's archetypes
(healthy ones give no finding, dgx-h100-degraded exactly its link and ACS faults, specs with a Polling port, counters
and firmware of their own), the judge's rules and options, hostile sysfs values, the inventory firmware check, and
rdma_facts + the audit end to end through the registry alone."""

import copy
import json
import pathlib
import struct

import pytest
import yaml

import hwsim
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health import judge, observe
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config

REPO = pathlib.Path(__file__).resolve().parents[5]
SPECS = REPO / "tests" / "hwsim" / "specs"
HEALTHY = ("dgx-h100", "roce-cx6dx", "numa-split", "a100-10nic", "dell-xe9680-12nic")


def facts_of(root):
    return observe.facts(HostRoot(str(root)))


def render(name_or_path, root):
    hwsim.render(str(name_or_path), root)
    return root


def findings(checks):
    return sorted((c["id"], c["subject"], c["status"]) for c in checks if c["status"] != "ok")


def spec_with(tmp_path, base, edit, name="faulty"):
    data = yaml.safe_load((SPECS / (base + ".yaml")).read_text(encoding="utf-8"))
    data["name"] = name
    edit(data)
    path = tmp_path / (name + ".yaml")
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def nics_of(data):
    todo, found = list(data["pci"]), []
    while todo:
        item = todo.pop(0)
        if "nic" in item:
            found.append(item)
        todo[:0] = item.get("children") or []
    return found


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_archetypes_have_no_finding(tmp_path, name):
    section = facts_of(render(name, tmp_path))
    assert section["nics"] and section["links"]
    checks = judge.judge(section, None)
    assert findings(checks) == []
    assert {"health.pcie_link", "health.port", "health.counters"} <= set(c["id"] for c in checks)
    if name != "roce-cx6dx":  # its GPUs have no NIC on their switch: still pairs, on other root ports
        assert any(c["id"] == "health.acs" for c in checks)


def test_degraded_archetype_gives_exactly_its_link_and_acs_faults(tmp_path):
    section = facts_of(render("dgx-h100-degraded", tmp_path))
    checks = judge.judge(section, None)
    assert findings(checks) == [("health.acs", "0000:3f:00.0", "fail"), ("health.acs", "0000:3f:02.0", "fail"),
                                ("health.pcie_link", "0000:18:00.0 (mlx5_0)", "fail")]
    link = [c for c in checks if c["status"] == "fail" and c["id"] == "health.pcie_link"][0]
    assert link["live"] == {"current": "32.0 GT/s PCIe x8", "max": "32.0 GT/s PCIe x16"}
    assert "0000:18:00.0-0000:17:00.0: trained at 32 GT/s x8, both ends can do 32 GT/s x16" in link["detail"]
    acs = [c for c in checks if c["subject"] == "0000:3f:00.0"][0]
    assert acs["live"] == {"control": "0x001d", "enabled": ["SV", "RR", "CR", "UF"]}
    assert "GPU 0000:43:00.0 <-> mlx5_3 (0000:40:00.0, PIX)" in acs["detail"] and "RR/CR on" in acs["detail"]
    assert "setpci -s 0000:3f:00.0 ECAP_ACS+6.w=0000:000c" in acs["remedy"] and "does not yet provide" in acs["remedy"]
    # the pair's bridges are the two downstream ports below the switch's upstream port (which has no ACS)
    pair = [p for p in section["pairs"] if p["gpu"] == "0000:43:00.0"][0]
    assert pair["nic"] == "mlx5_3" and pair["bridges"] == ["0000:3f:00.0", "0000:3f:02.0"]
    assert section["bridges"]["0000:3e:00.0"]["port_type"] == 5 and section["bridges"]["0000:3e:00.0"]["acs"] is False


def _fabric_faults(data):
    nics = nics_of(data)
    nics[0]["functions"][0].update({"phys_state": "Polling", "port_state": "DOWN"})
    nics[1]["functions"][0].update({"counters": {"symbol_error": 65535, "link_downed": 3, "port_rcv_errors": 10}})
    nics[2]["functions"][0].update({"port_state": "INIT", "phys_state": "LinkUp"})


def test_polling_port_init_port_and_counters_above_thresholds(tmp_path):
    root = render(spec_with(tmp_path, "dgx-h100", _fabric_faults), tmp_path / "root")
    checks = judge.judge(facts_of(root), None)
    # spec order: the rail NIC 18:00.0 (mlx5_0), the storage card 29:00.0 (mlx5_1/2), the rail NIC 40:00.0 (mlx5_3)
    assert findings(checks) == [("health.counters", "mlx5_1/1", "fail"), ("health.port", "mlx5_0/1", "fail"),
                                ("health.port", "mlx5_3/1", "fail")]
    by = dict(((c["id"], c["subject"]), c) for c in checks)
    assert "phys_state Polling: no link partner" in by[("health.port", "mlx5_0/1")]["detail"]
    assert "up but the port is INIT (no subnet manager" in by[("health.port", "mlx5_3/1")]["detail"]
    counters = by[("health.counters", "mlx5_1/1")]
    assert "symbol_error 65535 > 10 (saturated" in counters["detail"] and "link_downed 3 > 2" in counters["detail"]
    assert "port_rcv_errors" not in counters["detail"]  # 10 is at the threshold, not above it
    # thresholds from the inventory: a partial dict keeps the other defaults, null switches a counter off
    relaxed = judge.judge(facts_of(root), {"rdma_audit_counter_thresholds": {"symbol_error": None, "link_downed": 5}})
    assert ("health.counters", "mlx5_1/1", "fail") not in findings(relaxed)
    strict = judge.judge(facts_of(root), {"rdma_audit_counter_thresholds": {"port_rcv_errors": 0, "symbol_error": None,
                                                                            "link_downed": 5}})
    assert "port_rcv_errors 10 > 0" in [c for c in strict if c["id"] == "health.counters" and c["status"] == "fail"][0]["detail"]


def test_rate_counts_and_options(tmp_path):
    section = facts_of(render("roce-cx6dx", tmp_path))
    # the simulated ConnectX-6 Dx ports run at "100 Gb/sec (2X HDR)"
    desired = {"rdma_audit_port_rate": {"Ethernet": 100}, "rdma_audit_expected_gpus": 2, "rdma_audit_expected_nics": 2}
    assert findings(judge.judge(section, desired)) == []
    desired = {"rdma_audit_port_rate": {"Ethernet": 400}, "rdma_audit_expected_gpus": 4, "rdma_audit_expected_nics": 2}
    checks = judge.judge(section, desired)
    assert findings(checks) == [("health.gpu_count", None, "fail"), ("health.port", "mlx5_0/1", "fail"),
                                ("health.port", "mlx5_1/1", "fail")]
    port = [c for c in checks if c["id"] == "health.port"][0]
    assert "below rdma_audit_port_rate[Ethernet] = 400 Gb/s" in port["detail"]
    assert [c["detail"] for c in checks if c["id"] == "health.gpu_count"] == ["2 GPUs, rdma_audit_expected_gpus expects 4"]
    bad = {"rdma_audit_port_rate": {"Infiniband": 400}, "rdma_audit_counter_thresholds": {"symbol_error": -1},
           "rdma_audit_expected_gpus": "8", "rdma_audit_expected_nics": True}
    checks = judge.judge(section, bad)
    options = [c["detail"] for c in checks if c["id"] == "health.options"]
    assert len(options) == 4 and all(c["status"] == "fail" for c in checks if c["id"] == "health.options")
    assert any("rdma_audit_port_rate" in o and "'Infiniband'" in o for o in options)
    assert any("rdma_audit_expected_gpus must be an integer >= 0, got '8'" == o for o in options)
    # the bad options fall back to their defaults: nothing else fails
    assert [f for f in findings(checks) if f[0] != "health.options"] == []


def test_facts_only_still_reports(tmp_path):
    section = facts_of(render("dgx-h100-degraded", tmp_path))
    assert findings(judge.judge(section, None)) == findings(judge.judge(section, {}))
    assert len(findings(judge.judge(section, None))) == 3
    assert judge.judge(None, None) == [dict(judge.judge(None, None)[0], status="unknown")]


def test_firmware_must_be_one_version_per_model_across_the_inventory(tmp_path):
    same = facts_of(render("roce-cx6dx", tmp_path / "a"))
    other_fw = spec_with(tmp_path, "roce-cx6dx", lambda data: nics_of(data)[0].update(fw_ver="22.36.1010"))
    other = facts_of(render(other_fw, tmp_path / "b"))
    ok = judge.inventory_judge({"node-1": same, "node-2": same, "gone": None})
    assert [(c["id"], c["subject"], c["status"]) for c in ok["node-1"]] == [("health.firmware", "MT4125", "ok")]
    assert ok["gone"] == []
    mixed = judge.inventory_judge({"node-1": same, "node-2": same, "node-3": other})
    for host in ("node-1", "node-2", "node-3"):
        (check,) = mixed[host]
        assert (check["id"], check["subject"], check["status"]) == ("health.firmware", "MT4125", "fail")
        assert check["desired"] == "22.39.1002"
        assert check["detail"] == ("MT4125 runs 2 firmware versions across the inventory: 22.36.1010 on node-3; "
                                   "22.39.1002 on node-1, node-2")
    assert mixed["node-3"][0]["live"] == {"mlx5_0": "22.36.1010", "mlx5_1": "22.36.1010"}
    assert _registry.by_name("health").inventory_judge is judge.inventory_judge
    judged_across = ("health", "firmware", "qos", "sriov", "topology")
    assert all(layer.inventory_judge is None for layer in _registry.LAYERS if layer.name not in judged_across)


# -- hostile values ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attr,value", [
    ("current_link_speed", "Unknown\n"), ("current_link_speed", ""), ("max_link_width", "x16\n"),
    ("current_link_width", "sixteen\n"), ("max_link_speed", "32.0 GB/s\n"), ("current_link_width", "\xb2\n"),
])
def test_odd_link_values_are_unknown_not_a_traceback(tmp_path, attr, value):
    root = render("dgx-h100", tmp_path)
    target = root / "sys/bus/pci/devices/0000:18:00.0" / attr
    target.write_text(value, encoding="utf-8")
    checks = judge.judge(facts_of(root), None)
    assert findings(checks) == [("health.pcie_link", "0000:18:00.0 (mlx5_0)", "unknown")]


def test_unreadable_files_are_unknown(tmp_path):
    root = render("dgx-h100", tmp_path)
    for path in ("sys/bus/pci/devices/0000:18:00.0/current_link_width", "sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error"):
        (root / path).unlink()
        (root / path).mkdir()  # a directory where a file belongs: read_bytes refuses it (EISDIR)
    config_path = root / "sys/bus/pci/devices/0000:3f:00.0/config"
    config_path.write_bytes(config_path.read_bytes()[:64])  # what an unprivileged reader gets
    checks = judge.judge(facts_of(root), None)
    assert findings(checks) == [("health.acs", "0000:3f:00.0", "unknown"), ("health.counters", "mlx5_3/1", "unknown"),
                                ("health.pcie_link", "0000:18:00.0 (mlx5_0)", "unknown")]
    by = dict(((c["id"], c["subject"]), c) for c in checks)
    assert "only the 64-byte header" in by[("health.acs", "0000:3f:00.0")]["detail"]
    assert "it is a directory" in by[("health.pcie_link", "0000:18:00.0 (mlx5_0)")]["detail"]


@pytest.mark.parametrize("attr,value,status", [
    ("counters/symbol_error", "N/A (no PMA)\n", "unknown"), ("counters/link_downed", "\n", "unknown"),
    ("phys_state", "9: Garbage\n", "unknown"), ("state", "\n", "unknown"), ("phys_state", "3: Disabled\n", "fail"),
    ("rate", "fast\n", None),
])
def test_odd_port_values(tmp_path, attr, value, status):
    root = render("roce-cx6dx", tmp_path)
    (root / "sys/class/infiniband/mlx5_0/ports/1" / attr).write_text(value, encoding="utf-8")
    checks = judge.judge(facts_of(root), {"rdma_audit_port_rate": {"Ethernet": 100}} if status is None else None)
    if status is None:  # a rate that is not a kernel rate is unknown when a rate is expected
        assert findings(checks) == [("health.port", "mlx5_0/1", "unknown")]
    else:
        assert [found[2] for found in findings(checks) if found[1] == "mlx5_0/1"] == [status]


def test_parsers():
    assert judge.speed_of("32.0 GT/s PCIe") == 32.0 and judge.speed_of("8 GT/s") == 8.0 and judge.speed_of("2.5 GT/s PCIe") == 2.5
    assert judge.speed_of("Unknown") is None and judge.speed_of(None) is None and judge.speed_of("Unknown speed") is None
    assert judge.width_of("16") == 16 and judge.width_of("0") == 0 and judge.width_of("x16") is None
    assert judge.width_of(" 8\n") == 8 and judge.width_of(16) is None and judge.speed_of(["16 GT/s"]) is None  # junk
    assert judge.rate_of("400 Gb/sec (4X NDR)") == 400 and judge.rate_of("2.5 Gb/sec (1X SDR)") == 2.5
    assert judge.counter_of("0") == 0 and judge.counter_of("N/A (no PMA)") is None and judge.counter_of("-1") is None


# -- the extended capability walker (pcie/config.py) ----------------------------------------------------------------
def _ext(caps):
    data = bytearray(4096)
    for offset, cap_id, nxt in caps:
        data[offset:offset + 4] = struct.pack("<I", cap_id | (1 << 16) | (nxt << 20))
    return bytes(data)


def test_extended_capability_walker():
    assert config.find_ext_capability(_ext([(0x100, 0x0001, 0x148), (0x148, 0x000D, 0)]), 0x000D) == 0x148
    assert config.find_ext_capability(_ext([(0x100, 0x0001, 0)]), 0x000D) is None
    assert config.find_ext_capability(_ext([]), 0x000D) is None                     # header 0: none
    assert config.find_ext_capability(_ext([(0x100, 0x000D, 0)])[:256], 0x000D) is None  # conventional PCI: 256 bytes
    assert config.find_ext_capability(b"\xff" * 4096, 0x000D) is None               # all ones: no device
    assert config.find_ext_capability(_ext([(0x100, 0x0001, 0x40)]), 0x000D) is None  # next below 0x100 ends it
    with pytest.raises(ParseError, match="broken"):
        config.find_ext_capability(_ext([(0x100, 0x0001, 0x148), (0x148, 0x0002, 0x100)]), 0x000D)
    with pytest.raises(ParseError, match="past the"):
        config.find_ext_capability(_ext([(0x100, 0x0001, 0x1fc)])[:0x1fe], 0x000D)


# -- end to end: rdma_facts and the audit get the layer from the registry --------------------------------------------
def test_rdma_facts_and_the_audit_carry_the_layer(monkeypatch, tmp_path):
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    from unit.plugins.modules.harness import run_module  # pylint: disable=import-outside-toplevel
    root = render("dgx-h100-degraded", tmp_path)
    facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(root)})["ansible_facts"]["rdma"]
    assert facts["layers"]["health"]["links"]["0000:18:00.0"]["current_link_width"] == "8"
    checks = [c for c in _audit.audit_host(facts, None, ["health"]) if c["layer"] == "health"]
    assert sorted((c["id"], c["subject"]) for c in checks if c["status"] == "fail") == [
        ("health.acs", "0000:3f:00.0"), ("health.acs", "0000:3f:02.0"), ("health.pcie_link", "0000:18:00.0 (mlx5_0)")]
    desired = {"rdma_audit_expected_gpus": 8, "rdma_audit_expected_nics": 12, "rdma_audit_port_rate": {"InfiniBand": 400},
               "rdma_audit_counter_thresholds": {"symbol_error": "many"}}
    checks = [c for c in _audit.audit_host(facts, desired, ["health"]) if c["layer"] == "health"]
    assert [c["id"] for c in checks if c["id"] in ("health.gpu_count", "health.nic_count")] == [
        "health.gpu_count", "health.nic_count"]
    assert [c["status"] for c in checks if c["id"] == "health.options"] == ["fail"]
    report = _audit.audit({"n1": {"facts": facts, "desired": None}})
    assert report["hosts"]["n1"]["status"] == "fail" and "health" in report["hosts"]["n1"]["layers"]


def test_the_audit_report_carries_the_inventory_firmware_check(tmp_path):
    """_audit.audit() runs every room's inventory_judge: the firmware mismatch reaches each host's report."""
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    same = facts_of(render("roce-cx6dx", tmp_path / "a"))
    other_fw = spec_with(tmp_path, "roce-cx6dx", lambda data: nics_of(data)[0].update(fw_ver="22.36.1010"))
    other = facts_of(render(other_fw, tmp_path / "b"))
    hosts = dict((name, {"facts": {"layers": {"health": section}}, "desired": None})
                 for name, section in (("node-1", same), ("node-2", same), ("node-3", other)))
    hosts["node-4"] = {"facts": {"layers": {"health": other}}, "desired": None, "layers": ["kernel"]}
    report = _audit.audit(hosts)
    for name in ("node-1", "node-2", "node-3"):
        firmware = [c for c in report["hosts"][name]["checks"] if c["id"] == "health.firmware"]
        assert [(c["layer"], c["subject"], c["status"]) for c in firmware] == [("health", "MT4125", "fail")]
        assert firmware[0]["remedy"]
    # a host whose audit leaves the health layer out is not judged, but its NICs run in the same inventory and are
    # counted (as mtu.inventory counts every host's MTUs)
    assert not [c for c in report["hosts"]["node-4"]["checks"] if c["id"] == "health.firmware"]
    assert "22.36.1010 on node-3, node-4; 22.39.1002 on node-1, node-2" in firmware[0]["detail"]


@pytest.mark.parametrize("name", ["dgx-h100-degraded", "dell-xe9680-12nic"])
def test_link_values_parsed_once_per_host_judge_as_parsed_per_device(tmp_path, name):
    """_pcie_links shares one memo of parsed link values between a host's devices (links above a switch are on
    several devices' chains); each device judged with a fresh memo gives the same findings, degraded or unreadable
    links included."""
    section = facts_of(render(name, tmp_path))
    variants = [section]
    for bdf in sorted(section["links"])[:8]:
        for key, value in (("current_link_width", "4"), ("max_link_speed", "Unknown"), ("current_link_speed", "junk")):
            changed = json.loads(json.dumps(section))
            changed["links"][bdf][key] = value
            variants.append(changed)
    for variant in variants:
        shared = {}
        for bdf in sorted(variant["paths"]):
            assert judge._link_findings(variant, bdf, shared) == judge._link_findings(variant, bdf)  # pylint: disable=protected-access
        assert set(shared) <= set(variant["links"]) | set(b for chain in variant["paths"].values() for b in chain)


def test_pcie_links_parse_each_link_once(tmp_path, monkeypatch):
    section = facts_of(render("dgx-h100", tmp_path))
    parsed = []
    real = judge.speed_of
    monkeypatch.setattr(judge, "speed_of", lambda text: parsed.append(text) or real(text))
    checks = judge._pcie_links(section)  # pylint: disable=protected-access
    chains = set(b for chain in section["paths"].values() for b in chain) | set(section["paths"])
    # two speeds (current, max) per link end, each read once however many devices' chains it is on
    assert 0 < len(parsed) <= 2 * len(chains)
    assert checks and all(c["status"] == "ok" for c in checks)


@pytest.mark.parametrize("bad", [28.39, 2839, ["22.39.1002"], {"v": 1}, True, ""])
def test_a_firmware_version_of_another_type_on_one_host_fails_no_other_host(tmp_path, bad):
    """Versions are sorted across the inventory: a float (a YAML-edited facts cache) next to texts raised TypeError
    and failed every host's report; it is that host's unreadable version (unknown), the others are judged."""
    same = facts_of(render("roce-cx6dx", tmp_path / "a"))
    odd = copy.deepcopy(same)
    odd["nics"][0]["fw_ver"] = bad
    found = judge.inventory_judge({"node-1": same, "node-2": same, "node-3": odd})
    assert [(c["subject"], c["status"]) for c in found["node-1"]] == [("MT4125", "ok")]
    assert [(c["subject"], c["status"]) for c in found["node-3"]] == [("MT4125", "unknown")]
    # through the audit: the host with the odd value is judged, not the whole report lost
    report = _audit.audit(dict((name, {"facts": {"layers": {"health": section}}, "desired": None})
                               for name, section in (("node-1", same), ("node-3", odd))))
    firmware = dict((name, [c["status"] for c in host["checks"] if c["id"] == "health.firmware"])
                    for name, host in report["hosts"].items())
    assert firmware == {"node-1": ["ok"], "node-3": ["unknown"]}
