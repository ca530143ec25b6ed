"""After converge the audit is ok; after one NIC layer is changed behind the collection's back, exactly that layer
drifts, and the audit's evidence is that module's check-mode plan (issue 17, "Done when", for the rooms of the NIC
tuning layers: pcie, irq, qos).  test_converge_audit.py does the same for netns, sysctl, sriov and containerd.

Every simulator archetype, random valid desired states (hypothesis).  Per example, on a freshly powered-on simulated
node (tests/hwsim: its PCI configuration space, its /proc/irq, its DCB state and RoCE configfs, driven by the real
module code through the simulator's setpci and mlnx_qos):

1. converge with pcie_tuning, irq_affinity and roce_qos, called with the arguments their roles give them (the roles'
   defaults where the drawn desired state has nothing);
2. each module run again changes nothing, and ``rdma_facts`` + the audit with the same desired state report ``ok``
   in the three layers;
3. one layer is changed behind the collection's back (a NIC function's Max_Read_Request_Size written with setpci, one
   interrupt vector moved, a port's trust or PFC set with mlnx_qos, our boot unit removed), then the audit reports
   that layer and only that layer as drifted, the other two modules have no work in check mode, and every action
   the perturbed module plans in check mode is the evidence (``planned: [...]``) of one of the layer's checks, and
   nothing else is.
"""

import ast
import contextlib
import json
import pathlib
import shutil
import subprocess
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import compact
from ansible_collections.rdma.k8s_node.plugins.modules import irq_affinity, pcie_tuning, rdma_facts, roce_qos
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.modules.harness import ModuleExit, ModuleFail, run_module
from unit.plugins.modules.simnode import SHIMS, sim_node
from unit.safety.pods import pods_take

REPO = pathlib.Path(__file__).resolve().parents[3]
ARCHETYPES = ("dgx-h100", "roce-cx6dx", "numa-split", "a100-10nic", "dell-xe9680-12nic", "no-rdma")
LAYERS = ("pcie", "irq", "qos")
UNITS = {"pcie": "etc/systemd/system/rdma-k8s-node-pcie.service",
         "irq": "etc/systemd/system/rdma-k8s-node-irq.service",
         "qos": "etc/systemd/system/rdma-k8s-node-roce-qos.service"}
SIZES = (128, 256, 512, 1024, 2048, 4096)


def role_defaults(role):
    return yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text(encoding="utf-8"))


def test_units_are_the_roles():
    """The boot units this test removes are the ones the roles enable."""
    for layer, role in (("pcie", "pcie_tuning"), ("irq", "irq_affinity"), ("qos", "roce_qos")):
        tasks = (REPO / "roles" / role / "tasks/main.yml").read_text(encoding="utf-8")
        assert "name: %s" % pathlib.Path(UNITS[layer]).name in tasks, role


# -- the desired states -------------------------------------------------------------------------------------------
def cpu_list(text):
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]``."""
    cpus = []
    for part in (text or "").split(","):
        if part:
            first, dummy, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def numa_cpus(facts):
    """``{numa node: [cpu, ...]}`` of the node (the irq layer's facts)."""
    return dict((int(node), cpu_list(cpus)) for node, cpus in (facts["layers"]["irq"].get("numa_nodes") or {}).items())


@st.composite
def desired_states(draw, facts):
    """The three roles' variables: MaxReadReq, the CPUs for the RDMA NICs' interrupts (at least one on every NUMA
    node, so no NIC's node is disjoint from them), the RoCE QoS priority, DSCP and ECN."""
    cpus = []
    for dummy, node_cpus in sorted(numa_cpus(facts).items()):
        if node_cpus:
            cpus.extend(draw(st.lists(st.sampled_from(sorted(node_cpus)), min_size=1, max_size=3, unique=True)))
    priority = draw(st.integers(0, 7))
    dscp = draw(st.integers(0, 63).filter(lambda value: value != 48))
    return {
        "pcie_tuning_max_read_request": draw(st.sampled_from(SIZES)),
        "irq_affinity_manage": True,
        "irq_affinity_cpus": ",".join(str(cpu) for cpu in sorted(cpus)) or None,
        "roce_qos_manage": True,
        "roce_qos_priority": priority,
        "roce_qos_dscp": dscp,
        "roce_qos_cnp_priority": 6 if priority != 6 else 5,
        "roce_qos_ecn": draw(st.booleans()),
    }


# -- the modules, called as the roles call them -------------------------------------------------------------------
def module_calls(desired):
    """``[(layer, main, args)]`` as roles/pcie_tuning, irq_affinity and roce_qos build them."""
    pcie, irq, qos = role_defaults("pcie_tuning"), role_defaults("irq_affinity"), role_defaults("roce_qos")
    wanted = dict(qos, **desired)
    calls = [("pcie", pcie_tuning.main, {
        "max_read_request": desired["pcie_tuning_max_read_request"], "devices": pcie["pcie_tuning_devices"],
        "boot_unit": pcie["pcie_tuning_boot_unit"], "backup": pcie["pcie_tuning_backup"]})]
    if desired["irq_affinity_cpus"]:
        calls.append(("irq", irq_affinity.main, {
            "cpus": desired["irq_affinity_cpus"], "on_disjoint": irq["irq_affinity_on_disjoint"],
            "devices": irq["irq_affinity_devices"], "boot_unit": irq["irq_affinity_boot_unit"],
            "boot_wait": irq["irq_affinity_boot_wait"], "irqbalance": irq["irq_affinity_irqbalance"],
            "backup": irq["irq_affinity_backup"]}))
    calls.append(("qos", roce_qos.main, dict(
        (option, wanted["roce_qos_" + option])
        for option in ("priority", "dscp", "cnp_dscp", "cnp_priority", "ecn", "tool", "interfaces", "boot_unit",
                       "backup"))))
    return calls


def facts_of(mp, node):
    return run_module(mp, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]


def converge(mp, node, desired):
    made = []
    for layer, main, args in module_calls(desired):
        args = dict(args, host_root=str(node.root))
        run_module(mp, main, args)
        made.append((layer, main, args))
    return made


def check_mode(mp, made):
    """``{layer: (has work, [its check-mode actions])}``."""
    out = dict((layer, (False, [])) for layer in LAYERS)
    for layer, main, args in made:
        result = run_module(mp, main, args, check=True, expect=(ModuleExit, ModuleFail))
        work, actions = out[layer]
        out[layer] = (work or bool(result.get("failed") or result.get("changed")),
                      actions + list(result.get("actions") or []))
    return out


def audit(mp, node, desired):
    """``{layer: [non-ok checks]}`` of the audit of the three layers."""
    facts = facts_of(mp, node)
    for room in LAYERS:
        assert facts["layers"][room] is not None, facts["problems"]
    found = dict((layer, []) for layer in LAYERS + ("facts",))
    for check in _audit.audit_host(facts, desired, layers=list(LAYERS)):
        if check["status"] != "ok":
            found[check["layer"]].append(check)
    return found


def evidence(checks):
    """Every action named as ``planned: [...]`` in ``checks``, once each (a port's actions appear in one check each)."""
    seen = {}
    for check in checks:
        detail = check.get("detail") or ""
        if detail.startswith("planned: "):
            for step in ast.literal_eval(detail[len("planned: "):]):
                seen[json.dumps(step, sort_keys=True)] = step
    return seen


# -- perturbations behind the collection's back --------------------------------------------------------------------
def setpci(*argv):
    done = subprocess.run([str(SHIMS / "setpci")] + list(argv), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def perturb_pcie(node, facts, desired, choice):
    devices = sorted(facts["layers"]["pcie"]["devices"])
    if not devices or choice % 3 == 0:
        (node.root / UNITS["pcie"]).unlink()
        return "the pcie boot unit removed"
    bdf = devices[choice % len(devices)]
    other = [size for size in SIZES if size != desired["pcie_tuning_max_read_request"]][choice % (len(SIZES) - 1)]
    setpci("-s", bdf, "CAP_EXP+8.w=%x000:7000" % (SIZES.index(other)))
    return "%s: MaxReadReq set to %d" % (bdf, other)


def perturb_irq(node, facts, desired, choice):
    vectors = sorted(int(irq) for device in compact.unpack(facts["layers"]["irq"])["devices"].values()
                     for irq, item in (device.get("irqs") or {}).items() if item.get("settable"))
    wanted = set(int(cpu) for cpu in desired["irq_affinity_cpus"].split(","))
    others = [cpu for cpus in numa_cpus(facts).values() for cpu in sorted(cpus) if cpu not in wanted]
    if not vectors or not others or choice % 3 == 0:
        (node.root / UNITS["irq"]).unlink()
        return "the irq boot unit removed"
    irq = vectors[choice % len(vectors)]
    other = others[choice % len(others)]
    (node.root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("%d\n" % other, encoding="utf-8")
    return "IRQ %d moved to CPU %d" % (irq, other)


def perturb_qos(node, facts, desired, choice):
    ports = sorted(facts["layers"]["qos"].get("ports") or {})
    if not ports or choice % 3 == 0:
        (node.root / UNITS["qos"]).unlink()
        return "the roce_qos boot unit removed"
    port = ports[choice % len(ports)]
    if choice % 2:
        argv = ["-i", port, "--trust", "pcp"]
    else:
        argv = ["-i", port, "--pfc", ",".join("1" if i == (desired["roce_qos_priority"] + 1) % 8 else "0"
                                              for i in range(8))]
    done = subprocess.run([str(SHIMS / "mlnx_qos")] + argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return "mlnx_qos %s" % " ".join(argv)


PERTURB = {"pcie": perturb_pcie, "irq": perturb_irq, "qos": perturb_qos}


@contextlib.contextmanager
def converged_node(archetype, data):
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        with sim_node(archetype, pathlib.Path(tmp), mp) as node:
            (node.root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
            (node.root / "usr/bin").mkdir(parents=True, exist_ok=True)
            # the node's own setpci (a copy: a link out of the root does not resolve inside it, as in a chroot)
            shutil.copy2(SHIMS / "setpci", node.root / "usr/bin/setpci")
            facts = facts_of(mp, node)
            desired = data.draw(desired_states(facts), label="desired")
            yield mp, node, facts, desired, converge(mp, node, desired)


@pytest.mark.parametrize("archetype", ARCHETYPES)
@settings(max_examples=2, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_converged_nic_layers_audit_ok_and_one_perturbed_layer_drifts_alone(archetype, data):
    with converged_node(archetype, data) as (mp, node, facts, desired, made):
        assert dict((layer, work) for layer, (work, dummy) in check_mode(mp, made).items()) == dict(
            (layer, False) for layer in LAYERS)
        found = audit(mp, node, desired)
        assert found == dict((layer, []) for layer in LAYERS + ("facts",)), json.dumps(found, indent=1)

        # a layer the node gave its module nothing to do for (no RoCE port, no RDMA NIC) has nothing to perturb
        layers = [layer for layer in LAYERS if (node.root / UNITS[layer]).exists()]
        if not layers:
            assert not facts["devices"], "an RDMA node on which no role wrote its boot unit"
            return
        layer = data.draw(st.sampled_from(layers), label="perturbed layer")
        what = PERTURB[layer](node, facts_of(mp, node), desired, data.draw(st.integers(0, 11), label="choice"))
        found = audit(mp, node, desired)
        drifted = sorted(name for name, checks in found.items() if checks)
        assert drifted == [layer], "%s: %s" % (what, json.dumps(found, indent=1))
        assert set(check["status"] for check in found[layer]) == {"drift"}, (what, found[layer])
        planned = check_mode(mp, made)
        assert dict((name, work) for name, (work, dummy) in planned.items()) == dict(
            (name, name == layer) for name in LAYERS), what
        actions = planned[layer][1]
        assert actions, what
        assert evidence(found[layer]) == dict((json.dumps(step, sort_keys=True), step) for step in actions), (
            what, found[layer], actions)


# -- VFs in pods (issue 17: "This includes nodes whose VFs are in use by pods in other network namespaces") --------
def make_vfs(node, data):
    """VFs on up to two SR-IOV capable NIC PFs (as sriov_vfs makes them), before the NIC layers converge."""
    capable = []
    for bdf in sorted(pathlib.Path(node.root, "sys/bus/pci/devices").iterdir()):
        total = bdf / "sriov_totalvfs"
        if total.exists() and int(total.read_text()) and not (bdf / "physfn").exists():
            capable.append(bdf)
    chosen = data.draw(st.lists(st.sampled_from(capable), unique=True, min_size=1, max_size=2), label="PFs with VFs") \
        if capable else []
    for path in chosen:
        (path / "sriov_numvfs").write_text("%d\n" % data.draw(st.integers(1, 3), label="VFs of %s" % path.name))
    return [path.name for path in chosen]


def move_vfs_into_pods(node, data):
    """The RDMA netns mode (drawn), then pods take a random subset of the VFs: netdevs, and in exclusive mode their
    RDMA devices (the SR-IOV and RDMA CNIs)."""
    dump = node.call({"cmd": "dump"})
    if "ib_core" in dump["modules"]:
        node.call({"cmd": "rdma_system_set", "netns": data.draw(st.sampled_from(("shared", "exclusive")), label="mode")})
    return pods_take(node, data, [vf for pf in dump["pfs"].values() for vf in pf["vfs"]], ("pod-a", "pod-b"))


@pytest.mark.parametrize("archetype", ARCHETYPES)
@settings(max_examples=2, deadline=None, database=None, derandomize=True, phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_vfs_in_pods_change_nothing_and_one_perturbed_nic_layer_drifts_alone(archetype, data):
    """VFs made, the NIC layers converged, then pods take some VFs (their netdevs and, in exclusive mode, their RDMA
    devices leave the host's view; their interrupts and config space stay): the three modules have no work in check
    mode and the audit is ok; then one layer changed behind the collection's back drifts alone, with the module's
    check-mode plan as its evidence."""
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        with sim_node(archetype, pathlib.Path(tmp), mp) as node:
            (node.root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
            (node.root / "usr/bin").mkdir(parents=True, exist_ok=True)
            shutil.copy2(SHIMS / "setpci", node.root / "usr/bin/setpci")
            if not make_vfs(node, data):
                pytest.skip("no SR-IOV capable PF: no VF can be in a pod")
            facts = facts_of(mp, node)
            desired = data.draw(desired_states(facts), label="desired")
            made = converge(mp, node, desired)
            in_pods = move_vfs_into_pods(node, data)
            what = "VFs in pods: %s" % json.dumps(in_pods)
            assert dict((layer, work) for layer, (work, dummy) in check_mode(mp, made).items()) == dict(
                (layer, False) for layer in LAYERS), what
            found = audit(mp, node, desired)
            assert found == dict((layer, []) for layer in LAYERS + ("facts",)), "%s: %s" % (what, json.dumps(found, indent=1))

            layers = [layer for layer in LAYERS if (node.root / UNITS[layer]).exists()]
            if not layers:
                return
            layer = data.draw(st.sampled_from(layers), label="perturbed layer")
            what += "; " + PERTURB[layer](node, facts_of(mp, node), desired, data.draw(st.integers(0, 11), label="choice"))
            found = audit(mp, node, desired)
            assert sorted(name for name, checks in found.items() if checks) == [layer], "%s: %s" % (
                what, json.dumps(found, indent=1))
            planned = check_mode(mp, made)
            assert dict((name, work) for name, (work, dummy) in planned.items()) == dict(
                (name, name == layer) for name in LAYERS), what
            actions = planned[layer][1]
            assert actions and evidence(found[layer]) == dict(
                (json.dumps(step, sort_keys=True), step) for step in actions), (what, found[layer], actions)
