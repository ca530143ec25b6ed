"""After converge the audit is ok; after one layer is changed behind the collection's back, exactly that layer drifts
(issue 17, "Done when", for the layers the node simulator runs in-process: netns, sysctl, sriov).

Every simulator archetype, random valid desired states (hypothesis).  Per example, on a freshly powered-on simulated
node:

1. converge with the modules, called with the arguments the roles give them (the same filter for the sysctl
   settings, the sriov role's own template for the boot unit's state file);
2. every module run again changes nothing, and ``rdma_facts`` + the audit (the same desired state, as the role's
   defaults fill it) report ``ok`` in every layer converged;
3. one layer is changed behind the collection's back (the live netns mode or its modprobe.d file, a live sysctl, the
   VF count), then the audit reports that layer, and only that layer, as not ok, and the modules' check-mode plans
   agree: the perturbed layer's module has work (or refuses without ``allow_vf_reset``), the others have none.
   For a layer built as a room (netns, sysctl) the audit's evidence is the module's check-mode plan itself: the audit
   runs the module's planner on rdma_facts' ``layers.<name>``, so its ``planned: [...]`` equals the module's actions.

containerd (a room too) runs here with the safety suite's stand-in for containerd 1.6, 1.7 and 2.1 on every archetype:
converged it audits ok; its config.toml or unit drop-in changed behind the module's back, only containerd drifts and
``containerd.config``'s evidence is containerd_rdma's check-mode plan.  Real containerd is molecule's ``runtime``.
The kernel boot arguments (GRUB tooling), drivers and the kubelet are proved by their molecule scenarios (the VM's
real kernel and real kubelet): they do not run in-process here.
"""

import contextlib
import json
import pathlib
import tempfile

import jinja2
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.modules import (
    containerd_rdma, ib_vf_guids, rdma_facts, rdma_netns, sriov_vfs, sysctl_dropin,
)
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._sysctl_settings import rdma_sysctl_settings
from unit.plugins.modules.harness import ModuleExit, ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node
from unit.safety.pods import pods_take

REPO = pathlib.Path(__file__).resolve().parents[3]
ARCHETYPES = ("dgx-h100", "roce-cx6dx", "numa-split", "a100-10nic", "dell-xe9680-12nic", "no-rdma")
LAYERS = ("netns", "sysctl", "sriov")
DEFAULTS = role_defaults()
SRIOV_DEFAULTS = {"sriov_allow_vf_reset": False, "sriov_firmware_check": "auto", "sriov_timeout": 120,
                  "sriov_guid_prefix": "02", "sriov_guid_pool_file": "/etc/sriov-operator/infiniband/guids",
                  "sriov_export_operator_pool": "auto"}
STATE_FILE = "etc/rdma-k8s-node/sriov.json"
# the values the modules accept (plugins/module_utils/layers/sysctl/rules.py TYPED); the host-wide arp_ignore stays
# below 2, which the audit fails on by rule (pods' /32 routes stop answering ARP: sysctl.host_arp_ignore)
ARP_IGNORE = (0, 1, 2, 3, 8)
ARP_ANNOUNCE = (0, 1, 2)
RP_FILTER = (0, 1, 2)


def sriov_role_defaults():
    """The sriov role's defaults the state-file template reads (held to roles/sriov/defaults/main.yml)."""
    return dict(SRIOV_DEFAULTS)


def test_sriov_defaults_are_the_roles():
    import yaml  # pylint: disable=import-outside-toplevel
    defaults = yaml.safe_load((REPO / "roles/sriov/defaults/main.yml").read_text(encoding="utf-8"))
    assert dict((k, defaults[k]) for k in SRIOV_DEFAULTS) == SRIOV_DEFAULTS


# -- the desired state ------------------------------------------------------------------------------------------------
@st.composite
def desired_states(draw, facts):
    """Role variables for this node: the netns mode, the sysctls, and VFs on up to two SR-IOV capable PFs."""
    desired = {
        "rdma_netns_mode": draw(st.sampled_from(("shared", "exclusive"))),
        "rdma_sysctl_host": {"arp_ignore": draw(st.sampled_from((0, 1))),
                             "arp_announce": draw(st.sampled_from(ARP_ANNOUNCE)),
                             "rp_filter": draw(st.sampled_from(RP_FILTER))},
        "rdma_sysctl_per_interface": draw(st.fixed_dictionaries({}, optional={
            "arp_ignore": st.sampled_from(ARP_IGNORE), "arp_announce": st.sampled_from(ARP_ANNOUNCE),
            "rp_filter": st.sampled_from(RP_FILTER)})),
    }
    capable = [d for d in facts["devices"] if not d.get("is_vf") and (d.get("sriov") or {}).get("totalvfs")]
    pfs = []
    for device in draw(st.lists(st.sampled_from(capable), unique_by=lambda d: d["pci_address"], max_size=2)
                       if capable else st.just([])):
        spec = {"pci_address": device["pci_address"],
                "num_vfs": draw(st.integers(0, min(4, device["sriov"]["totalvfs"])))}
        ethernet = all(p.get("link_layer") == "Ethernet" for p in device.get("ports") or [])
        if ethernet and spec["num_vfs"] and draw(st.booleans()):
            spec["vf_defaults"] = {"trust": draw(st.booleans()), "spoofchk": draw(st.booleans())}
        pfs.append(spec)
    desired["sriov_pfs"] = pfs
    return desired


# -- the modules, called as the roles call them -------------------------------------------------------------------
def facts_of(mp, node):
    return run_module(mp, rdma_facts.main, {"host_root": str(node.root)})["ansible_facts"]["rdma"]


def module_calls(desired, facts):
    """``[(layer, main, args)]`` as roles/rdma_netns, rdma_sysctl and sriov build them (the role defaults elsewhere)."""
    calls = [("netns", rdma_netns.main, {"mode": desired["rdma_netns_mode"], "live": True, "on_conflict": "fail",
                                         "initramfs": "auto", "conf_file": DEFAULTS["rdma_netns_conf_file"]})]
    settings_ = rdma_sysctl_settings([], desired["rdma_sysctl_host"], desired["rdma_sysctl_per_interface"], facts)
    calls.append(("sysctl", sysctl_dropin.main, {"path": DEFAULTS["rdma_sysctl_file"], "settings": settings_,
                                                 "live": True, "on_conflict": "fail"}))
    for spec in desired["sriov_pfs"]:
        args = dict(spec, allow_vf_reset=False, firmware_check="auto", timeout=120)
        calls.append(("sriov", sriov_vfs.main, args))
    return calls


def guid_calls(sriov_results):
    """The role's ib_vf_guids call for each InfiniBand PF among ``[(spec, sriov_vfs result)]``."""
    calls = []
    for spec, result in sriov_results:
        if result["observed"]["pf"].get("link_layer", "").lower() == "infiniband" or _is_ib(result):
            calls.append(("sriov", ib_vf_guids.main, {
                "pci_address": result["observed"]["pf"]["pci_address"], "scheme": spec.get("guid_scheme", "pf_guid"),
                "guid_prefix": SRIOV_DEFAULTS["sriov_guid_prefix"], "pool_file": SRIOV_DEFAULTS["sriov_guid_pool_file"],
                "allow_vf_reset": False, "timeout": 120}))
    return calls


def _is_ib(result):
    pf = result["observed"]["pf"]
    return any((p.get("link_layer") or "").lower() == "infiniband" for p in pf.get("ports") or [])


def write_state_file(node, desired, sriov_results):
    """The boot unit's desired-state file, rendered from the sriov role's own template."""
    template = (REPO / "roles/sriov/templates/sriov-state.json.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["to_json"] = lambda value, sort_keys=False: json.dumps(value, sort_keys=sort_keys)
    env.filters["bool"] = bool
    ib_results = [{"observed": r["observed"], "item": spec} for spec, r in sriov_results if _is_ib(r)]
    text = env.from_string(template).render(
        sriov_pfs=desired["sriov_pfs"], sriov__ib_results=ib_results, sriov__other_hosts_guids=[],
        sriov_host_root="/", **sriov_role_defaults())
    json.loads(text)  # the template renders JSON
    path = node.root / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def converge(mp, node, desired, facts=None):
    """Run every module as the roles do (``facts``: the node's rdma_facts before, what the roles read; read here when
    not given); ``[(layer, main, args)]`` of the calls made."""
    if facts is None:
        facts = facts_of(mp, node)
    made, sriov_results = [], []
    for layer, main, args in module_calls(desired, facts):
        args = dict(args, host_root=str(node.root))
        result = run_module(mp, main, args)
        made.append((layer, main, args))
        if main is sriov_vfs.main:
            sriov_results.append((dict((k, v) for k, v in args.items() if k in ("pci_address", "num_vfs")), result))
    for layer, main, args in guid_calls(sriov_results):
        args = dict(args, host_root=str(node.root))
        run_module(mp, main, args)
        made.append((layer, main, args))
    if desired["sriov_pfs"]:
        write_state_file(node, desired, sriov_results)
    return made


def audit(mp, node, desired):
    """``{layer: [non-ok checks]}`` of the audit of this node against ``desired`` (role defaults elsewhere)."""
    wanted = dict(DEFAULTS, **desired)
    facts = facts_of(mp, node)
    for room in ("netns", "sysctl"):  # judged by the room, not from the older keys
        assert facts["layers"][room] is not None, facts["problems"]
    checks = _audit.audit_host(facts, wanted, layers=list(LAYERS))
    found = dict((layer, []) for layer in LAYERS + ("facts",))
    for check in checks:
        if check["status"] != "ok":
            found[check["layer"]].append(check)
    return found


def planned_work(mp, made):
    """``{layer: True}`` for the layers whose module has work in check mode (or refuses: a VF reset is needed)."""
    work = dict((layer, False) for layer in LAYERS)
    for layer, main, args in made:
        try:
            result = run_module(mp, main, args, check=True, expect=(ModuleExit, ModuleFail))
        except AssertionError:  # pragma: no cover - run_module's pytest.raises reports an unexpected exception
            raise
        if result.get("failed") or result.get("changed"):
            work[layer] = True
    return work


def planned_actions(mp, made, layer):
    """The check-mode ``actions`` of ``layer``'s module calls, in call order."""
    actions = []
    for name, main, args in made:
        if name == layer:
            actions.extend(run_module(mp, main, args, check=True)["actions"])
    return actions


def assert_drifts_alone(mp, node, made, desired, layer, what):
    """After ``layer`` was changed behind the collection's back (``what``): the audit reports that layer alone, only
    its module has work in check mode, and a room's evidence is that module's plan."""
    found = audit(mp, node, desired)
    drifted = sorted(name for name, checks in found.items() if checks)
    assert drifted == [layer], "%s: %s" % (what, json.dumps(found, indent=1))
    work = planned_work(mp, made)
    assert work == dict((name, name == layer) for name in LAYERS), what
    assert_plan_is_evidence(mp, made, found, layer, what)


def assert_plan_is_evidence(mp, made, found, layer, what):
    """For a layer built as a room (netns, sysctl) the audit's evidence is the module's check-mode plan: the audit
    runs the module's planner on rdma_facts' ``layers.<name>``."""
    if layer == "netns":
        [mode] = [check for check in found["netns"] if check["id"] == "netns.mode"]
        actions = planned_actions(mp, made, "netns")
        assert actions and mode["detail"].endswith("planned: %s" % actions), (what, mode, actions)
    if layer == "sysctl":
        [dropin] = [check for check in found["sysctl"] if check["id"] == "sysctl.dropin"]
        actions = planned_actions(mp, made, "sysctl")
        assert actions and dropin["detail"] == "planned: %s" % actions, (what, dropin, actions)


# -- perturbations behind the collection's back --------------------------------------------------------------------
def perturb_netns(node, desired, facts, choice):  # pylint: disable=unused-argument
    other = "exclusive" if desired["rdma_netns_mode"] == "shared" else "shared"
    if choice % 2 == 0 and facts["devices"]:
        node.call({"cmd": "rdma_system_set", "netns": other})
        return "live netns mode set to %s" % other
    path = node.root / DEFAULTS["rdma_netns_conf_file"].lstrip("/")
    path.write_text("options ib_core netns_mode=%s\n" % ("1" if other == "shared" else "0"), encoding="utf-8")
    return "%s rewritten to %s" % (path.name, other)


def perturb_sysctl(node, desired, facts, choice):  # pylint: disable=unused-argument
    params = sorted(desired["rdma_sysctl_host"])
    param = params[choice % len(params)]
    path = node.root / "proc/sys/net/ipv4/conf/all" / param
    current = int(path.read_text().strip())
    values = (0, 1) if param == "arp_ignore" else ARP_ANNOUNCE if param == "arp_announce" else RP_FILTER
    new = [v for v in values if v != current][choice % (len(values) - 1)]
    path.write_text("%d\n" % new, encoding="utf-8")
    return "all.%s %d -> %d" % (param, current, new)


def perturb_sriov(node, desired, facts, choice):  # pylint: disable=unused-argument
    spec = desired["sriov_pfs"][choice % len(desired["sriov_pfs"])]
    path = node.root / "sys/bus/pci/devices" / spec["pci_address"] / "sriov_numvfs"
    if spec["num_vfs"]:
        path.write_text("0\n", encoding="utf-8")
        return "%s: VFs removed" % spec["pci_address"]
    path.write_text("1\n", encoding="utf-8")
    return "%s: a VF created" % spec["pci_address"]


PERTURB = {"netns": perturb_netns, "sysctl": perturb_sysctl, "sriov": perturb_sriov}


def record_sysctl(mp, tmp):
    """A stand-in for the real sysctl the simulator's shim would run (HWSIM_REAL_SYSCTL): it succeeds and writes no host
    sysctl."""
    recorder = pathlib.Path(tmp) / "real-sysctl"
    recorder.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    recorder.chmod(0o755)
    mp.setenv("HWSIM_REAL_SYSCTL", str(recorder))


@contextlib.contextmanager
def converged_node(archetype, data, skip_if=None, strategy=None):
    """A simulated node of ``archetype`` converged to a drawn desired state: ``(mp, node, facts, desired, made)``.
    ``skip_if(facts)`` gives a reason to skip the test before anything is drawn; ``strategy(facts)`` draws the
    desired state (default :func:`desired_states`)."""
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        record_sysctl(mp, tmp)
        with sim_node(archetype, pathlib.Path(tmp), mp) as node:
            facts = facts_of(mp, node)
            reason = skip_if(facts) if skip_if else None
            if reason:
                pytest.skip(reason)
            desired = data.draw((strategy or desired_states)(facts), label="desired")
            yield mp, node, facts, desired, converge(mp, node, desired, facts)


@pytest.mark.parametrize("archetype", ARCHETYPES)
@settings(max_examples=4, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_converged_audits_ok_and_one_perturbed_layer_drifts_alone(archetype, data, monkeypatch):  # pylint: disable=unused-argument
    with converged_node(archetype, data) as (mp, node, facts, desired, made):
        # converged: nothing left to do, and the audit agrees
        assert planned_work(mp, made) == dict((layer, False) for layer in LAYERS)
        found = audit(mp, node, desired)
        assert found == dict((layer, []) for layer in LAYERS + ("facts",)), json.dumps(found, indent=1)

        layers = [layer for layer in LAYERS if layer != "sriov" or desired["sriov_pfs"]]
        layer = data.draw(st.sampled_from(layers), label="perturbed layer")
        what = PERTURB[layer](node, desired, facts, data.draw(st.integers(0, 7), label="choice"))
        assert_drifts_alone(mp, node, made, desired, layer, what)


@pytest.mark.parametrize("archetype", ARCHETYPES)
@pytest.mark.parametrize("how", ("live", "file"))
@settings(max_examples=1, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_netns_drift_evidence_is_the_modules_check_mode_plan(archetype, how, data, monkeypatch):  # pylint: disable=unused-argument
    """The netns room on every archetype: converged, the live mode or our modprobe.d file changed behind the module's
    back; only netns drifts, and the audit's evidence is exactly the module's check-mode plan for it."""
    def skip_if(facts):
        if how == "live" and not facts["devices"]:
            return "no RDMA device: ib_core is not loaded, there is no live mode to change"
        return None

    with converged_node(archetype, data, skip_if) as (mp, node, facts, desired, made):
        assert audit(mp, node, desired) == dict((layer, []) for layer in LAYERS + ("facts",))
        what = perturb_netns(node, desired, facts, 0 if how == "live" else 1)
        found = audit(mp, node, desired)
        assert sorted(name for name, checks in found.items() if checks) == ["netns"], what
        [mode] = [check for check in found["netns"] if check["id"] == "netns.mode"]
        actions = planned_actions(mp, made, "netns")
        assert mode["status"] == "drift" and mode["detail"].endswith("planned: %s" % actions), (what, mode, actions)
        conf = DEFAULTS["rdma_netns_conf_file"]
        want = desired["rdma_netns_mode"]
        expected = ([{"action": "run", "target": "rdma system set netns %s" % want}] if how == "live"
                    else [{"action": "update_file", "target": conf, "mode": "0644"}])
        assert actions == expected, what


def perturb_sysctl_file(node, desired, how):
    """Our sysctl.d file changed behind the module's back: one value edited (``file``), or the file rewritten by hand
    without the module's header (``foreign``)."""
    path = node.root / DEFAULTS["rdma_sysctl_file"].lstrip("/")
    text = path.read_text(encoding="utf-8")
    param = sorted(desired["rdma_sysctl_host"])[0]
    key = "net.ipv4.conf.all.%s = " % param
    value = desired["rdma_sysctl_host"][param]
    other = 0 if value else 1
    assert key + str(value) + "\n" in text
    if how == "file":
        path.write_text(text.replace(key + str(value) + "\n", key + str(other) + "\n"), encoding="utf-8")
        return "%s: all.%s %s -> %s" % (path.name, param, value, other)
    path.write_text("# by hand\n" + key + str(value) + "\n", encoding="utf-8")
    return "%s rewritten by hand" % path.name


@pytest.mark.parametrize("archetype", ARCHETYPES)
@pytest.mark.parametrize("how", ("live", "file", "foreign"))
@settings(max_examples=1, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_sysctl_drift_evidence_is_the_modules_check_mode_plan(archetype, how, data, monkeypatch):  # pylint: disable=unused-argument
    """The sysctl room on every archetype: converged, a live value or our sysctl.d file changed behind the module's
    back; only sysctl drifts, and the audit's evidence (``sysctl.dropin``) is exactly sysctl_dropin's check-mode plan."""
    with converged_node(archetype, data) as (mp, node, facts, desired, made):
        found = audit(mp, node, desired)
        assert found == dict((layer, []) for layer in LAYERS + ("facts",)), json.dumps(found, indent=1)
        if how == "live":
            what = perturb_sysctl(node, desired, facts, data.draw(st.integers(0, 7), label="choice"))
        else:
            what = perturb_sysctl_file(node, desired, how)
        found = audit(mp, node, desired)
        assert sorted(name for name, checks in found.items() if checks) == ["sysctl"], what
        [dropin] = [check for check in found["sysctl"] if check["id"] == "sysctl.dropin"]
        actions = planned_actions(mp, made, "sysctl")
        assert dropin["status"] == "drift" and dropin["detail"] == "planned: %s" % actions, (what, dropin, actions)
        if how == "live":
            assert [a["action"] for a in actions] == ["set_live"], what
        else:
            assert actions == [{"action": "update_file", "target": DEFAULTS["rdma_sysctl_file"], "mode": "0644"}], what
            # the interface view agrees: all's value at boot is not the desired one any more
            arp = dict((c["subject"], c) for c in found["sysctl"] if c["id"] == "sysctl.arp")
            assert arp["all"]["status"] == "drift", what


# -- containerd (a room: its audit runs containerd_rdma's planner on rdma_facts' layers.containerd) -----------------
CONTAINERD_VERSIONS = ((1, 6), (1, 7), (2, 1))
CONTAINERD_UNIT = "/lib/systemd/system/containerd.service"
# a version 2 config as distribution packages ship it (1.6/1.7; 2.x reads and migrates it), with a runc runtime
CONTAINERD_CONFIG = """version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""


@contextlib.contextmanager
def containerd_on(node, mp, version):
    """containerd ``version`` on the simulated node: its unit, config.toml, the binaries (the safety suite's
    stand-in answers ``containerd --version``, ``config dump`` and ``ctr oci spec`` from the node's files); no
    systemd runs in the simulator (``systemctl`` cannot be asked), so no daemon-reload is planned."""
    from unit.safety import nodes  # pylint: disable=import-outside-toplevel
    root = pathlib.Path(node.root)
    unit = root / CONTAINERD_UNIT.lstrip("/")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Service]\nExecStart=/usr/bin/containerd\nLimitNOFILE=infinity\n", encoding="utf-8")
    (root / "etc/containerd").mkdir(parents=True, exist_ok=True)
    (root / "etc/containerd/config.toml").write_text(CONTAINERD_CONFIG, encoding="utf-8")
    nodes.tool(root, "/usr/bin/containerd")
    nodes.tool(root, "/usr/bin/ctr")
    tools = nodes.FakeTools(root)
    fake = nodes.FakeContainerd(root, version)
    tools.handlers.update(containerd=fake, ctr=fake,
                          systemctl=lambda argv: (1, "", "System has not been booted with systemd as init system\n"))
    tools.install(mp)
    tools.activate()
    try:
        yield tools
    finally:
        nodes._ACTIVE["tools"] = None  # pylint: disable=protected-access


def containerd_role_defaults():
    """roles/containerd_rdma/defaults/main.yml (the module options the audit's desired state does not hold)."""
    import yaml  # pylint: disable=import-outside-toplevel
    return yaml.safe_load((REPO / "roles/containerd_rdma/defaults/main.yml").read_text(encoding="utf-8"))


def containerd_call(desired):
    """roles/containerd_rdma's module call (its defaults, the drawn memlock and CDI)."""
    DEFAULTS = containerd_role_defaults()  # pylint: disable=invalid-name,redefined-outer-name
    return ("containerd", containerd_rdma.main, {
        "memlock": desired["containerd_rdma_memlock"], "config": DEFAULTS["containerd_rdma_config"],
        "base_runtime_spec": DEFAULTS["containerd_rdma_base_runtime_spec"], "runtimes": DEFAULTS["containerd_rdma_runtimes"],
        "cdi": desired["containerd_rdma_cdi"], "cdi_spec_dirs": DEFAULTS["containerd_rdma_cdi_spec_dirs"],
        "edit_imports": DEFAULTS["containerd_rdma_edit_imports"], "edit_generated": DEFAULTS["containerd_rdma_edit_generated"],
        "service": DEFAULTS["containerd_rdma_service"], "restart": DEFAULTS["containerd_rdma_restart_ok"],
        "restart_timeout": DEFAULTS["containerd_rdma_restart_timeout"], "backup": DEFAULTS["containerd_rdma_backup"]})


def audit_all(mp, node, desired, layers):
    """:func:`audit` over ``layers`` (the containerd layer with the others)."""
    wanted = dict(DEFAULTS, **desired)
    facts = facts_of(mp, node)
    assert facts["layers"]["containerd"] is not None and facts["layers"]["containerd"]["observed"], facts["problems"]
    found = dict((layer, []) for layer in layers + ("facts",))
    for check in _audit.audit_host(facts, wanted, layers=list(layers)):
        if check["status"] != "ok":
            found[check["layer"]].append(check)
    return found


def perturb_containerd(node, desired, how):
    """containerd's files changed behind the module's back: CDI switched off in config.toml (``config``), the
    collection's unit drop-in given another LimitMEMLOCK (``dropin``)."""
    root = pathlib.Path(node.root)
    if how == "config":
        path = root / "etc/containerd/config.toml"
        text = path.read_text(encoding="utf-8")
        assert "enable_cdi = true" in text, text
        path.write_text(text.replace("enable_cdi = true", "enable_cdi = false"), encoding="utf-8")
        return "config.toml: enable_cdi = false"
    path = root / "etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf"
    path.write_text("[Service]\nLimitMEMLOCK=65536\n", encoding="utf-8")
    return "%s: LimitMEMLOCK=65536" % path.name


@pytest.mark.parametrize("archetype", ARCHETYPES)
@pytest.mark.parametrize("how", ("config", "dropin"))
@settings(max_examples=1, deadline=None, database=None, derandomize=True, phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_containerd_drift_evidence_is_the_modules_check_mode_plan(archetype, how, data, monkeypatch):  # pylint: disable=unused-argument
    """The containerd room on every archetype (containerd 1.6, 1.7 or 2.1): converged with the other layers, the
    containerd layer audits ok; its config.toml or its unit drop-in changed behind the module's back, only containerd
    drifts, and the audit's evidence (``containerd.config``) is exactly containerd_rdma's check-mode plan."""
    layers = LAYERS + ("containerd",)
    with converged_node(archetype, data) as (mp, node, facts, desired, made):
        # (1.6 has no CDI: the config perturbation, CDI switched off, needs 1.7 or later)
        version = data.draw(st.sampled_from(CONTAINERD_VERSIONS if how == "dropin" else CONTAINERD_VERSIONS[1:]),
                            label="containerd")
        desired = dict(desired, containerd_rdma_memlock=data.draw(st.sampled_from(("unlimited", "64M", "1073741824")),
                                                                  label="memlock"),
                       containerd_rdma_cdi=data.draw(st.booleans(), label="cdi") if version >= (1, 7) else False)
        if how == "config":
            desired["containerd_rdma_cdi"] = True
        with containerd_on(node, mp, version):
            layer, main, args = containerd_call(desired)
            args = dict(args, host_root=str(node.root))
            run_module(mp, main, args)
            made = made + [(layer, main, args)]
            assert not run_module(mp, main, args, check=True)["changed"]
            found = audit_all(mp, node, desired, layers)
            assert found == dict((name, []) for name in layers + ("facts",)), json.dumps(found, indent=1)
            what = perturb_containerd(node, desired, how)
            found = audit_all(mp, node, desired, layers)
            assert sorted(name for name, checks in found.items() if checks) == ["containerd"], (what, found)
            [config] = [check for check in found["containerd"] if check["id"] == "containerd.config"]
            actions = planned_actions(mp, made, "containerd")
            assert config["status"] == "drift" and config["detail"] == "planned: %s" % actions, (what, config, actions)
            target = "/etc/containerd/config.toml" if how == "config" else \
                "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf"
            assert [a["target"] for a in actions] == [target], (what, actions)


# -- VFs in pods (issue 17: "This includes nodes whose VFs are in use by pods in other network namespaces") --------
PODS = ("pod-a", "pod-b", "pod-c")


def sriov_capable(facts):
    return [d for d in facts["devices"] if not d.get("is_vf") and (d.get("sriov") or {}).get("totalvfs")]


@st.composite
def desired_states_with_vfs(draw, facts):
    """:func:`desired_states` with at least one VF on the node (when it has an SR-IOV capable PF)."""
    desired = draw(desired_states(facts))
    capable = sriov_capable(facts)
    if capable and not any(spec["num_vfs"] for spec in desired["sriov_pfs"]):
        if not desired["sriov_pfs"]:
            desired["sriov_pfs"] = [{"pci_address": capable[0]["pci_address"]}]
        desired["sriov_pfs"][0]["num_vfs"] = draw(st.integers(1, min(4, next(
            d for d in capable if d["pci_address"] == desired["sriov_pfs"][0]["pci_address"])["sriov"]["totalvfs"])))
    return desired


def vfs_of(node, desired):
    """The PCI addresses of the VFs of the desired PFs, now."""
    pfs = node.call({"cmd": "dump"})["pfs"]
    return [vf for spec in desired["sriov_pfs"] for vf in pfs[spec["pci_address"]]["vfs"]]


def move_vfs_into_pods(node, data, desired):
    """Pods take a random subset of the VFs, as the SR-IOV CNI and (exclusive mode) the RDMA CNI do: each VF's netdev
    moves into its pod's namespace as ``net<N>``, and in exclusive mode its RDMA device too.  Returns
    ``{vf: (pod, what moved)}``."""
    return pods_take(node, data, vfs_of(node, desired), PODS)


@pytest.mark.parametrize("archetype", ARCHETYPES)
@settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_vfs_in_pods_change_nothing_and_one_perturbed_layer_drifts_alone(archetype, data, monkeypatch):  # pylint: disable=unused-argument
    """Converged, then pods take some of the VFs (their netdevs, and in exclusive mode their RDMA devices, leave the
    host's view): no module has work in check mode and the audit stays ok in every layer; then one layer changed
    behind the collection's back drifts that layer alone, with the module's check-mode plan as its evidence."""
    def skip_if(facts):
        return None if sriov_capable(facts) else "no SR-IOV capable PF: no VF can be in a pod"

    with converged_node(archetype, data, skip_if, desired_states_with_vfs) as (mp, node, facts, desired, made):
        in_pods = move_vfs_into_pods(node, data, desired)
        assert in_pods, "no VF moved"
        exclusive = desired["rdma_netns_mode"] == "exclusive"
        assert all(bool(moved["rdma"]) == (exclusive and bool(facts["devices"])) for dummy, moved in in_pods.values()
                   if node.call({"cmd": "dump"})["ibdevs"]), in_pods
        what = "VFs in pods: %s" % json.dumps(in_pods)
        assert planned_work(mp, made) == dict((layer, False) for layer in LAYERS), what
        found = audit(mp, node, desired)
        assert found == dict((layer, []) for layer in LAYERS + ("facts",)), "%s: %s" % (what, json.dumps(found, indent=1))

        layer = data.draw(st.sampled_from(LAYERS), label="perturbed layer")
        choice = data.draw(st.integers(0, 7), label="choice")
        if layer == "netns":
            choice |= 1  # a pod exists: the kernel refuses a live mode switch (EBUSY), so change our modprobe.d file
        what += "; " + PERTURB[layer](node, desired, facts, choice)
        assert_drifts_alone(mp, node, made, desired, layer, what)
