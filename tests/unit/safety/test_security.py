"""Security review as tests: argument-list commands, validated names, explicit modes and owners, root-only backups,
no_log on secrets, and two runs against one node at once.

The static checks read the collection's own source (plugins/, roles/, playbooks/) with ``ast`` and ``yaml``, so a
new shell string or a secret option without ``no_log`` fails here; the dynamic ones run the modules on node trees.
"""

import ast
import multiprocessing
import os
import pathlib
import random
import stat
import time

import pytest
import yaml

from bench import bench_fleet
from unit.safety.benches import ContainerdBench, GrubBench, KubeletBench, SysctlBench
from unit.safety.nodes import snapshot

REPO = pathlib.Path(__file__).resolve().parents[3]
PLUGIN_FILES = sorted((REPO / "plugins").rglob("*.py")) + sorted((REPO / "roles").glob("*/files/*.py"))
YAML_FILES = sorted(p for p in list((REPO / "roles").rglob("*.yml")) + list((REPO / "playbooks").rglob("*.yml"))
                    if "/tasks/" in str(p) or "/playbooks/" in str(p) or "/handlers/" in str(p))
SECRET_WORDS = ("password", "passwd", "token", "secret", "credential", "api_key", "private_key", "auth")
COMMAND_CALLS = ("run_command", "run", "run_kernel", "Popen", "call", "check_call", "check_output")


def _source(path):
    return ast.parse(path.read_text(), str(path))


def _string_like(node):
    """True for an expression that builds a command line as one string (a literal, an f-string, % or + of strings)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _string_like(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_like(node.left) or _string_like(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
    return False


def test_every_command_is_an_argument_list():
    """No shell=True, no use_unsafe_shell, no os.system/os.popen, no command built as a string, in any plugin or role
    script: a value from the inventory can never become shell syntax."""
    problems = []
    for path in PLUGIN_FILES:
        for node in ast.walk(_source(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            for keyword in node.keywords:
                if keyword.arg in ("shell", "use_unsafe_shell") and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
                    problems.append("%s:%d %s=..." % (path.relative_to(REPO), node.lineno, keyword.arg))
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "os" \
                    and name in ("system", "popen", "execl", "execlp", "spawnl"):
                problems.append("%s:%d os.%s" % (path.relative_to(REPO), node.lineno, name))
            if name in COMMAND_CALLS and node.args and _string_like(node.args[0]):
                problems.append("%s:%d %s(<string>)" % (path.relative_to(REPO), node.lineno, name))
    assert not problems, "commands built as strings or through a shell:\n" + "\n".join(problems)


def test_the_only_shell_is_the_grub_evaluation_with_a_constant_script():
    """kernel_cmdline sources the GRUB defaults with ``sh -c SCRIPT sh FILE...`` as grub-mkconfig does: the script is
    a constant and every file name is a positional parameter, never part of the script."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub  # pylint: disable=import-outside-toplevel
    script = _grub.evaluate_script(["/etc/default/grub", "/tmp/$(reboot)`id`.cfg"])
    assert script == _grub.evaluate_script([])
    assert "$(" not in script and "`" not in script


def _tasks(data):
    if isinstance(data, list):
        for item in data:
            yield from _tasks(item)
    elif isinstance(data, dict):
        if any(key in data for key in ("name", "block", "tasks")) or any("." in str(k) for k in data):
            yield data
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if key in data:
                yield from _tasks(data[key])


def test_roles_and_playbooks_run_commands_as_argv_only():
    problems = []
    for path in YAML_FILES:
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        for task in _tasks(data):
            for key, value in task.items():
                short = str(key).rsplit(".", 1)[-1]
                if short in ("shell", "raw", "script"):
                    problems.append("%s: task %r uses %s" % (path.relative_to(REPO), task.get("name"), key))
                if short == "command" and str(key) in ("command", "ansible.builtin.command", "ansible.legacy.command"):
                    if not isinstance(value, dict) or "argv" not in value:
                        problems.append("%s: task %r runs a command string" % (path.relative_to(REPO), task.get("name")))
    assert not problems, "\n".join(problems)


def _argument_specs():
    """(module file, option name, spec dict) of every module option, nested ones included."""
    out = []
    for path in sorted((REPO / "plugins/modules").glob("*.py")):
        for node in ast.walk(_source(path)):
            if isinstance(node, ast.keyword) and node.arg == "argument_spec" and isinstance(node.value, ast.Call):
                stack = [node.value]
                while stack:
                    call = stack.pop()
                    for option in call.keywords:
                        if isinstance(option.value, ast.Call):
                            flags = {k.arg: k.value for k in option.value.keywords}
                            out.append((path.name, option.arg, flags))
                            if "options" in flags and isinstance(flags["options"], ast.Call):
                                stack.append(flags["options"])
    return out


def test_secret_options_are_no_log():
    specs = _argument_specs()
    assert len(specs) > 50, "the argument_spec scan found too little; it is broken"
    leaking = [(module, name) for module, name, flags in specs
               if any(word in name.lower() for word in SECRET_WORDS)
               and not (isinstance(flags.get("no_log"), ast.Constant) and flags["no_log"].value is True)]
    assert not leaking, "options that look secret but are logged: %s" % leaking


def test_every_file_plan_states_its_mode():
    """plan_file(observed, content, mode[, uid, gid]): every call in a module passes the mode; the owner defaults to
    root (uid 0, gid 0) unless the call keeps the observed owner."""
    calls = []
    for path in PLUGIN_FILES:
        for node in ast.walk(_source(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "plan_file" and "_fileedit" not in path.name:
                has_mode = len(node.args) >= 3 or any(k.arg == "mode" for k in node.keywords)
                calls.append((path.name, node.lineno, has_mode))
    assert calls
    assert all(has for dummy, dummy_line, has in calls), [c for c in calls if not c[2]]


# -- dynamic: modes, owners and backups of what the modules write -----------------------------------------------------
def _written(before, after):
    return {rel: entry for rel, entry in after.items() if entry[0] == "file" and before.get(rel) != entry}


@pytest.mark.parametrize("make, options, args", [
    (GrubBench, {}, {"present": ["iommu=pt", "intel_iommu=on"], "backup": True}),
    (GrubBench, {"mode": "grub_default"},
     {"present": ["iommu=pt", "intel_iommu=on"], "backup": True, "bootloader": "grub_default"}),
    (ContainerdBench, {}, {"backup": True}),
    (KubeletBench, {}, {"topology_manager_policy": "restricted", "backup": True}),
], ids=["kernel_cmdline-dropin", "kernel_cmdline-grub_default", "containerd_rdma", "kubelet_topology"])
def test_written_files_have_explicit_mode_and_root_owner_and_backups_are_root_only(make, options, args, tmp_path,
                                                                                   monkeypatch):
    bench = make(tmp_path, monkeypatch, **options)
    try:
        before = snapshot(bench.root, skip=("proc", "sys"))
        result = bench.run(bench.args(**args))
        after = snapshot(bench.root, skip=("proc", "sys"))
        written = _written(before, after)
        backups = set(os.path.relpath(p, bench.root) for p in (result.get("backup_files") or {}).values())
        assert backups, "backup=true kept no backup: %s" % result
        for rel, (dummy_kind, mode, uid, gid, dummy_data) in written.items():
            if rel in backups:
                assert (mode, uid, gid) == (0o600, 0, 0), "%s: backup is %04o %d:%d" % (rel, mode, uid, gid)
            elif rel in before:
                assert (mode, uid, gid) == before[rel][1:4], "%s: an edited file keeps its mode and owner" % rel
            else:
                assert (mode, uid, gid) == (0o644, 0, 0), "%s: a new file is 0644 root:root, got %04o" % (rel, mode)
        assert not [rel for rel in after if rel.endswith(".tmp")], "temp files left behind"
    finally:
        bench.close()


@pytest.mark.fuse
def test_sysctl_backup_of_a_world_readable_file_is_root_only(tmp_path, monkeypatch):
    bench = SysctlBench(tmp_path, monkeypatch)
    try:
        result = bench.run(bench.args(settings={"net.ipv4.conf.all.arp_announce": 2}, backup=True))
        backup = pathlib.Path(result["backup_files"]["/etc/sysctl.d/90-rdma-k8s-node.conf"])
        info = backup.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o600, 0, 0)
        assert stat.S_IMODE((bench.etc / "sysctl.d/90-rdma-k8s-node.conf").stat().st_mode) == 0o644
    finally:
        bench.close()


# -- concurrency: two module runs against one node at once --------------------------------------------------------------
def _race_child(root, arg, start_at, out):
    """Run kernel_cmdline (grub_default mode: a read-modify-write of /etc/default/grub) in this forked process."""
    from ansible.module_utils import basic  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel

    from ansible_collections.rdma.k8s_node.plugins.module_utils import _fileedit  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.modules import kernel_cmdline  # pylint: disable=import-outside-toplevel

    rng = random.Random(arg)
    real_apply_all = _fileedit.FileTransaction.apply_all

    def slow_apply_all(self, plans):
        time.sleep(rng.uniform(0, 0.03))  # a module that takes a while between reading and writing
        return real_apply_all(self, plans)

    class Done(Exception):
        pass

    def finish(ok):
        def record(self, **kwargs):  # pylint: disable=unused-argument
            out.put((arg, ok, kwargs.get("msg")))
            raise Done()
        return record

    _fileedit.FileTransaction.apply_all = slow_apply_all
    basic.AnsibleModule.exit_json = finish(True)
    basic.AnsibleModule.fail_json = finish(False)
    while time.time() < start_at:
        time.sleep(0.001)
    try:
        with patch_module_args({"present": [arg], "bootloader": "grub_default", "update": False, "host_root": root}):
            kernel_cmdline.main()
    except Done:
        pass


def test_concurrent_runs_on_one_node_lose_no_edit(tmp_path):
    """Rounds of two kernel_cmdline runs at once, each adding its own argument to GRUB_CMDLINE_LINUX of
    /etc/default/grub: a run either succeeds and its argument is in the file, or fails saying the file changed under
    it - never a success whose edit another run overwrote.  The operator's other lines always survive."""
    root = tmp_path / "node"
    (root / "etc/default/grub.d").mkdir(parents=True)
    (root / "proc").mkdir()
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro\n")
    grub = root / "etc/default/grub"
    grub.write_text('# operator comment\nGRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=""\nGRUB_TIMEOUT=5\n')
    bench_fleet.install_boot_tools(root)  # the GRUB defaults are sourced by /bin/sh chrooted into the node
    ctx = multiprocessing.get_context("fork")
    outcomes = []
    for round_ in range(6):
        out = ctx.Queue()
        start_at = time.time() + 0.3
        args = ["race%d_a=1" % round_, "race%d_b=1" % round_]
        procs = [ctx.Process(target=_race_child, args=(str(root), arg, start_at, out)) for arg in args]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
        results = [out.get(timeout=5) for dummy in procs]
        text = grub.read_text()
        assert text.startswith("# operator comment\nGRUB_DEFAULT=0\n") and "GRUB_TIMEOUT=5" in text, text
        for arg, ok, msg in results:
            if ok:
                assert arg in text, "run %s succeeded but its edit was lost:\n%s" % (arg, text)
            else:
                assert "changed on the node after this run read it" in msg, msg
            outcomes.append(ok)
        leftovers = [p.name for p in grub.parent.iterdir() if p.name not in ("grub", "grub.d")]
        assert not leftovers, leftovers
    assert any(outcomes), "no run succeeded"
    print("concurrent kernel_cmdline runs: %d succeeded, %d refused on a changed file" % (
        outcomes.count(True), outcomes.count(False)))
