"""kubelet_topology, rdma_facts and the audit on k3s and rke2 nodes built from real files (tests/fixtures/realworld/k3s):
install.sh's units, rke2's own unit, the hardened configs of k3s's tests, k3s's config-file merge test data.

k3s runs the kubelet itself with --config-dir=<data-dir>/agent/etc/kubelet.conf.d and the kubelet-arg values of its
config files and unit; the collection writes its drop-in there and restarts the k3s/rke2 unit.
"""

import json

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.kubelet_nodes import CORPUS, K3S_DROPINS, RANCHER_SCENARIOS, RancherKubeletBench, build_tree, write
from unit.safety.nodes import ModuleFail, snapshot


def kubelet_facts(host, **kwargs):
    """``runtime.kubelet`` as rdma_facts returns it: the kubelet room's facts without the planner's input."""
    return kubelet_observe.report_of(kubelet_observe.facts(host, **kwargs))


OWN = "50-rdma-k8s-node-topology.conf"
USER_YAML = "/etc/rancher/k3s/config.yaml.d/60-user.yaml"


@pytest.fixture
def bench(tmp_path, monkeypatch):
    made = []

    def make(name, **options):
        made.append(RancherKubeletBench(tmp_path / ("%d-%s" % (len(made), name)), monkeypatch, name, **options))
        return made[-1]
    yield make
    for one in made:
        one.close()


def facts(root):
    return kubelet_facts(HostRoot(str(root)))


def audit(root, **overrides):
    found = {"runtime": {"kubelet": facts(root)}}
    want = dict(role_defaults())
    want.update(overrides)
    return [c for c in _audit.audit_host(found, want, ["kubelet"]) if c["layer"] == "kubelet"]


# -- reading: detection, k3s's merge order, the + rule ----------------------------------------------------------------
def test_k3s_merge_of_its_own_test_data_gives_the_flags_its_test_expects(tmp_path):
    """k3s's pkg/configfilearg/testdata and the flags parser_test.go expects (testDataOutput), in k3s's order."""
    spec = {"files": {"/etc/rancher/k3s/config.yaml": "k3s/configfilearg/data.yaml.raw",
                      "/etc/rancher/k3s/config.yaml.d/01-data.yml": "k3s/configfilearg/data.yaml.d/01-data.yml.raw",
                      "/etc/rancher/k3s/config.yaml.d/02-data.yaml": "k3s/configfilearg/data.yaml.d/02-data.yaml.raw",
                      "/etc/rancher/k3s/config.yaml.d/02-data-ignore-this.txt":
                          "k3s/configfilearg/data.yaml.d/02-data-ignore-this.txt"}, "extra": {}}
    build_tree(tmp_path, spec)
    problems = []
    merged, files = kr.read_config(HostRoot(str(tmp_path)), "/etc/rancher/k3s/config.yaml", problems)
    assert problems == []
    assert [f.rsplit("/", 1)[1] for f in files] == ["config.yaml", "01-data.yml", "02-data.yaml"]
    flags = [("-" if len(key) == 1 else "--") + key + "=" + text for key, items in merged for text, dummy in items]
    assert flags == ["--foo-bar=bar-foo", "--alice=bob", "--a-slice=1", "--a-slice=1.5", "--a-slice=2", "--a-slice=",
                     "--a-slice=three", "--isempty=", "-c=b", "--isfalse=false", "--islast=true", "--b-string=one",
                     "--b-string=two", "--c-slice=one", "--c-slice=two", "--c-slice=three", "--d-slice=three",
                     "--d-slice=four", "--f-string=beta", "--e-slice=one", "--e-slice=two"]
    by_key = dict(merged)
    assert by_key["c-slice"][-1][1].endswith("02-data.yaml") and by_key["c-slice"][0][1].endswith("01-data.yml")


def test_a_scalar_kubelet_arg_is_one_flag(tmp_path):
    build_tree(tmp_path, {"files": {"/etc/rancher/k3s/config.yaml": "k3s/configfilearg/defaultdata.yaml.raw"},
                          "extra": {}})
    merged, dummy_files = kr.read_config(HostRoot(str(tmp_path)), "/etc/rancher/k3s/config.yaml", [])
    assert dict(merged)["kubelet-arg"] == [("max-pods=999", "/etc/rancher/k3s/config.yaml")]
    assert dict(merged)["notaflag"] == [("true", "/etc/rancher/k3s/config.yaml")]


@pytest.mark.parametrize("name", sorted(RANCHER_SCENARIOS))
def test_detection_and_the_layers_facts_see(bench, name):
    node = bench(name)
    spec = node.spec
    got = facts(node.root)
    assert got["problems"] == []
    assert got["command_line"]["source"] == spec["service"].split("-")[0]
    assert got["config_file"] is None and got["config_dir"] == spec["dropin_dir"]
    assert got["rancher"]["service"] == spec["service"] and got["rancher"]["binary"] == spec["binary"]
    assert [layer["kind"] for layer in got["layers"]] == ["dropin", "flags"]
    assert got["layers"][0]["name"].startswith("00-") and got["layers"][0]["name"].endswith("-defaults.conf")
    # the hardened configs' kubelet-args: none of them a flag the collection looks at
    args = [a["arg"] for a in got["rancher"]["kubelet_args"]]
    assert args[0] == "streaming-connection-idle-timeout=5m"
    if name == "k3s-agent":  # the unit's --kubelet-arg comes after the config file's
        assert args[-1] == "cpu-manager-policy=none"
        assert got["settings"]["cpuManagerPolicy"] == "none"
        assert got["layers"][-1]["flags"][0]["source"] == \
            "--kubelet-arg in ExecStart= of /etc/systemd/system/k3s-agent.service"


def test_config_file_from_the_environment_and_data_dir_from_the_config(bench):
    node = bench("k3s-server")
    write(node.root, "/etc/systemd/system/k3s.service.env", "K3S_CONFIG_FILE=/etc/k3s-alt.yaml\n")
    write(node.root, "/etc/k3s-alt.yaml", "data-dir: /data/k3s\nkubelet-arg:\n  - topology-manager-scope=pod\n")
    got = facts(node.root)
    assert got["rancher"]["config"] == "/etc/k3s-alt.yaml"
    assert got["config_dir"] == "/data/k3s/agent/etc/kubelet.conf.d"
    assert got["settings"]["topologyManagerScope"] == "pod"


def test_default_file_of_percent_n_is_read(bench):
    node = bench("k3s-server")
    write(node.root, "/etc/default/k3s", "K3S_CONFIG_FILE=/etc/k3s-default.yaml\n")
    write(node.root, "/etc/k3s-default.yaml", "kubelet-arg: topology-manager-policy=best-effort\n")
    assert facts(node.root)["settings"]["topologyManagerPolicy"] == "best-effort"


def test_plus_appends_and_a_later_plain_key_replaces(bench):
    node = bench("k3s-server")
    write(node.root, "/etc/rancher/k3s/config.yaml.d/10-a.yaml", "kubelet-arg+:\n  - topology-manager-policy=best-effort\n")
    got = facts(node.root)
    assert [a["arg"] for a in got["rancher"]["kubelet_args"]][-1] == "topology-manager-policy=best-effort"
    assert len(got["rancher"]["kubelet_args"]) == 5  # the hardened server's four, then the appended one
    write(node.root, "/etc/rancher/k3s/config.yaml.d/20-b.yaml", "kubelet-arg:\n  - topology-manager-policy=none\n")
    got = facts(node.root)
    assert [a["arg"] for a in got["rancher"]["kubelet_args"]] == ["topology-manager-policy=none"]
    assert got["settings"]["topologyManagerPolicy"] == "none"
    assert got["layers"][-1]["flags"][0]["source"] == "kubelet-arg in /etc/rancher/k3s/config.yaml.d/20-b.yaml"


def test_a_kubelet_config_dir_arg_is_merged_as_k3s_copies_it(bench):
    """k3s's e2e startup test: kubelet-arg config-dir=/tmp/kubelet.conf.d is copied to 20-cli-config-dir/."""
    node = bench("k3s-server")
    write(node.root, "/etc/rancher/k3s/config.yaml", (CORPUS / "k3s/startup-config-dir/config.yaml.raw").read_text())
    write(node.root, "/tmp/kubelet.conf.d/99-shutdownGracePeriod.conf",
          (CORPUS / "k3s/startup-config-dir/tmp/kubelet.conf.d/99-shutdownGracePeriod.conf").read_text())
    write(node.root, "/tmp/kubelet.conf.d/98-topology.conf", "topologyManagerPolicy: best-effort\n")
    got = facts(node.root)
    assert [layer.get("name") for layer in got["layers"]] == [
        "00-k3s-defaults.conf", "20-cli-config-dir/98-topology.conf", "20-cli-config-dir/99-shutdownGracePeriod.conf",
        None]
    assert got["settings"]["topologyManagerPolicy"] == "best-effort"


# -- the audit names a kubelet-arg that overrides the collection ------------------------------------------------------
def test_the_audit_names_the_kubelet_arg_and_its_file(bench):
    node = bench("k3s-server")
    write(node.root, K3S_DROPINS + "/" + OWN, "# Managed by rdma.k8s_node.kubelet_topology\n" +
          json.dumps({"topologyManagerPolicy": "restricted", "topologyManagerScope": "container"}))
    assert [(c["id"], c["status"]) for c in audit(node.root)] == [("kubelet.topology", "ok")]
    write(node.root, USER_YAML, "kubelet-arg+:\n  - topology-manager-policy=best-effort\n")
    checks = dict((c["id"], c) for c in audit(node.root))
    assert checks["kubelet.topology"]["status"] == "drift"
    override = checks["kubelet.override"]
    assert override["status"] == "fail" and override["subject"] == "topologyManagerPolicy"
    assert override["persisted"] == "--topology-manager-policy=best-effort (kubelet-arg in %s)" % USER_YAML
    assert (override["desired"], override["live"]) == ("restricted", "best-effort")
    assert override["remedy"] == ("remove --topology-manager-policy=best-effort from the kubelet-arg list of %s, then "
                                  "restart the k3s/rke2 unit" % USER_YAML)


# -- writing --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["k3s-server", "rke2-agent"])
@pytest.mark.parametrize("running", [True, False], ids=["running", "stopped"])
def test_check_apply_idempotent_into_the_kubelet_conf_d(bench, name, running):
    node = bench(name, running=running)
    service, dropins = node.spec["service"], node.spec["dropin_dir"]
    before = snapshot(node.root)
    planned = node.run(node.request(), check=True)
    assert planned["changed"] is True and snapshot(node.root) == before
    assert planned["target"] == {"mode": "dropin", "path": dropins + "/" + OWN}
    assert planned["observed"]["command_line"]["source"] == service.split("-")[0]
    assert [a for a in planned["actions"] if a["action"] == "restart"][0]["target"] == service
    result = node.run(node.request())
    assert result["changed"] is True and result["removed_state_files"] == ["/var/lib/kubelet/cpu_manager_state"]
    assert node.systemd.active(service)
    text = node.read(dropins + "/" + OWN)
    data = yaml.safe_load(text)
    assert data["topologyManagerPolicy"] == "single-numa-node" and data["cpuManagerPolicy"] == "static"
    assert node.read(dropins + "/00-%s-defaults.conf" % service.split("-")[0]) is not None  # untouched
    assert node.run(node.request())["changed"] is False
    assert node.run(node.request(), check=True)["changed"] is False
    got = facts(node.root)
    assert got["settings"]["topologyManagerPolicy"] == "single-numa-node" and got["settings"]["reservedSystemCPUs"] == "0-1"
    assert "kubelet" not in node.systemd.services


def test_without_restart_the_k3s_unit_is_the_one_to_restart(bench):
    node = bench("k3s-server")
    args = node.request(restart=False)
    del args["cpu_manager_policy"], args["reserved_system_cpus"]
    result = node.run(args)
    assert result["restart_required"] == ["k3s"]


def test_a_kubelet_arg_in_the_unit_is_a_conflict_and_override_refuses_to_edit_it(bench):
    node = bench("k3s-agent")
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert "--cpu-manager-policy=none (--kubelet-arg in ExecStart= of /etc/systemd/system/k3s-agent.service)" in \
        failure["msg"] and snapshot(node.root) == before
    failure = node.run(node.request(on_conflict="override"), expect=ModuleFail)
    assert "does not edit systemd units" in failure["msg"] and snapshot(node.root) == before
    result = node.run(node.request(on_conflict="ignore"))
    assert [c["key"] for c in result["conflicts"]] == ["cpuManagerPolicy"]
    assert "cpuManagerPolicy" not in result["changes"]


def test_a_kubelet_arg_in_a_config_file_is_refused_with_the_file_to_edit(bench):
    node = bench("k3s-server")
    write(node.root, USER_YAML, "kubelet-arg+:\n  - topology-manager-policy=best-effort\n")
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert "(kubelet-arg in %s)" % USER_YAML in failure["msg"]
    failure = node.run(node.request(on_conflict="override"), expect=ModuleFail)
    assert "the kubelet-arg list of %s" % USER_YAML in failure["msg"] and snapshot(node.root) == before


def test_a_later_drop_in_in_kubelet_conf_d_is_beaten_by_renaming_ours(bench):
    node = bench("k3s-server")
    write(node.root, K3S_DROPINS + "/60-user.conf", "topologyManagerPolicy: best-effort\n")
    result = node.run(node.request(on_conflict="override"))
    assert result["target"]["path"] == K3S_DROPINS + "/99-rdma-k8s-node-topology.conf"
    assert facts(node.root)["settings"]["topologyManagerPolicy"] == "single-numa-node"


def test_old_k3s_is_refused_with_the_way_by_hand(bench):
    node = bench("k3s-server")
    node.spec["version"] = "k3s version v1.30.4+k3s1 (98262b5d)\n"
    before = snapshot(node.root)
    failure = node.run(node.request(), expect=ModuleFail)
    assert "k3s 1.30.4 does not read kubelet drop-ins" in failure["msg"]
    assert "/etc/rancher/k3s/config.yaml.d/50-rdma-k8s-node.yaml" in failure["msg"] and "kubelet-arg+" in failure["msg"]
    assert "systemctl restart k3s" in failure["msg"] and snapshot(node.root) == before


def test_mode_config_is_refused_on_k3s(bench):
    node = bench("k3s-server")
    failure = node.run(node.request(mode="config"), expect=ModuleFail)
    assert "passes the kubelet no config file" in failure["msg"]
