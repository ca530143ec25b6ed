"""Audit filters (hostvars -> report, report -> md/junit) and the audit playbook end to end on simulated nodes."""

import json
import os
import pathlib
import subprocess
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_audit as F
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_report
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers

hwsim = pytest.importorskip("hwsim")

REPO = pathlib.Path(__file__).resolve().parents[4]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"


def test_role_defaults_are_the_roles_own_values():
    defaults = F.role_defaults()
    for role in F.DEFAULTS_ROLES:
        path = REPO / "roles" / role / "defaults" / "main.yml"
        if not path.exists():
            continue
        for key, value in (yaml.safe_load(path.read_text()) or {}).items():
            if key in _audit.DESIRED_VARS:
                assert defaults[key] == value, key
    assert defaults["rdma_netns_mode"] == "shared"
    assert defaults["rdma_sysctl_per_interface"] == {"arp_ignore": 2, "arp_announce": 2, "rp_filter": 2}
    assert defaults["rdma_audit_gpu_nic_max_class"] == "PXB"


def test_desired_var_names_exist_in_some_role_or_are_documented():
    known = set()
    for path in (REPO / "roles").glob("*/defaults/main.yml"):
        known.update(yaml.safe_load(path.read_text()) or {})
    # options without a default (unset means "leave it alone") are documented in the role's argument spec
    for path in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        known.update(yaml.safe_load(path.read_text())["argument_specs"]["main"].get("options", {}))
    # variables of roles another issue adds (doca_ofed, nvidia_peermem) may not exist yet
    pending = {"rdma_k8s_node_doca_ofed", "rdma_k8s_node_gpudirect"}  # provision.yml switches, not role variables
    assert set(_audit.DESIRED_VARS) - known <= pending


def _registered(facts):
    return {"changed": False, "ansible_facts": {"rdma": facts}}


@pytest.fixture(scope="module")
def roce_facts(tmp_path_factory):
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
    from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
    from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
    root = hwsim.render("roce-cx6dx", tmp_path_factory.mktemp("roce"))
    facts = gather(HostRoot(str(root)))
    facts["persisted"] = persisted_facts(HostRoot(str(root)), [])
    return json.loads(json.dumps(facts))


def test_filter_reads_host_variables_over_defaults(roce_facts):
    hostvars = {
        "a": {"rdma_audit__facts": _registered(roce_facts), "rdma_netns_mode": "exclusive"},
        "b": {"rdma_audit__facts": _registered(roce_facts)},
        "c": {"rdma_audit__facts": {"unreachable": True, "msg": "Failed to connect to the host via ssh"}},
        "d": {"rdma_audit__facts": {"failed": False, "msg": "host_root /nope does not exist"}},
        "e": {},
    }
    report = F.rdma_audit(["a", "b", "c", "d", "e"], hostvars, layers=["netns"])
    netns = dict((h, [c for c in report["hosts"][h]["checks"] if c["id"] == "netns.mode"]) for h in "ab")
    assert netns["a"][0]["desired"] == "exclusive" and netns["a"][0]["status"] == "drift"
    assert netns["b"][0]["desired"] == "shared" and netns["b"][0]["status"] == "ok"
    assert report["hosts"]["c"]["status"] == "unknown"
    assert "Failed to connect" in report["hosts"]["c"]["checks"][0]["detail"]
    assert "host_root /nope does not exist" in report["hosts"]["d"]["checks"][0]["detail"]
    assert "did not run" in report["hosts"]["e"]["checks"][0]["detail"]


def test_facts_only_mode_and_host_layers(roce_facts):
    hostvars = {"a": {"rdma_audit__facts": _registered(roce_facts), "rdma_audit_layers": ["topology"]}}
    report = F.rdma_audit(["a"], hostvars, mode="facts_only")
    assert report["hosts"]["a"]["audit"] == "facts_only"
    assert set(c["layer"] for c in report["hosts"]["a"]["checks"]) <= {"facts", "topology"}


@pytest.mark.parametrize("args,message", [
    ((["a"], {}, "strict"), "mode must be"),
    (("a", {}), "list of inventory host names"),
    ((["a"], {}, "desired", ["kernal"]), "unknown layers"),
])
def test_filter_bad_input(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        F.rdma_audit(*args)


@pytest.mark.parametrize("name", ["rdma_audit_markdown", "rdma_audit_junit", "rdma_audit_summary"])
def test_render_filters_refuse_other_data(name):
    with pytest.raises(AnsibleFilterError, match="expected an rdma_audit report"):
        getattr(F, name)({"hosts": {}})


def test_markdown_and_junit_agree_with_the_report(roce_facts):
    facts = json.loads(json.dumps(roce_facts))
    facts["problems"] = [{"path": "/sys/x|y", "error": "Permission <denied> & more"}]
    hostvars = {"n<1>": {"rdma_audit__facts": _registered(facts)}, "n2": {}}
    report = F.rdma_audit(["n<1>", "n2"], hostvars, generated="2026-11-30T10:00:00Z")
    text = F.rdma_audit_markdown(report)
    assert text.startswith("# RDMA node audit\n")
    assert "| n\\<1\\> | **FAIL** |" in text or "| n\\<1\\> | *unknown* |" in text or "| n\\<1\\> | **DRIFT** |" in text
    assert "facts.read\\[/sys/x\\|y\\]" in text  # pipes (and link brackets) escaped inside a table cell
    assert "Permission \\<denied\\> & more" in text  # no raw HTML
    assert "GPU0" in text and "NIC Legend" in text  # the topo matrix of the RoCE node (2 GPUs)
    root = ET.fromstring(F.rdma_audit_junit(report))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == sum(len(h["checks"]) for h in report["hosts"].values())
    assert int(root.get("tests")) == len(cases)
    totals = report["summary"]["checks_by_status"]
    assert int(root.get("failures")) == totals["drift"] + totals["fail"] == len(root.findall(".//failure"))
    assert int(root.get("errors")) == totals["unknown"] == len(root.findall(".//error"))
    assert [s.get("name") for s in root.findall("testsuite")] == ["n2", "n<1>"]
    lines = F.rdma_audit_summary(report, 3)
    assert lines[0].startswith("audit: 2 hosts, status ")
    assert lines[-1] == "... more in the report" and len(lines) == 5


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_audit_playbook_on_simulated_nodes(tmp_path):
    """The real CLI: three local hosts on simulated nodes (one does not exist), in check mode, reports on disk."""
    dgx = hwsim.render("dgx-h100", tmp_path / "dgx")
    roce = hwsim.render("roce-cx6dx", tmp_path / "roce")
    python = str(REPO / ".venv" / "bin" / "python")
    inventory = {"all": {"hosts": {
        "dgx": {"rdma_audit_host_root": str(dgx)},
        "roce": {"rdma_audit_host_root": str(roce)},
        "gone": {"rdma_audit_host_root": str(tmp_path / "nope")},
        # nothing listens on the discard port: the connection is refused, the host is unreachable
        "down": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
                 "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"},
    }, "vars": {"ansible_connection": "local", "ansible_python_interpreter": python,
                "rdma_audit_layers": ["netns", "sysctl", "topology"]}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_HOME": str(tmp_path / "home"),
                "ANSIBLE_BECOME": "false"})
    # the desired netns mode of one host comes from play vars (only the role's per-host set_fact sees those)
    (tmp_path / "audit.yml").write_text(yaml.safe_dump([{
        "name": "Audit", "hosts": "all", "gather_facts": False,
        "vars": {"rdma_netns_mode": "{{ 'exclusive' if inventory_hostname == 'roce' else 'shared' }}"},
        "roles": [{"role": "rdma.k8s_node.rdma_audit"}]}]))
    argv = [str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "audit.yml"), "--check",
            "-e", "ansible_become=false", "-e", "rdma_audit_dir=%s" % (tmp_path / "out")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert sorted(report["hosts"]) == ["dgx", "down", "gone", "roce"]
    assert report["hosts"]["gone"]["status"] == "unknown"
    assert report["hosts"]["down"]["status"] == "unknown"
    assert "unreachable" in json.dumps(report["hosts"]["down"])
    roce_netns = [c for c in report["hosts"]["roce"]["checks"] if c["id"] == "netns.mode"][0]
    assert (roce_netns["status"], roce_netns["desired"], roce_netns["live"]) == ("drift", "exclusive", "shared")
    assert report["hosts"]["dgx"]["status"] == "drift"  # power-on sysctls differ from the role defaults
    assert (tmp_path / "out" / "report.md").read_text().count("\n## ") == 6  # summary, inventory, 4 hosts
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<h2>roce: fail</h2>" in page
    ET.parse(str(tmp_path / "out" / "junit.xml"))
    # the RoCE archetype's GPUs reach the NIC only through the host bridge: NCCL would not use GPUDirect there
    affinity = [c for c in report["hosts"]["roce"]["checks"] if c["id"] == "topology.gpu_nic"]
    assert [(c["status"], c["live"]) for c in affinity] == [("fail", {"mlx5_0": "PHB"})] * 2
    assert "audit: 4 hosts, status fail (hosts: drift 1, fail 1, unknown 2)" in done.stdout

    # sorted, indented down to the checks, one line per check, a final newline (test__audit_report_json.py)
    text = (tmp_path / "out" / "report.json").read_text()
    assert text == _audit_report.json_document(report) + "\n"

    # the role's options are checked (once) before anything runs
    bad = subprocess.run(argv + ["-e", "rdma_audit_mode=everything"], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert bad.returncode != 0
    assert "rdma_audit_mode must be one of: desired, facts_only" in bad.stdout, bad.stdout[-2000:]
    assert "Gather the RDMA facts" not in bad.stdout

    # the same audit asked to fail on drift exits non-zero
    failing = subprocess.run(argv + ["-e", "rdma_audit_fail_on_drift=true"], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    assert failing.returncode != 0
    assert "audit status fail" in failing.stdout


def test_role_reads_the_same_variables_as_the_audit():
    """The role asks the gather action for the registry's variables, which are the audit's (no list of its own)."""
    role_vars = yaml.safe_load((REPO / "roles" / "rdma_audit" / "vars" / "main.yml").read_text())
    assert "rdma_audit__desired_vars" not in role_vars
    tasks = yaml.safe_load((REPO / "roles" / "rdma_audit" / "tasks" / "main.yml").read_text())
    gather = [t for t in tasks if "rdma.k8s_node.rdma_audit_gather" in t][0]["rdma.k8s_node.rdma_audit_gather"]
    # host_root, counters_interval and desired_state (rdma_audit_mode == 'desired') from the role's variables; the
    # facts compressed on the node
    assert gather == {"role_vars": True, "compress": True}
    assert _layers.desired_vars() == _audit.DESIRED_VARS


def test_desired_var_built_by_the_role_wins_and_nulls_take_defaults(roce_facts):
    hostvars = {"a": {"rdma_audit__facts": _registered(roce_facts), "rdma_netns_mode": "shared",
                      "rdma_audit__desired": {"rdma_netns_mode": "exclusive", "rdma_sysctl_host": None}}}
    report = F.rdma_audit(["a"], hostvars, layers=["netns", "sysctl"])
    checks = dict(((c["id"], c["subject"]), c) for c in report["hosts"]["a"]["checks"])
    assert checks[("netns.mode", None)]["desired"] == "exclusive"
    assert checks[("sysctl.arp", "all")]["desired"] == {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2}


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_audit_playbook_publishes_node_labels_with_kubectl(tmp_path):
    """Labels go through kubectl (a recording stand-in on PATH here); nothing is labelled in check mode."""
    roce = hwsim.render("roce-cx6dx", tmp_path / "roce")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kubectl").write_text("#!/bin/sh\necho \"$*\" >> %s\necho \"node/$5 labeled\"\n" % (tmp_path / "calls"))
    (bindir / "kubectl").chmod(0o755)
    inventory = {"all": {"hosts": {"gpu1.example.com": {"rdma_audit_host_root": str(roce)},
                                   "gpu2": {"rdma_audit_host_root": str(roce), "rdma_audit_node_name": "node-b"}},
                         "vars": {"ansible_connection": "local",
                                  "ansible_python_interpreter": str(REPO / ".venv" / "bin" / "python"),
                                  "rdma_audit_layers": ["netns"]}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_HOME": str(tmp_path / "home"),
                "PATH": "%s:%s" % (bindir, env["PATH"])})
    argv = [str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "audit.yml"),
            "-e", "ansible_become=false", "-e", "rdma_audit_dir=%s" % (tmp_path / "out"),
            "-e", "rdma_audit_publish_labels=true"]
    checked = subprocess.run(argv + ["--check"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert not (tmp_path / "calls").exists()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    assert calls == [
        "label --overwrite node gpu1 rdma.k8s-node.io/audit=ok rdma.k8s-node.io/netns-mode=shared "
        "rdma.k8s-node.io/gpudirect=none",
        "label --overwrite node node-b rdma.k8s-node.io/audit=ok rdma.k8s-node.io/netns-mode=shared "
        "rdma.k8s-node.io/gpudirect=none",
    ]


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_the_real_audit_playbook_fails_only_the_host_with_a_bad_option(tmp_path):
    """playbooks/audit.yml checks the role's options once (run_once); a per-host value it did not see fails that
    host in the report, and the others are audited as usual."""
    roce = hwsim.render("roce-cx6dx", tmp_path / "roce")
    python = str(REPO / ".venv" / "bin" / "python")
    inventory = {"all": {"hosts": {
        "good": {"rdma_audit_host_root": str(roce)},
        "badclass": {"rdma_audit_host_root": str(roce), "rdma_audit_gpu_nic_max_class": "pxb"},
        "badmap": {"rdma_audit_host_root": str(roce), "rdma_audit_gpu_nic_map": ["mlx5_0"]},
        "badlayers": {"rdma_audit_host_root": str(roce), "rdma_audit_layers": ["netns", "gpus"]},
    }, "vars": {"ansible_connection": "local", "ansible_python_interpreter": python,
                "rdma_audit_layers": ["netns", "topology"]}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_HOME": str(tmp_path / "home")})
    argv = [str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "audit.yml"), "--check",
            "-e", "ansible_become=false", "-e", "rdma_audit_dir=%s" % (tmp_path / "out")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    hosts = json.loads((tmp_path / "out" / "report.json").read_text())["hosts"]
    options = dict((name, [c["detail"] for c in host["checks"] if c["id"] == "facts.options"])
                   for name, host in hosts.items())
    assert options["good"] == []
    assert options["badclass"] == ["rdma_audit_gpu_nic_max_class must be one of PIX, PXB, PHB, NODE, SYS, got 'pxb'"]
    assert options["badmap"][0].startswith("rdma_audit_gpu_nic_map must map GPU PCI addresses")
    assert options["badlayers"][0].startswith("rdma_audit_layers of this host must be a list of facts, drivers")
    assert all(hosts[name]["status"] == "fail" for name in ("badclass", "badmap", "badlayers"))
    # the good host's checks ran as usual (the RoCE archetype's GPUs sit behind the host bridge: PHB > PXB)
    assert [c["status"] for c in hosts["good"]["checks"] if c["id"] == "topology.gpu_nic"] == ["fail", "fail"]
