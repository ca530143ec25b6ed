"""The sriov role's boot-time applier on a simulated node: power-on reset, then the applier, then no drift."""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import yaml

from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.plugins.modules.harness import run_module
from unit.plugins.modules.simnode import sim_node

REPO = pathlib.Path(__file__).resolve().parents[3]
APPLIER = REPO / "roles" / "sriov" / "files" / "sriov_apply.py"


def load_applier():
    spec = importlib.util.spec_from_file_location("sriov_apply", APPLIER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def state(root):
    common = {"allow_vf_reset": False, "timeout": 30, "host_root": str(root)}
    vfs = dict(common, netdev="ibp24s0", rdma_device=None, pci_address=None, num_vfs=3,
               vf_defaults={"link_state": "auto"}, vfs=None, firmware_check="auto")
    guids = dict(common, netdev=None, rdma_device=None, pci_address="0000:18:00.0", scheme="pf_guid", guid_prefix="02",
                 guids=None, pool_file="/etc/sriov-operator/infiniband/guids", export_pool_file=False, exclude_guids=[])
    return {"version": 1, "sriov_vfs": [vfs], "ib_vf_guids": [guids]}


def given(params):
    """Module arguments as a playbook passes them: options left out rather than null."""
    return dict((key, value) for key, value in params.items() if value is not None)


def test_reboot_then_applier_then_no_drift(tmp_path, monkeypatch, capsys):
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        assert applier.main(["--state", str(state_file)]) == 0
        provisioned = run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)
        assert provisioned["changed"] is False
        before = [row["guid"] for row in provisioned["guids"]]

        node.reboot()
        assert applier.main(["--state", str(state_file), "--check"]) == 2, "after power-on the VFs are gone: drift"
        assert applier.main(["--state", str(state_file)]) == 0
        assert applier.main(["--state", str(state_file), "--check"]) == 0
        assert run_module(monkeypatch, sriov_vfs.main, given(data["sriov_vfs"][0]), check=True)["changed"] is False
        after = run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)
        assert after["changed"] is False and [row["guid"] for row in after["guids"]] == before
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {"step": "sriov_vfs", "pf": "ibp24s0", "changed": True,
                "actions": ["write", "wait_for_vfs", "set_vf", "set_vf", "set_vf"]} in lines


def test_applier_reports_failures_and_goes_on(tmp_path, monkeypatch, capsys):
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        data["sriov_vfs"].insert(0, dict(data["sriov_vfs"][0], netdev="ib99"))
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        assert applier.main(["--state", str(state_file)]) == 1
        out = capsys.readouterr().out
        assert "there is no network interface 'ib99'" in out and '"pf": "ibp24s0", "changed": true' in out
        state_file.write_text(json.dumps(dict(data, version=7)))
        assert applier.main(["--state", str(state_file)]) == 1


def render_bundle(path):
    """What the role's templates/sriov_bundle.py.j2 renders: the module_utils sources, JSON-encoded twice."""
    names = yaml.safe_load((REPO / "roles/sriov/vars/main.yml").read_text())["sriov__module_utils"]
    sources = dict((name[:-3], (REPO / "plugins/module_utils" / name).read_text()) for name in names)
    path.write_text("import json\n\nSOURCES = json.loads(%s)\n" % json.dumps(json.dumps(sources)))


def test_applier_runs_from_the_bundle_alone(tmp_path, monkeypatch):
    """As on a node: a fresh python3 with no collection on sys.path, only sriov_apply.py + sriov_bundle.py."""
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        lib = tmp_path / "lib"
        lib.mkdir()
        shutil.copy(APPLIER, lib / "sriov_apply.py")
        render_bundle(lib / "sriov_bundle.py")
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(state(node.root)))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        argv = [sys.executable, "-I", str(lib / "sriov_apply.py"), "--state", str(state_file), "--lib", str(tmp_path)]
        first = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert first.returncode == 0, first.stdout + first.stderr
        assert '"step": "ib_vf_guids", "pf": "0000:18:00.0", "changed": true' in first.stdout
        again = subprocess.run(argv + ["--check"], env=env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stdout + again.stderr


# ---------------------------------------------------------------------------------------------- boot: late PFs
# hwsim's power-on probes every PF at once and its delays (vf_probe, sriov_numvfs_write, bind, udev_rename) do not
# cover a PF probed late, so the late probe is driven here through the simulated kernel's own interface: the PF's
# driver unbound right after power-on (its netdev and RDMA device go away, as before mlx5_core has probed it), bound
# again from a thread N seconds after the applier started.
PF_BDF = "0000:18:00.0"


def unbind_pf(root, bdf=PF_BDF):
    (root / "sys/bus/pci/drivers/mlx5_core/unbind").write_text(bdf)


def bind_pf_later(root, seconds, bdf=PF_BDF):
    thread = threading.Thread(target=lambda: (time.sleep(seconds), (root / "sys/bus/pci/drivers/mlx5_core/bind").write_text(bdf)))
    thread.start()
    return thread


def with_wait(data, needs=("netdev", "rdma_device")):
    """The ``wait`` section the role writes: the PF as configured (by netdev) and what it had at provisioning."""
    return dict(data, wait={"pfs": [{"by": "netdev", "name": "ibp24s0", "pci_address": PF_BDF, "needs": list(needs)}]})


def test_boot_waits_for_a_pf_probed_seconds_after_the_unit_started(tmp_path, monkeypatch, capsys):
    """Simulated power-on where the PF appears 2 s after the unit starts: VFs and GUIDs end up as provisioned."""
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = with_wait(state(node.root))
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        assert applier.main(["--state", str(state_file)]) == 0
        before = [row["guid"] for row in run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)["guids"]]
        capsys.readouterr()

        node.reboot()
        unbind_pf(node.root)
        assert not (node.root / "sys/class/net/ibp24s0").exists()
        assert not list((node.root / "sys/bus/pci/devices" / PF_BDF / "infiniband").glob("*"))
        started = time.monotonic()
        thread = bind_pf_later(node.root, 2.0)
        try:
            assert applier.main(["--state", str(state_file), "--wait-timeout", "30"]) == 0, capsys.readouterr()
        finally:
            thread.join()
        assert time.monotonic() - started >= 2.0
        out = capsys.readouterr().out
        assert '"step": "wait"' not in out
        assert applier.main(["--state", str(state_file), "--check"]) == 0
        assert run_module(monkeypatch, sriov_vfs.main, given(data["sriov_vfs"][0]), check=True)["changed"] is False
        after = run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)
        assert after["changed"] is False and [row["guid"] for row in after["guids"]] == before


def test_boot_names_the_pf_that_never_appears_and_gives_up_in_time(tmp_path, monkeypatch, capsys):
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = with_wait(state(node.root))
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        node.reboot()
        unbind_pf(node.root)
        started = time.monotonic()
        assert applier.main(["--state", str(state_file), "--wait-timeout", "1.5", "--retries", "2", "--retry-delay", "0"]) == 1
        assert time.monotonic() - started < 15
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert lines == [{"step": "wait", "pf": "netdev ibp24s0", "failed": True, "missing": ["netdev ibp24s0 (not present)"],
                          "msg": "netdev ibp24s0 still missing after 1.5s: netdev ibp24s0 (not present)"}], \
            "the PF's own sriov_vfs and ib_vf_guids calls are left out, not failed one by one"


def test_boot_names_what_is_missing_of_a_present_pf(tmp_path, monkeypatch, capsys):
    """mlx5_ib not loaded yet: the Ethernet PF lacks its RDMA device, the IB PF also its IPoIB netdev; each named."""
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        eth = dict(data["sriov_vfs"][0], netdev="enp41s0f0np0", num_vfs=2, vf_defaults=None)
        data = dict(data, sriov_vfs=[data["sriov_vfs"][0], eth], ib_vf_guids=[])
        data["wait"] = {"pfs": [{"by": "pci_address", "name": PF_BDF, "pci_address": PF_BDF, "needs": ["netdev", "rdma_device"]},
                                {"by": "netdev", "name": "enp41s0f0np0", "needs": ["netdev", "rdma_device"]}]}
        data["sriov_vfs"][0] = dict(data["sriov_vfs"][0], netdev=None, pci_address=PF_BDF)
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        node.reboot()
        node.call({"cmd": "modprobe", "name": "mlx5_ib", "remove": True})   # kmod also drops ib_ipoib and mlx5_core
        node.call({"cmd": "modprobe", "name": "mlx5_core"})                  # back: Ethernet netdevs only, no IPoIB
        assert applier.main(["--state", str(state_file), "--wait-timeout", "1"]) == 1
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        waits = dict((line["pf"], line["missing"]) for line in lines if line["step"] == "wait")
        assert waits == {
            "PCI device " + PF_BDF: ["netdev of %s (/sys/bus/pci/devices/%s/net/ empty)" % (PF_BDF, PF_BDF),
                                     "RDMA device of %s (/sys/bus/pci/devices/%s/infiniband/ empty)" % (PF_BDF, PF_BDF)],
            "netdev enp41s0f0np0": ["RDMA device of 0000:29:00.0 (/sys/bus/pci/devices/0000:29:00.0/infiniband/ empty)"]}


def test_waiter_settles_udev_once_the_pfs_are_there_and_only_warns_when_it_does_not(tmp_path):
    """Fake clock: the wait polls until the PF exists, then settles udev with what is left of the budget."""
    applier = load_applier()
    now = [0.0]
    calls = []
    net = tmp_path / "sys/class/net"
    net.mkdir(parents=True)

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 3 and not (net / "ibp24s0").exists():
            device = tmp_path / "sys/devices/pci0000:15/0000:18:00.0"
            (device / "net/ibp24s0").mkdir(parents=True)
            (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
            (tmp_path / "sys/bus/pci/devices/0000:18:00.0").symlink_to(device)
            (net / "ibp24s0").mkdir()
            (net / "ibp24s0/device").symlink_to(device)

    def settle(seconds):
        calls.append((now[0], seconds))
        return False, "timeout"

    pf = applier.PfWait("netdev", "ibp24s0", ["netdev"])
    waiter = applier.Waiter(str(tmp_path), 10, clock=lambda: now[0], sleep=sleep, settle=settle)
    assert waiter.wait([pf]) == ({}, "timeout")
    assert calls == [(3.0, 7.0)]
    missing, note = applier.Waiter(str(tmp_path), 2, clock=lambda: now[0], sleep=sleep, settle=settle).wait(
        [applier.PfWait("rdma_device", "mlx5_0", ["netdev"])])
    assert missing == {"RDMA device mlx5_0": ["RDMA device mlx5_0 (not present)"]} and note is None
    assert applier.Waiter("/", 1).udev_settle(0)[0] in (True, False)


def test_wait_list_without_a_wait_section_follows_the_entries(tmp_path):
    applier = load_applier()
    pfs = applier.wait_list(state(tmp_path))
    assert [(pf.by, pf.name, pf.needs) for pf in pfs] == [("netdev", "ibp24s0", ["netdev"]), ("pci_address", PF_BDF, [])]


def test_failed_entries_are_retried_alone(tmp_path, monkeypatch, capsys):
    """A transient failure (EBUSY on sriov_numvfs once) is retried, with the GUID calls that depend on its VFs."""
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        node.call({"cmd": "fault_add", "path": "sys/bus/pci/devices/%s/sriov_numvfs" % PF_BDF, "op": "write",
                   "action": "errno", "errno": "EBUSY", "count": 1})
        assert applier.main(["--state", str(state_file), "--retries", "2", "--retry-delay", "0"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(line["step"], line.get("attempt", 1), bool(line.get("failed"))) for line in lines] == [
            ("sriov_vfs", 1, True), ("ib_vf_guids", 1, False), ("sriov_vfs", 2, False), ("ib_vf_guids", 2, False)]
        assert lines[3]["changed"] is True, "the GUIDs are set on the VFs of the second run"
        assert applier.main(["--state", str(state_file), "--check"]) == 0
