"""kubelet_topology on nodes built from real files (tests/fixtures/realworld, read at test time): kubeadm deb/rpm (and a
hand-edited kubeadm-flags.env), EKS AL2 (JSON config, flags in unit drop-ins), EKS AL2023 nodeadm (JSON config, JSON
in a .conf drop-in, --config-dir), kubespray (YAML with `key : value` and `True`, backslash-continued kubelet.env).

Each: check mode changes nothing, apply, idempotence, every original value unchanged (parsed before and after with
Python's json/yaml, all keys but the collection's compared), the kubelet's merged view (rdma_facts) has the settings;
then the conflicts: a later drop-in, a flag in an environment file, a flag in a unit, a flag only the running kubelet
still has, with on_conflict fail, ignore and override.
"""

import builtins
import difflib
import json
import sys

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe
from unit.plugins.kubelet_nodes import SCENARIOS, RealKubeletBench, write
from unit.safety.nodes import ModuleFail, snapshot


def kubelet_facts(host, **kwargs):
    """``runtime.kubelet`` as rdma_facts returns it: the kubelet room's facts without the planner's input."""
    return kubelet_observe.report_of(kubelet_observe.facts(host, **kwargs))


MANAGED = set(kub.MANAGED_KEYS)
OWN = "50-rdma-k8s-node-topology.conf"


def parse(text, fmt):
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


def others(data):
    return dict((k, v) for k, v in data.items() if k not in MANAGED)


@pytest.fixture
def bench(tmp_path, monkeypatch):
    made = []

    def make(name, **options):
        made.append(RealKubeletBench(tmp_path / ("%d-%s" % (len(made), name)), monkeypatch, name, **options))
        return made[-1]
    yield make
    for one in made:
        one.close()


@pytest.fixture
def no_yaml(monkeypatch):
    """Importing PyYAML fails, as on a node without python3-yaml."""
    real_import = builtins.__import__

    def guarded(name, *args, **kwargs):
        if name == "yaml" or name.startswith("yaml."):
            raise ImportError("No module named %r" % name)
        return real_import(name, *args, **kwargs)
    monkeypatch.delitem(sys.modules, "yaml", raising=False)
    monkeypatch.setattr(builtins, "__import__", guarded)


def test_the_expansion_gives_the_command_line_written_out_from_each_unit(bench):
    """The oracle: systemd's command line for each scenario, written by hand from its unit and environment files."""
    for name in SCENARIOS:
        node = bench(name)
        assert node.unit_cmdline() == node.spec["cmdline"], name
        node.close()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("running", [True, False], ids=["running", "stopped"])
def test_check_apply_idempotent_and_every_other_value_kept(bench, name, running):
    node = bench(name, running=running)
    spec = node.spec
    original = node.read(spec["config"])
    before = snapshot(node.root)
    planned = node.run(node.request(), check=True)
    assert planned["changed"] is True and snapshot(node.root) == before, "check mode wrote something"
    assert planned["target"]["mode"] == spec["mode"]
    assert planned["conflicts"] == [] and planned["overridden"] == []
    assert planned["observed"]["command_line"]["source"] == ("process" if running else "unit")
    assert planned["observed"]["config_format"] == spec["fmt"]
    assert planned["diff"]["after"]["topologyManagerPolicy"] == "single-numa-node"

    result = node.run(node.request())
    assert result["changed"] is True and result["actions"] == planned["actions"]
    assert result["removed_state_files"] == ["/var/lib/kubelet/cpu_manager_state"]
    assert node.run(node.request())["changed"] is False
    assert node.run(node.request(), check=True)["changed"] is False

    after = node.read(spec["config"])
    if spec["mode"] == "config":
        old, new = parse(original, spec["fmt"]), parse(after, spec["fmt"])
        assert others(new) == others(old), "a value the collection does not own changed"
        assert list(new)[:len(old)] == list(old), "key order"
        assert new["topologyManagerPolicy"] == "single-numa-node" and new["cpuManagerPolicy"] == "static"
        if spec["fmt"] == "json":
            head = original.rstrip()[:-1].rstrip()  # everything up to the closing brace stays byte for byte
            assert after.startswith(head) and after.endswith(original[len(original.rstrip()) - 1:])
            assert '\n%s"topologyManagerPolicy": "single-numa-node"' % ("    " if "al2023" in name else "  ") in after
        else:
            ops = set(op for op, *dummy in difflib.SequenceMatcher(
                None, original.splitlines(), after.splitlines()).get_opcodes())
            assert ops <= {"equal", "insert"}, "an original line changed"
    else:
        assert after == original, "the config file is not the target in drop-in mode"
        dropin = parse(node.read(spec["dropin_dir"] + "/" + OWN).split("\n", 1)[1], "yaml")
        assert dropin["topologyManagerPolicy"] == "single-numa-node"
        assert dropin["kind"] == "KubeletConfiguration" and dropin["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
    facts = kubelet_facts(HostRoot(str(node.root)), pids={"kubelet": node.systemd.services["kubelet"]["pid"]})
    assert facts["problems"] == []
    assert facts["settings"]["topologyManagerPolicy"] == "single-numa-node"
    assert facts["settings"]["cpuManagerPolicy"] == "static"
    assert facts["settings"]["reservedSystemCPUs"] == "0-1"


def test_nodeadm_drop_in_stays_merged_before_ours(bench):
    node = bench("eks-al2023")
    node.run(node.request())
    facts = kubelet_facts(HostRoot(str(node.root)))
    assert [layer["path"].rsplit("/", 1)[1] for layer in facts["layers"]] == [
        "config.json", "40-nodeadm.conf", OWN, "kubelet.service"]
    assert node.read("/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf") == (
        node.spec and (node.root / "etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf").read_text())


# -- conflicts: a later drop-in --------------------------------------------------------------------------------------
USER_DROPIN = "/etc/kubernetes/kubelet/config.json.d/60-user.conf"
USER_JSON = json.dumps({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                        "topologyManagerPolicy": "best-effort",
                        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"}}, indent=4) + "\n"


def test_a_later_drop_in_is_found_and_refused(bench):
    node = bench("eks-al2023")
    write(node.root, USER_DROPIN, USER_JSON)
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert "topologyManagerPolicy=\"single-numa-node\" is overridden by the later drop-in %s" % USER_DROPIN in failure["msg"]
    assert "Nothing was written" in failure["msg"] and "on_conflict=override" in failure["msg"]
    assert snapshot(node.root) == before


def test_ignore_writes_and_reports_the_drop_in_that_keeps_winning(bench):
    node = bench("eks-al2023")
    write(node.root, USER_DROPIN, USER_JSON)
    result = node.run(node.request(on_conflict="ignore"))
    assert [(c["key"], c["path"], c["value"]) for c in result["conflicts"]] == [
        ("topologyManagerPolicy", USER_DROPIN, "best-effort")]
    assert any(USER_DROPIN in w for w in result["warnings"])
    assert result["changes"]["cpuManagerPolicy"] == {"before": "none", "after": "static"}
    assert "topologyManagerPolicy" not in result["changes"]  # the kubelet keeps best-effort
    assert kubelet_facts(HostRoot(str(node.root)))["settings"]["topologyManagerPolicy"] == "best-effort"
    assert node.run(node.request(on_conflict="ignore"))["changed"] is False


def test_override_sorts_the_collections_drop_in_last_and_leaves_the_other_file_alone(bench):
    node = bench("eks-al2023")
    write(node.root, USER_DROPIN, USER_JSON)
    result = node.run(node.request(on_conflict="override"))
    assert result["target"]["path"] == "/etc/kubernetes/kubelet/config.json.d/99-rdma-k8s-node-topology.conf"
    assert [c["path"] for c in result["overridden"]] == [USER_DROPIN]
    assert node.read(USER_DROPIN) == USER_JSON
    facts = kubelet_facts(HostRoot(str(node.root)))
    assert facts["settings"]["topologyManagerPolicy"] == "single-numa-node"
    # the other file's own option stays (maps merge per key)
    assert facts["settings"]["topologyManagerPolicyOptions"] == {"max-allowable-numa-nodes": "16",
                                                                 "prefer-closest-numa-nodes": "true"}
    assert node.run(node.request(on_conflict="override"))["changed"] is False
    # back to the default: the collection's file would return to 50-..., where 60-user.conf wins again: refused
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert USER_DROPIN in failure["msg"] and snapshot(node.root) == before
    # the other file gone: the drop-in moves back to its own name, the 99- copy is removed
    (node.root / USER_DROPIN.lstrip("/")).unlink()
    moved = node.run(node.request())
    assert [(a["action"], a["target"].rsplit("/", 1)[1]) for a in moved["actions"] if "file" in a["action"]] == [
        ("create_file", OWN), ("delete_file", "99-rdma-k8s-node-topology.conf")]


def test_override_cannot_make_the_config_file_beat_a_drop_in(bench):
    node = bench("eks-al2023-1.29")
    write(node.root, USER_DROPIN, USER_JSON)
    before = snapshot(node.root)
    failure = node.run(node.request(on_conflict="override"), expect=ModuleFail)
    assert "cannot make /etc/kubernetes/kubelet/config.json win" in failure["msg"] and "mode=dropin" in failure["msg"]
    assert snapshot(node.root) == before


# -- conflicts: flags ------------------------------------------------------------------------------------------------
def _with_extra_args(node, line):
    write(node.root, "/etc/default/kubelet", line)
    node.restart_kubelet()


def test_a_flag_in_etc_default_kubelet_is_found_and_refused(bench):
    node = bench("kubeadm-deb")
    _with_extra_args(node, "KUBELET_EXTRA_ARGS=--cpu-manager-policy=none --max-pods=200\n")
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert "--cpu-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)" in failure["msg"]
    assert snapshot(node.root) == before


def test_ignore_leaves_the_flag_and_says_so(bench):
    node = bench("kubeadm-deb")
    _with_extra_args(node, "KUBELET_EXTRA_ARGS=--cpu-manager-policy=none --max-pods=200\n")
    result = node.run(node.request(on_conflict="ignore", cpu_manager_policy="static"))
    assert [c["source"] for c in result["conflicts"]] == [
        "--cpu-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)"]
    assert "cpuManagerPolicy" not in result["changes"]
    assert result["removed_state_files"] == []  # the policy the kubelet runs does not change
    assert node.read("/etc/default/kubelet") == "KUBELET_EXTRA_ARGS=--cpu-manager-policy=none --max-pods=200\n"


def test_override_takes_the_flag_out_of_the_environment_file(bench):
    node = bench("kubeadm-deb")
    _with_extra_args(node, "# local\nKUBELET_EXTRA_ARGS=\"--cpu-manager-policy=none --max-pods=200\"\n")
    result = node.run(node.request(on_conflict="override"), diff=True)
    assert node.read("/etc/default/kubelet") == "# local\nKUBELET_EXTRA_ARGS=\"--max-pods=200\"\n"
    assert [d.get("before_header") for d in result["diff"]][1] == "/etc/default/kubelet (content)"
    assert "--max-pods=200" in node.systemd.services["kubelet"]["cmdline"]
    assert "--cpu-manager-policy=none" not in node.systemd.services["kubelet"]["cmdline"]
    assert kubelet_facts(HostRoot(str(node.root)))["settings"]["cpuManagerPolicy"] == "static"
    assert node.run(node.request(on_conflict="override"))["changed"] is False


def test_override_in_kubespray_kubelet_env_cuts_the_flag_where_it_is_written(bench):
    node = bench("kubespray")
    original = node.read("/etc/kubernetes/kubelet.env")
    env = original.replace("--config=", "--topology-manager-policy best-effort \\\n--config=")
    write(node.root, "/etc/kubernetes/kubelet.env", env)
    node.restart_kubelet()
    assert "best-effort" in node.systemd.services["kubelet"]["cmdline"]
    result = node.run(node.request(on_conflict="override"))
    assert [f["flag"] for c in result["overridden"] for f in c["flags"]] == ["--topology-manager-policy=best-effort"]
    # the continuation lines, the quotes and every other assignment stay as kubespray wrote them
    assert node.read("/etc/kubernetes/kubelet.env") == original
    assert node.systemd.services["kubelet"]["cmdline"] == node.spec["cmdline"]
    assert node.run(node.request(on_conflict="override"))["changed"] is False


def test_a_flag_in_a_unit_is_found_and_override_refuses_to_edit_units(bench):
    node = bench("eks-al2")
    path = "/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf"
    write(node.root, path, node.read(path).replace("--node-labels", "--topology-manager-policy=none --node-labels"))
    node.restart_kubelet()
    failure = node.run(node.request(), expect=ModuleFail)
    assert "--topology-manager-policy=none ($KUBELET_EXTRA_ARGS from %s (Environment=))" % path in failure["msg"]
    before = snapshot(node.root)
    failure = node.run(node.request(on_conflict="override"), expect=ModuleFail)
    assert "does not edit systemd units" in failure["msg"] and path in failure["msg"]
    assert snapshot(node.root) == before
    assert node.run(node.request(on_conflict="ignore"))["conflicts"][0]["kind"] == "flags"


def test_a_flag_only_the_running_kubelet_has_needs_a_restart_not_a_refusal(bench):
    node = bench("kubeadm-deb")
    node.systemd.services["kubelet"]["cmdline"] = node.spec["cmdline"] + ["--topology-manager-policy=none"]
    (node.root / "proc").joinpath(str(node.systemd.services["kubelet"]["pid"]), "cmdline").write_text(
        "\0".join(node.spec["cmdline"] + ["--topology-manager-policy=none"]) + "\0")
    args = node.request(restart=False)
    del args["cpu_manager_policy"], args["reserved_system_cpus"]
    result = node.run(args, check=True)
    assert any("its unit no longer sets that flag" in w for w in result["warnings"])
    assert result["conflicts"] == [] and result["restart_required"] == ["kubelet"]


def test_json_config_and_json_drop_ins_need_no_pyyaml(bench, no_yaml):  # pylint: disable=unused-argument
    node = bench("eks-al2023")
    result = node.run(node.request())
    text = node.read("/etc/kubernetes/kubelet/config.json.d/" + OWN)
    assert text.startswith(kub.OWN_HEADER) and json.loads(text.split("\n", 1)[1])["cpuManagerPolicy"] == "static"
    assert result["changed"] is True
    assert node.run(node.request())["changed"] is False


def test_a_yaml_config_keeps_its_comments(bench):
    node = bench("kubespray")
    path = node.spec["config"]
    text = "# Managed by kubespray\n" + node.read(path).replace("cgroupDriver: systemd\n",
                                                                "cgroupDriver: systemd  # keep in step with containerd\n")
    write(node.root, path, text + "topologyManagerPolicy: none # before\n")
    node.run(node.request())
    after = node.read(path)
    assert after.startswith("# Managed by kubespray\n") and "cgroupDriver: systemd  # keep in step with containerd\n" in after
    assert "containerRuntimeEndpoint : unix:///var/run/containerd/containerd.sock\n" in after
    assert "failSwapOn: True\n" in after and "topologyManagerPolicy: single-numa-node\n" in after
    assert others(yaml.safe_load(after)) == others(yaml.safe_load(text))


def test_a_yaml_config_without_pyyaml_fails_naming_the_file_and_the_package(bench, no_yaml):  # pylint: disable=unused-argument
    node = bench("kubeadm-deb")
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert failure["msg"] == "/var/lib/kubelet/config.yaml is YAML: reading it needs PyYAML (python3-yaml) on the node"
    assert "exception" not in failure and snapshot(node.root) == before
