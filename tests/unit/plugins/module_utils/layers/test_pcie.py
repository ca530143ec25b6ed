"""The pcie layer (one room): config-space parsing against real devices decoded by the real lspci, the planner, the
judge (the planner run on the facts), and the module on node trees: check mode, apply, idempotence, all-or-nothing.

Real data: configuration spaces of real devices from pciutils' own test files (tests/fixtures/realworld/pciutils,
INDEX.md), decoded here by this machine's ``lspci -F`` (pciutils): our Max_Read_Request_Size and PCI Express
capability offset must be lspci's for every device in them.
"""

import ast
import os
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config, judge, observe, plan
from ansible_collections.rdma.k8s_node.plugins.modules import pcie_tuning
from unit.plugins.modules.harness import ModuleFail, run_module

REPO = pathlib.Path(__file__).resolve().parents[5]
PCIUTILS = REPO / "tests" / "fixtures" / "realworld" / "pciutils"
LSPCI = shutil.which("lspci")
_DEVICE = re.compile(r"^((?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ")
_HEX = re.compile(r"^([0-9a-f]{2,3}): ((?:[0-9a-f]{2} ?){1,16})$")


def dumps(path):
    """``{bdf: config bytes}`` from an ``lspci -xxx`` style file (bytes not dumped are zero, as lspci -F reads them)."""
    found, current = {}, None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _DEVICE.match(line)
        if match:
            current = match.group(1)
            found[current] = bytearray(4096)
            found[current + "#len"] = 0
            continue
        match = _HEX.match(line.strip())
        if match and current:
            offset = int(match.group(1), 16)
            data = bytes.fromhex(match.group(2).replace(" ", ""))
            found[current][offset:offset + len(data)] = data
            found[current + "#len"] = max(found[current + "#len"], offset + len(data))
    return dict((bdf, bytes(data[:found[bdf + "#len"]])) for bdf, data in found.items() if not bdf.endswith("#len"))


def lspci_view(path):
    """``{bdf: (express capability offset, MaxReadReq)}`` as the real lspci decodes the file (-F, offline)."""
    out = subprocess.run([LSPCI, "-F", str(path), "-vv"], capture_output=True, text=True, check=True).stdout
    view, current = {}, None
    for line in out.splitlines():
        match = _DEVICE.match(line)
        if match:
            current = match.group(1)
            view[current] = (None, None)
            continue
        cap = re.search(r"Capabilities: \[([0-9a-f]+)\] Express", line)
        if cap and current:
            view[current] = (int(cap.group(1), 16), view[current][1])
        mrrs = re.search(r"MaxReadReq (\d+) bytes", line)
        if mrrs and current and view[current][1] is None:
            view[current] = (view[current][0], int(mrrs.group(1)))
    return view


@pytest.mark.parametrize("name", sorted(p.name for p in PCIUTILS.iterdir()))
def test_real_devices_decode_as_lspci_does(name):
    if LSPCI is None:
        if os.environ.get("RDMA_REQUIRE_TOOLS"):  # scripts/test: setup installed pciutils, a skip would hide it
            pytest.fail("lspci (pciutils) is missing: scripts/setup installs it")
        pytest.skip("pciutils (lspci) is not installed (scripts/setup installs it)")
    path = PCIUTILS / name
    ours = dumps(path)
    theirs = lspci_view(path)
    assert ours and set(theirs) <= set(ours) | set(theirs)
    compared = 0
    for bdf, (cap, mrrs) in theirs.items():
        data = ours.get(bdf)
        if data is None or len(data) < 0x40:
            continue
        try:
            found = config.read_request(data)
        except ParseError:
            found = "broken"
        if cap is None:
            assert found in (None, "broken") or mrrs is None, (bdf, found)
            continue
        if mrrs is None:  # lspci shows the capability but the dump is too short for Device Control
            continue
        assert found != "broken" and found is not None, (bdf, cap, mrrs)
        assert (found[0], found[2]) == (cap, mrrs), bdf
        compared += 1
    if name.startswith(("cap-pcie", "tree-", "cap-exp")):
        assert compared >= 1


def _config(devctl=0x2937, cap=0x60, status=0x0010, next_cap=0):
    """A minimal PCIe function: a PM capability at 0x40 pointing at the Express capability at ``cap``."""
    data = bytearray(4096)
    data[0:4] = bytes((0xb3, 0x15, 0x1d, 0x10))  # Mellanox 101d (ConnectX-6 Dx)
    data[6:8] = struct.pack("<H", status)
    data[0x34] = 0x40
    data[0x40:0x42] = bytes((0x01, cap))
    data[cap:cap + 2] = bytes((0x10, next_cap))
    data[cap + 8:cap + 10] = struct.pack("<H", devctl)
    return bytes(data)


def test_a_capability_loop_is_refused():
    looped = _config(next_cap=0x40)  # Express at 0x60 points back at the PM capability at 0x40
    with pytest.raises(ParseError, match="broken"):
        config.find_capability(looped, cap_id=0x05)


def test_parse_sizes_and_setpci_values():
    assert config.read_request(_config(0x2937)) == (0x60, 0x2937, 512)
    assert config.read_request(_config(0x5937))[2] == 4096
    assert config.with_size(0x2937, 4096) == 0x5937 and config.with_size(0x5937, 128) == 0x0937
    assert config.setpci_value(4096) == "5000:7000" and config.setpci_value(512) == "2000:7000"
    assert config.read_request(_config(status=0)) is None  # no capability list


@pytest.mark.parametrize("data,message", [
    (_config(0x6937), "reserved"),
    (_config()[:64], "too short"),                      # an unprivileged read shows 64 bytes
    (_config(cap=0x20), "broken"),                      # a pointer into the header
    (_config(cap=0xfc)[:0xfd], "past the"),
])
def test_hostile_config_spaces_are_typed_errors(data, message):
    with pytest.raises(ParseError, match=message):
        config.read_request(data)


# -- a node tree --------------------------------------------------------------------------------------------------
PFS = {"0000:18:00.0": ("mlx5_0", 0x2937), "0000:29:00.0": ("mlx5_1", 0x5937)}
VF = "0000:18:00.2"


def make_node(root, pfs=None, setpci=True):
    pfs = PFS if pfs is None else pfs
    for bdf, (name, devctl) in pfs.items():
        dev = root / "sys/devices/pci0000:00" / bdf
        dev.mkdir(parents=True, exist_ok=True)
        (dev / "config").write_bytes(_config(devctl))
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
        os.symlink("../../../devices/pci0000:00/" + bdf, root / "sys/bus/pci/devices" / bdf)
        (root / "sys/class/infiniband").mkdir(parents=True, exist_ok=True)
        (dev / "infiniband" / name).mkdir(parents=True)
        os.symlink("../../devices/pci0000:00/%s/infiniband/%s" % (bdf, name), root / "sys/class/infiniband" / name)
        os.symlink("../../../" + bdf, dev / "infiniband" / name / "device")  # as the kernel links it
    vf = root / "sys/devices/pci0000:00" / VF
    (vf / "infiniband/mlx5_2").mkdir(parents=True)
    (vf / "config").write_bytes(_config(0x2937))
    os.symlink("../0000:18:00.0", vf / "physfn")
    os.symlink("../../devices/pci0000:00/%s/infiniband/mlx5_2" % VF, root / "sys/class/infiniband/mlx5_2")
    os.symlink("../../../" + VF, vf / "infiniband/mlx5_2/device")
    (root / "etc/systemd/system").mkdir(parents=True)
    if setpci:
        (root / "usr/bin").mkdir(parents=True)
        (root / "usr/bin/setpci").write_text("#!/bin/sh\n")
        (root / "usr/bin/setpci").chmod(0o755)
    return root


def devctl(root, bdf):
    return struct.unpack("<H", (root / "sys/bus/pci/devices" / bdf / "config").read_bytes()[0x68:0x6a])[0]


def run(monkeypatch, root, check=False, expect=None, **args):
    args.setdefault("host_root", str(root))
    args.setdefault("max_read_request", 4096)
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, pcie_tuning.main, args, check=check, diff=True, **kwargs)


def test_observer_finds_pfs_not_vfs(tmp_path):
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # pylint: disable=import-outside-toplevel
    host = HostRoot(str(make_node(tmp_path)))
    assert observe.rdma_pfs(host) == {"0000:18:00.0": ["mlx5_0"], "0000:29:00.0": ["mlx5_1"]}
    seen = observe.facts(host)
    assert seen["devices"]["0000:18:00.0"]["max_read_request"] == 512 and seen["setpci"] == "/usr/bin/setpci"
    assert seen["unit"]["exists"] is False


def test_check_then_apply_then_idempotent(monkeypatch, tmp_path):
    root = make_node(tmp_path)
    checked = run(monkeypatch, root, check=True)
    assert [(a["action"], a["target"]) for a in checked["actions"]] == [
        ("set_max_read_request", "0000:18:00.0"), ("write_unit", "/etc/systemd/system/rdma-k8s-node-pcie.service")]
    assert devctl(root, "0000:18:00.0") == 0x2937 and not (root / "etc/systemd/system/rdma-k8s-node-pcie.service").exists()
    applied = run(monkeypatch, root)
    assert applied["actions"] == checked["actions"] and applied["unit_changed"] is True
    assert devctl(root, "0000:18:00.0") == 0x5937 and devctl(root, "0000:29:00.0") == 0x5937
    unit = (root / "etc/systemd/system/rdma-k8s-node-pcie.service").read_text()
    assert "ExecStart=/usr/bin/setpci -s 0000:18:00.0 CAP_EXP+8.w=5000:7000\n" in unit
    assert "ExecStart=/usr/bin/setpci -s 0000:29:00.0 CAP_EXP+8.w=5000:7000\n" in unit
    assert "Before=openibd.service rdma-hw.target rdma-k8s-node-sriov.service kubelet.service" in unit
    again = run(monkeypatch, root)
    assert again["changed"] is False and again["actions"] == []
    # the VF was never touched
    assert struct.unpack("<H", (root / "sys/devices/pci0000:00" / VF / "config").read_bytes()[0x68:0x6a])[0] == 0x2937


def test_backup_files_map_the_unit_to_its_copy(monkeypatch, tmp_path):
    """backup_files is ``{edited path: backup path}``, as every module of the collection returns it (RETURN)."""
    root = make_node(tmp_path)
    created = run(monkeypatch, root, max_read_request=512, backup=True)
    assert created["changed"] is True and created["backup_files"] == {}, "a new unit has nothing to back up"
    check = run(monkeypatch, root, check=True, backup=True)
    assert check["changed"] is True and check["backup_files"] == {}
    result = run(monkeypatch, root, backup=True)
    unit = "/etc/systemd/system/rdma-k8s-node-pcie.service"
    assert list(result["backup_files"]) == [unit] and result["backup_files"][unit].startswith(str(root) + unit + ".")
    assert "CAP_EXP+8.w=2000:7000" in pathlib.Path(result["backup_files"][unit]).read_text()
    again = run(monkeypatch, root, backup=True)
    assert again["changed"] is False and again["backup_files"] == {}
    registers = run(monkeypatch, root, max_read_request=1024, boot_unit=False, backup=True)
    assert registers["changed"] is True and registers["backup_files"] == {}, "only registers changed: no file edited"


def test_devices_by_name_and_bad_names(monkeypatch, tmp_path):
    root = make_node(tmp_path)
    result = run(monkeypatch, root, check=True, devices=["mlx5_0"], boot_unit=False)
    assert [a["target"] for a in result["actions"]] == ["0000:18:00.0"]
    failed = run(monkeypatch, root, devices=["mlx5_9"], expect=ModuleFail)
    assert "devices: 'mlx5_9'" in failed["msg"] and "mlx5_0" in failed["msg"]
    failed = run(monkeypatch, root, devices=[VF], expect=ModuleFail)
    assert "not the physical function" in failed["msg"]
    failed = run(monkeypatch, root, max_read_request=300, expect=ModuleFail)
    assert "max_read_request" in failed["msg"]


def test_no_setpci_refuses_before_any_write(monkeypatch, tmp_path):
    root = make_node(tmp_path, setpci=False)
    failed = run(monkeypatch, root, expect=ModuleFail)
    assert "setpci (pciutils)" in failed["msg"] and "nothing was changed" in failed["msg"]
    assert failed["changed"] is False and failed["backup_files"] == {}
    assert devctl(root, "0000:18:00.0") == 0x2937
    assert run(monkeypatch, root, boot_unit=False)["changed"] is True


def test_a_write_that_does_not_stick_puts_everything_back(monkeypatch, tmp_path):
    root = make_node(tmp_path)
    real = pcie_tuning._apply._write_devctl  # pylint: disable=protected-access
    calls = []

    def stubborn(host, bdf, cap, value):
        calls.append((bdf, value))
        if bdf == "0000:29:00.0":
            return None  # the device ignores the write (as a platform that pins MRRS does)
        return real(host, bdf, cap, value)
    monkeypatch.setattr(pcie_tuning._apply, "_write_devctl", stubborn)  # pylint: disable=protected-access
    (root / "sys/bus/pci/devices/0000:29:00.0/config").write_bytes(_config(0x2937))
    failed = run(monkeypatch, root, expect=ModuleFail)
    assert "0000:29:00.0: Max_Read_Request_Size is 512 after writing 4096" in failed["msg"]
    assert "0000:18:00.0 put back" in failed["msg"] and "boot unit restored" in failed["msg"]
    assert devctl(root, "0000:18:00.0") == 0x2937
    assert not (root / "etc/systemd/system/rdma-k8s-node-pcie.service").exists()


# -- the judge is the planner on the facts -------------------------------------------------------------------------
def test_judge_agrees_with_the_module(monkeypatch, tmp_path):
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # pylint: disable=import-outside-toplevel
    root = make_node(tmp_path)
    desired = {"pcie_tuning_max_read_request": 4096, "pcie_tuning_devices": [], "pcie_tuning_boot_unit": True}
    checks = judge.judge(observe.facts(HostRoot(str(root))), desired)
    assert [(c["id"], c["subject"], c["status"]) for c in checks] == [
        ("pcie.max_read_request", "0000:18:00.0 (mlx5_0)", "drift"), ("pcie.max_read_request", "0000:29:00.0 (mlx5_1)", "drift")]
    assert "set_max_read_request" in checks[0]["detail"] and checks[1]["live"] == 4096 and checks[1]["persisted"] is None
    run(monkeypatch, root)
    checks = judge.judge(observe.facts(HostRoot(str(root))), desired)
    assert [c["status"] for c in checks] == ["ok", "ok"]
    # a hand edit of the unit's ordering: the registers are right, the unit drifts
    path = root / "etc/systemd/system/rdma-k8s-node-pcie.service"
    path.write_text(path.read_text().replace("DefaultDependencies=no\n", ""))
    checks = judge.judge(observe.facts(HostRoot(str(root))), desired)
    assert [(c["id"], c["status"]) for c in checks][-1] == ("pcie.boot_unit", "drift")
    assert judge.judge(observe.facts(HostRoot(str(root))), {"pcie_tuning_max_read_request": None}) == []
    assert judge.judge(observe.facts(HostRoot(str(root))), None) == []


def test_plan_is_pure_and_lists_problems():
    observed = {"devices": {"0000:18:00.0": {"error": "not a PCI Express function"}}, "unit": {"path": "/u"}, "setpci": None}
    planned = plan.plan(4096, ["0000:18:00.0"], observed)
    assert planned["actions"] == [] and len(planned["problems"]) == 2


def test_rdma_facts_and_the_audit_get_the_layer_from_the_registry(monkeypatch, tmp_path):
    """No per-layer code in rdma_facts or the audit: the registry hands them the room's observer and judgement."""
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    root = make_node(tmp_path)
    facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(root)})["ansible_facts"]["rdma"]
    assert facts["layers"]["pcie"]["devices"]["0000:18:00.0"]["max_read_request"] == 512
    desired = {"pcie_tuning_max_read_request": 4096}
    checks = [c for c in _audit.audit_host(facts, desired, ["pcie"]) if c["layer"] == "pcie"]
    assert [(c["id"], c["status"]) for c in checks] == [("pcie.max_read_request", "drift")] * 2
    assert checks[0]["remedy"] == "run the pcie_tuning role"
    run(monkeypatch, root)
    facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(root)})["ansible_facts"]["rdma"]
    assert [c["status"] for c in _audit.audit_host(facts, desired, ["pcie"]) if c["layer"] == "pcie"] == ["ok", "ok"]
    # not managed (the role default): the layer says nothing
    assert [c for c in _audit.audit_host(facts, {}, ["pcie"]) if c["layer"] == "pcie"] == []


def test_on_the_simulator_live_then_the_boot_unit_after_a_power_on(monkeypatch, tmp_path):
    """The node simulator's configuration space (tests/hwsim/pciconf.py): the module sets MaxReadReq live; a power-on
    resets it to 512, and the boot unit's own ExecStart lines, run with the simulator's setpci, set it back."""
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # pylint: disable=import-outside-toplevel
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as node:
        tools = node.root / "usr" / "bin"
        tools.mkdir(parents=True, exist_ok=True)
        shim = shutil.which("setpci", path=os.environ["PATH"])
        assert shim and "/hwsim/shims/" in shim
        shutil.copy2(shim, tools / "setpci")  # a copy: a link out of the root does not resolve inside it (chroot rules)
        (node.root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
        before = observe.facts(HostRoot(str(node.root)))
        assert sorted(before["devices"]) == ["0000:01:00.0", "0000:01:00.1"]
        assert set(d["max_read_request"] for d in before["devices"].values()) == {512}
        result = run(monkeypatch, node.root)
        assert [a["action"] for a in result["actions"]] == ["set_max_read_request"] * 2 + ["write_unit"]
        assert set(d["max_read_request"] for d in observe.facts(HostRoot(str(node.root)))["devices"].values()) == {4096}
        assert run(monkeypatch, node.root)["changed"] is False
        unit = (node.root / "etc/systemd/system/rdma-k8s-node-pcie.service").read_text()
        node.reboot()
        assert set(d["max_read_request"] for d in observe.facts(HostRoot(str(node.root)))["devices"].values()) == {512}
        for line in unit.splitlines():
            if line.startswith("ExecStart="):
                argv = line[len("ExecStart="):].split()
                done = subprocess.run([shim] + argv[1:], capture_output=True, text=True, check=False)
                assert done.returncode == 0, done.stderr
        after = observe.facts(HostRoot(str(node.root)))
        assert set(d["max_read_request"] for d in after["devices"].values()) == {4096}
        assert judge.judge(after, {"pcie_tuning_max_read_request": 4096}) == [
            dict(c, status="ok") for c in judge.judge(after, {"pcie_tuning_max_read_request": 4096})]


def test_every_planned_step_is_some_checks_evidence():
    """Each step of the plan is the evidence of one check: a function's live value, the unit's missing value, or
    the unit's rewrite for another reason (here it names /usr/sbin/setpci, the node has /usr/bin/setpci) while
    another function drifts live (review of session 14: the rewrite was nobody's evidence)."""
    bdfs = ["0000:18:00.0", "0000:19:00.0"]
    devices = dict((bdf, {"max_read_request": 4096, "devctl": "0x5000", "cap": "0x40", "rdma_devices": ["mlx5_%d" % i]})
                   for i, bdf in enumerate(bdfs))
    devices[bdfs[0]].update(max_read_request=512, devctl="0x2000")
    section = {"devices": devices, "setpci": "/usr/bin/setpci",
               "unit": {"path": observe.UNIT, "text": plan.render_unit("/usr/sbin/setpci", dict.fromkeys(bdfs, 4096)),
                        "exists": True, "values": dict.fromkeys(bdfs, 4096)}}
    planned = plan.plan(4096, bdfs, section)
    assert [step["action"] for step in planned["actions"]] == ["set_max_read_request", "write_unit"]
    evidence = [step for check in judge.judge(section, {"pcie_tuning_max_read_request": 4096})
                if check["status"] == "drift" for step in ast.literal_eval(check["detail"][len("planned: "):])]
    assert sorted(evidence, key=repr) == sorted(planned["actions"], key=repr)
