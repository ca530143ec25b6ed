"""The kubelet room: the planner tested directly (pure: an observed node written by hand), ``kubelet.config`` judged
ok / drift / fail / unknown, and the differential test: on the real-world nodes of tests/fixtures/realworld (kubeadm,
EKS AL2 and AL2023, kubespray, k3s, rke2; tests/unit/plugins/kubelet_nodes.py), the audit's ``kubelet.config``
evidence is what kubelet_topology's check mode returns as ``actions`` on the same node (or its failure message)."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, InputError, RdmaNodeError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import judge as _judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.kubelet_nodes import RANCHER_SCENARIOS, SCENARIOS, RancherKubeletBench, RealKubeletBench, write
from unit.safety.nodes import ModuleFail

CONFIG = "/var/lib/kubelet/config.yaml"
DROPINS = "/etc/kubernetes/kubelet.conf.d"
OWN = DROPINS + "/" + kub.DEFAULT_DROPIN_NAME
CPU_STATE = kub.STATE_FILES["cpuManagerPolicy"]
CONFIG_TEXT = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"


# -- the planner, pure ---------------------------------------------------------------------------------------------
def params(**extra):
    out = {"topology_manager_policy": "restricted", "topology_manager_scope": "container",
           "topology_manager_policy_options": None, "topology_manager_default_options": None,
           "cpu_manager_policy": None, "reserved_system_cpus": None, "memory_manager_policy": None,
           "reserved_memory": None, "mode": "auto", "dropin_name": kub.DEFAULT_DROPIN_NAME, "config": CONFIG,
           "restart": False, "restart_timeout": 60, "settle_time": 15, "healthz_url": "http://127.0.0.1:10248/healthz",
           "on_conflict": "fail", "backup": False, "host_root": "/"}
    out.update(extra)
    return out


def _doc(path, text):
    data, fmt = kub.load_document(text, path)
    return {"path": path, "text": text, "fmt": fmt, "data": data}


def observed(version=(1, 31, 2), config_dir=None, dropins=None, state=None, rancher=None, config_text=CONFIG_TEXT):
    """A kubeadm node as :func:`observe.collect` returns it, written by hand: ``config_text`` at CONFIG,
    ``dropins`` ({name: text}) under ``config_dir``, the CPU manager checkpoint ``state`` (a policy name)."""
    line = {"running": True, "pid": 4242, "unit": "/usr/lib/systemd/system/kubelet.service", "source": "unit",
            "config": None if rancher else CONFIG, "config_dir": config_dir, "flags": [],
            "flags_from": "/usr/lib/systemd/system/kubelet.service", "live_flags": [], "problems": []}
    if rancher:
        line.update(source=rancher, rancher={"tool": rancher, "service": rancher + "-agent", "binary": "/usr/local/bin/" + rancher,
                                             "config": "/etc/rancher/%s/config.yaml" % rancher, "dropin_dir": config_dir,
                                             "pending": {}})
    documents, layers = {}, []
    if not rancher:
        documents[CONFIG] = _doc(CONFIG, config_text)
        layers.append({"kind": "config", "path": CONFIG, "settings": kub.relevant(documents[CONFIG]["data"])})
    files = {CONFIG: FileState(CONFIG, True, config_text, 0o644, 0, 0)}
    for name in kub.own_names(kub.DEFAULT_DROPIN_NAME) if config_dir else ():
        files[config_dir + "/" + name] = FileState(config_dir + "/" + name)
    for name, text in sorted((dropins or {}).items()):
        path = config_dir + "/" + name
        documents[path] = _doc(path, text)
        files[path] = FileState(path, True, text, 0o644, 0, 0)
        layers.append({"kind": "dropin", "path": path, "name": name, "settings": kub.relevant(documents[path]["data"]),
                       "ours": name == kub.DEFAULT_DROPIN_NAME and kub.is_own_dropin(text)})
    state_text = json.dumps({"policyName": state, "defaultCpuSet": "0-3", "checksum": 1}) if state else None
    return {"version": version, "service": rancher + "-agent" if rancher else "kubelet", "line": line,
            "config_file": None if rancher else CONFIG, "layers": layers, "documents": documents,
            "layers_error": None, "cpus_online": {0, 1, 2, 3}, "numa_nodes": {0, 1},
            "state_files": {CPU_STATE: state_text, kub.STATE_FILES["memoryManagerPolicy"]: None},
            "state_exists": {CPU_STATE: state is not None, kub.STATE_FILES["memoryManagerPolicy"]: False}, "files": files}


def run_plan(obs, **extra):
    options = params(**extra)
    return _plan.plan(options, _plan.validate(options), obs)


def test_config_mode_edits_the_config_file_and_keeps_every_other_line():
    planned = run_plan(observed(version=(1, 29, 6)))
    assert planned["actions"] == [{"action": "update_file", "target": CONFIG, "mode": "0644"}]
    assert planned["extra"]["target"] == {"mode": "config", "path": CONFIG}
    text = planned["plans"][0].content
    assert text.startswith(CONFIG_TEXT) and "topologyManagerPolicy: restricted" in text
    assert planned["needs_restart"] and not planned["restarting"]
    assert planned["report"]["config_format"] == "yaml"


def test_drop_in_mode_writes_the_collections_drop_in_and_restarts_with_restart():
    planned = run_plan(observed(config_dir=DROPINS), restart=True)
    assert planned["extra"]["target"] == {"mode": "dropin", "path": OWN}
    assert planned["actions"] == [{"action": "create_file", "target": OWN, "mode": "0644"},
                                  {"action": "restart", "target": "kubelet"}]
    assert kub.is_own_dropin(planned["plans"][0].content)
    assert planned["stale_states"] == []


def test_nothing_to_do_is_an_empty_plan():
    done = kub.render_own_dropin({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                                  "topologyManagerPolicy": "restricted", "topologyManagerScope": "container"})
    planned = run_plan(observed(config_dir=DROPINS, dropins={kub.DEFAULT_DROPIN_NAME: done}), restart=True)
    assert planned["actions"] == [] and not planned["needs_restart"]


def test_a_cpu_policy_change_needs_the_checkpoint_moved_and_so_a_restart():
    obs = observed(config_dir=DROPINS, state="none")
    with pytest.raises(InputError, match="needs restart=true"):
        run_plan(obs, cpu_manager_policy="static", reserved_system_cpus="0")
    planned = run_plan(obs, cpu_manager_policy="static", reserved_system_cpus="0", restart=True)
    assert planned["actions"][1:] == [{"action": "delete_file", "target": CPU_STATE},
                                      {"action": "restart", "target": "kubelet"}]
    assert planned["stale_states"] == [CPU_STATE]


def test_a_stale_checkpoint_alone_is_work_for_a_restart():
    """The settings are already right, but the checkpoint was written under another policy: the kubelet would refuse
    it at its next start, so the plan moves it aside and restarts (and refuses without restart)."""
    done = kub.render_own_dropin({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                                  "topologyManagerPolicy": "restricted", "topologyManagerScope": "container"})
    obs = observed(config_dir=DROPINS, dropins={kub.DEFAULT_DROPIN_NAME: done}, state="static")
    planned = run_plan(obs, restart=True)
    assert planned["actions"] == [{"action": "delete_file", "target": CPU_STATE},
                                  {"action": "restart", "target": "kubelet"}]
    assert "would refuse" in planned["extra"]["stale_state_files"][CPU_STATE]
    with pytest.raises(InputError, match="cpu_manager_state"):
        run_plan(obs)


def test_a_later_drop_in_is_refused_with_on_conflict_fail_and_beaten_with_override():
    other = {"99-user.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                             "topologyManagerPolicy: none\n"}
    with pytest.raises(ConflictError, match="99-user.conf"):
        run_plan(observed(config_dir=DROPINS, dropins=other))
    planned = run_plan(observed(config_dir=DROPINS, dropins=other), on_conflict="override")
    assert planned["extra"]["target"]["path"] > DROPINS + "/99-user.conf"


@pytest.mark.parametrize("tool", ["k3s", "rke2"])
def test_k3s_and_rke2_before_1_32_are_refused_saying_how_by_hand(tool):
    obs = observed(version=(1, 31, 4), config_dir="/var/lib/rancher/%s/agent/etc/kubelet.conf.d" % tool, rancher=tool)
    with pytest.raises(ApplyError, match="does not read kubelet drop-ins") as err:
        run_plan(obs)
    assert "kubelet-arg+" in err.value.msg


@pytest.mark.parametrize("tool", ["k3s", "rke2"])
def test_k3s_and_rke2_have_no_config_file_to_edit(tool):
    obs = observed(version=(1, 32, 5), config_dir="/var/lib/rancher/%s/agent/etc/kubelet.conf.d" % tool, rancher=tool)
    with pytest.raises(InputError, match="mode=config: %s passes the kubelet no config file" % tool):
        run_plan(obs, mode="config")
    planned = run_plan(obs, restart=True)
    assert planned["actions"][-1] == {"action": "restart", "target": tool + "-agent"}


def test_an_unreadable_config_is_raised_once_the_target_is_known():
    obs = observed(version=(1, 29, 6))
    obs["layers_error"] = RdmaNodeError("cannot read %s" % CONFIG)
    with pytest.raises(RdmaNodeError, match="cannot read"):
        run_plan(obs)
    with pytest.raises(InputError, match="mode=dropin but the kubelet does not run with --config-dir"):
        run_plan(obs, mode="dropin")  # the target's refusal comes first, as the module always said


# -- kubelet.config on the facts -----------------------------------------------------------------------------------
@pytest.fixture
def bench(tmp_path, monkeypatch):
    made = []

    def make(name, **options):
        kind = RancherKubeletBench if name in RANCHER_SCENARIOS else RealKubeletBench
        made.append(kind(tmp_path / ("%d-%s" % (len(made), name)), monkeypatch, name, **options))
        return made[-1]
    yield make
    for one in made:
        one.close()


def gather(node):
    """rdma_facts on the node, as the audit receives them (through JSON)."""
    result = node.run_main(rdma_facts.main, {"host_root": str(node.root)})
    return json.loads(json.dumps(result["ansible_facts"]["rdma"]))


def desired(**overrides):
    out = dict(role_defaults())
    out.update(overrides)
    return out


def config_check(facts, want):
    found = [c for c in _audit.audit_host(facts, want, ["kubelet"]) if c["id"] == "kubelet.config"]
    assert len(found) == 1, found
    return found[0]


def module_args(node, want):
    """kubelet_topology's options as the role passes them (the judge's :func:`judge.params_of`), on this node."""
    args = dict((k, v) for k, v in _judge.params_of(want).items() if v is not None)
    args.update(host_root=str(node.root), healthz_url=node.health.url)
    return args


def check_mode(node, want):
    try:
        return True, node.run(module_args(node, want), check=True)
    except ModuleFail as exc:
        return False, exc.args[0]


def test_kubelet_config_ok_drift_fail_unknown(bench):
    node = bench("kubeadm-deb")
    facts = gather(node)
    assert "observed" not in facts["runtime"]["kubelet"] and facts["layers"]["kubelet"]["observed"]["version"] == [1, 31, 4]
    drift = config_check(facts, desired())
    assert drift["status"] == "drift" and drift["detail"].startswith("planned: [{'action': 'update_file'")
    assert drift["subject"] == CONFIG and drift["desired"]["topologyManagerPolicy"] == "restricted"

    node.run(module_args(node, desired()))
    assert config_check(gather(node), desired())["status"] == "ok"

    refused = config_check(gather(node), desired(kubelet_topology_cpu_manager_policy="static",
                                                 kubelet_topology_reserved_system_cpus="0-1"))
    assert refused["status"] == "fail" and "needs restart=true" in refused["detail"]

    facts = gather(node)
    facts["layers"]["kubelet"]["observed"]["version"] = None
    assert config_check(facts, desired())["status"] == "unknown"
    facts = gather(node)
    del facts["layers"]["kubelet"]["observed"]["files"][CONFIG]
    missing = config_check(facts, desired())
    assert missing["status"] == "unknown" and "do not hold %s" % CONFIG in missing["detail"]


def test_facts_of_an_older_collection_are_judged_as_before_without_kubelet_config(bench):
    node = bench("kubeadm-deb")
    facts = gather(node)
    new = _audit.audit_host(facts, desired(), ["kubelet"])
    del facts["layers"]["kubelet"]
    old = _audit.audit_host(facts, desired(), ["kubelet"])
    assert [c for c in new if c["id"] != "kubelet.config"] == old
    assert "kubelet.config" in [c["id"] for c in new] and "kubelet.config" not in [c["id"] for c in old]
    assert _registry.by_name("kubelet").judge is _judge.judge


CASES = [(name, {}) for name in sorted(SCENARIOS) + sorted(RANCHER_SCENARIOS)] + [
    ("kubeadm-deb", {"kubelet_topology_restart_ok": True, "kubelet_topology_cpu_manager_policy": "static",
                     "kubelet_topology_reserved_system_cpus": "0-1"}),
    ("eks-al2023", {"kubelet_topology_restart_ok": True, "kubelet_topology_cpu_manager_policy": "static",
                    "kubelet_topology_reserved_system_cpus": "0"}),
    ("eks-al2023", {"kubelet_topology_mode": "config"}),
    ("kubespray", {"kubelet_topology_on_conflict": "ignore", "kubelet_topology_memory_manager_policy": "None"}),
    ("k3s-agent", {"kubelet_topology_restart_ok": True, "kubelet_topology_cpu_manager_policy": "static",
                   "kubelet_topology_reserved_system_cpus": "0"}),
]


@pytest.mark.parametrize("name,overrides", CASES, ids=["%s-%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_the_audit_evidence_is_the_modules_check_mode(bench, name, overrides):
    node = bench(name)
    want = desired(**overrides)
    check = config_check(gather(node), want)
    ok, result = check_mode(node, want)
    if not ok:
        assert (check["status"], check["detail"]) == ("fail", result["msg"])
    elif result["actions"]:
        assert (check["status"], check["detail"]) == ("drift", "planned: %s" % result["actions"])
    else:
        assert (check["status"], check["detail"]) == ("ok", None)
    if ok:  # and after the role's change, the audit finds nothing left to do
        node.run(module_args(node, want))
        assert config_check(gather(node), want)["status"] == "ok"


def test_the_differential_cases_cover_every_outcome(bench):
    """The cases above are not all one status: drift, fail and ok (after applying) each appear."""
    statuses = set()
    for name, overrides in CASES:
        node = bench(name)
        statuses.add(config_check(gather(node), desired(**overrides))["status"])
    assert {"drift", "fail"} <= statuses


def test_a_user_drop_in_written_after_provisioning_is_drift_then_refused(bench):
    node = bench("eks-al2023")
    node.run(module_args(node, desired()))
    write(node.root, "/etc/kubernetes/kubelet/config.json.d/90-user.conf",
          json.dumps({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                      "topologyManagerPolicy": "best-effort"}))
    check = config_check(gather(node), desired())
    ok, failure = check_mode(node, desired())
    assert not ok and check["status"] == "fail" and check["detail"] == failure["msg"] and "90-user.conf" in check["detail"]


def test_a_node_without_a_kubelet_fails_as_the_module_does(bench):
    node = bench("kubeadm-deb")
    (node.root / "usr/bin/kubelet").unlink()
    check = config_check(gather(node), desired())
    ok, failure = check_mode(node, desired())
    assert not ok and failure["msg"] == "kubelet is not installed on the node"
    assert (check["status"], check["detail"]) == ("fail", failure["msg"])


def test_the_judges_fallback_defaults_are_the_roles():
    """judge.ROLE_DEFAULTS fills what a desired state lacks exactly as roles/kubelet_topology/defaults/main.yml does."""
    defaults = role_defaults()
    assert _judge.ROLE_DEFAULTS == dict((var, defaults[var]) for var in _judge.ROLE_DEFAULTS)


# -- the role's variables as the module receives them ----------------------------------------------------------------
def role_task_args(node, want):
    """The arguments roles/kubelet_topology/tasks/main.yml passes, unconverted (``default(omit, true)`` drops what
    Jinja takes as false): the module converts and checks them with its argument spec, as the judge must."""
    args = {"topology_manager_policy": want["kubelet_topology_topology_manager_policy"],
            "topology_manager_scope": want["kubelet_topology_topology_manager_scope"],
            "topology_manager_policy_options": want["kubelet_topology_topology_manager_policy_options"],
            "topology_manager_default_options": want["kubelet_topology_topology_manager_default_options"],
            "mode": want["kubelet_topology_mode"], "on_conflict": want["kubelet_topology_on_conflict"],
            "restart": want["kubelet_topology_restart_ok"], "host_root": str(node.root),
            "healthz_url": node.health.url}
    for name in ("cpu_manager_policy", "reserved_system_cpus", "memory_manager_policy", "reserved_memory"):
        if want.get("kubelet_topology_" + name):
            args[name] = want["kubelet_topology_" + name]
    return args


@pytest.mark.parametrize("cpus", [2, "2"])
def test_reserved_cpus_given_as_a_number_are_what_the_module_applies(bench, cpus):
    """YAML's ``kubelet_topology_reserved_system_cpus: 2`` is the int 2; the module's ``type: str`` makes it "2", so
    a node converged with it audits ok (the judge once planned with the int and drifted for ever)."""
    node = bench("kubeadm-deb")
    want = desired(kubelet_topology_restart_ok=True, kubelet_topology_cpu_manager_policy="static",
                   kubelet_topology_reserved_system_cpus=cpus)
    before = config_check(gather(node), want)
    check = node.run(role_task_args(node, want), check=True)
    assert (before["status"], before["detail"]) == ("drift", "planned: %s" % check["actions"])
    node.run(role_task_args(node, want))
    assert config_check(gather(node), want)["status"] == "ok"


@pytest.mark.parametrize("empty", [0, "", None, [], False])
def test_a_variable_jinja_takes_as_false_is_omitted_as_the_role_omits_it(bench, empty):
    node = bench("kubeadm-deb")
    node.run(role_task_args(node, desired()))
    assert config_check(gather(node), desired(kubelet_topology_reserved_system_cpus=empty,
                                              kubelet_topology_reserved_memory=empty))["status"] == "ok"


@pytest.mark.parametrize("variable,value,says", [
    ("kubelet_topology_reserved_memory", "1Gi", "reserved_memory"),
    ("kubelet_topology_reserved_memory", {"numaNode": 0, "limits": {"memory": "1Gi"}}, "reserved_memory"),
    ("kubelet_topology_reserved_memory", [{"numa_node": 0}], "missing required arguments: limits"),
    ("kubelet_topology_reserved_memory", [{"numa_node": "zero", "limits": {"memory": "1Gi"}}], "numa_node"),
    ("kubelet_topology_topology_manager_policy", "strict", "topology_manager_policy"),
    ("kubelet_topology_topology_manager_policy_options", "prefer-closest-numa-nodes=true,x", "policy_options"),
    ("kubelet_topology_reserved_system_cpus", "0-", "reserved_system_cpus"),
])
def test_variables_the_module_refuses_fail_this_check_and_not_the_audit(bench, variable, value, says):
    """A malformed variable is the role's failure before any change: kubelet.config fails naming it, the module
    refuses the same arguments, and every other check of the host (and of the fleet) is still judged."""
    node = bench("kubeadm-deb")
    want = desired(**{variable: value, "kubelet_topology_memory_manager_policy": "Static",
                      "kubelet_topology_restart_ok": True})
    if variable != "kubelet_topology_reserved_memory":
        want["kubelet_topology_reserved_memory"] = [{"numa_node": 0, "limits": {"memory": "1Gi"}}]
    with pytest.raises(ModuleFail) as refused:
        node.run(role_task_args(node, want), check=True)
    checks = _audit.audit_host(gather(node), want, ["kubelet", "sysctl"])
    check = [c for c in checks if c["id"].startswith("kubelet.")]
    assert len(check) == 1 and check[0]["id"] == "kubelet.config" and check[0]["status"] == "fail"
    assert says in check[0]["detail"] and refused.value.args[0]["msg"] in check[0]["detail"]
    assert "role's variables" in check[0]["remedy"]
    assert [c for c in checks if c["id"].startswith("sysctl.")]  # the host's other layers are still judged
