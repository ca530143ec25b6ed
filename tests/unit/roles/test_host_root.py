"""One host root for the whole collection (issue 17, item 4).

* ``rdma_k8s_node_host_root`` is the default of every role's own ``<role>_host_root`` (the role's variable still
  wins); test_rolling_provision runs provision.yml and the audit with nothing else set.
* the ``rdma.k8s_node.rdma`` action group of ``meta/runtime.yml`` lists every module, and ``module_defaults`` through
  it really reaches them, the audit's action plugin included (it was missing from the group and ignored the default).
"""

import json
import pathlib
import subprocess

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
ROLES = REPO / "roles"
ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
EXPECTED_DEFAULT = "{{ rdma_k8s_node_host_root | default('/') }}"


def roles_with_host_root():
    found = []
    for defaults in sorted(ROLES.glob("*/defaults/main.yml")):
        role = defaults.parent.parent.name
        values = yaml.safe_load(defaults.read_text(encoding="utf-8")) or {}
        if "%s_host_root" % role in values:
            found.append((role, values["%s_host_root" % role]))
    return found


def test_every_role_with_a_host_root_follows_the_collection_wide_one():
    found = dict(roles_with_host_root())
    assert len(found) >= 10, found
    assert dict((role, value) for role, value in found.items() if value != EXPECTED_DEFAULT) == {}


def test_roles_pass_their_host_root_to_every_module_call():
    """A role task calling one of the collection's modules without host_root would read the controller's ``/``."""
    modules = set(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    missing = []
    for tasks in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(tasks.read_text(encoding="utf-8")) or []):
            for key, args in task.items():
                short = key.rsplit(".", 1)[-1]
                if key.startswith("rdma.k8s_node.") and short in modules and short not in ("rdma_perftest", "rdma_audit_report"):
                    # rdma_audit_gather's role_vars takes host_root from rdma_audit_host_root (the role's host root)
                    role_vars = short == "rdma_audit_gather" and isinstance(args, dict) and args.get("role_vars") is True
                    if not role_vars and (not isinstance(args, dict) or "host_root" not in args):
                        missing.append("%s: %s" % (tasks.relative_to(REPO), task.get("name", key)))
    assert missing == []


def _tasks(items):
    for task in items:
        if not isinstance(task, dict):
            continue
        yield task
        for nested in ("block", "rescue", "always"):
            yield from _tasks(task.get(nested) or [])


def test_the_action_group_lists_every_module():
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    modules = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    assert sorted(runtime["action_groups"]["rdma"]) == modules


@pytest.mark.parametrize("arp_ignore", [1, 2])
def test_module_defaults_group_reaches_the_modules(tmp_path, arp_ignore):
    """module_defaults of group/rdma.k8s_node.rdma sets host_root of the module and of the audit's action plugin."""
    root = tmp_path / "root"
    conf = root / "proc" / "sys" / "net" / "ipv4" / "conf" / "all"
    conf.mkdir(parents=True)
    (conf / "arp_ignore").write_text("%d\n" % arp_ignore, encoding="utf-8")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/rdma.k8s_node.rdma": {"host_root": str(root)}},
        "tasks": [
            {"name": "facts", "rdma.k8s_node.rdma_facts": {}, "register": "facts"},
            {"name": "gather", "rdma.k8s_node.rdma_audit_gather": {}, "register": "gathered"},
            {"name": "zipped", "rdma.k8s_node.rdma_audit_gather": {"compress": True}, "register": "zipped"},
            {"name": "show", "ansible.builtin.debug": {"msg": "{{ {'facts': facts.ansible_facts.rdma.sysctl.all.arp_ignore,"
                                                              " 'gathered': (gathered.rdma_facts_json | from_json)"
                                                              ".sysctl.all.arp_ignore,"
                                                              " 'gathered_facts': gathered.ansible_facts is defined,"
                                                              " 'zipped': (zipped | rdma.k8s_node.rdma_audit_facts)"
                                                              ".sysctl.all.arp_ignore,"
                                                              " 'zipped_text': zipped.rdma_facts_json is defined,"
                                                              " 'same': (zipped | rdma.k8s_node.rdma_audit_facts)"
                                                              " == (gathered | rdma.k8s_node.rdma_audit_facts)}"
                                                              " | to_json }}"}},
        ]}]), encoding="utf-8")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_HOME": str(tmp_path / "home"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_NOCOLOR": "1", "PATH": "/usr/bin:/bin",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    (tmp_path / "none.cfg").write_text("[defaults]\n", encoding="utf-8")
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), str(playbook)], env=env, capture_output=True, text=True,
                          check=False, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    shown = [t for t in tasks if t["task"]["name"] == "show"][0]["hosts"]["localhost"]["msg"]
    # rdma_audit_gather returns the facts as JSON text, not as ansible_facts (no copy into the fact cache)
    # ... and with compress: true, the node's compressed text, which the rdma_audit_facts filter reads back
    assert json.loads(shown) == {"facts": arp_ignore, "gathered": arp_ignore, "gathered_facts": False,
                                 "zipped": arp_ignore, "zipped_text": False, "same": True}
