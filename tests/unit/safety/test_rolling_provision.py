"""Rolling provision with failing nodes: ``playbooks/provision.yml`` on a simulated fleet.

    .venv/bin/python -m pytest -q tests/unit/safety/test_rolling_provision.py                  # 12 nodes (default run)
    .venv/bin/python -m pytest -q tests/unit/safety/test_rolling_provision.py -m rollout_fleet -p no:xdist
                                                     # 100 nodes, 5 failing (RDMA_ROLLOUT_NODES to change the count)

The fleet is tests/bench's (``bench_fleet.build_fleet``: one assembled root per inventory host, local connection);
each node gets its own ``etc``, ``boot`` and ``proc`` (the live sysctls), GRUB with an ``update-grub`` that stops on
the first error as grub-mkconfig does, and its own environment through a per-host ``ansible_python_interpreter``
(the simulator's shims first on PATH, ``HWSIM_ROOT`` = the node, a recorder instead of this machine's ``sysctl``).

Faults are real failures of the node, never of our code: ``chattr +i`` on a directory or file the provisioning must
write (EPERM, also for root), so the module's own writes, the node's ``update-grub`` or the simulator's ``sysctl``
fail; and one node is unreachable (ssh to a closed port: connection refused). The fleet is cut into 10 batches
(``rdma_k8s_node_serial``, at least 4 of at least 3 nodes); ``rdma_k8s_node_max_fail_percentage`` tolerates one failed
node per batch. One node fails in each of up to three early batches (the rollout goes on); in a later batch one node
fails and one is unreachable (Ansible alone would go on: it counts failed nodes only; provision.yml stops there), the
others wait in the last batch, which never runs. Then:

* the play stops after that batch; the failed nodes are reported with the module and the cause, the unreachable one
  as unreachable, the recap fails them and the stopping batch's other nodes (with a message saying why);
* every node that ran and did not fail is converged, byte for byte the same as the others;
* a failed node is in its documented rollback state: the layers before the failing one applied, exactly as a node
  that ran only those layers (reference nodes provisioned with just them), the failing layer and the later ones
  untouched (so a node failing in its first layer is byte-identical to before);
* nodes of the batches that never ran are byte-identical to before;
* with the faults removed (the unreachable node answers), a re-run converges every node; the nodes converged by the
  first run report no change.

``test_failure_cause`` runs provision.yml's rescue (``playbooks/tasks/record_node_failure.yml``) on failures the
simulated fleet cannot produce: a no_log task (its cause hidden) and a loop task (the failed item's cause).
"""

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import yaml

import hwsim.bind

from unit.safety.nodes import snapshot, tree_diff

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "bench"))

import bench_fleet  # noqa: E402  pylint: disable=wrong-import-position,import-error

SHIMS = REPO / "tests" / "hwsim" / "shims"
PROVISION = REPO / "playbooks" / "provision.yml"
ARCHETYPE = "roce-cx6dx"  # dual-port ConnectX-6 Dx and 2 GPUs: every layer has work, module calls stay cheap
CHATTR = shutil.which("chattr")
#: the node's bootloader tool: bench_fleet's update-grub in miniature, which stops on the first error as
#: grub-mkconfig does (``set -e``), so a /boot it cannot write makes it fail
UPDATE_GRUB = bench_fleet.FAKE_UPDATE_GRUB
#: the provisioning layers, in provision.yml's order, on a node with no DOCA, GPUDirect, VFs, containerd or kubelet
LAYERS = ("kernel", "netns", "sysctl")
REFERENCE_ROLES = {"kernel": "rdma.k8s_node.rdma_kernel", "netns": "rdma.k8s_node.rdma_netns"}
NETDEV = "ens1f0np0"  # the archetype's first RDMA netdev (its per-interface sysctls change)


class Fault:
    """A path of the node made immutable: which layer fails on it, and what its failure message must say."""

    def __init__(self, name, path, layer, module, says):
        self.name, self.path, self.layer, self.module, self.says = name, path, layer, module, says

    def inject(self, root):
        subprocess.run([CHATTR, "+i", str(root / self.path)], check=True)

    def remove(self, root):
        if os.path.lexists(root / self.path):
            subprocess.run([CHATTR, "-i", str(root / self.path)], check=True)


FAULTS = {
    # the drop-in cannot be created: the first write of the first layer fails
    "grub_dropin_dir": Fault("grub_dropin_dir", "etc/default/grub.d", "kernel", "rdma.k8s_node.kernel_cmdline",
                             ("Operation not permitted",)),
    # the drop-in is written, then update-grub cannot write grub.cfg: the module takes the drop-in back
    "grub_cfg": Fault("grub_cfg", "boot/grub/grub.cfg", "kernel", "rdma.k8s_node.kernel_cmdline",
                      ("update-grub", "Operation not permitted")),
    # the kernel layer is done; the netns layer cannot write its modprobe.d file
    "modprobe_dir": Fault("modprobe_dir", "etc/modprobe.d", "netns", "rdma.k8s_node.rdma_netns",
                          ("Operation not permitted",)),
    # kernel and netns done; the sysctl file is written, then the simulator's sysctl cannot set one live value:
    # the module takes the file and the live values it already set back
    "sysctl_live": Fault("sysctl_live", "proc/sys/net/ipv4/conf/%s/arp_ignore" % NETDEV, "sysctl",
                         "rdma.k8s_node.sysctl_dropin", ("net.ipv4.conf.%s.arp_ignore" % NETDEV, "restored")),
    # kernel and netns done; the sysctl.d file cannot be created
    "sysctl_dir": Fault("sysctl_dir", "etc/sysctl.d", "sysctl", "rdma.k8s_node.sysctl_dropin",
                        ("Operation not permitted",)),
}
#: the unreachable node: ssh to a port nothing listens on (connection refused at once; ConnectTimeout in case not).
#: Its first contact is the first layer's first module: nothing on it changes.
UNREACHABLE = "unreachable"
UNREACHABLE_VARS = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
                    "ansible_ssh_common_args": "-o ConnectTimeout=5"}


def plan_rollout(count):
    """Batch size, max_fail_percentage and ``{node index: fault name}`` for ``count`` nodes in 10 batches (at least
    3 nodes each): one failure tolerated in each of up to three early batches; in the batch that stops the rollout,
    its first node unreachable and its last one failing (one failed node alone is tolerated: the unreachable one
    stops it); one in the last batch (never run). Fewer batches: the tolerated ones that do not fit go to the last."""
    size = max(3, count // 10)
    batches = math.ceil(count / float(size))
    assert batches >= 4, "need at least 4 batches of 3 nodes, got %d nodes" % count
    # ansible-core stops after a batch in which failed/batch_size > max_fail_percentage / 100: 1 of `size` is allowed
    max_fail = math.ceil(100.0 / size)
    stop = max(2, batches * 6 // 10)
    layout = {}
    early = sorted(set(stop * k // 3 for k in range(3)))
    tolerated = ["grub_cfg", "sysctl_live", "grub_dropin_dir"]
    for batch, fault in zip(early, tolerated):
        layout[batch * size + size // 2] = fault
    layout[stop * size] = UNREACHABLE
    layout[stop * size + size - 1] = "modprobe_dir"
    late = tolerated[len(early):] + ["sysctl_dir"]
    last = (batches - 1) * size
    for offset, fault in enumerate(late):
        layout[min(last + offset, count - 1)] = fault
    return size, max_fail, stop, layout


class Fleet:
    """The simulated fleet, its inventory and the runs of provision.yml against it."""

    def __init__(self, workdir, count):
        self.workdir = workdir
        self.count = count
        self.roots = []
        self.tools = workdir / "tools"
        self.env = None
        self.timings = {}

    # -- building -----------------------------------------------------------------------------------------------------
    def build(self, references, unreachable=()):
        """``count`` nodes (bench_fleet's builder), plus the reference nodes ``{name: layers}`` (group reference);
        the nodes named in ``unreachable`` are reached by ssh to a closed port."""
        self.tools.mkdir(parents=True, exist_ok=True)
        recorder = self.tools / "real-sysctl"
        recorder.write_text('#!/bin/sh\necho "$*" >> "%s"\n' % (self.workdir / "real-sysctl.log"), encoding="utf-8")
        recorder.chmod(0o755)
        roots = bench_fleet.build_fleet(self.workdir, ARCHETYPE, self.count + len(references))
        tree = self.workdir / ("tree-" + ARCHETYPE)
        template = None
        for root in roots:
            self.make_node(root, tree, template)
            template = template or root
        self.roots, extra = roots[:self.count], roots[self.count:]
        path = bench_fleet.write_inventory(self.workdir / "inventory.yml", self.roots, pathlib.Path(sys.executable), {
            # a simulated node has no container runtime, kubelet or systemd: provision.yml's opt-outs
            "rdma_k8s_node_containerd": False, "rdma_k8s_node_kubelet": False})
        inventory = yaml.safe_load(path.read_text(encoding="utf-8"))
        fleet = inventory["all"]["children"]["fleet"]
        self.host_vars(fleet["hosts"])
        refs = dict((name, {"rdma_k8s_node_host_root": str(root), "reference_layers": references[name]})
                    for name, root in zip(references, extra))
        self.host_vars(refs)
        inventory["all"]["children"]["reference"] = {"hosts": refs, "vars": fleet["vars"]}
        self.inventory, self.inventory_data = path, inventory
        self.write_inventory(unreachable)
        self.env = bench_fleet.ansible_env(self.workdir, REPO / "examples" / "ansible.cfg", {
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_RETRY_FILES_ENABLED": "false"})
        return dict(zip(references, extra))

    def make_node(self, root, tree, template):
        """The node's own proc (live sysctls), GRUB files, /bin/sh and update-grub (hard links to the first node's)."""
        if hwsim.bind.is_mount(root / "proc"):  # the node's own proc (live sysctls) instead of the shared tree's
            hwsim.bind.unbind(root / "proc")
            shutil.copytree(tree / "proc", root / "proc", symlinks=True, dirs_exist_ok=True)
        for sub in ("default/grub.d", "modprobe.d", "sysctl.d"):
            (root / "etc" / sub).mkdir(parents=True, exist_ok=True)
        (root / "etc" / "default" / "grub").write_text(bench_fleet.GRUB_DEFAULTS, encoding="utf-8")
        if template is None:
            bench_fleet.install_boot_tools(root)
            (root / "usr" / "sbin" / "update-grub").write_text(UPDATE_GRUB, encoding="utf-8")
            subprocess.run(["chroot", str(root), "/usr/sbin/update-grub"], check=True, capture_output=True)
            return
        for path in sorted(template.rglob("*")):
            rel = path.relative_to(template)
            if rel.parts[0] not in ("bin", "lib", "lib64", "usr", "boot"):
                continue
            if path.is_dir() and not path.is_symlink():
                (root / rel).mkdir(parents=True, exist_ok=True)
            elif rel.parts[0] == "boot":
                shutil.copy2(path, root / rel)  # grub.cfg is the node's own: the provisioning rewrites it
            else:
                os.link(path, root / rel)

    def write_inventory(self, unreachable=()):
        """The inventory, the nodes named in ``unreachable`` reached by ssh to a closed port (the others: local)."""
        inventory = json.loads(json.dumps(self.inventory_data))
        for name in unreachable:
            inventory["all"]["children"]["fleet"]["hosts"][name].update(UNREACHABLE_VARS)
        self.inventory.write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")

    def host_vars(self, hosts):
        """The node's own environment (a per-host interpreter); its root is ``rdma_k8s_node_host_root`` alone."""
        python_dir = os.path.dirname(sys.executable)
        for name, values in hosts.items():
            # bench_fleet's inventory names the audit's own variable: replaced by the collection-wide one
            root = values.pop("rdma_audit_host_root", None) or values["rdma_k8s_node_host_root"]
            values["rdma_k8s_node_host_root"] = root
            wrapper = self.tools / ("%s-python" % name)
            wrapper.write_text(
                '#!/bin/sh\nPATH="%s:%s:$PATH" HWSIM_ROOT="%s" HWSIM_REAL_SYSCTL="%s" exec "%s" "$@"\n' % (
                    SHIMS, python_dir, root, self.tools / "real-sysctl", sys.executable), encoding="utf-8")
            wrapper.chmod(0o755)
            # one variable gives every role the node's root (rdma_k8s_node_host_root; no per-role *_host_root)
            values.update({"ansible_python_interpreter": str(wrapper)})

    # -- running ------------------------------------------------------------------------------------------------------
    def playbook(self, name, playbook, *args):
        """Run ansible-playbook; ``(rc, json callback output)``; the wall time is kept in ``timings``."""
        argv = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(self.inventory), str(playbook),
                "-e", "ansible_become=false"] + list(args)
        start = time.perf_counter()
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False, cwd=str(self.workdir))
        self.timings[name] = round(time.perf_counter() - start, 1)
        (self.workdir / ("%s.json" % name)).write_text(done.stdout, encoding="utf-8")
        (self.workdir / ("%s.stderr" % name)).write_text(done.stderr, encoding="utf-8")
        try:
            return done.returncode, json.loads(done.stdout)
        except ValueError:
            pytest.fail("%s: no JSON from ansible-playbook (rc %d): %s" % (name, done.returncode, done.stderr[-3000:]))
        return None  # not reached

    def provision(self, name, size, max_fail):
        return self.playbook(name, PROVISION, "-e", "rdma_k8s_node_targets=fleet",
                             "-e", "rdma_k8s_node_serial=%d" % size,
                             "-e", "rdma_k8s_node_max_fail_percentage=%d" % max_fail)


def task_results(output, task_name):
    """``{host: result}`` of every run of the named task (all batches), skipped hosts left out."""
    out = {}
    for play in output["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == task_name:
                out.update((h, r) for h, r in task["hosts"].items() if not r.get("skipped"))
    return out


def reference_playbook(path):
    """Reference nodes: a node with only the layers before the failing one (provision.yml's roles, in its order)."""
    tasks = []
    for layer in ("kernel", "netns"):
        tasks.append({"name": "Layer %s" % layer, "ansible.builtin.include_role": {"name": REFERENCE_ROLES[layer]},
                      "when": "'%s' in reference_layers" % layer})
    play = [{"name": "Reference nodes", "hosts": "reference", "become": False, "gather_facts": False, "tasks": tasks}]
    path.write_text(yaml.safe_dump(play, sort_keys=False), encoding="utf-8")
    return path


def rollout(workdir, count):
    """The whole scenario; returns the measurements."""
    if CHATTR is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    if os.geteuid() != 0:
        pytest.skip("the faults are immutable files (chattr +i needs root)")
    size, max_fail, stop, layout = plan_rollout(count)
    names = [bench_fleet.host_name(i) for i in range(count)]
    unreachable = [names[i] for i, f in layout.items() if f == UNREACHABLE]
    fleet = Fleet(workdir, count)
    refs = fleet.build(references={"ref-kernel": ["kernel"], "ref-netns": ["kernel", "netns"]},
                       unreachable=unreachable)
    before = snapshot(fleet.roots[0], skip=("sys",))
    assert all(snapshot(root, skip=("sys",)) == before for root in fleet.roots[1:])
    # the rollback states: a node that ran only the layers before netns / sysctl (before kernel: nothing)
    rc, _out = fleet.playbook("reference", reference_playbook(workdir / "reference.yml"))
    assert rc == 0
    reference = {"kernel": before, "netns": snapshot(refs["ref-kernel"], skip=("sys",)),
                 "sysctl": snapshot(refs["ref-netns"], skip=("sys",))}

    faults = dict((i, FAULTS[f]) for i, f in layout.items() if f != UNREACHABLE)
    faulty = dict((names[i], fault) for i, fault in faults.items())
    try:
        for index, fault in faults.items():
            fault.inject(fleet.roots[index])
        rc, first = fleet.provision("first", size, max_fail)
    finally:
        for index, fault in faults.items():
            fault.remove(fleet.roots[index])

    ran = names[:(stop + 1) * size]
    failed = sorted(n for n in faulty if n in ran)
    # the stopping batch's nodes that neither failed nor were unreachable: provisioned, then failed to stop the rollout
    held = [n for n in ran[stop * size:] if n not in faulty and n not in unreachable]
    stopped = names[(stop + 1) * size:]
    # -- the first run: stopped after the batch with a failed and an unreachable node, reported them ------------------
    assert rc == 2, "ansible-playbook exit status %d (2: failed hosts)" % rc
    stats = first["stats"]
    # every node passed the pre-flight play (no connection); the provision play reached batches 1..stop+1 only
    assert sorted(stats) == sorted(names)
    assert all(r.get("failed") is not True for task in first["plays"][0]["tasks"] for r in task["hosts"].values())
    provisioned = set(h for play in first["plays"] if play["play"]["name"] == "Provision RDMA GPU nodes"
                      for task in play["tasks"] for h in task["hosts"])
    assert sorted(provisioned) == sorted(ran), "hosts that ran: expected batches 1..%d" % (stop + 1)
    assert sorted(h for h in stats if stats[h]["failures"]) == sorted(failed + held)
    assert sorted(h for h in stats if stats[h]["unreachable"]) == unreachable
    assert all(stats[h]["rescued"] == 1 for h in failed)
    report = task_results(first, "Report the nodes that failed so far, and why")
    assert report, "no failure report was printed"
    final_report = task_results({"plays": first["plays"][-1:]}, "Report the nodes that failed so far, and why")
    assert len(final_report) == 1, "the stopping batch printed no report"
    lines = list(final_report.values())[0]["msg"]
    assert sorted(line.split(":", 1)[0] for line in lines) == sorted(failed + unreachable)
    for node in unreachable:
        assert [line for line in lines if line.startswith(node + ": unreachable: ")], lines
    fails = task_results(first, "Fail the nodes whose provisioning failed")
    assert sorted(fails) == failed
    for node in failed:
        line = [line for line in lines if line.startswith(node + ":")][0]
        fault = faulty[node]
        assert fails[node]["msg"] in line
        assert fault.module in line, line
        for word in fault.says:
            assert word in line, "%s (%s): %r not in %r" % (node, fault.name, word, line)
    holds = task_results(first, "Stop the rollout when the batch's failed and unreachable nodes are over "
                                "max_fail_percentage")
    assert sorted(h for h in holds if holds[h].get("failed")) == held
    stopping = [n for n in ran[stop * size:] if n in faulty or n in unreachable]
    for node in held:
        msg = holds[node]["msg"]
        assert "%d of %d nodes of this batch failed or were unreachable" % (len(stopping), size) in msg, msg
        assert all(n in msg for n in stopping), msg

    # -- the nodes' state ----------------------------------------------------------------------------------------------
    converged = None
    for name, root in zip(names, fleet.roots):
        state = snapshot(root, skip=("sys",))
        if name in stopped or name in unreachable:
            assert state == before, "%s never ran but changed: %s" % (name, tree_diff(before, state))
        elif name in faulty:
            want = reference[faulty[name].layer]
            assert state == want, "%s (%s) is not in its rollback state: %s" % (
                name, faulty[name].name, tree_diff(want, state))
        elif converged is None:
            converged = state
            assert state != before
        else:
            assert state == converged, "%s differs from %s: %s" % (name, names[0], tree_diff(converged, state))
    assert_converged(converged)

    # -- the re-run, faults removed, every node answers: everything converges; what was converged does not change ----
    fleet.write_inventory(unreachable=())
    rc, second = fleet.provision("rerun", size, max_fail)
    stats = second["stats"]
    assert rc == 0 and sorted(stats) == names
    assert [h for h in names if stats[h]["failures"] or stats[h]["unreachable"]] == []
    assert not task_results(second, "Report the nodes that failed so far, and why")
    for name, root in zip(names, fleet.roots):
        state = snapshot(root, skip=("sys",))
        assert state == converged, "%s did not converge: %s" % (name, tree_diff(converged, state))
        if name in ran and name not in faulty and name not in unreachable:
            assert stats[name]["changed"] == 0, "%s was converged by the first run, the re-run changed it" % name
        else:
            assert stats[name]["changed"] > 0
    return {"nodes": count, "batch": size, "max_fail_percentage": max_fail, "faulty": len(faulty),
            "failed": len(failed), "unreachable": len(unreachable),
            "converged_first": len(ran) - len(failed) - len(unreachable), "stopped": len(stopped),
            "seconds": dict(fleet.timings)}


def assert_converged(state):
    """What a converged node of this archetype has: the kernel arguments in grub.cfg, the netns mode persisted, the
    sysctl file, the live per-interface values."""
    grub = state["boot/grub/grub.cfg"][4].decode()
    assert "iommu=pt" in grub and "ib_core.netns_mode=1" in grub
    assert state["etc/modprobe.d/rdma-k8s-node-ib_core.conf"][0] == "file"
    assert b"net.ipv4.conf.%s.arp_ignore = 2" % NETDEV.encode() in state["etc/sysctl.d/90-rdma-k8s-node.conf"][4]
    assert state["proc/sys/net/ipv4/conf/%s/arp_ignore" % NETDEV][4].strip() == b"2"


def test_plan_rollout():
    assert plan_rollout(100) == (10, 10, 6, {5: "grub_cfg", 25: "sysctl_live", 45: "grub_dropin_dir",
                                             60: UNREACHABLE, 69: "modprobe_dir", 90: "sysctl_dir"})
    size, max_fail, stop, layout = plan_rollout(12)
    assert (size, max_fail, stop) == (3, 34, 2)
    assert layout == {1: "grub_cfg", 4: "sysctl_live", 6: UNREACHABLE, 8: "modprobe_dir", 9: "grub_dropin_dir",
                      10: "sysctl_dir"}


def test_rolling_provision(tmp_path):
    """The default run: 12 nodes in 4 batches of 3 (one failure tolerated per batch; 5 faulty nodes, 1 unreachable)."""
    result = rollout(tmp_path, 12)
    print("rolling provision: %s" % json.dumps(result))


#: a mirror URL with a password, as doca_ofed's no_log tasks carry it
SECRET_URL = "https://mirror-user:s3cret-pw@mirror.example/doca/"
#: the failing tasks of test_failure_cause: ``{host: (task, what its rdma_k8s_node_failure must say)}``
FAILING = {
    # a no_log task (no_log templated, as doca_ofed's are) whose message carries the password
    "nolog-fail": (
        {"name": "Fetch from the mirror", "ansible.builtin.fail": {"msg": "cannot fetch {{ mirror }}"},
         "no_log": "{{ mirror is search('@') }}"},
        "ansible.builtin.fail (task 'Fetch from the mirror'): (output hidden by no_log)"),
    # a no_log module failing with the password in its stderr
    "nolog-command": (
        {"name": "Probe the mirror", "ansible.builtin.command": {"argv": [
            "/bin/sh", "-c", "echo \"{{ mirror }}: 401\" >&2; exit 1"]}, "changed_when": False, "no_log": True},
        "ansible.builtin.command (task 'Probe the mirror'): (output hidden by no_log)"),
    # a loop task: its own msg is "One or more items failed"; the cause is the first failed item's
    "loop-assert": (
        {"name": "Check the PFs", "ansible.builtin.assert": {
            "that": "item.num_vfs <= 8", "fail_msg": "{{ item.netdev }}: num_vfs {{ item.num_vfs }} is over 8",
            "quiet": True},
         "loop": [{"netdev": "ens1f0", "num_vfs": 4}, {"netdev": "ens1f1", "num_vfs": 16},
                  {"netdev": "ens2f0", "num_vfs": 32}]},
        "ansible.builtin.assert (task 'Check the PFs'): ens1f1: num_vfs 16 is over 8"),
    # a loop of module calls: the failed item's msg
    "loop-command": (
        {"name": "Load the modules", "ansible.builtin.command": {"argv": ["/bin/sh", "-c", "{{ item }}"]},
         "changed_when": False, "loop": ["true", "exit 3"]},
        "ansible.builtin.command (task 'Load the modules'): non-zero return code"),
    # not a loop, not no_log: the task's own message
    "plain": (
        {"name": "Write the drop-in", "ansible.builtin.fail": {"msg": "/etc/sysctl.d: Permission denied"}},
        "ansible.builtin.fail (task 'Write the drop-in'): /etc/sysctl.d: Permission denied"),
}


def test_failure_cause(tmp_path):
    """provision.yml's rescue task file on failures the simulated fleet cannot produce: a no_log task's cause is
    hidden (neither our line nor anything in the run's output shows the password), a loop task's cause is its first
    failed item's."""
    rescue = REPO / "playbooks" / "tasks" / "record_node_failure.yml"
    inventory = {"all": {"hosts": dict((name, {}) for name in FAILING),
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "mirror": SECRET_URL}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    plays = []
    for name, (task, _want) in FAILING.items():
        plays.append({"name": "Fail on %s" % name, "hosts": name, "gather_facts": False, "tasks": [
            {"name": "Provision", "block": [task],
             "rescue": [{"name": "Record why", "ansible.builtin.import_tasks": str(rescue)}]},
            {"name": "Show the cause", "ansible.builtin.debug": {"var": "rdma_k8s_node_failure"}}]})
    (tmp_path / "failing.yml").write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    env = bench_fleet.ansible_env(tmp_path, None, {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    done = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(tmp_path / "failing.yml")], env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = json.loads(done.stdout)
    causes = task_results(output, "Show the cause")
    assert sorted(causes) == sorted(FAILING)
    for name, (_task, want) in FAILING.items():
        assert causes[name]["rdma_k8s_node_failure"] == want, (name, causes[name])
    assert "s3cret" not in done.stdout, "the password shows in the run's output"
    assert all(output["stats"][name]["rescued"] == 1 for name in FAILING)


@pytest.mark.rollout_fleet
def test_rolling_provision_fleet(tmp_path, request):
    """100 nodes (RDMA_ROLLOUT_NODES), 5 % of them failing; about 6 minutes on 2 cores, hence its own marker."""
    if "rollout_fleet" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the 100-node rollout runs with -m rollout_fleet")
    result = rollout(tmp_path, int(os.environ.get("RDMA_ROLLOUT_NODES", "100")))
    print("rolling provision: %s" % json.dumps(result))
