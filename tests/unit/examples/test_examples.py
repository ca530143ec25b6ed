"""The example inventories of ``examples/`` (docs/getting-started.md) hold what a user will copy.

For every example (a directory with ``inventory.yml``, ``group_vars/``, optional ``host_vars/`` and ``rollout.yml``,
the extra-vars file of the disruptive run):

* ``ansible-inventory --list`` parses it, and every variable it sets is a documented one: an option of some role's
  argument spec (or a role default), a provision/audit/validate switch (the ``rdma_k8s_node_*`` names the playbooks
  read, not the ones they set), or one of Ansible's own connection variables. A misspelt name is the bug a user
  would hit: Ansible ignores it silently and the role runs with its default.
* every role's argument spec accepts the example's values, with the role's defaults merged under them (as Ansible
  checks a role's variables when the role starts);
* ``ansible-playbook --syntax-check`` of provision.yml, audit.yml and validate.yml with the inventory;
* provision.yml in check mode (``--check --diff``) against one simulated node per example (tests/bench's fleet
  builder: an assembled host root of the matching hwsim archetype, local connection, the simulator's shims first on
  PATH), with the example's group_vars as they are and ``rollout.yml`` as extra vars. Only what a simulated node
  cannot have is overridden (as host vars of the simulated host, see ``SIMULATOR_OVERRIDES``): it has no systemd,
  containerd or kubelet, no package manager or DOCA repository, and no NVIDIA driver to load a GPUDirect module
  for. The run must end without a failed or unreachable host.
"""

import contextlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

import hwsim
import hwsim.bind

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "bench"))

import bench_fleet  # noqa: E402  pylint: disable=wrong-import-position,import-error

EXAMPLES = REPO / "examples"
ROLES = REPO / "roles"
PLAYBOOKS = REPO / "playbooks"
ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
ANSIBLE_INVENTORY = REPO / ".venv" / "bin" / "ansible-inventory"
SHIMS = REPO / "tests" / "hwsim" / "shims"
#: the simulator archetype each example's nodes are (tests/hwsim/specs)
ARCHETYPES = {"infiniband-8rail": "dgx-h100", "roce-shared": "roce-cx6dx"}
#: what a simulated node cannot have, and only that: no containerd, kubelet or systemd (so no boot units), no
#: package manager and repository for DOCA-OFED, no NVIDIA driver for GPUDirect RDMA
SIMULATOR_OVERRIDES = {
    "rdma_k8s_node_containerd": False,
    "rdma_k8s_node_kubelet": False,
    "sriov_boot_unit": False,
    "pcie_tuning_boot_unit": False,
    "rdma_k8s_node_doca_ofed": False,
    "rdma_k8s_node_gpudirect": False,
}
#: rollout.yml's variables a simulated node cannot take: it is reached by a local connection, where Ansible's reboot
#: refuses to run ("would reboot the control node"). They are extra vars there, so they are left out of its copy.
ROLLOUT_LEFT_OUT = ("node_reboot_ok",)
#: Ansible's own variables an inventory may set (connection and interpreter)
ANSIBLE_VARS = re.compile(r"^ansible_(host|port|user|connection|python_interpreter|become\w*|ssh_\w+|private_key_file)$")


def examples():
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "inventory.yml").is_file())


def env(tmp_path):
    out = bench_fleet.ansible_env(tmp_path, None, {"ANSIBLE_RETRY_FILES_ENABLED": "false"})
    return out


def load_yaml(path):
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def role_specs():
    """``{role: options}`` of every role's argument spec."""
    return dict((p.parent.parent.name, load_yaml(p)["argument_specs"]["main"].get("options", {}))
                for p in sorted(ROLES.glob("*/meta/argument_specs.yml")))


def role_defaults(role):
    path = ROLES / role / "defaults" / "main.yml"
    return load_yaml(path) if path.exists() else {}


def playbook_switches():
    """The ``rdma_k8s_node_*`` names the playbooks read, less the ones they set themselves (set_fact, register)."""
    used, produced = set(), set()
    for path in PLAYBOOKS.rglob("*.yml"):
        text = path.read_text(encoding="utf-8")
        used.update(re.findall(r"\b(rdma_k8s_node_\w+)", text))
        for task in _tasks(load_yaml(path)):
            produced.update((task.get("ansible.builtin.set_fact") or task.get("set_fact") or {}).keys())
            if isinstance(task.get("register"), str):
                produced.add(task["register"])
    return used - produced


def _tasks(data):
    """Every task dict of a playbook or task file, blocks and rescues included."""
    stack = list(data) if isinstance(data, list) else []
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        yield item
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            stack.extend(item.get(key) or [])


def known_variables():
    known = set(playbook_switches())
    for role, options in role_specs().items():
        known.update(options)
        known.update(role_defaults(role))
    # every role's <role>_host_root defaults to it (roles/*/defaults/main.yml)
    known.add("rdma_k8s_node_host_root")
    return known


def example_files(name):
    """The variable files of an example: group_vars, host_vars and the rollout extra vars."""
    root = EXAMPLES / name
    files = sorted(root.glob("group_vars/*.yml")) + sorted(root.glob("host_vars/*.yml"))
    if (root / "rollout.yml").exists():
        files.append(root / "rollout.yml")
    return files


def inventory_list(name, tmp_path):
    done = subprocess.run([str(ANSIBLE_INVENTORY), "-i", str(EXAMPLES / name / "inventory.yml"), "--list"],
                          env=env(tmp_path), capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[WARNING]" not in done.stderr, done.stderr
    return json.loads(done.stdout)


# -- (i) the inventory parses, and every name is documented ----------------------------------------------------------
@pytest.mark.parametrize("name", examples())
def test_inventory_parses_and_every_variable_is_documented(name, tmp_path):
    listed = inventory_list(name, tmp_path)
    hosts = listed["_meta"]["hostvars"]
    assert len(hosts) >= 2 and "gpu_nodes" in listed["all"]["children"]
    known = known_variables()
    names = set()
    for values in hosts.values():
        names.update(values)
    for path in example_files(name):
        names.update(load_yaml(path))
    unknown = sorted(n for n in names if n not in known and not ANSIBLE_VARS.match(n))
    assert unknown == [], "%s sets variables no role or playbook documents: %s" % (name, unknown)
    # group_vars reach the hosts as written (a file named after a group that does not exist would be ignored)
    groups = set(listed) - {"_meta"}
    for path in sorted((EXAMPLES / name).glob("group_vars/*.yml")):
        assert path.stem in groups, "%s: no group %s" % (name, path.stem)
        for key, value in load_yaml(path).items():
            assert all(values.get(key) == value for values in hosts.values()), (path, key)


def test_the_checks_would_catch_a_typo():
    known = known_variables()
    assert "rdma_netns_mode" in known and "rdma_k8s_node_serial" in known and "rdma_k8s_node_gpudirect" in known
    assert "rdma_netns_modes" not in known and "sriov_pf" not in known
    # what the playbooks set for themselves is no switch
    assert "rdma_k8s_node_failures" not in known and "rdma_k8s_node_batch" not in known


# -- (ii) every role's argument spec accepts the example's values --------------------------------------------------------
@pytest.mark.parametrize("name", examples())
def test_role_argument_specs_accept_the_example(name):
    given = {}
    for path in example_files(name):
        given.update(load_yaml(path))
    checked = set()
    for role, options in role_specs().items():
        values = dict((k, v) for k, v in role_defaults(role).items() if not (isinstance(v, str) and "{{" in v))
        values.update((k, v) for k, v in given.items() if k in options)
        checked.update(k for k in given if k in options)
        result = ArgumentSpecValidator(options).validate(values, validate_role_argument_spec=True)
        assert result.error_messages == [], "%s: role %s: %s" % (name, role, result.error_messages)
    # the roles' own variables of the example were all checked by some role
    roles_vars = set(k for k in given if not k.startswith("rdma_k8s_node_") and not ANSIBLE_VARS.match(k))
    assert roles_vars <= checked, sorted(roles_vars - checked)


def test_sriov_pfs_entries_name_their_pf_once():
    """sriov_pfs is a list of dicts to the argument spec: the entries' own keys are checked here."""
    allowed = {"netdev", "rdma_device", "pci_address", "num_vfs", "vf_defaults", "vfs", "guid_scheme", "guids"}
    for name in examples():
        for path in example_files(name):
            for entry in load_yaml(path).get("sriov_pfs") or []:
                assert set(entry) <= allowed, (path, entry)
                assert len(set(entry) & {"netdev", "rdma_device", "pci_address"}) == 1, (path, entry)
                assert isinstance(entry["num_vfs"], int)
                assert entry.get("guid_scheme", "pf_guid") in ("pf_guid", "list", "pool_file")


# -- (iii) the playbooks' syntax with the inventory ------------------------------------------------------------------
@pytest.mark.parametrize("name", examples())
def test_playbooks_syntax_check(name, tmp_path):
    inventory = EXAMPLES / name / "inventory.yml"
    for playbook in ("provision.yml", "audit.yml", "validate.yml"):
        argv = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOKS / playbook), "--syntax-check"]
        if playbook == "provision.yml" and (EXAMPLES / name / "rollout.yml").exists():
            argv += ["-e", "@%s" % (EXAMPLES / name / "rollout.yml")]
        done = subprocess.run(argv, env=env(tmp_path), capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, "%s %s: %s%s" % (name, playbook, done.stdout[-2000:], done.stderr[-2000:])


# -- (iv) provision.yml in check mode on a simulated node ----------------------------------------------------------------
@contextlib.contextmanager
def simulated_inventory(name, workdir):
    """A copy of the example's variable files and an inventory of one simulated node in the example's group.

    The node is the live simulator (FUSE sysfs/procfs and its control socket, which the ``ip``/``rdma``/``devlink``
    shims talk to), as tests/bench's converge run builds it: SR-IOV cannot be planned on a static rendered tree
    (bench_fleet.build_fleet's), since ``ib_vf_guids`` asks ``ip -j link show`` for the PFs' VF GUIDs. Its ``etc``
    and ``boot`` are real directories of the assembled root, with GRUB defaults and bench_fleet's ``update-grub``."""
    archetype = ARCHETYPES[name]
    inventory_dir = workdir / name
    shutil.copytree(EXAMPLES / name, inventory_dir, ignore=shutil.ignore_patterns("inventory.yml", "*.md"))
    root, mnt, tools = workdir / "root", workdir / "mnt", workdir / "tools"
    etc = root / "etc"
    for sub in ("default/grub.d", "modprobe.d", "modules-load.d", "sysctl.d"):
        (etc / sub).mkdir(parents=True, exist_ok=True)
    (etc / "default" / "grub").write_text(bench_fleet.GRUB_DEFAULTS, encoding="utf-8")
    mnt.mkdir()
    tools.mkdir()
    # the sysctl shim also writes all/default to the real kernel: a recorder stands in, this machine is never touched
    recorder = tools / "real-sysctl"
    recorder.write_text('#!/bin/sh\necho "$*" >> "%s"\n' % (workdir / "real-sysctl.log"), encoding="utf-8")
    recorder.chmod(0o755)
    wrapper = tools / "node-python"
    wrapper.write_text('#!/bin/sh\nPATH="%s:%s:$PATH" HWSIM_ROOT="%s" HWSIM_REAL_SYSCTL="%s" exec "%s" "$@"\n' % (
        SHIMS, os.path.dirname(sys.executable), mnt, recorder, sys.executable), encoding="utf-8")
    wrapper.chmod(0o755)
    host = dict(SIMULATOR_OVERRIDES, ansible_connection="local", ansible_python_interpreter=str(wrapper),
                rdma_k8s_node_host_root=str(root))
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {"%s-sim" % archetype: host}}}}}
    rollout = load_yaml(inventory_dir / "rollout.yml")
    for key in ROLLOUT_LEFT_OUT:
        rollout.pop(key, None)
    (inventory_dir / "rollout.yml").write_text(yaml.safe_dump(rollout), encoding="utf-8")
    (inventory_dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")
    with hwsim.mounted(archetype, mnt, etc=etc, threads=False), \
            hwsim.bind.Assembled(root, {"sys": mnt / "sys", "proc": mnt / "proc"}):
        bench_fleet.install_boot_tools(root)
        subprocess.run(["chroot", str(root), "/usr/sbin/update-grub"], check=True, capture_output=True)
        yield inventory_dir


@pytest.mark.parametrize("name", examples())
def test_check_mode_provision_on_a_simulated_node(name, tmp_path):
    reason = hwsim.fuse_available()
    if reason:
        pytest.skip("FUSE unavailable: %s" % reason)
    with simulated_inventory(name, tmp_path) as inventory_dir:
        argv = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory_dir / "inventory.yml"), str(PLAYBOOKS / "provision.yml"),
                "--check", "--diff", "-e", "ansible_become=false", "-e", "@%s" % (inventory_dir / "rollout.yml")]
        run_env = bench_fleet.ansible_env(tmp_path, REPO / "examples" / "ansible.cfg",
                                          {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
                                           "ANSIBLE_RETRY_FILES_ENABLED": "false"})
        done = subprocess.run(argv, env=run_env, capture_output=True, text=True, check=False, timeout=300,
                              cwd=str(tmp_path))
    (tmp_path / "provision.json").write_text(done.stdout, encoding="utf-8")
    try:
        output = json.loads(done.stdout)
    except ValueError:
        pytest.fail("no JSON from ansible-playbook (rc %d): %s" % (done.returncode, done.stderr[-3000:]))
    failures = []
    for play in output["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if result.get("failed") or result.get("unreachable"):
                    failures.append("%s: %s: %s" % (host, task["task"]["name"], result.get("msg")))
    assert done.returncode == 0 and not failures, "\n".join(failures) or done.stderr[-3000:]
    stats = output["stats"]
    assert [h for h, s in stats.items() if s["failures"] or s["unreachable"]] == []
    assert all(s["changed"] > 0 for h, s in stats.items() if h != "localhost"), "a fresh node has nothing to change?"
    # what the dry run tells the operator: the reboot the node needs (node_reboot_ok is the rollout's choice)
    report = [r["msg"] for play in output["plays"] for t in play["tasks"] for r in t["hosts"].values()
              if t["task"]["name"] == "rdma.k8s_node.node_reboot : Report a reboot that is needed but not allowed"
              and not r.get("skipped")]
    assert len(report) == 1 and "needs a reboot (kernel command line: iommu=pt" in report[0], report
    if load_yaml(EXAMPLES / name / "group_vars" / "gpu_nodes.yml").get("sriov_pfs"):
        vfs = [r for play in output["plays"] for t in play["tasks"] for r in t["hosts"].values()
               if t["task"]["name"] == "rdma.k8s_node.sriov : Create the VFs and set their attributes"]
        assert len(vfs) == 1 and vfs[0]["changed"] and len(vfs[0]["results"]) == 8, vfs
