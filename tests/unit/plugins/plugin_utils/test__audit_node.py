"""The node audit's outputs (plugin_utils/_audit_node.py, filters rdma_audit_textfile and rdma_audit_daemonset).

* The metrics: the audit report of a simulated drifted node and a clean one, through the textfile writer, read back
  with prometheus_client's text parser (what Prometheus reads; node_exporter's textfile collector uses Go's
  equivalent, expfmt's TextParser).
* The DaemonSet: every rendered object validated against the OpenAPI schema of the pinned Kubernetes release
  (tests/unit/plugins/k8s_openapi.py, scripts/k8s-openapi), plus what a schema cannot say (the selector matches the
  pod labels, every mount has its volume), and its command line run against a simulated node.
"""

import itertools
import json
import os
import pathlib
import shlex
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_audit_node as F
from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.modules.rdma_facts import layer_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_node as N
from unit.plugins.k8s_openapi import Schema, schema_dir

hwsim = pytest.importorskip("hwsim")

REPO = pathlib.Path(__file__).resolve().parents[4]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
PREFIX = "rdma_k8s_node_audit_"
# the DGX archetype with a rail NIC trained at x8 and ACS P2P redirect above a GPU and its NIC (docs/health.md),
# audited with a netns mode it does not have: fail (health) and drift (netns)
DRIFTED = {"spec": "dgx-h100-degraded", "desired": {"rdma_netns_mode": "exclusive"}}
DRIFTED_NOT_OK = {
    ("netns", "netns.mode", "", "drift"): 1,
    ("health", "health.pcie_link", "0000:18:00.0 (mlx5_0)", "fail"): 3,
    ("health", "health.acs", "0000:3f:00.0", "fail"): 3,
    ("health", "health.acs", "0000:3f:02.0", "fail"): 3,
}


def facts_of(root):
    """What rdma_facts returns for a node tree (its discovery, persisted state and the rooms' observers)."""
    host = HostRoot(str(root))
    facts = gather(host)
    facts["persisted"] = persisted_facts(host, [])
    facts["layers"] = layer_facts(host, facts["problems"])
    return facts


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The audit reports (health and netns layers) of the drifted node and of a clean one (roce-cx6dx)."""
    defaults = role_defaults()
    out = {}
    for name, spec, desired in (("drifted", DRIFTED["spec"], DRIFTED["desired"]), ("clean", "roce-cx6dx", {})):
        root = hwsim.render(spec, tmp_path_factory.mktemp(name))
        # the desired state as the rdma_audit filter builds it: the host's variables over the roles' defaults
        wanted = dict((var, desired.get(var, defaults.get(var))) for var in _audit.DESIRED_VARS)
        out[name] = _audit.audit({"localhost": {"facts": facts_of(root), "desired": wanted,
                                                "layers": ["health", "netns"]}}, generated="2026-12-01T00:00:00Z")
    return out


def families(text):
    return dict((f.name, f) for f in text_string_to_metric_families(text))


def check_series(fams):
    return dict(((s.labels["layer"], s.labels["check"], s.labels["subject"], s.labels["status"]), s.value)
                for s in fams[PREFIX + "check_status"].samples)


def test_drifted_node(reports):
    report = reports["drifted"]
    text = N.textfile(report, duration=6.25, finished=1764547200.5)
    fams = families(text)
    assert sorted(fams) == sorted(PREFIX + n for n in ("check_status", "status", "checks", "node_labels",
                                                       "last_run_timestamp_seconds", "run_duration_seconds"))
    assert all(f.type == "gauge" and f.documentation for f in fams.values())
    series = check_series(fams)
    # one series per check of the report, and exactly the drifted node's findings are not 0
    assert len(series) == len(report["hosts"]["localhost"]["checks"])
    assert dict((k, v) for k, v in series.items() if v) == DRIFTED_NOT_OK
    assert all(key[3] == "ok" for key, value in series.items() if value == 0)
    [status] = fams[PREFIX + "status"].samples
    assert (status.labels, status.value) == ({"status": "fail", "audit": "desired"}, 3)
    counts = dict((s.labels["status"], s.value) for s in fams[PREFIX + "checks"].samples)
    assert counts == dict((s, report["hosts"]["localhost"]["counts"][s]) for s in _audit.STATUSES)
    assert counts["drift"] == 1 and counts["fail"] == 3 and counts["ok"] > 40
    [labels] = fams[PREFIX + "node_labels"].samples
    assert labels.labels == {"audit": "fail", "netns_mode": "shared", "gpudirect": "none"}
    assert fams[PREFIX + "last_run_timestamp_seconds"].samples[0].value == 1764547200.5
    assert fams[PREFIX + "run_duration_seconds"].samples[0].value == 6.25
    # the textfile collector refuses a file with client-side time stamps (node_exporter collector/textfile.go)
    assert all(s.timestamp is None for f in fams.values() for s in f.samples)
    assert text.endswith("\n")


def test_clean_node(reports):
    report = reports["clean"]
    assert report["hosts"]["localhost"]["status"] == "ok"
    fams = families(N.textfile(report, "localhost"))
    series = check_series(fams)
    assert len(series) == len(report["hosts"]["localhost"]["checks"]) > 5
    assert set(series.values()) == {0} and set(key[3] for key in series) == {"ok"}
    assert {key[1] for key in series} >= {"netns.mode", "health.pcie_link", "health.port"}
    assert [(s.labels, s.value) for s in fams[PREFIX + "status"].samples] == [({"status": "ok", "audit": "desired"}, 0)]
    # without a run time, no time series for it
    assert PREFIX + "last_run_timestamp_seconds" not in fams and PREFIX + "run_duration_seconds" not in fams


def test_status_values_follow_the_audits_order():
    """max() over the series is the node's worst status, as _audit.worst decides it."""
    for first, second in itertools.product(_audit.STATUSES, repeat=2):
        worst = _audit.worst([first, second])
        assert N.STATUS_VALUE[worst] == max(N.STATUS_VALUE[first], N.STATUS_VALUE[second])
    assert N.STATUS_VALUE["ok"] == 0 and sorted(N.STATUS_VALUE.values()) == [0, 1, 2, 3]


def _report(checks, status="drift"):
    return {"schema_version": 1, "hosts": {"n1": {
        "status": status, "audit": "facts_only", "counts": {"ok": 0, "drift": 0, "fail": 0, "unknown": 0},
        "labels": {}, "checks": checks}}}


def _check(subject, status, check_id="facts.read"):
    return {"id": check_id, "layer": _audit.layer_of(check_id), "subject": subject, "status": status}


def test_label_values_are_escaped():
    subject = 'C:\\dir "quoted"\nsecond line'
    fams = families(N.textfile(_report([_check(subject, "unknown")], "unknown")))
    [sample] = fams[PREFIX + "check_status"].samples
    assert sample.labels["subject"] == subject and sample.value == 2
    assert PREFIX + "node_labels" not in fams  # a report without labels


def test_one_series_per_check_keeps_the_worse_status():
    """The text format may hold a series once (node_exporter's registry refuses a file with one twice)."""
    fams = families(N.textfile(_report([_check("/a", "drift"), _check("/a", "fail"), _check("/a", "ok"),
                                        _check("/b", "ok"), _check(None, "ok", "netns.mode")], "fail")))
    assert check_series(fams) == {("facts", "facts.read", "/a", "fail"): 3, ("facts", "facts.read", "/b", "ok"): 0,
                                  ("netns", "netns.mode", "", "ok"): 0}


@pytest.mark.parametrize("call,message", [
    (lambda: N.textfile({"hosts": {"a": {}, "b": {}}}), "has 2 hosts"),
    (lambda: N.textfile(_report([]), host="n2"), "host 'n2' is not in the report"),
    (lambda: N.textfile(_report([_check("x", "bad")])), "unknown status 'bad'"),
    (lambda: N.textfile(_report([]), duration=-1), "duration must be a finite number"),
    (lambda: N.textfile(_report([]), finished=float("nan")), "finished must be a finite number"),
    (lambda: N.textfile(_report([]), duration=True), "duration must be"),
    (lambda: N.textfile([]), "expected an rdma_audit report"),
])
def test_textfile_refuses_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_filter_wraps_errors_and_checks_the_schema_version(reports):
    with pytest.raises(AnsibleFilterError, match="expected an rdma_audit report"):
        F.rdma_audit_textfile({"hosts": {}})
    with pytest.raises(AnsibleFilterError, match="duration must be"):
        F.rdma_audit_textfile(reports["clean"], duration="soon")
    assert F.rdma_audit_textfile(reports["clean"]) == N.textfile(reports["clean"])


# -- the DaemonSet -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def schema():
    return Schema(schema_dir())


def _by_kind(objects):
    return dict((o["kind"], o) for o in objects)


@pytest.mark.parametrize("options", [
    {},
    {"publish_labels": True, "priority_class_name": "system-node-critical", "create_namespace": False},
    {"node_selector": {}, "tolerations": [{"operator": "Exists"}], "interval": 60, "mode": "facts_only",
     "layers": ["health"], "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}, "image_pull_policy": "Always"},
])
def test_daemonset_objects_validate_against_the_kubernetes_schema(schema, options):
    objects = N.daemonset("registry.example.com/rdma/ee:0.1.0", **options)
    for obj in objects:
        assert schema.errors(obj) == [], obj["kind"]
    kinds = [o["kind"] for o in objects]
    expected = (["Namespace"] if options.get("create_namespace", True) else []) + ["ConfigMap"]
    if options.get("publish_labels"):
        expected += ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    assert kinds == expected + ["DaemonSet"]
    daemonset = _by_kind(objects)["DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    # what the schema cannot say: the selector selects the pod, every mount has a volume, the account exists
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()
    [container] = pod["containers"]
    assert {m["name"] for m in container["volumeMounts"]} == {v["name"] for v in pod["volumes"]}
    assert pod["automountServiceAccountToken"] is bool(options.get("publish_labels"))
    if options.get("publish_labels"):
        assert pod["serviceAccountName"] == _by_kind(objects)["ServiceAccount"]["metadata"]["name"]
        binding = _by_kind(objects)["ClusterRoleBinding"]
        assert binding["roleRef"]["name"] == _by_kind(objects)["ClusterRole"]["metadata"]["name"]
        assert _by_kind(objects)["ClusterRole"]["rules"] == [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    else:
        assert "serviceAccountName" not in pod


def test_daemonset_pod_sees_the_host_read_only_and_writes_the_textfile(schema):
    objects = _by_kind(N.daemonset("ee:1", textfile_dir="/var/lib/prometheus/node-exporter/", desired={
        "rdma_netns_mode": "exclusive", "not_a_desired_var": 1}))
    pod = objects["DaemonSet"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = dict((m["mountPath"], m) for m in container["volumeMounts"])
    volumes = dict((v["name"], v) for v in pod["volumes"])
    assert mounts["/host"]["readOnly"] is True and mounts["/host"]["recursiveReadOnly"] == "IfPossible"
    assert "mountPropagation" not in mounts["/host"]  # recursiveReadOnly needs None (the schema's description)
    assert volumes["host"]["hostPath"] == {"path": "/", "type": "Directory"}
    assert volumes["textfile"]["hostPath"] == {"path": "/var/lib/prometheus/node-exporter", "type": "DirectoryOrCreate"}
    assert not mounts["/textfile"].get("readOnly")
    assert container["securityContext"]["privileged"] is True and pod["hostNetwork"] is True
    assert container["image"] == "ee:1"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    options = yaml.safe_load(objects["ConfigMap"]["data"]["audit-node.yml"])
    assert options == {"rdma_audit_host_root": "/host", "rdma_audit_node_textfile": "/textfile/rdma_k8s_node.prom",
                       "rdma_audit_dir": "/var/lib/rdma-k8s-node/audit", "rdma_audit_mode": "desired",
                       "rdma_audit_layers": [], "rdma_audit_publish_labels": False, "rdma_netns_mode": "exclusive"}
    env = dict((e["name"], e) for e in container["env"])
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["RDMA_AUDIT_INTERVAL"]["value"] == "900"


def test_two_daemonsets_for_two_node_groups_do_not_collide(schema):
    infiniband = N.daemonset("ee:1", name="rdma-audit-ib", node_selector={"example.com/fabric": "ib"},
                             publish_labels=True, desired={"rdma_netns_mode": "exclusive"})
    roce = N.daemonset("ee:1", name="rdma-audit-roce", node_selector={"example.com/fabric": "roce"},
                       publish_labels=True, create_namespace=False)
    names = [(o["kind"], o["metadata"]["name"]) for o in infiniband + roce if o["kind"] != "Namespace"]
    assert len(names) == len(set(names)) == 10
    assert all(schema.errors(o) == [] for o in infiniband + roce)
    ib_pods, roce_pods = _by_kind(infiniband)["DaemonSet"], _by_kind(roce)["DaemonSet"]
    # neither DaemonSet selects the other's pods
    assert not ib_pods["spec"]["selector"]["matchLabels"].items() <= roce_pods["spec"]["template"]["metadata"]["labels"].items()
    assert ib_pods["spec"]["template"]["spec"]["volumes"][2] == {"name": "config", "configMap": {"name": "rdma-audit-ib"}}
    assert _by_kind(roce)["ClusterRoleBinding"]["subjects"][0]["name"] == "rdma-audit-roce"


def test_a_misspelt_field_fails_the_schema(schema):
    """The validation can fail: an unknown field, a wrong type, a kind this Kubernetes does not have."""
    daemonset = N.daemonset("ee:1")[-1]
    daemonset["spec"]["template"]["spec"]["hostNetwrok"] = True
    daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = "true"
    errors = schema.errors(daemonset)
    assert any("'hostNetwrok' was unexpected" in e for e in errors)
    assert any(e.startswith("spec/template/spec/containers/0/securityContext/privileged:") for e in errors)
    assert schema.errors({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet"})[0].startswith("no schema")


@pytest.mark.parametrize("options,message", [
    ({"image": ""}, "image must be"),
    ({"image": "a b"}, "image must be"),
    ({"namespace": "Bad_NS"}, "namespace must be a DNS-1123 label"),
    ({"name": "x" * 64}, "name must be a DNS-1123 label"),
    ({"interval": 30}, "interval must be"),
    ({"interval": "900"}, "interval must be"),
    ({"textfile_dir": "relative"}, "textfile_dir must be"),
    ({"textfile_dir": "/"}, "textfile_dir must be"),
    ({"textfile_name": "metrics.txt"}, "textfile_name must be"),
    ({"node_selector": {"a": True}}, "node_selector must map strings"),
    ({"tolerations": "all"}, "tolerations must be a list"),
    ({"mode": "strict"}, "mode must be"),
    ({"layers": ["kernal"]}, "layers must be a list of facts, drivers"),
    ({"publish_labels": "yes"}, "publish_labels must be a boolean"),
    ({"image_pull_policy": "Sometimes"}, "image_pull_policy must be"),
    ({"priority_class_name": "Not Valid"}, "priority_class_name must be"),
])
def test_daemonset_refuses_bad_options(options, message):
    options = dict(options)
    image = options.pop("image", "ee:1")
    with pytest.raises(ValueError, match=message):
        N.daemonset(image, **options)
    with pytest.raises(AnsibleFilterError, match="rdma_audit_daemonset: " + message):
        F.rdma_audit_daemonset(image, **options)


def test_filter_yaml_output_and_desired_state_of_an_inventory_host(schema):
    hostvars = {"rdma_netns_mode": "exclusive", "rdma_audit_mtu": 4200, "ansible_host": "10.0.0.1"}
    text = F.rdma_audit_daemonset("ee:1", output="yaml", desired_from=hostvars, desired={"rdma_audit_mtu": 9000})
    objects = list(yaml.safe_load_all(text))
    assert text.startswith("---\n") and "&id" not in text and "audit-node.yml: |\n" in text
    assert [o["kind"] for o in objects] == ["Namespace", "ConfigMap", "DaemonSet"]
    assert all(schema.errors(o) == [] for o in objects)
    options = yaml.safe_load(objects[1]["data"]["audit-node.yml"])
    assert options["rdma_netns_mode"] == "exclusive" and options["rdma_audit_mtu"] == 9000
    assert "ansible_host" not in options
    with pytest.raises(AnsibleFilterError, match="output must be objects or yaml"):
        F.rdma_audit_daemonset("ee:1", output="json")


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_the_pods_command_audits_a_node_and_writes_its_metrics(tmp_path):
    """The container's command line (the audit playbook, with the ConfigMap's options) run here against the
    drifted node: the textfile holds its metrics, and no temporary file is left beside it."""
    objects = _by_kind(N.daemonset("ee:1", layers=["health", "netns"], desired=DRIFTED["desired"]))
    [container] = objects["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    script = container["command"][2]
    argv = shlex.split(script.split("while :; do ", 1)[1].split(" || ", 1)[0])
    assert argv[0] == "ansible-playbook" and argv[-1] == "@/etc/rdma-k8s-node/audit-node.yml"
    root = hwsim.render(DRIFTED["spec"], tmp_path / "host")
    options = yaml.safe_load(objects["ConfigMap"]["data"]["audit-node.yml"])
    (tmp_path / "audit-node.yml").write_text(yaml.safe_dump(options))
    # the pod's paths, moved into this test's directory: /host, /textfile, its HOME
    moved = {"rdma_audit_host_root": str(root), "rdma_audit_node_textfile": str(tmp_path / "textfile" / "rdma_k8s_node.prom"),
             "rdma_audit_dir": str(tmp_path / "home" / "audit")}
    (tmp_path / "textfile").mkdir()
    argv = [str(PLAYBOOK)] + argv[1:-1] + ["@%s" % (tmp_path / "audit-node.yml"), "--extra-vars", json.dumps(moved)]
    env = dict(os.environ, HOME=str(tmp_path / "home"), NODE_NAME="gpu-node-7", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "textfile").iterdir()) == ["rdma_k8s_node.prom"]
    fams = families((tmp_path / "textfile" / "rdma_k8s_node.prom").read_text())
    assert dict((k, v) for k, v in check_series(fams).items() if v) == DRIFTED_NOT_OK
    assert fams[PREFIX + "run_duration_seconds"].samples[0].value > 0
    assert (tmp_path / "home" / "audit" / "report.json").exists()


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_daemonset_playbook_writes_a_valid_manifest_with_an_inventory_hosts_desired_state(tmp_path, schema):
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"gpu": {
        "hosts": {"gpu-node-01": {"ansible_host": "192.0.2.1"}},
        "vars": {"rdma_netns_mode": "exclusive", "rdma_audit_expected_gpus": "{{ 4 * 2 }}"}}}}}))
    argv = [str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "audit_daemonset.yml"),
            "-e", "rdma_audit_daemonset_image=registry.example.com/rdma-k8s-node-ee:0.1.0",
            "-e", "rdma_audit_daemonset_desired_from=gpu-node-01",
            "-e", "rdma_audit_daemonset_dest=%s" % (tmp_path / "ds.yaml"),
            "-e", json.dumps({"rdma_audit_daemonset_options": {"interval": 600, "publish_labels": True}})]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOME=str(tmp_path / "home"))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    objects = list(yaml.safe_load_all((tmp_path / "ds.yaml").read_text()))
    assert [o["kind"] for o in objects] == [
        "Namespace", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"]
    assert all(schema.errors(o) == [] for o in objects)
    options = yaml.safe_load(_by_kind(objects)["ConfigMap"]["data"]["audit-node.yml"])
    assert options["rdma_netns_mode"] == "exclusive" and options["rdma_audit_expected_gpus"] == 8
    assert options["rdma_audit_publish_labels"] is True
    missing = subprocess.run(argv[:4] + ["-e", "rdma_audit_daemonset_desired_from=gpu-node-99"], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
    assert missing.returncode != 0 and "set rdma_audit_daemonset_image" in missing.stdout
