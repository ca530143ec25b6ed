"""The irq layer (one room): /proc/interrupts parsing on real captures, the pure planner (reserved CPUs x NUMA,
on_disjoint, managed vectors, irqbalance), the judge (the planner on the facts), and the module on simulated
ConnectX-7 (two NUMA nodes) and ConnectX-6 Dx nodes: check mode, diff, idempotence, errors, the boot unit after a
power-on and a driver reload, the audit clean then and drifting on one perturbed vector with the module's plan.
"""

import json
import pathlib
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import compact, interrupts, judge, observe, plan
from ansible_collections.rdma.k8s_node.plugins.modules import irq_affinity
from unit.plugins.modules.harness import ModuleFail, run_module

REPO = pathlib.Path(__file__).resolve().parents[5]
REAL = REPO / "tests" / "fixtures" / "realworld" / "proc_interrupts"
BDF = "0000:b1:00.0"  # numa-split: ConnectX-7 on NUMA node 1 (CPUs 16-31,48-63)


# ---------------------------------------------------------------- parsing real captures
def test_real_lkml_capture_old_format():
    rows = interrupts.parse_proc_interrupts((REAL / "lkml-2023-01-27-azure-centos7.txt").read_text())
    assert rows[28]["name"] == "mlx5_comp0@pci:8b76:00:02.0" and rows[28]["columns"] == 8
    assert rows[24]["name"] == "mlx5_pages_eq@pci:8b76:00:02.0" and rows[24]["chip"] == "PCI-MSI-edge"
    assert interrupts.device_irqs(rows, "8b76:00:02.0") == [24, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35]
    assert interrupts.device_irqs(rows, "83a4:00:02.0")[0] == 36
    assert 0 in rows and "NMI" not in str(sorted(rows))


def test_real_grep_capture_per_device_msix_chip():
    text = (REAL / "100gbe-lab-2025-grep-mlx.txt").read_text()
    rows = interrupts.parse_proc_interrupts(" " * 11 + "".join("CPU%-8d" % c for c in range(12)) + "\n" + text)
    assert rows[98]["chip"] == "IR-PCI-MSIX-0000:01:00.0" and rows[98]["name"] == "mlx5_async0@pci:0000:01:00.0"
    assert interrupts.device_irqs(rows, "0000:01:00.1") == [101, 102]
    assert len(interrupts.device_irqs(rows, "0000:01:00.0")) == 13 and rows[114]["columns"] == 12


def test_real_igb_capture_old_format_names_without_addresses():
    rows = interrupts.parse_proc_interrupts((REAL / "netutils-linux-i350-igb.txt").read_text())
    assert [(n, rows[n]["name"], rows[n]["pci"]) for n in range(34, 39)] == [
        (34, "eth6", None), (35, "eth6-TxRx-0", None), (36, "eth6-TxRx-1", None), (37, "eth6-TxRx-2", None),
        (38, "eth6-TxRx-3", None)]
    assert rows[35]["chip"] == "PCI-MSI-edge" and rows[35]["columns"] == 4
    assert rows[19]["name"] == "skge@pci:0000:05:00.0" and rows[19]["chip"] == "IO-APIC-fasteoi"
    assert rows[7]["name"] == "" and rows[41]["name"] == "eth0"  # a row with no handler name; r8169's one vector
    # only skge names an address: by name, /proc/interrupts finds nothing of the I350 at 0000:01:00.0
    assert interrupts.device_irqs(rows, "0000:05:00.0") == [19] and interrupts.device_irqs(rows, "0000:01:00.0") == []


def _pci_node(root, capture, functions):
    """A node tree: ``functions`` {bdf: (numa node, local CPUs, MSI vectors)}, /proc/irq/<n>/ for every vector,
    4 CPUs online, and ``capture`` as /proc/interrupts."""
    (root / "proc").mkdir(parents=True)
    (root / "proc/interrupts").write_text(capture)
    (root / "sys/devices/system/cpu").mkdir(parents=True)
    (root / "sys/devices/system/cpu/online").write_text("0-3\n")
    for bdf, (numa, local, vectors) in functions.items():
        base = root / "sys/bus/pci/devices" / bdf
        (base / "msi_irqs").mkdir(parents=True)
        (base / "numa_node").write_text("%d\n" % numa)
        (base / "local_cpulist").write_text(local + "\n")
        for number in vectors:
            (base / "msi_irqs" / str(number)).write_text("msix\n")
            irq = root / "proc/irq" / str(number)
            irq.mkdir(parents=True)
            (irq / "smp_affinity_list").write_text("0-3\n")
            (irq / "effective_affinity_list").write_text("0\n")


def test_observer_on_an_igb_nic_takes_its_vectors_from_msi_irqs(tmp_path):
    # the capture's three NICs: igb's five MSI-X vectors, r8169's one MSI vector, skge on an INTx line (no msi_irqs)
    capture = (REAL / "netutils-linux-i350-igb.txt").read_text()
    _pci_node(tmp_path, capture, {"0000:01:00.0": (-1, "0-3", range(34, 39)), "0000:03:00.0": (-1, "0-3", [41]),
                                  "0000:05:00.0": (-1, "0-3", [])})
    seen = observe.observe(HostRoot(str(tmp_path)), devices=["0000:01:00.0", "0000:03:00.0", "0000:05:00.0"])
    igb = seen["devices"]["0000:01:00.0"]
    assert dict((n, v["name"]) for n, v in igb["irqs"].items()) == {
        "34": "eth6", "35": "eth6-TxRx-0", "36": "eth6-TxRx-1", "37": "eth6-TxRx-2", "38": "eth6-TxRx-3"}
    assert "mismatched" not in igb and "note" not in igb
    assert list(seen["devices"]["0000:03:00.0"]["irqs"]) == ["41"]
    # skge's row names it, but an INTx line is no vector of its own: reported, never placed
    skge = seen["devices"]["0000:05:00.0"]
    assert skge["irqs"] == {} and skge["mismatched"] == [{"irq": 19, "name": "skge@pci:0000:05:00.0",
                                                         "names": "0000:05:00.0"}]
    assert skge["note"].startswith("no MSI vectors")
    desired = _desired(cpus=[0, 1], devices=["0000:01:00.0", "0000:05:00.0"])
    for item in seen["devices"].values():
        item["rdma_devices"] = []
    planned = plan.plan(desired, seen)
    assert [(a["target"], a["name"], a["after"]) for a in planned["actions"]] == [
        (str(n), name, "0-1") for n, name in zip(range(34, 39), ["eth6"] + ["eth6-TxRx-%d" % q for q in range(4)])]
    assert [w for w in planned["warnings"] if "IRQ 19" in w] == [
        "0000:05:00.0: IRQ 19 (skge@pci:0000:05:00.0) names it in /proc/interrupts but is not one of its MSI vectors "
        "(msi_irqs): an INTx line or a vector freed since; left alone"]


def test_observer_trusts_msi_irqs_over_a_row_naming_another_function(tmp_path):
    # a real mlx5 capture (Azure VM, two VFs); msi_irqs/ of 8b76:00:02.0 says IRQ 36 is its own, while its row names
    # 83a4:00:02.0 (a driver reload between the two reads would look so): placed with 8b76's vectors, and warned
    capture = (REAL / "lkml-2023-01-27-azure-centos7.txt").read_text()
    _pci_node(tmp_path, capture, {"8b76:00:02.0": (0, "0-3", [24, 25, 36])})
    seen = observe.observe(HostRoot(str(tmp_path)), devices=["8b76:00:02.0"])
    item = seen["devices"]["8b76:00:02.0"]
    assert sorted(item["irqs"], key=int) == ["24", "25", "36"]
    # the rows that name 8b76 but are no vector in its msi_irqs/ (this tree lists three): reported, not placed
    assert [e["irq"] for e in item["mismatched"] if e["names"] == "8b76:00:02.0"] == [26, 28, 29, 30, 31, 32, 33, 34, 35]
    other = [e for e in item["mismatched"] if e["irq"] == 36]
    assert other == [{"irq": 36, "name": "mlx5_pages_eq@pci:83a4:00:02.0", "names": "83a4:00:02.0"}]
    item["rdma_devices"] = ["mlx5_0"]
    planned = plan.plan(_desired(cpus=None, devices=["8b76:00:02.0"]), seen)
    assert [a["target"] for a in planned["actions"] if a["action"] == "set_affinity"] == []  # 0-3 already
    assert any("IRQ 36 is one of its MSI vectors (msi_irqs) but /proc/interrupts names 83a4:00:02.0" in w
               for w in planned["warnings"])


def test_a_table_without_header_is_a_parse_error():
    with pytest.raises(Exception, match="no CPU header"):
        interrupts.parse_proc_interrupts(" 1: 0 0 IO-APIC 1-edge i8042\n")


def test_env_file_args_and_rewrite():
    text = '# comment\nIRQBALANCE_ARGS="--foreground"\n#IRQBALANCE_ARGS="x"\n'
    assert interrupts.env_args(text) == ["--foreground"]
    new = interrupts.with_args(text, ["--foreground", "--policyscript=/p"], "# ours\n")
    assert 'IRQBALANCE_ARGS="--foreground --policyscript=/p"\n' in new and new.startswith("# comment\n")
    assert interrupts.env_args("ENABLED=1\n") is None
    assert interrupts.with_args("ENABLED=1", ["-l", "/p"], "# ours\n") == 'ENABLED=1\n# ours\nIRQBALANCE_ARGS="-l /p"\n'


# ---------------------------------------------------------------- the pure planner
def _observed(irqs=None, numa=1, local="16-31,48-63", **extra):
    irqs = irqs if irqs is not None else {"40": {"name": "mlx5_comp0@pci:" + BDF, "affinity": "16", "settable": True},
                                          "41": {"name": "mlx5_async0@pci:" + BDF, "affinity": "0-63", "settable": True}}
    device = {"rdma_devices": ["mlx5_0"], "numa_node": numa, "local_cpus": local, "irqs": irqs}
    out = {"cpus_online": "0-63", "devices": {BDF: device},
           "unit": {"text": None}, "script": {"text": None}, "policy": {"text": None},
           "irqbalance": {"installed": None, "env_file": None, "args": None}}
    out.update(extra)
    return out


def _desired(**kw):
    out = {"cpus": [0, 1, 16, 17], "on_disjoint": "fail", "devices": [BDF], "boot_unit": False, "irqbalance": "policy",
           "unit": observe.UNIT, "script": observe.SCRIPT, "policy": observe.POLICY}
    out.update(kw)
    return out


def test_reserved_cpus_on_the_nics_node():
    planned = plan.plan(_desired(), _observed())
    assert planned["targets"] == {BDF: "16-17"} and not planned["problems"]
    moves = [(a["target"], a["before"], a["after"]) for a in planned["actions"]]
    assert moves == [("40", "16", "16-17"), ("41", "0-63", "16-17")]


def test_no_reserved_cpus_means_numa_local():
    assert plan.plan(_desired(cpus=None), _observed())["targets"] == {BDF: "16-31,48-63"}


@pytest.mark.parametrize("mode,target,problem", [("fail", None, True), ("local", "16-31,48-63", False),
                                                 ("reserved", "0-3", False)])
def test_disjoint_reserved_set(mode, target, problem):
    planned = plan.plan(_desired(cpus=[0, 1, 2, 3], on_disjoint=mode), _observed())
    assert planned["targets"].get(BDF) == target
    assert bool(planned["problems"]) is problem
    text = (planned["problems"] or planned["warnings"])[0]
    assert "none of the reserved CPUs (0-3) is on its NUMA node 1 (CPUs 16-31,48-63)" in text and "mlx5_0" in text


def test_managed_vectors_are_reported_not_planned():
    irqs = {"40": {"name": "nvme-like", "affinity": "16", "settable": False}}
    planned = plan.plan(_desired(), _observed(irqs=irqs))
    assert planned["actions"] == [] and planned["managed"][0]["irq"] == "40" and "manages" in planned["warnings"][0]


def test_offline_reserved_cpus_are_a_problem():
    assert "CPUs 70 are not online" in plan.plan(_desired(cpus=[16, 70]), _observed())["problems"][0]


def test_irqbalance_policy_and_conflict():
    env = {"path": "/etc/default/irqbalance", "exists": True, "text": 'IRQBALANCE_ARGS=""\n'}
    observed = _observed(irqbalance={"installed": "/usr/sbin/irqbalance", "env_file": env, "args": []})
    planned = plan.plan(_desired(), observed)
    kinds = [a["action"] for a in planned["actions"]]
    assert kinds[:2] == ["write_policy", "edit_irqbalance_env"]
    assert 'case "${1##*/}" in\n0000:b1:00.0)\n    echo ban=true' in planned["files"][observe.POLICY]
    other = dict(observed, irqbalance={"installed": "/usr/sbin/irqbalance", "env_file": env, "args": ["-l", "/x"]})
    assert "already runs the policy script /x" in plan.plan(_desired(), other)["problems"][0]
    assert plan.plan(_desired(irqbalance="ignore"), other)["problems"] == []


def test_policy_script_runs_and_bans_only_our_nics(tmp_path):
    script = tmp_path / "policy.sh"
    script.write_text(plan.render_policy([BDF]))
    ours = subprocess.run(["sh", str(script), "/sys/bus/pci/devices/" + BDF, "40"], capture_output=True, text=True, check=False)
    other = subprocess.run(["sh", str(script), "/sys/bus/pci/devices/0000:18:00.0", "41"], capture_output=True, text=True, check=False)
    assert (ours.returncode, ours.stdout, other.returncode, other.stdout) == (0, "ban=true\n", 0, "")


# ---------------------------------------------------------------- the module on the simulator
def _sim(spec, tmp_path, monkeypatch):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    return sim_node(spec, tmp_path, monkeypatch)


def run(monkeypatch, root, check=False, expect=None, **args):
    args.setdefault("host_root", str(root))
    args.setdefault("cpus", "0-1,16-17")
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, irq_affinity.main, args, check=check, diff=True, **kwargs)


def affinities(root, bdf=BDF):
    irqs = sorted(int(n) for n in (root / "sys/bus/pci/devices" / bdf / "msi_irqs").iterdir() for n in [n.name])
    return dict((n, (root / "proc/irq" / str(n) / "smp_affinity_list").read_text().strip()) for n in irqs)


def desired_vars(**kw):
    out = {"irq_affinity_manage": True, "kubelet_topology_reserved_system_cpus": "0-1,16-17"}
    out.update(kw)
    return out


def test_module_on_two_numa_nodes_check_apply_idempotent_boot(monkeypatch, tmp_path):
    with _sim("numa-split", tmp_path, monkeypatch) as node:
        root = node.root
        (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
        before = affinities(root)
        assert len(before) == 64 and before[min(before)] == "0-63"  # mlx5_async0: every CPU; comp vectors spread
        checked = run(monkeypatch, root, check=True)
        assert checked["changed"] and affinities(root) == before
        kinds = [a["action"] for a in checked["actions"]]
        assert kinds[:2] == ["write_script", "write_unit"] and kinds.count("set_affinity") == 64
        assert checked["targets"] == {BDF: "16-17"} and any("smp_affinity_list" in d.get("before_header", "")
                                                            for d in checked["diff"])
        applied = run(monkeypatch, root)
        assert applied["actions"] == checked["actions"] and applied["refused"] == []
        assert set(affinities(root).values()) == {"16-17"}
        effective = set((root / "proc/irq" / str(n) / "effective_affinity_list").read_text().strip()
                        for n in affinities(root))
        assert effective <= {"16", "17"}
        again = run(monkeypatch, root)
        assert again["changed"] is False and again["actions"] == []
        unit = (root / observe.UNIT.lstrip("/")).read_text()
        assert "ExecStart=/bin/sh /etc/rdma-k8s-node/irq-affinity.sh 120 0000:b1:00.0 16-17\n" in unit
        assert "PartOf=openibd.service" in unit and "Before=irqbalance.service kubelet.service" in unit
        facts = observe.facts(HostRoot(str(root)))
        assert judge.judge(facts, desired_vars())[0]["status"] == "ok"
        # the role's devices as the module takes them: an RDMA device name or a short address judge the same NIC
        name = facts["devices"][BDF]["rdma_devices"][0]
        for devices in ([name], ["b1:00.0"]):
            named = judge.judge(facts, dict(desired_vars(), irq_affinity_devices=devices))
            assert [(c["status"], c["subject"].split()[0]) for c in named] == [("ok", BDF)], named
        # power-on: the driver's affinities again, the audit drifts; the boot unit's ExecStart puts them back
        node.reboot()
        assert set(affinities(root).values()) != {"16-17"}
        assert judge.judge(observe.facts(HostRoot(str(root))), desired_vars())[0]["status"] == "drift"
        _run_exec_start(root, unit)
        assert set(affinities(root).values()) == {"16-17"}
        checks = judge.judge(observe.facts(HostRoot(str(root))), desired_vars())
        assert [(c["id"], c["status"]) for c in checks] == [("irq.affinity", "ok")]


def _run_exec_start(root, unit):
    """The unit's ExecStart with the node's paths under ``root`` (the script reads /sys and /proc)."""
    line = [l for l in unit.splitlines() if l.startswith("ExecStart=")][0]
    argv = line[len("ExecStart="):].split()
    text = (root / argv[1].lstrip("/")).read_text().replace("/sys/", str(root) + "/sys/").replace(
        "/proc/", str(root) + "/proc/")
    done = subprocess.run(["sh", "-c", text, "irq-affinity.sh"] + argv[2:], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_driver_reload_and_one_perturbed_vector_audit_evidence(monkeypatch, tmp_path):
    with _sim("numa-split", tmp_path, monkeypatch) as node:
        root = node.root
        (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
        run(monkeypatch, root)
        irq = sorted(affinities(root))[5]
        (root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("40\n")
        facts = observe.facts(HostRoot(str(root)))
        checks = judge.judge(facts, desired_vars())
        drift = [c for c in checks if c["status"] != "ok"]
        checked = run(monkeypatch, root, check=True)
        assert [a["target"] for a in checked["actions"]] == [str(irq)]
        assert len(drift) == 1 and drift[0]["detail"] == "planned: %s" % checked["actions"]
        assert drift[0]["remedy"] == "run the irq_affinity role"
        # a driver reload (what openibd does): new vectors with the driver's affinities
        removed = node.call({"cmd": "modprobe", "name": "mlx5_ib", "remove": True})
        assert "mlx5_core" in str(removed)  # kmod removes the dependency left unused
        assert not (root / "sys/bus/pci/devices" / BDF / "msi_irqs").exists()
        node.call({"cmd": "modprobe", "name": "mlx5_ib"})
        assert set(affinities(root).values()) != {"16-17"}


def test_backup_files_always_returned_and_map_the_unit_to_its_old_copy(monkeypatch, tmp_path):
    """backup_files is ``{edited path: backup path}`` on a run that replaces a file with backup=true, ``{}`` otherwise:
    check mode, new files, a no-op run, vectors only, a refused plan (RETURN)."""
    with _sim("numa-split", tmp_path, monkeypatch) as node:
        root = node.root
        (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
        check = run(monkeypatch, root, check=True, backup=True)
        assert check["changed"] is True and check["backup_files"] == {}
        created = run(monkeypatch, root, backup=True)
        assert created["changed"] is True and created["backup_files"] == {}, "new files have nothing to back up"
        again = run(monkeypatch, root, backup=True)
        assert again["changed"] is False and again["backup_files"] == {}
        (root / "proc/irq" / str(sorted(affinities(root))[5]) / "smp_affinity_list").write_text("40\n")
        vector = run(monkeypatch, root, backup=True)
        assert [a["action"] for a in vector["actions"]] == ["set_affinity"] and vector["backup_files"] == {}
        refused = run(monkeypatch, root, cpus="0-1,200", backup=True, expect=ModuleFail)
        assert "are not online" in refused["msg"] and refused["changed"] is False and refused["backup_files"] == {}
        changed = run(monkeypatch, root, boot_wait=60, backup=True)
        assert [a["action"] for a in changed["actions"]] == ["write_unit"]
        [(edited, copy)] = changed["backup_files"].items()
        assert edited == observe.UNIT and copy.startswith(str(root) + edited + ".")
        assert " 120 0000:b1:00.0 16-17\n" in pathlib.Path(copy).read_text()
        assert " 60 0000:b1:00.0 16-17\n" in (root / observe.UNIT.lstrip("/")).read_text()


def test_simulated_kernel_refusals(monkeypatch, tmp_path):
    with _sim("numa-split", tmp_path, monkeypatch) as node:
        path = root_path = node.root / "proc/irq" / str(min(affinities(node.root))) / "smp_affinity_list"
        for text, code in (("abc", 22), ("99", 34), ("\n", 22)):
            with pytest.raises(OSError) as info:
                with open(path, "w") as handle:
                    handle.write(text)
            assert info.value.errno == code
        assert root_path.read_text() == "0-63\n"


def test_errors_name_option_and_value(monkeypatch, tmp_path):
    with _sim("roce-cx6dx", tmp_path, monkeypatch) as node:
        root = node.root
        bad = run(monkeypatch, root, cpus="0-3,x", expect=ModuleFail)
        assert "cpus: '0-3,x' is not a CPU list" in bad["msg"]
        bad = run(monkeypatch, root, cpus="0-3,200", expect=ModuleFail)
        assert "cpus: CPUs 200 are not online on this node (online: 0-63)" in bad["msg"]
        bad = run(monkeypatch, root, devices=["mlx5_9"], expect=ModuleFail)
        assert "devices: 'mlx5_9' is neither" in bad["msg"]
        bad = run(monkeypatch, root, unit="/tmp/x.service", expect=ModuleFail)
        assert "unit must be a .service file" in bad["msg"]
        # ConnectX-6 Dx, one socket: both ports' vectors on the reserved CPUs; irqbalance installed -> policy
        (root / "usr/sbin").mkdir(parents=True, exist_ok=True)
        (root / "usr/sbin/irqbalance").write_text("#!/bin/sh\n")
        (root / "usr/sbin/irqbalance").chmod(0o755)
        (root / "etc/default").mkdir(parents=True, exist_ok=True)
        (root / "etc/default/irqbalance").write_text('#IRQBALANCE_ARGS=\nIRQBALANCE_ARGS=""\n')
        done = run(monkeypatch, root, cpus="0-3", boot_unit=False, backup=True)
        assert done["targets"] == {"0000:01:00.0": "0-3", "0000:01:00.1": "0-3"}
        # backups by edited path, as every module returns them (the policy script was new: nothing to keep)
        assert list(done["backup_files"]) == ["/etc/default/irqbalance"]
        assert pathlib.Path(done["backup_files"]["/etc/default/irqbalance"]).read_text() == (
            '#IRQBALANCE_ARGS=\nIRQBALANCE_ARGS=""\n')
        assert done["restart_required"] == ["irqbalance.service"]
        assert 'IRQBALANCE_ARGS="--policyscript=/etc/rdma-k8s-node/irqbalance-policy.sh"' in (
            root / "etc/default/irqbalance").read_text()
        assert run(monkeypatch, root, cpus="0-3", boot_unit=False)["changed"] is False


# ---------------------------------------------------------------- the facts' compact form (issue 17)
def _compact_size(value):
    return len(json.dumps(value, separators=(",", ":")))


def _dgx(tmp_path):
    """A powered-on DGX H100 of the simulator, rendered as plain files (as the benchmarks' node)."""
    import hwsim  # pylint: disable=import-outside-toplevel
    root = tmp_path / "dgx-h100"
    hwsim.render("dgx-h100", root)
    return root


def _both_shapes(root):
    """``(facts in the previous shape, compact facts)`` of one node: before the compact form, ``facts()`` returned
    :func:`observe.observe`'s result as it is."""
    host = HostRoot(str(root))
    return observe.observe(host), observe.facts(host)


def test_compact_facts_are_less_than_half_and_unpack_to_the_observers_shape(tmp_path):
    old, new = _both_shapes(_dgx(tmp_path))
    assert _compact_size(new) * 2 <= _compact_size(old)
    assert json.dumps(compact.unpack(new)) == json.dumps(old)  # the same values, in the same key order
    table = new["devices"]["0000:18:00.0"]["vectors"]
    assert "irqs" not in new["devices"]["0000:18:00.0"] and table["irqs"] == "24-87" and table["settable"] is True
    assert table["name_suffix"] == "@pci:0000:18:00.0" and table["name"][:2] == ["mlx5_async0", "mlx5_comp0"]
    assert table["affinity"][:3] == ["0-223", "0", "1"] and len(table["effective"]) == 64
    assert compact.unpack(old) is old  # facts of an older collection: as they are


@pytest.mark.parametrize("extra", [
    {}, {"irq_affinity_cpus": "0-1"}, {"irq_affinity_cpus": "0-1", "irq_affinity_on_disjoint": "local"},
    {"irq_affinity_cpus": "0-1", "irq_affinity_on_disjoint": "reserved"}, {"irq_affinity_devices": ["mlx5_0", "29:00.1"]},
    {"irq_affinity_boot_unit": False, "irq_affinity_irqbalance": "ignore"}, {"irq_affinity_cpus": "0-1,300"}])
def test_both_shapes_of_the_facts_judge_the_same(tmp_path, extra):
    root = _dgx(tmp_path)
    # one NIC placed already, one vector of another placed and one kernel-managed: ok, drift and managed checks
    for irq in range(24, 88):
        (root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("0-1\n")
    (root / "proc/irq/89/smp_affinity_list").write_text("0-1\n")
    (root / "proc/irq/90/smp_affinity_list").chmod(0o444)
    old, new = _both_shapes(root)
    desired = desired_vars(kubelet_topology_reserved_system_cpus="0-1,56-57", **extra)
    checks = judge.judge(new, desired)
    assert checks == judge.judge(old, desired)
    statuses = set((c["id"], c["status"]) for c in checks)
    if not extra:
        assert {("irq.affinity", "ok"), ("irq.affinity", "drift"), ("irq.managed", "ok"),
                ("irq.boot_unit", "drift")} <= statuses
    if extra == {"irq_affinity_cpus": "0-1"}:
        assert ("irq.affinity", "fail") in statuses


def _round_trip(observed):
    packed = compact.pack(observed)
    assert json.dumps(compact.unpack(packed)) == json.dumps(observed)
    return packed


def test_compact_form_round_trips_names_without_addresses_other_addresses_and_errors(tmp_path):
    igb = tmp_path / "igb"
    _pci_node(igb, (REAL / "netutils-linux-i350-igb.txt").read_text(),
              {"0000:01:00.0": (-1, "0-3", range(34, 39)), "0000:05:00.0": (-1, "0-3", [])})
    seen = observe.observe(HostRoot(str(igb)), devices=["0000:01:00.0", "0000:05:00.0"])
    seen["devices"]["0000:09:00.0"] = {"rdma_devices": ["mlx5_2"], "error": "/sys/bus/pci/devices/...: EIO"}
    packed = _round_trip(seen)
    assert "name_suffix" not in packed["devices"]["0000:01:00.0"]["vectors"]
    assert packed["devices"]["0000:05:00.0"]["vectors"] == {"irqs": "", "affinity": [], "effective": [], "settable": [],
                                                            "name": []}
    assert "error" in packed["devices"]["0000:09:00.0"] and "vectors" not in packed["devices"]["0000:09:00.0"]
    # IRQ 36's row names another function: no common suffix, every name whole
    mlx = tmp_path / "mlx"
    _pci_node(mlx, (REAL / "lkml-2023-01-27-azure-centos7.txt").read_text(), {"8b76:00:02.0": (0, "0-3", [24, 25, 36])})
    packed = _round_trip(observe.observe(HostRoot(str(mlx)), devices=["8b76:00:02.0"]))
    assert packed["devices"]["8b76:00:02.0"]["vectors"]["irqs"] == "24-25,36"
    assert "name_suffix" not in packed["devices"]["8b76:00:02.0"]["vectors"]
    # a vector without a row, one without an effective affinity, kernel-managed ones, numbers past any CPU number
    irqs = {"70000": {"affinity": "0-3", "effective": None, "settable": False, "name": None},
            "70001": {"affinity": "2", "effective": "2", "settable": True, "name": "mlx5_comp0@pci:0000:b1:00.0"},
            "70003": {"affinity": "0-3", "effective": "1", "settable": False, "name": "mlx5_comp1@pci:0000:b1:00.0"}}
    packed = _round_trip(_observed(irqs=irqs))
    assert packed["devices"][BDF]["vectors"] == {
        "irqs": "70000-70001,70003", "affinity": ["0-3", "2", "0-3"], "effective": [None, "2", "1"],
        "settable": [False, True, False], "name": [None, "mlx5_comp0", "mlx5_comp1"], "name_suffix": "@pci:" + BDF}


def test_a_compact_table_that_does_not_match_its_irqs_is_malformed():
    packed = compact.pack(_observed())
    packed["devices"][BDF]["vectors"]["affinity"] = ["16"]
    with pytest.raises(ValueError, match="1 values of affinity for 2 IRQs"):
        judge.judge(packed, desired_vars())
