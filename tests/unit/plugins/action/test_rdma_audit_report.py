"""rdma_audit_report: each host's checks come back as a tuple, which ansible-core's register does not copy, and
which templates read as the list they were (a real ansible-playbook run)."""

import json
import os
import pathlib
import subprocess
import sys

import yaml

from ansible.vars.clean import module_response_deepcopy, strip_internal_keys

from ansible_collections.rdma.k8s_node.plugins.action import rdma_audit_report as R
from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit

REPO = pathlib.Path(__file__).resolve().parents[4]
# a small node: one InfiniBand HCA without its layers' sections (their checks say unknown or are skipped), a drifted
# and a failing check among ok ones, so the filters below have something to keep and to drop
FACTS = {"devices": [{"name": "mlx5_0", "netdevs": ["ibp24s0"], "fw_ver": "28.39.1002", "link_layer": "InfiniBand"}],
         "gpus": [], "problems": [{"path": "/sys/class/net/ibp24s0/mtu", "error": "Permission denied"}],
         "netns_mode": "shared", "modules": ["mlx5_core", "ib_core"],
         "layers": {"irq": {"devices": {"0000:18:00.0": {"irqs": {"24": {"affinity": "0-3"}}}}}}}


def _report(count=3):
    hosts = dict(("node-%d" % index, {"facts": json.loads(json.dumps(FACTS)), "desired": None, "layers": None,
                                      "error": None if index else "unreachable: no route to host"})
                 for index in range(count))
    hosts["node-0"]["facts"] = None
    return _audit.audit(hosts, generated="2026-12-04T00:00:00Z")


def test_frozen_checks_are_the_reports_own_checks_as_tuples():
    report = _report()
    frozen = R.frozen_checks(report["hosts"])
    assert list(frozen) == list(report["hosts"])
    for name, host in frozen.items():
        assert isinstance(host["checks"], tuple) and list(host["checks"]) == report["hosts"][name]["checks"]
        assert all(a is b for a, b in zip(host["checks"], report["hosts"][name]["checks"]))
        assert dict(host, checks=list(host["checks"])) == report["hosts"][name]  # the rest as it was
    # the report itself is left as the writers had it
    assert all(isinstance(host["checks"], list) for host in report["hosts"].values())


def test_register_keeps_the_tuples_and_copies_the_rest():
    """What StrategyBase._process_pending_results does to a result before it registers it: the checks are not
    copied (the same tuple), every container around them is."""
    report = _report()
    result = dict(report, hosts=R.frozen_checks(report["hosts"]), _ansible_no_log=True, changed=False)
    registered = strip_internal_keys(module_response_deepcopy(result))
    assert "_ansible_no_log" not in registered and "_ansible_no_log" in result
    for name, host in registered["hosts"].items():
        assert host is not result["hosts"][name] and host["summary"] is not result["hosts"][name]["summary"] or \
            host["summary"] is None
        assert host["checks"] is result["hosts"][name]["checks"]


def _ansible_env(tmp_path):
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), "ANSIBLE_HOME": str(tmp_path / "home"),
                "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    (tmp_path / "ansible.cfg").write_text("[defaults]\n", encoding="utf-8")
    return env


def _run(tmp_path, report_args, read):
    """A real ansible-playbook run of the action over three hosts whose gather results are in the inventory (one
    unreachable), then a debug task per host with ``read`` (templates); ``(the tasks' results by name and host,
    report.json)``."""
    blob = _facts_text.deflate(json.dumps(FACTS, separators=(",", ":")))
    gathered = {"changed": False, "rdma_facts_json_zlib": blob, "rdma_audit_desired": {}}
    inventory = {"all": {"hosts": {
        "node-0": {"rdma_audit__facts": {"unreachable": True, "msg": "no route to host"}},
        "node-1": {"rdma_audit__facts": gathered}, "node-2": {"rdma_audit__facts": gathered}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    play = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Report", "rdma.k8s_node.rdma_audit_report": dict({
            "hosts": "{{ ansible_play_hosts_all }}", "mode": "facts_only", "dest": str(tmp_path / "reports")},
            **report_args), "register": "rep", "run_once": True},
        {"name": "Read", "ansible.builtin.debug": {"msg": read},
         "vars": {"checks": "{{ rep.hosts[inventory_hostname].checks | default('none') }}"}},
        {"name": "Copied", "ansible.builtin.set_fact": {"copied": "{{ rep.hosts[inventory_hostname].checks | default([]) }}"}},
        {"name": "Type", "ansible.builtin.debug": {"msg": "{{ copied | type_debug }}"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False), encoding="utf-8")
    done = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(tmp_path / "play.yml")], env=_ansible_env(tmp_path), capture_output=True, text=True,
                          check=False, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = json.loads(done.stdout)
    tasks = dict((task["task"]["name"], task["hosts"]) for task in output["plays"][0]["tasks"])
    report = json.loads((tmp_path / "reports" / "report.json").read_text(encoding="utf-8"))
    assert sorted(report["hosts"]) == ["node-0", "node-1", "node-2"]
    assert report["hosts"]["node-0"]["status"] == "unknown"
    return tasks, report


def test_a_playbook_reads_the_registered_checks_as_lists(tmp_path):
    """The role's and the molecule scenarios' ways of reading ``rdma_audit_report.hosts[h].checks``: what they give
    is what report.json holds for that host."""
    tasks, report = _run(tmp_path, {}, {
        "not_ok": "{{ checks | rejectattr('status', 'equalto', 'ok') | map(attribute='id') | list }}",
        "read": "{{ (checks | selectattr('id', 'equalto', 'facts.read') | first).subject | default(None) }}",
        "count": "{{ checks | length }}",
        "first": "{{ checks[0].id }}",
        "as_json": "{{ checks | to_json }}",
        "listed": "{{ ((checks | list) + [{'id': 'mine'}]) | map(attribute='id') | list }}",
        "status": "{{ rep.hosts[inventory_hostname].status }}",
        "labels": "{{ rep.hosts[inventory_hostname].labels }}"})
    for name, host in report["hosts"].items():
        got = tasks["Read"][name]["msg"]
        assert got["not_ok"] == [check["id"] for check in host["checks"] if check["status"] != "ok"], name
        assert got["not_ok"], name  # something to drop and keep on every host
        assert int(got["count"]) == len(host["checks"]) and got["first"] == host["checks"][0]["id"]
        assert json.loads(got["as_json"]) == host["checks"]
        assert got["listed"] == [check["id"] for check in host["checks"]] + ["mine"]  # `| list` where a list is needed
        assert got["status"] == host["status"] and got["labels"] == host["labels"]
        assert tasks["Type"][name]["msg"] == "list"  # set_fact makes it a list, as templates see it
    assert tasks["Read"]["node-1"]["msg"]["read"] == "/sys/class/net/ibp24s0/mtu"


def test_checks_false_registers_each_hosts_verdict_and_writes_every_check(tmp_path):
    tasks, report = _run(tmp_path, {"checks": False}, {
        "checks": "{{ checks }}", "host": "{{ rep.hosts[inventory_hostname] | to_json }}",
        "summary": "{{ rep.summary | to_json }}"})
    for name, host in report["hosts"].items():
        got = tasks["Read"][name]["msg"]
        assert got["checks"] == "none", name  # not registered
        assert json.loads(got["host"]) == dict((key, value) for key, value in host.items() if key != "checks")
        assert json.loads(got["summary"]) == report["summary"]
        assert host["checks"] and sum(host["counts"].values()) == len(host["checks"])  # the file has them all


def test_readers_of_checks_refuse_a_report_registered_without_them():
    """rdma_audit_register_checks: false: the collection's filters that read checks say so, instead of a KeyError
    or metrics without a check."""
    # pylint: disable=import-outside-toplevel
    import pytest
    from ansible.errors import AnsibleFilterError
    from ansible_collections.rdma.k8s_node.plugins.filter import rdma_audit as F
    from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit_node import rdma_audit_textfile

    report = _report()
    registered = dict(report, hosts=R.without_checks(report["hosts"]), changed=False, files={}, summary_lines=[])
    for name in ("rdma_audit_json", "rdma_audit_markdown", "rdma_audit_html", "rdma_audit_junit", "rdma_audit_summary"):
        with pytest.raises(AnsibleFilterError, match="rdma_audit_register_checks: false"):
            getattr(F, name)(registered)
        getattr(F, name)(dict(report, changed=False, files={}, summary_lines=[]))  # with them: as before
    with pytest.raises(AnsibleFilterError, match="rdma_audit_register_checks: false"):
        rdma_audit_textfile(registered, host="node-1")
    assert "check_status" in rdma_audit_textfile(report, host="node-1")
