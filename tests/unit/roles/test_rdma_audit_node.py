"""The rdma_audit_node role end to end, without systemd: the role installs for two local "nodes" (a drifted and a
clean simulated one) into temporary directories, then each service's ExecStart runs as systemd would start it, with
the unit's environment, and the metrics it leaves in the textfile directory are read with prometheus_client.

systemd itself (daemon-reload, the timer, ProtectSystem) is left to the molecule default scenario; here the role's
internal paths (its vars/main.yml: unit and config directories, state directory) point into the test's directory
and ``rdma_audit_node__systemd: false`` skips the systemctl calls.  The units are checked with ``systemd-analyze
verify`` where it exists.
"""

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

hwsim = pytest.importorskip("hwsim")

REPO = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
PREFIX = "rdma_k8s_node_audit_"
UNITS = ("rdma-k8s-node-audit.service", "rdma-k8s-node-audit.timer")
# dgx-h100-degraded (a rail NIC at x8, ACS P2P redirect) audited with a netns mode it does not have
DRIFTED_NOT_OK = {
    ("netns", "netns.mode", "", "drift"): 1,
    ("health", "health.pcie_link", "0000:18:00.0 (mlx5_0)", "fail"): 3,
    ("health", "health.acs", "0000:3f:00.0", "fail"): 3,
    ("health", "health.acs", "0000:3f:02.0", "fail"): 3,
}

pytestmark = pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")


class Nodes:
    """Two local hosts, each with its own simulated node tree and its own "node" directory for what the role writes."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        # a kubectl stand-in that records its arguments and the kubeconfig it was given
        (self.bin / "kubectl").write_text("#!/bin/sh\necho \"$KUBECONFIG $*\" >> %s\necho \"node/$5 labeled\"\n"
                                          % (tmp_path / "kubectl.calls"))
        (self.bin / "kubectl").chmod(0o755)
        (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
        hosts = {
            "drifted": {"spec": "dgx-h100-degraded", "vars": {
                "rdma_netns_mode": "exclusive", "rdma_audit_node_name": "gpu-node-a",
                "rdma_audit_node_kubeconfig": str(tmp_path / "kubeconfig")}},
            "clean": {"spec": "roce-cx6dx", "vars": {}},
        }
        inventory = {}
        for name, host in hosts.items():
            node = tmp_path / name
            root = hwsim.render(host["spec"], node / "root")
            (node / "units").mkdir()  # /etc/systemd/system, which every node has
            inventory[name] = dict(host["vars"], **{
                "node_dir": str(node),
                "rdma_audit_node_host_root": str(root),
                "rdma_audit_node_prefix": str(node / "opt"),
                "rdma_audit_node_textfile": str(node / "textfile" / "rdma_k8s_node.prom"),
                "rdma_audit_node_layers": ["health", "netns"],
                "rdma_audit_node_ansible": "system",
                "rdma_audit_node_ansible_playbook": str(PLAYBOOK),
                "rdma_audit_node_environment": {"PATH": "%s:%s" % (self.bin, os.environ["PATH"]),
                                                "RDMA_TEST_QUOTING": 'a "b" \\ 50%'},
            })
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": inventory, "vars": {
            "ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv" / "bin" / "python")}}}))
        (tmp_path / "site.yml").write_text(yaml.safe_dump([{
            "name": "Install the node audit", "hosts": "all", "gather_facts": False,
            "roles": [{"role": "rdma.k8s_node.rdma_audit_node"}]}]))
        self.env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"), ANSIBLE_NOCOLOR="1",
                        ANSIBLE_HOME=str(tmp_path / "controller-home"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))

    def node(self, name):
        return self.tmp / name

    def play(self, *extra):
        # the role's internal paths are role vars: only extra vars win over them
        internal = {"rdma_audit_node__unit_dir": "{{ node_dir }}/units",
                    "rdma_audit_node__config_dir": "{{ node_dir }}/etc",
                    "rdma_audit_node__state_dir": "{{ node_dir }}/state", "rdma_audit_node__systemd": False}
        argv = [str(PLAYBOOK), "-i", str(self.tmp / "inventory.yml"), str(self.tmp / "site.yml"),
                "-e", json.dumps(internal)] + list(extra)
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=600, check=False)

    def service(self, name):
        """``(argv, environment)`` of the installed service, as systemd would start it."""
        text = (self.node(name) / "units" / UNITS[0]).read_text()
        env = {}
        for line in text.splitlines():
            if line.startswith("Environment="):
                # systemd's quoting: the whole assignment may be in double quotes, with C escapes; %% is a %
                [assignment] = shlex.split(line[len("Environment="):].replace("%%", "%"))
                key, value = assignment.split("=", 1)
                env[key] = value
        [exec_start] = [line for line in text.splitlines() if line.startswith("ExecStart=")]
        return shlex.split(exec_start[len("ExecStart="):]), env


def recap(output):
    return dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", output, re.M))


def metrics(path):
    families = dict((f.name, f) for f in text_string_to_metric_families(pathlib.Path(path).read_text()))
    series = dict(((s.labels["layer"], s.labels["check"], s.labels["subject"], s.labels["status"]), s.value)
                  for s in families[PREFIX + "check_status"].samples)
    return families, series


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    nodes = Nodes(tmp_path_factory.mktemp("audit-node"))
    first = nodes.play()
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    return nodes, first


def test_install_then_idempotent_and_check_mode(installed):
    nodes, first = installed
    assert all(count > 0 for count in recap(first.stdout).values()), first.stdout[-2000:]
    again = nodes.play()
    assert again.returncode == 0, again.stdout[-3000:]
    assert recap(again.stdout) == {"drifted": 0, "clean": 0}, again.stdout[-3000:]
    checked = nodes.play("--check", "--diff")
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert recap(checked.stdout) == {"drifted": 0, "clean": 0}, checked.stdout[-3000:]


def test_the_node_gets_this_collection_and_its_desired_state(installed):
    nodes, dummy = installed
    for name in ("drifted", "clean"):
        node = nodes.node(name)
        copy = node / "opt" / "collections" / "ansible_collections" / "rdma" / "k8s_node"
        for part in ("playbooks/audit_node.yml", "roles/rdma_audit/tasks/main.yml", "plugins/filter/rdma_audit.py",
                     "plugins/module_utils/layers/_registry.py"):
            assert (copy / part).read_bytes() == (REPO / part).read_bytes(), part
        assert not (copy / "tests").exists() and not (copy / "molecule").exists()
        options = yaml.safe_load((node / "etc" / "audit-node.yml").read_text())
        assert options["rdma_audit_host_root"] == str(node / "root")
        assert options["rdma_audit_layers"] == ["health", "netns"] and options["rdma_audit_mode"] == "desired"
        assert "__unset__" not in json.dumps(options)
    drifted = yaml.safe_load((nodes.node("drifted") / "etc" / "audit-node.yml").read_text())
    clean = yaml.safe_load((nodes.node("clean") / "etc" / "audit-node.yml").read_text())
    assert drifted["rdma_netns_mode"] == "exclusive" and "rdma_netns_mode" not in clean
    assert drifted["rdma_audit_node_name"] == "gpu-node-a" and "rdma_audit_node_name" not in clean
    assert drifted["rdma_audit_node_kubeconfig"] == str(nodes.tmp / "kubeconfig") and clean["rdma_audit_node_kubeconfig"] == ""


def test_units(installed):
    nodes, dummy = installed
    node = nodes.node("drifted")
    service = (node / "units" / UNITS[0]).read_text()
    timer = (node / "units" / UNITS[1]).read_text()
    assert "Type=oneshot" in service and "ProtectSystem=strict" in service and "NoNewPrivileges=true" in service
    assert "ReadWritePaths=-%s\n" % (node / "textfile") in service
    assert "Environment=\"RDMA_TEST_QUOTING=a \\\"b\\\" \\\\ 50%%\"" in service
    assert "OnUnitActiveSec=15min" in timer and "RandomizedDelaySec=1min" in timer and "WantedBy=timers.target" in timer
    argv, env = nodes.service("drifted")
    assert argv[0] == str(PLAYBOOK) and "rdma.k8s_node.audit_node" in argv
    assert env["RDMA_TEST_QUOTING"] == 'a "b" \\ 50%'
    assert env["ANSIBLE_COLLECTIONS_PATH"] == str(node / "opt" / "collections")
    analyze = shutil.which("systemd-analyze")
    if analyze:
        done = subprocess.run([analyze, "verify"] + [str(node / "units" / unit) for unit in UNITS],
                              capture_output=True, text=True, timeout=120, check=False)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr


def run_service(nodes, name):
    argv, env = nodes.service(name)
    # what systemd gives the service besides its Environment= lines (the kubectl stand-in comes first on its PATH)
    return subprocess.run(argv, env=dict(env, LANG="C.UTF-8"), capture_output=True, text=True, timeout=600,
                          check=False)


def test_the_service_audits_the_drifted_node_writes_its_metrics_and_labels_it(installed):
    nodes, dummy = installed
    done = run_service(nodes, "drifted")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    textfile = nodes.node("drifted") / "textfile"
    assert sorted(p.name for p in textfile.iterdir()) == ["rdma_k8s_node.prom"]  # no temporary file left behind
    families, series = metrics(textfile / "rdma_k8s_node.prom")
    assert dict((k, v) for k, v in series.items() if v) == DRIFTED_NOT_OK
    [status] = families[PREFIX + "status"].samples
    assert (status.labels["status"], status.value) == ("fail", 3)
    assert families[PREFIX + "run_duration_seconds"].samples[0].value > 0
    assert families[PREFIX + "last_run_timestamp_seconds"].samples[0].value > 1.7e9
    calls = (nodes.tmp / "kubectl.calls").read_text().splitlines()
    assert calls == ["%s label --overwrite node gpu-node-a rdma.k8s-node.io/audit=fail rdma.k8s-node.io/netns-mode=shared "
                     "rdma.k8s-node.io/gpudirect=none" % (nodes.tmp / "kubeconfig")]
    report = json.loads((nodes.node("drifted") / "state" / "audit" / "report.json").read_text())
    assert report["hosts"]["localhost"]["status"] == "fail"


def test_the_service_of_the_clean_node_reports_ok_and_labels_nothing(installed):
    nodes, dummy = installed
    before = (nodes.tmp / "kubectl.calls").read_text() if (nodes.tmp / "kubectl.calls").exists() else ""
    done = run_service(nodes, "clean")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    families, series = metrics(nodes.node("clean") / "textfile" / "rdma_k8s_node.prom")
    assert len(series) > 5 and set(series.values()) == {0}
    assert [(s.labels["status"], s.value) for s in families[PREFIX + "status"].samples] == [("ok", 0)]
    after = (nodes.tmp / "kubectl.calls").read_text() if (nodes.tmp / "kubectl.calls").exists() else ""
    assert after == before  # no kubeconfig: nothing talks to Kubernetes


def test_a_bad_textfile_name_is_refused(installed):
    nodes, dummy = installed
    done = nodes.play("--check", "-e", "rdma_audit_node_textfile=/var/lib/node_exporter/metrics.txt", "--limit", "clean")
    assert done.returncode != 0 and "must be an absolute path to a file" in done.stdout


def test_absent_removes_everything_it_installed(installed):
    nodes, dummy = installed
    done = nodes.play("-e", "rdma_audit_node_state=absent")
    assert done.returncode == 0, done.stdout[-3000:]
    assert recap(done.stdout) == {"drifted": 1, "clean": 1}
    for name in ("drifted", "clean"):
        node = nodes.node(name)
        assert not (node / "opt").exists() and not (node / "state").exists()
        assert not (node / "etc" / "audit-node.yml").exists()
        assert list((node / "units").iterdir()) == [] and list((node / "textfile").iterdir()) == []
        assert (node / "root" / "sys").is_dir()  # the node itself is untouched
    again = nodes.play("-e", "rdma_audit_node_state=absent")
    assert recap(again.stdout) == {"drifted": 0, "clean": 0}
