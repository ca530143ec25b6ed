"""rdma_audit_gather's fleet gather (option hosts) and the rdma_audit role's rdma_audit_gather_mode: fleet.

One run_once task runs rdma_facts on every host of the batch on that host's own connection; the report, its files
and every check are the same as the per-host gather's on the same hosts (issue 21 item 5, docs/scale.md)."""

import json
import os
import pathlib
import re
import subprocess
from unittest import mock

import pytest
import yaml

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure

from ansible_collections.rdma.k8s_node.plugins.action import rdma_audit_gather as G
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit_hosts

hwsim = pytest.importorskip("hwsim")

REPO = pathlib.Path(__file__).resolve().parents[4]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
PYTHON = str(REPO / ".venv" / "bin" / "python")
GENERATED = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z")
needs_cli = pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Five hosts: two simulated nodes on the local connection (different host roots), one whose host root does not
    exist (rdma_facts fails), one that cannot be reached (ssh to a closed port), one whose become (su to an account
    without a shell) fails; and the environment of a CLI run."""
    tmp = tmp_path_factory.mktemp("fleet")
    dgx = hwsim.render("dgx-h100", tmp / "dgx")
    roce = hwsim.render("roce-cx6dx", tmp / "roce")
    inventory = {"all": {"hosts": {
        "dgx": {"rdma_audit_host_root": str(dgx)},
        "roce": {"rdma_audit_host_root": str(roce), "rdma_netns_mode": "exclusive"},
        "gone": {"rdma_audit_host_root": str(tmp / "nope")},
        "down": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                 "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"},
        # become is this host's own: su to an account whose shell refuses logins, so its gather fails
        "nobody": {"rdma_audit_host_root": str(roce), "ansible_become": True, "ansible_become_method": "su",
                   "ansible_become_user": "nobody"},
    }, "vars": {"ansible_connection": "local", "ansible_python_interpreter": PYTHON, "ansible_become": False,
                "rdma_audit_layers": ["netns", "sysctl", "topology"]}}}
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp / "tmp"), "ANSIBLE_HOME": str(tmp / "home")})
    return {"tmp": tmp, "inventory": tmp / "inventory.yml", "env": env, "dgx": dgx, "roce": roce}


def _playbook(fleet, playbook, *extra):
    argv = [str(PLAYBOOK), "-i", str(fleet["inventory"]), str(playbook), "--check"] + list(extra)
    return subprocess.run(argv, env=fleet["env"], capture_output=True, text=True, timeout=300, check=False)


def _audit(fleet, mode, *extra):
    out = fleet["tmp"] / ("out-" + mode)
    done = _playbook(fleet, REPO / "playbooks" / "audit.yml", "-e", "rdma_audit_dir=%s" % out,
                     "-e", "rdma_audit_gather_mode=%s" % mode, *extra)
    return done, out


@needs_cli
def test_both_gather_modes_write_the_same_reports(fleet):
    """playbooks/audit.yml in both modes on the same hosts: report.json, report.md, report.html and junit.xml are
    the same, byte for byte, with the generated time stamp masked."""
    per_host, per_host_out = _audit(fleet, "per_host")
    # the per-host task fails the host whose become raises (failed_when does not see an exception); the fleet gather
    # reports it in the report only, with the same message
    assert per_host.returncode == 2, per_host.stdout[-3000:] + per_host.stderr[-3000:]
    assert re.findall(r"(?m)^fatal: \[(\w+)\]: FAILED", per_host.stdout) == ["nobody"]
    fleet_run, fleet_out = _audit(fleet, "fleet", "--forks", "2")
    assert fleet_run.returncode == 0, fleet_run.stdout[-3000:] + fleet_run.stderr[-3000:]
    for name in ("report.json", "report.md", "report.html", "junit.xml"):
        texts = [GENERATED.sub("GEN", (out / name).read_text()) for out in (per_host_out, fleet_out)]
        assert texts[0] == texts[1], name
    report = json.loads((fleet_out / "report.json").read_text())
    status = dict((name, host["status"]) for name, host in report["hosts"].items())
    assert status == {"dgx": "drift", "roce": "fail", "gone": "unknown", "down": "unknown", "nobody": "unknown"}
    gathered = dict((name, [c["detail"] for c in host["checks"] if c["id"] == "facts.gathered"])
                    for name, host in report["hosts"].items())
    assert gathered["gone"] == ["rdma_facts failed: host_root %s does not exist" % (fleet["tmp"] / "nope")]
    assert gathered["down"][0].startswith("unreachable: Failed to connect to the host via ssh")
    assert gathered["nobody"][0].startswith("rdma_facts failed: Task failed: Premature end of stream waiting for "
                                            "become success.")
    roce_netns = [c for c in report["hosts"]["roce"]["checks"] if c["id"] == "netns.mode"][0]
    assert (roce_netns["desired"], roce_netns["live"]) == ("exclusive", "shared")  # that host's own variable
    # no task per host in fleet mode: one gather line, for the host the run_once task ran on
    assert _gather_lines(fleet_run.stdout) == ["ok: [dgx]"]
    assert sorted(_gather_lines(per_host.stdout)) == ["fatal: [down]", "fatal: [nobody]", "ok: [dgx]", "ok: [gone]",
                                                      "ok: [roce]"]


def _gather_lines(stdout):
    """The hosts' result lines of the gather task."""
    section = stdout.split("TASK [rdma.k8s_node.rdma_audit : Gather the RDMA facts")[1].split("\nTASK [")[0]
    return re.findall(r"(?m)^(?:ok|fatal|changed): \[\w+\]", section)


@needs_cli
def test_the_fleet_result_of_every_host(fleet):
    """The action itself: each host's entry is what the per-host gather returns for it, from its own variables and
    connection; the hosts are gathered at most forks at a time; one host's failure is that host's entry."""
    result = fleet["tmp"] / "result.json"
    playbook = fleet["tmp"] / "gather.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Fleet gather", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Gather", "rdma.k8s_node.rdma_audit_gather": {
            "hosts": "{{ ansible_play_batch + ['ghost'] }}", "forks": 3, "role_vars": True,
            "desired_vars": ["rdma_netns_mode"]},
         "register": "gathered", "run_once": True},
        {"name": "Save", "ansible.builtin.copy": {"content": "{{ gathered | to_json }}", "dest": str(result)},
         "run_once": True, "delegate_to": "localhost", "check_mode": False}]}]))
    done = _playbook(fleet, playbook)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    registered = json.loads(result.read_text())
    assert registered["msg"] == "rdma_facts on 6 hosts (3 at a time): 2 ok, 3 failed, 1 unreachable"
    hosts = registered[G.FLEET_KEY]
    assert sorted(hosts) == ["dgx", "down", "ghost", "gone", "nobody", "roce"]
    facts = dict((name, json.loads(hosts[name]["rdma_facts_json"])) for name in ("dgx", "roce"))
    # each node's own host root: the DGX has 8 GPUs, the RoCE archetype fewer
    assert len(facts["dgx"]["gpus"]) == 8 and len(facts["roce"]["gpus"]) != 8
    assert hosts["roce"]["rdma_audit_desired"]["rdma_netns_mode"] == "exclusive"
    assert hosts["dgx"]["rdma_audit_desired"]["rdma_netns_mode"] == "__unset__"
    assert hosts["down"]["unreachable"] is True and "Connection refused" in hosts["down"]["msg"]
    assert "rdma_netns_mode" in hosts["down"]["rdma_audit_desired"]  # the desired state is kept
    assert hosts["gone"]["failed"] is True and hosts["gone"]["msg"].endswith("does not exist")
    assert hosts["ghost"] == {"failed": True, "changed": False,
                              "msg": "rdma_audit_gather: ghost is not an inventory host"}
    assert hosts["nobody"].get("failed") or hosts["nobody"].get("unreachable")
    for name in hosts:
        assert _audit_hosts.registered_of(registered, name) == hosts[name]
    assert _audit_hosts.facts_of(_audit_hosts.registered_of(registered, "dgx"))[0] == facts["dgx"]

    playbook.write_text(playbook.read_text().replace("forks: 3", "forks: -1"))
    bad = _playbook(fleet, playbook)
    assert bad.returncode != 0 and "forks must be 0 (the run's forks) or more, got -1" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


@needs_cli
def test_the_gather_mode_is_checked(fleet):
    bad, _out = _audit(fleet, "everywhere")
    assert bad.returncode != 0
    assert "rdma_audit_gather_mode must be one of: per_host, fleet" in bad.stdout, bad.stdout[-2000:]
    assert "Gather the RDMA facts" not in bad.stdout
    # an inventory variable comes after the tasks were chosen: the run stops before gathering, saying so
    inventory = yaml.safe_load(fleet["inventory"].read_text())
    inventory["all"]["vars"]["rdma_audit_gather_mode"] = "fleet"
    late = fleet["tmp"] / "late.yml"
    late.write_text(yaml.safe_dump(inventory))
    argv = [str(PLAYBOOK), "-i", str(late), str(REPO / "playbooks" / "audit.yml"), "--check",
            "-e", "rdma_audit_dir=%s" % (fleet["tmp"] / "late")]
    done = subprocess.run(argv, env=fleet["env"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert "the role's tasks were chosen when the play was loaded" in done.stdout, done.stdout[-2000:]
    assert "Gather the RDMA facts and the desired state (the audit's only call" not in done.stdout


class _Boom(G._Fleet):  # pylint: disable=protected-access
    """A fleet whose gather of one host raises (anything), of another fails to connect."""

    def __init__(self):  # pylint: disable=super-init-not-called
        self.action = mock.MagicMock()
        self.action._task.get_ds.return_value = {"name": "Gather"}  # pylint: disable=protected-access

    def gather(self, name, args):
        if name == "bad":
            raise KeyError("ansible_host")
        if name == "down":
            raise AnsibleConnectionFailure("ssh: connect to host down port 22: Connection refused")
        if name == "fail":
            raise AnsibleActionFail("rdma_audit_gather: host_root must be a path")
        return {"changed": False, "rdma_facts_json": "{}", "rdma_audit_desired": {}}


def test_one_hosts_exception_is_that_hosts_result():
    fleet = _Boom()
    # worded as ansible-core's task executor words a task that raised it (the per-host gather's message)
    assert fleet.gather_safely("bad", {}) == {"failed": True, "changed": False,
                                              "msg": "Task failed: 'ansible_host'"}
    assert fleet.gather_safely("down", {}) == {"unreachable": True, "changed": False,
                                               "msg": "ssh: connect to host down port 22: Connection refused"}
    # an action's failure gives its own message, as the per-host task's result does
    assert fleet.gather_safely("fail", {})["msg"] == "rdma_audit_gather: host_root must be a path"
    assert fleet.gather_safely("good", {})["rdma_facts_json"] == "{}"


@pytest.mark.parametrize("registered,name,expected", [
    ({"rdma_facts_json": "{}"}, "a", {"rdma_facts_json": "{}"}),  # the per-host gather's own result
    ({G.FLEET_KEY: {"a": {"failed": True, "msg": "x"}}}, "a", {"failed": True, "msg": "x"}),
    ({G.FLEET_KEY: {"a": {}}}, "b", None),  # not gathered by that fleet task: "did not run"
    ({G.FLEET_KEY: None}, "a", None),
    (None, "a", None),
])
def test_registered_of_picks_the_hosts_entry(registered, name, expected):
    assert _audit_hosts.registered_of(registered, name) == expected
    if expected is None:
        assert _audit_hosts.facts_of(expected)[1].startswith("rdma_facts did not run on this host")
