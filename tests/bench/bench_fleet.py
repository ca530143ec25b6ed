"""Fleet benchmark: the drift audit against N simulated hosts, next to a peer-style baseline, in one command.

    scripts/bench fleet [--sizes 1,10,100,1000] [--baseline-max 100] [--forks 8] [--only audit,baseline,...]

Every host of the inventory is a local-connection host with its own simulated node root (``tests/hwsim``: the
archetype is rendered once; each host root is a directory whose ``sys`` and ``proc`` are links to that tree, the
"assembled root" layout the collection's HostRoot supports, or with ``--roots hardlink`` a ``cp -al`` copy).
For each N it times, with the same ``ansible.cfg`` (``--config``, default ``examples/ansible.cfg``):

* ``audit``     -- ``playbooks/audit.yml`` (one ``rdma_facts`` per host, the comparison on the controller);
* ``baseline``  -- ``tests/bench/fleet/baseline_audit.yml``: the same checks as one stock-module task per check
  (``command``/``shell``/``stat``/``slurp`` + ``assert``), capped at ``--baseline-max`` hosts;
* ``floor`` and ``floor-facts`` (``--only floor``) -- ``tests/bench/fleet/floor.yml`` (one ``ansible.builtin.ping``
  per host) and ``floor_facts.yml`` (one plain ``rdma_facts`` task per host, the gather's arguments): what
  ansible-core itself costs for one module task per host, the least an audit that reads each node can cost; the
  audit's controller CPU above ``floor-facts`` is the collection's own (``versus_floor``);

and, once: ``converge`` -- a second (no-op) run of the provisioning roles that work on a simulated node (FUSE
mount, command shims; see docs/benchmarks.md for which roles and why), and ``facts`` -- ``rdma_facts`` alone on
the largest archetype with VFs.

CPU is split between the controller and the nodes.  Where this machine has a writable cgroup v1 ``cpuacct``
hierarchy (root), the local connection's shell (``ANSIBLE_EXECUTABLE``) is a two-line ``sh`` that moves itself into
a cpuacct cgroup of the run's nodes before it ``exec``s ``/bin/sh``: everything a node runs for a task (the shell,
the module's Python, the ``&& sleep 0`` Ansible appends, the timing wrapper below) counts as the node's, as over SSH
it runs on the node; the controller is the rest of the ``ansible-playbook`` process tree (``getrusage``): the main
process, its forked workers, the fork of each node command and the controller-side report writing.  Without that
hierarchy (or with ``--no-node-cgroup``) the controller also carries the local shells and the wrapper, about 3.6 ms
a module call here (session 21); each row keeps that figure too (``cpu_controller_with_shells_s``).  What neither
counts is an SSH client's own CPU per task, which a real fleet's controller pays and a local connection does not.
``ansible_python_interpreter`` is a wrapper that runs the real interpreter under bash's ``time`` and appends each
module process's user+sys seconds (to the millisecond) to a log: the modules' own CPU, ``module ms/call``.

``--strategy linear,mitogen_linear`` runs every audit/baseline measurement once per strategy plugin, interleaved at
each N (rows ``audit/linear``, ``audit/mitogen_linear``), and compares each strategy's controller CPU, wall, peak RSS
and report files (time stamps masked) with the first's; ``--venv`` names the venv whose ``ansible-playbook`` runs
them (Mitogen for Ansible is installed in a venv of its own, not in .venv: docs/scale.md, "Mitogen").
``ANSIBLE_STRATEGY`` does not beat a play's ``strategy`` keyword, and playbooks/audit.yml names one (it pins
``linear`` for run_once since c4bcb77): ``--strategy`` changes the baseline's plays, not the audit's, until the
audit's keyword can be set from outside (the Mitogen figures of docs/scale.md were measured before the pin).
``--cgroup-cpu`` also counts each run's CPU in a cpuacct cgroup of its own, which sees processes nobody waited for.

Prints a table and, with ``--json FILE``, the raw measurements.  Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(REPO / ".cache" / "collections"), str(REPO / "tests"), str(BENCH)]

# pylint: disable=wrong-import-position
import yaml  # noqa: E402

PLAYBOOKS = {
    "audit": REPO / "playbooks" / "audit.yml",
    "baseline": BENCH / "fleet" / "baseline_audit.yml",
    # ansible-core's own cost of one module task per host: the least an audit reading each node can cost
    "floor": BENCH / "fleet" / "floor.yml",
    "floor-facts": BENCH / "fleet" / "floor_facts.yml",
}
DEFAULT_CONFIG = REPO / "examples" / "ansible.cfg"
# one line per timed process: "<user> <sys> <elapsed>", seconds to the millisecond (bash's `time`, TIMEFORMAT below;
# earlier runs' logs hold GNU time's centiseconds, read alike)
_CPU_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s*$")
# bash `times`: "0m0.004s 0m0.000s" (the logs of an older wrapper)
_TIMES_LINE = re.compile(r"^\s*(\d+)m(\d+(?:\.\d+)?)s\s+(\d+)m(\d+(?:\.\d+)?)s\s*$")
_RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)"
                    r"\s+rescued=(\d+)\s+ignored=(\d+)")


# -- the simulated fleet ----------------------------------------------------------------------------------------------
def host_name(index: int) -> str:
    """Inventory name of the index-th simulated host."""
    return "node%04d" % index


def render_template(archetype: str, directory: pathlib.Path) -> pathlib.Path:
    """The archetype's power-on tree, rendered once (reused when already there)."""
    import hwsim  # pylint: disable=import-outside-toplevel

    tree = directory / ("tree-" + archetype)
    if not (tree / "sys").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        hwsim.render(archetype, tree)
    return tree


def build_fleet(workdir: pathlib.Path, archetype: str, count: int, roots: str = "assembled") -> list[pathlib.Path]:
    """``count`` host roots under ``workdir/nodes`` (existing ones are reused), one per inventory host.

    ``assembled``: a directory per host with its own ``etc/`` and ``sys``/``proc`` bind mounts of the rendered tree
    (hwsim/bind.py, in this process's private mount namespace: the collection resolves host_root as a chroot, so
    links would not do; tests/unit/plugins/modules/simnode.py builds roots the same way).  ``hardlink``: ``cp -al``
    of the tree per host (every host has its own directory entries).
    """
    import hwsim.bind  # pylint: disable=import-outside-toplevel

    tree = render_template(archetype, workdir)
    nodes = workdir / ("nodes-%s-%s" % (archetype, roots))
    nodes.mkdir(parents=True, exist_ok=True)
    out = []
    pending = []
    for index in range(count):
        root = nodes / host_name(index)
        out.append(root)
        if roots == "assembled":
            (root / "etc").mkdir(parents=True, exist_ok=True)
            for name in ("sys", "proc"):
                if (root / name).is_symlink():  # a root assembled by an older bench: links no longer do
                    (root / name).unlink()
                if not hwsim.bind.is_mount(root / name):
                    hwsim.bind.bind(tree / name, root / name)
            continue
        if (root / "sys").exists():
            continue
        if roots == "hardlink":
            pending.append(root)
        else:
            raise ValueError("roots must be assembled or hardlink, got %r" % (roots,))
    # cp -al in two parallel streams (one per core); a copy is a few thousand link() and mkdir() calls
    procs = []
    for chunk in (pending[0::2], pending[1::2]):
        if chunk:
            script = "".join('cp -al "%s" "%s" && ' % (tree, root) for root in chunk) + "true"
            procs.append(subprocess.Popen(["/bin/sh", "-c", script]))  # pylint: disable=consider-using-with
    for proc in procs:
        if proc.wait() != 0:
            raise RuntimeError("cp -al failed")
    return out


# Variables of the controller's environment that a node's Python, reached over SSH, does not get, and that change
# what the module process costs.  PYTHONUNBUFFERED (set by many CI and container images, this machine's included)
# makes CPython read a script from stdin one byte per read(2): with pipelining a module's ~270 KB AnsiballZ
# text becomes ~270,000 system calls, 0.08-0.14 s of kernel CPU per module process (measured with strace here).
NODE_ENV_UNSET = ("PYTHONUNBUFFERED",)


def timed_wrapper(command: str, log: pathlib.Path, prelude: str = "") -> str:
    """A bash script that runs ``command`` with its arguments and appends its user/sys/elapsed seconds to ``log``.

    bash's ``time`` prints them to the millisecond (the process's rusage, plus the fork bash makes for it, a fraction
    of a millisecond).  GNU time, used before session 20, prints centiseconds cut short: about 9 ms of every module
    process's CPU went missing (93.3 against 102.1 ms a call for the same 40 processes measured both ways), and
    the fleet benchmark counted it as the controller's.  The command's stdin, stdout, stderr and exit status pass
    through (``time`` writes to file descriptor 2 of the group, sent to the log; the command gets the caller's
    stderr back as 2).
    """
    return ('#!/bin/bash\n%sTIMEFORMAT="%%3U %%3S %%3R"\n{ time "%s" "$@" 2>&3 3>&-; } 3>&2 2>>"%s"\n'
            % (prelude, command, log))


def write_timed_interpreter(path: pathlib.Path, log: pathlib.Path, python: str = sys.executable) -> pathlib.Path:
    """An ``ansible_python_interpreter`` that runs ``python`` and appends its user/sys/elapsed seconds to ``log``.

    It stands for the node's own Python, so the local connection's inherited ``NODE_ENV_UNSET`` is dropped first.
    """
    path.write_text(timed_wrapper(python, log, "unset %s\n" % " ".join(NODE_ENV_UNSET)), encoding="utf-8")
    path.chmod(0o755)
    return path


def host_interpreters(interpreter: pathlib.Path, count: int) -> list[pathlib.Path]:
    """A path of its own to ``interpreter`` for each of ``count`` hosts (symbolic links beside it, in
    ``<interpreter>.hosts/``).  Mitogen keys a local connection's interpreter by its path alone, so hosts sharing one
    path would share one Python process and run their modules one after the other in it; over SSH each host has its
    own.  Ansible's own strategies run the same programme whatever the path."""
    directory = interpreter.parent / (interpreter.name + ".hosts")
    directory.mkdir(exist_ok=True)
    out = []
    for index in range(count):
        link = directory / host_name(index)
        if not link.is_symlink():
            link.symlink_to(interpreter)
        out.append(link)
    return out


def parse_module_cpu(text: str) -> dict:
    """``{"calls", "user", "sys", "cpu", "elapsed"}`` from a timed interpreter's log (both line formats)."""
    calls = 0
    user = system = elapsed = 0.0
    for line in text.splitlines():
        match = _CPU_LINE.match(line)
        if match:
            calls += 1
            user += float(match.group(1))
            system += float(match.group(2))
            elapsed += float(match.group(3))
            continue
        match = _TIMES_LINE.match(line)
        if match:
            calls += 1
            user += int(match.group(1)) * 60 + float(match.group(2))
            system += int(match.group(3)) * 60 + float(match.group(4))
        # anything else ("Command exited with non-zero status 1") belongs to the next line's process
    return {"calls": calls, "user": round(user, 3), "sys": round(system, 3), "cpu": round(user + system, 3),
            "elapsed": round(elapsed, 3)}


def parse_recap(text: str) -> dict:
    """``{host: {ok, changed, unreachable, failed, skipped, rescued, ignored}}`` from a PLAY RECAP."""
    keys = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
    out = {}
    for line in text.splitlines():
        match = _RECAP.match(line)
        if match:
            out[match.group(1)] = dict(zip(keys, (int(g) for g in match.groups()[1:])))
    return out


def write_inventory(path: pathlib.Path, roots: list[pathlib.Path], interpreter: pathlib.Path,
                    extra_vars: dict | None = None, interpreters: list[pathlib.Path] | None = None,
                    ssh: dict | None = None) -> pathlib.Path:
    """Inventory of one host per root, in group ``fleet``; connection and interpreter are the group's (not
    ``all``'s, so the implicit localhost that writes the reports keeps the controller's own Python), or with
    ``interpreters`` each host's own (``host_interpreters``).  With ``ssh`` (``ssh_target``) every host is reached
    over SSH at that address, each with an SSH master connection of its own (``ansible_control_path``), as the
    hosts of a fleet are."""
    hosts = dict((host_name(i), {"rdma_audit_host_root": str(root)}) for i, root in enumerate(roots))
    for index, own in enumerate(interpreters or ()):
        hosts[host_name(index)]["ansible_python_interpreter"] = str(own)
    group_vars = {"ansible_connection": "local", "ansible_python_interpreter": str(interpreter)}
    if ssh:
        group_vars.update(ansible_connection="ssh", ansible_host=ssh["host"], ansible_port=ssh["port"],
                          ansible_user=ssh["user"])
        if ssh.get("key"):
            group_vars["ansible_ssh_private_key_file"] = ssh["key"]
        for name, host in hosts.items():
            host["ansible_control_path"] = str(path.parent / "cp" / name)
        (path.parent / "cp").mkdir(exist_ok=True)
    group_vars.update(extra_vars or {})
    inventory = {"all": {"children": {"fleet": {"hosts": hosts, "vars": group_vars}}}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")
    return path


# -- running ansible-playbook -----------------------------------------------------------------------------------------
def ansible_env(workdir: pathlib.Path, config: pathlib.Path | None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-local"),
        "ANSIBLE_REMOTE_TMP": str(workdir / "ansible-remote"),
        "ANSIBLE_HOME": str(workdir / "ansible-home"),
    })
    env.pop("ANSIBLE_CONFIG", None)
    if config is not None:
        env["ANSIBLE_CONFIG"] = str(config)
    else:  # Ansible's defaults: make sure no ./ansible.cfg is picked up
        env["ANSIBLE_CONFIG"] = str(workdir / "empty-ansible.cfg")
        (workdir / "empty-ansible.cfg").write_text("[defaults]\n", encoding="utf-8")
    env.update(extra or {})
    return env


# -- strategies -------------------------------------------------------------------------------------------------------
DEFAULT_VENV = REPO / ".venv"
REPORT_FILES = ("report.json", "report.md", "report.html", "junit.xml")
# the report's `generated` time stamp (one per file but junit.xml), masked before files of two runs are compared
_GENERATED = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def strategy_env(strategy: str | None, plugin_dir: str | None = None) -> dict:
    """The environment that makes ansible-playbook run ``strategy``: nothing for ``None`` (the config's strategy,
    ansible-core's ``linear`` unless the config names another), ``ANSIBLE_STRATEGY`` for a strategy ansible-core
    ships, and for a Mitogen one (``mitogen_linear``, ``mitogen_free``, ...) also ``ANSIBLE_STRATEGY_PLUGINS``:
    ``plugin_dir``, the ``ansible_mitogen/plugins/strategy`` directory of the venv that runs ansible-playbook."""
    if strategy is None:
        return {}
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", strategy):
        raise ValueError("strategy must be a plugin name such as linear or mitogen_linear, got %r" % (strategy,))
    env = {"ANSIBLE_STRATEGY": strategy}
    if strategy.startswith("mitogen"):
        if not plugin_dir:
            raise ValueError("strategy %s needs the ansible_mitogen/plugins/strategy directory (mitogen is not "
                             "importable by the venv that runs ansible-playbook: see --venv)" % strategy)
        env["ANSIBLE_STRATEGY_PLUGINS"] = str(plugin_dir)
    return env


def mitogen_strategy_dir(python: str) -> str | None:
    """``ansible_mitogen/plugins/strategy`` as ``python`` (the interpreter of the venv that runs ansible-playbook)
    imports it, or None when that interpreter has no ansible_mitogen."""
    code = ("import os, ansible_mitogen; "
            "print(os.path.join(os.path.dirname(ansible_mitogen.__file__), 'plugins', 'strategy'))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    path = done.stdout.strip()
    if done.returncode != 0 or not os.path.isfile(os.path.join(path, "mitogen_linear.py")):
        return None
    return path


def venv_versions(python: str) -> dict:
    """``{"ansible-core": ..., "mitogen": ...}`` installed for ``python`` (None for what is not installed)."""
    code = ("import json, importlib.metadata as m\n"
            "def v(name):\n"
            "    try:\n        return m.version(name)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            "print(json.dumps({'ansible-core': v('ansible-core'), 'mitogen': v('mitogen')}))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def ssh_target(text: str, key: str | None = None) -> dict:
    """``{"user", "host", "port", "key"}`` of ``--ssh USER@HOST:PORT`` (ValueError when it is not that)."""
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)@([A-Za-z0-9_.:-]+?):([0-9]{1,5})", text or "")
    if not match or not 0 < int(match.group(3)) < 65536:
        raise ValueError("expected USER@HOST:PORT, got %r" % (text,))
    return {"user": match.group(1), "host": match.group(2), "port": int(match.group(3)), "key": key}


# the SSH client's options for a --ssh run: examples/ansible.cfg's multiplexing, with masters that outlive their
# last task by seconds (the run's cgroup waits for them), and a throwaway sshd's key not recorded anywhere
SSH_MUX = "-o ControlMaster=auto -o ControlPersist=3s"
SSH_ARGS = "-o PreferredAuthentications=publickey -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null " \
    "-o LogLevel=ERROR"


def run_name(kind: str, revision: str | None = None, strategy: str | None = None) -> str:
    """A row's name: ``audit``, ``audit@REV``, ``audit/mitogen_linear``, ``audit@REV/mitogen_linear``."""
    return kind + ("@" + revision if revision else "") + ("/" + strategy if strategy else "")


def file_name(name: str) -> str:
    """A row's name as a file or directory name (``audit@abc/mitogen_linear`` -> ``audit-abc-mitogen_linear``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def masked_report(text: str) -> str:
    """A report file's text with its `generated` time stamps masked: what two runs of the same hosts must share."""
    return _GENERATED.sub("GENERATED", text)


def report_digests(directory: pathlib.Path) -> dict:
    """sha256 of each report file in ``directory`` with its time stamps masked (None for a file not written)."""
    import hashlib  # pylint: disable=import-outside-toplevel

    out = {}
    for name in REPORT_FILES:
        path = directory / name
        out[name] = (hashlib.sha256(masked_report(path.read_text(encoding="utf-8")).encode("utf-8")).hexdigest()
                     if path.exists() else None)
    return out


def versus_strategy(rows: list[dict]) -> list[str]:
    """For each N and run kind, each strategy's row against the first strategy's (the order of ``--strategy``):
    controller CPU, wall, peak RSS, and whether the report files are the same (time stamps masked)."""
    lines = []
    firsts = {}
    for row in rows:
        if row.get("strategy") is None:
            continue
        key = (row["name"].rsplit("/", 1)[0], row["hosts"])
        first = firsts.setdefault(key, row)
        if first is row:
            continue
        ours, theirs = row.get("report_digests") or {}, first.get("report_digests") or {}
        written = [n for n in REPORT_FILES if ours.get(n) or theirs.get(n)]
        differ = [n for n in written if ours.get(n) != theirs.get(n)]
        reports = ("no report files" if not written else
                   "report files differ: %s" % ", ".join(differ) if differ else
                   "%s identical (time stamps masked)" % ", ".join(written))
        lines.append("N = %d, %s / %s: controller CPU per host %.1f / %.1f ms = %.2fx, wall %.2fx, "
                     "peak RSS %.0f / %.0f MB = %.2fx; %s" % (
                         row["hosts"], row["name"], first["name"], row["controller_ms_per_host"],
                         first["controller_ms_per_host"],
                         row["cpu_controller_s"] / first["cpu_controller_s"] if first["cpu_controller_s"] else 0,
                         row["wall_s"] / first["wall_s"] if first["wall_s"] else 0,
                         row["peak_rss_mb"], first["peak_rss_mb"],
                         row["peak_rss_mb"] / first["peak_rss_mb"] if first["peak_rss_mb"] else 0, reports))
    return lines


CPUACCT = pathlib.Path("/sys/fs/cgroup/cpuacct")


def cgroup_cpu_unavailable(root: pathlib.Path = CPUACCT) -> str | None:
    """Why a run cannot be given a cpuacct cgroup of its own (cgroup v1) here, or None when it can."""
    if not (root / "cpuacct.usage").exists():
        return "no cgroup v1 cpuacct hierarchy at %s" % root
    if not os.access(root, os.W_OK):
        return "%s is not writable (root needed)" % root
    return None


class CpuCgroup:
    """A cpuacct cgroup (v1) of its own for one run: its usage counts every process the run started, including
    those nobody in the run's tree waited for (a process whose parent exits without reaping it is reparented
    outside the tree, and wait4's resource usage never sees its CPU)."""

    def __init__(self, name: str, root: pathlib.Path = CPUACCT):
        self.path = root / ("%s-%d-%s" % ("rdma-bench", os.getpid(), file_name(name)))
        self.path.mkdir()

    def join(self) -> None:
        """Move the calling process into the group (``preexec_fn``: the child, before it execs)."""
        (self.path / "cgroup.procs").write_text("%d\n" % os.getpid(), encoding="ascii")

    def procs(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text(encoding="ascii").split()]

    def finish(self, settle: float = 10.0) -> tuple[float, int]:
        """``(CPU seconds, processes left)`` once the group is empty or ``settle`` seconds have passed; the group
        is removed when empty."""
        deadline = time.monotonic() + settle
        while self.procs() and time.monotonic() < deadline:
            time.sleep(0.1)
        usage = int((self.path / "cpuacct.usage").read_text(encoding="ascii")) / 1e9
        left = len(self.procs())
        if not left:
            self.path.rmdir()
        return usage, left


def node_shell(path: pathlib.Path, group: CpuCgroup) -> pathlib.Path:
    """An ``ANSIBLE_EXECUTABLE`` that moves itself into ``group`` and becomes ``/bin/sh``: the local connection's
    command for a node, and everything it starts, counts as that group's CPU (only the fork and this script's
    ``sh`` start before the ``echo`` stay with the caller)."""
    path.write_text('#!/bin/sh\necho $$ > "%s/cgroup.procs" || exit 125\nexec /bin/sh "$@"\n' % group.path,
                    encoding="utf-8")
    path.chmod(0o755)
    return path


def node_side(row: dict, cpu: float) -> dict:
    """Count ``cpu`` seconds (the node cgroup's) as the nodes' instead of the controller's in ``row``; the former
    split (the tree minus the timed module processes) stays as ``cpu_controller_with_shells_s`` and its ms/host."""
    row["cpu_node_side_s"] = round(cpu, 3)
    row["cpu_controller_with_shells_s"] = row["cpu_controller_s"]
    row["controller_with_shells_ms_per_host"] = row["controller_ms_per_host"]
    controller = max(row["cpu_total_s"] - cpu, 0.0)
    row["cpu_controller_s"] = round(controller, 3)
    row["controller_ms_per_host"] = ms_per_host(controller, row["hosts"])
    return row


def over_ssh(row: dict) -> dict:
    """A run over SSH: the nodes' commands ran under sshd, outside the run's process tree and cgroup, so the
    controller is all the cgroup counted (ansible-playbook, each task's ssh client and the master connections,
    which leave the tree when they daemonise); ``cpu_total_s`` (wait4) never held the modules."""
    controller = row["cpu_total_cgroup_s"]
    row.update(cpu_controller_s=round(controller, 3), cpu_total_s=round(controller + row["cpu_modules_s"], 3),
               over_ssh=True,
               controller_ms_per_host=ms_per_host(controller, row["hosts"]))
    return row


def run_playbook(name: str, argv: list[str], env: dict, log_dir: pathlib.Path, cpu_log: pathlib.Path,
                 hosts: int, cgroup: bool = False) -> dict:
    """Run one ansible-playbook; wall time, the CPU of its whole process tree, module CPU, the recap; with
    ``cgroup``, also the CPU of every process it started as a cpuacct cgroup counts it (``cpu_total_cgroup_s``,
    ``cgroup_procs_left``: processes still running 10 s after it exited)."""
    if cpu_log.exists():
        cpu_log.unlink()
    cpu_log.touch()
    log = log_dir / ("%s.log" % file_name(name))
    group = CpuCgroup(name) if cgroup else None
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        # pylint: disable-next=consider-using-with,subprocess-popen-preexec-fn
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(log_dir),
                                preexec_fn=group.join if group else None)
        # wait4: this run's own CPU (its whole process tree) and the peak RSS of its largest process (the
        # ansible-playbook main process, which holds every host's results), not the maximum of earlier runs
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    total = usage.ru_utime + usage.ru_stime
    text = log.read_text(encoding="utf-8", errors="replace")
    group_cpu = group.finish() if group else None
    row = measurement(name, hosts, wall, total, parse_module_cpu(cpu_log.read_text(encoding="utf-8")),
                      parse_recap(text), proc.returncode, str(log))
    row["peak_rss_mb"] = round(usage.ru_maxrss / 1024.0, 1)  # KiB on Linux
    if group_cpu:
        row["cpu_total_cgroup_s"], row["cgroup_procs_left"] = round(group_cpu[0], 3), group_cpu[1]
    return row


def ms_per_host(seconds: float, hosts: int) -> float | None:
    """``seconds`` of CPU as milliseconds a host (one decimal), None for no hosts."""
    return round(1000.0 * seconds / hosts, 1) if hosts else None


def measurement(name: str, hosts: int, wall: float, total_cpu: float, modules: dict, recap: dict, rc: int,
                log: str = None) -> dict:
    """One row: wall, total/module/controller CPU, per-host figures, module round trips per host."""
    controller = max(total_cpu - modules["cpu"], 0.0)
    return {
        "name": name, "hosts": hosts, "rc": rc, "log": log,
        "wall_s": round(wall, 3), "cpu_total_s": round(total_cpu, 3), "cpu_modules_s": modules["cpu"],
        "cpu_controller_s": round(controller, 3), "module_calls": modules["calls"],
        "module_wall_s": modules["elapsed"],
        "controller_ms_per_host": ms_per_host(controller, hosts),
        "module_ms_per_call": round(1000.0 * modules["cpu"] / modules["calls"], 1) if modules["calls"] else None,
        "module_calls_per_host": round(modules["calls"] / float(hosts), 2) if hosts else None,
        "changed": sum(h["changed"] for h in recap.values()),
        "failed": sum(h["failed"] + h["unreachable"] for h in recap.values()),
        "recap_hosts": len(recap),
    }


def node_python() -> str:
    """The simulated nodes' Python: the machine's own ``/usr/bin/python3`` when it has one, as a real node runs
    modules with its system Python (the collection's modules need only the standard library), else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def fleet_run(kind: str, workdir: pathlib.Path, roots: list[pathlib.Path], config: pathlib.Path | None,
              forks: int | None, python: str = sys.executable, tree: pathlib.Path | None = None,
              label: str | None = None, strategy: str | None = None, strategy_plugins: str | None = None,
              venv: pathlib.Path = DEFAULT_VENV, cgroup: bool = False, node_cgroup: bool = False,
              ssh: dict | None = None) -> dict:
    """One audit or baseline run on the first ``len(roots)`` hosts, the modules run by ``python``; with ``tree`` (a
    directory holding ``ansible_collections/rdma/k8s_node``, e.g. another revision) that tree's audit playbook and
    collection instead of the work tree's; with ``strategy`` that strategy plugin (``strategy_env``) instead of the
    config's, each host with an interpreter path of its own (``host_interpreters``); ansible-playbook from
    ``venv``; with ``cgroup`` the run's CPU also as a cpuacct cgroup counts it (``run_playbook``); with
    ``node_cgroup`` the nodes' commands count as the nodes' (``node_shell``, ``node_side``); with ``ssh``
    (``ssh_target``) over SSH instead of the local connection: the controller is then everything the run's
    cpuacct cgroup counts (ansible-playbook, the SSH clients and their master connections), the nodes are sshd's."""
    count = len(roots)
    name = label or kind
    run_dir = workdir / "runs" / ("%s-%d" % (file_name(name), count))
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cpu_log = run_dir / "module-cpu.log"
    interpreter = write_timed_interpreter(run_dir / "python-timed", cpu_log, python)
    # a Python process per host under Mitogen too, as over SSH; every row of a --strategy comparison alike
    own = host_interpreters(interpreter, count) if strategy else None
    inventory = write_inventory(run_dir / "inventory.yml", roots, interpreter, interpreters=own, ssh=ssh)
    playbook = PLAYBOOKS[kind]
    env = ansible_env(workdir, config, strategy_env(strategy, strategy_plugins))
    if ssh:
        env.update(ANSIBLE_SSH_ARGS=" ".join(filter(None, (SSH_MUX if ssh.get("mux", True) else "", SSH_ARGS,
                                                           ssh.get("args")))),
                   ANSIBLE_HOST_KEY_CHECKING="False")
        cgroup, node_cgroup = True, False
    if tree is not None:
        playbook = tree / "ansible_collections" / "rdma" / "k8s_node" / "playbooks" / (playbook.name)
        env["ANSIBLE_COLLECTIONS_PATH"] = "%s:%s" % (tree, env["ANSIBLE_COLLECTIONS_PATH"])
    argv = [str(venv / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook),
            "-e", "rdma_k8s_node_targets=fleet", "-e", "ansible_become=false",
            "-e", "rdma_audit_dir=%s" % (run_dir / "report"), "-e", "bl_report_dir=%s" % (run_dir / "report")]
    if forks:
        argv += ["--forks", str(forks)]
    nodes = CpuCgroup("nodes-" + name) if node_cgroup else None
    if nodes:
        env["ANSIBLE_EXECUTABLE"] = str(node_shell(run_dir / "node-sh", nodes))
    try:
        result = run_playbook(name, argv, env, run_dir, cpu_log, count, cgroup)
    finally:
        node_cpu = nodes.finish() if nodes else None
    if node_cpu:
        node_side(result, node_cpu[0])
    if ssh:
        over_ssh(result)
    result["strategy"] = strategy
    result["findings_per_host"] = findings_per_host(kind, run_dir / "report" / "report.json")
    result["report_digests"] = report_digests(run_dir / "report")
    return result


def findings_per_host(kind: str, report: pathlib.Path) -> float | None:
    """Non-ok checks per host in the run's report (the audit and the baseline must find the same drift)."""
    if not report.exists():
        return None
    data = json.loads(report.read_text(encoding="utf-8"))
    if kind.startswith("audit"):
        hosts = data["hosts"].values()
        return sum(sum(v for k, v in h["counts"].items() if k != "ok") for h in hosts) / float(len(hosts) or 1)
    return sum(len(v) for v in data.values()) / float(len(data) or 1)


# -- converge of a provisioned node -----------------------------------------------------------------------------------
CONVERGE_PLAYBOOK = BENCH / "fleet" / "converge.yml"
GRUB_DEFAULTS = 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR=Debian\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'
# update-grub in miniature, for the chroot the collection runs it in: source the defaults as grub-mkconfig does and
# write the kernel lines of the normal and the recovery entry (shell builtins only: the root has nothing but sh)
FAKE_UPDATE_GRUB = r"""#!/bin/sh
# stops on the first error, as grub-mkconfig does (set -e): a grub.cfg it cannot write fails the run
set -e
. /etc/default/grub
for f in /etc/default/grub.d/*.cfg; do if [ -e "$f" ]; then . "$f"; fi; done
{
  printf "menuentry 'Debian GNU/Linux' {\n\tlinux\t/boot/vmlinuz root=UUID=abcd ro %s %s\n}\n" \
    "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"
  printf "menuentry 'Debian GNU/Linux (recovery mode)' {\n\tlinux\t/boot/vmlinuz root=UUID=abcd ro single %s\n}\n" \
    "$GRUB_CMDLINE_LINUX"
} > /boot/grub/grub.cfg
echo "Generating grub configuration file ... done"
"""


def install_boot_tools(root: pathlib.Path) -> None:
    """``/bin/sh`` (this machine's, with the libraries it loads) and a stand-in ``update-grub`` inside ``root``:
    kernel_cmdline runs update-grub through ``chroot <host_root>`` when the GRUB files changed."""
    shell = os.path.realpath("/bin/sh")
    ldd = subprocess.run(["ldd", shell], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"(/\S+\.so[.\d]*)", ldd)
    for source, target in [(shell, "/bin/sh")] + [(lib, lib) for lib in libs]:
        dest = root / target.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(source), dest)
    (root / "usr" / "sbin").mkdir(parents=True, exist_ok=True)
    (root / "usr" / "sbin" / "update-grub").write_text(FAKE_UPDATE_GRUB, encoding="utf-8")
    (root / "usr" / "sbin" / "update-grub").chmod(0o755)
    (root / "boot" / "grub").mkdir(parents=True, exist_ok=True)


def converge_run(workdir: pathlib.Path, archetype: str, config: pathlib.Path | None, vfs: int,
                 python: str = sys.executable) -> dict:
    """Provision one FUSE-simulated node, then time the second (no-op) run of the same playbook (modules run by
    ``python``)."""
    import hwsim  # pylint: disable=import-outside-toplevel
    import hwsim.bind  # pylint: disable=import-outside-toplevel

    reason = hwsim.fuse_available()
    if reason:
        return {"name": "converge", "skipped": "FUSE unavailable: %s" % reason}
    run_dir = workdir / "runs" / "converge"
    shutil.rmtree(run_dir, ignore_errors=True)
    root = run_dir / "root"
    # etc/ is a real directory inside the root: update-grub runs chrooted there (the simulator reads it too)
    etc = root / "etc"
    for sub in ("default/grub.d", "modprobe.d", "modules-load.d", "sysctl.d"):
        (etc / sub).mkdir(parents=True)
    (etc / "default" / "grub").write_text(GRUB_DEFAULTS, encoding="utf-8")
    # the sysctl shim writes all/default to the real kernel too: a recorder stands in, this machine is never touched
    recorder = run_dir / "real-sysctl"
    recorder.write_text('#!/bin/sh\necho "$*" >> "%s"\n' % (run_dir / "real-sysctl.log"), encoding="utf-8")
    recorder.chmod(0o755)
    mnt = run_dir / "mnt"
    mnt.mkdir()
    cpu_log = run_dir / "module-cpu.log"
    interpreter = write_timed_interpreter(run_dir / "python-timed", cpu_log, python)
    shim_log = run_dir / "shim-cpu.log"
    shims = timed_shims(run_dir / "shims", shim_log)
    env = ansible_env(workdir, config, {"PATH": "%s:%s" % (shims, os.environ.get("PATH", "")),
                                        "HWSIM_ROOT": str(mnt), "HWSIM_REAL_SYSCTL": str(recorder)})
    with hwsim.mounted(archetype, mnt, etc=etc, threads=False) as mount, \
            hwsim.bind.Assembled(root, {"sys": mnt / "sys", "proc": mnt / "proc"}):
        install_boot_tools(root)
        pfs = sriov_pfs(root, vfs)
        inventory = write_inventory(run_dir / "inventory.yml", [root], interpreter, {
            "rdma_kernel_host_root": str(root),
            "rdma_netns_host_root": str(root), "rdma_sysctl_host_root": str(root),
            "sriov_host_root": str(root), "sriov_boot_unit": False, "sriov_pfs": pfs,
            # no container runtime or kubelet on a simulated node: provision.yml's opt-out for unjoined nodes
            "rdma_k8s_node_containerd": False, "rdma_k8s_node_kubelet": False,
        })
        argv = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(CONVERGE_PLAYBOOK),
                "-e", "rdma_k8s_node_targets=fleet", "-e", "ansible_become=false"]
        first = run_playbook("converge-first", argv, env, run_dir, cpu_log, 1)
        sim_before = process_cpu(mount.pid)
        shim_log.write_text("", encoding="utf-8")
        second = run_playbook("converge-noop", argv, env, run_dir, cpu_log, 1)
        # the simulator daemon (FUSE sysfs/procfs: the kernel's share of the work) is no child of ansible-playbook
        second["cpu_simulator_s"] = round(process_cpu(mount.pid) - sim_before, 3)
        # the command shims (Python stand-ins for ip, rdma, devlink ...) ran as children of the modules
        shim = parse_module_cpu(shim_log.read_text(encoding="utf-8"))
        second["cpu_shims_s"], second["shim_calls"] = shim["cpu"], shim["calls"]
        second["cpu_modules_own_s"] = round(max(second["cpu_modules_s"] - shim["cpu"], 0.0), 3)
    second["first_run"] = {k: first[k] for k in ("wall_s", "changed", "failed", "rc", "module_calls")}
    second["sriov_pfs"] = len(pfs)
    return second


def timed_shims(directory: pathlib.Path, log: pathlib.Path) -> pathlib.Path:
    """tests/hwsim/shims, each timed (``timed_wrapper``) into ``log`` (their CPU is the simulation's, not ours)."""
    directory.mkdir(parents=True, exist_ok=True)
    source = REPO / "tests" / "hwsim" / "shims"
    for shim in sorted(source.iterdir()):
        if not os.access(shim, os.X_OK):
            continue
        wrapper = directory / shim.name
        wrapper.write_text(timed_wrapper(str(shim), log), encoding="utf-8")
        wrapper.chmod(0o755)
    return directory if any(directory.iterdir()) else source


def process_cpu(pid: int) -> float:
    """user+sys seconds of a running process (and its waited-for children) from /proc/PID/stat."""
    fields = pathlib.Path("/proc/%d/stat" % pid).read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / float(os.sysconf("SC_CLK_TCK"))


def sriov_pfs(root: pathlib.Path, vfs: int) -> list[dict]:
    """``sriov_pfs`` for every InfiniBand SR-IOV PF of the node (``vfs`` VFs each, capped at sriov_totalvfs)."""
    out = []
    for ibdev in sorted(os.listdir(root / "sys" / "class" / "infiniband")):
        device = root / "sys" / "class" / "infiniband" / ibdev / "device"
        total = device / "sriov_totalvfs"
        layer = root / "sys" / "class" / "infiniband" / ibdev / "ports" / "1" / "link_layer"
        if not total.exists() or layer.read_text(encoding="utf-8").strip() != "InfiniBand":
            continue
        count = min(vfs, int(total.read_text(encoding="utf-8")))
        if count:
            out.append({"rdma_device": ibdev, "num_vfs": count})
    return out


# -- rdma_facts alone -------------------------------------------------------------------------------------------------
def facts_run(workdir: pathlib.Path, archetype: str, vfs: int, repeat: int, config: pathlib.Path | None,
              python: str = sys.executable) -> dict:
    """rdma_facts on the archetype with ``vfs`` VFs per SR-IOV PF: in-process collection, and the module process
    through ansible (one local host, the timed interpreter: the whole round trip)."""
    import statistics  # pylint: disable=import-outside-toplevel

    import bench_rdma_facts  # pylint: disable=import-outside-toplevel

    run_dir = workdir / "runs" / "facts"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    tree = run_dir / "node"
    made = bench_rdma_facts.render_with_vfs(archetype, vfs, str(tree))
    in_process = bench_rdma_facts.timed(lambda: bench_rdma_facts.module_facts(str(tree)), repeat)
    facts = bench_rdma_facts.module_facts(str(tree))
    cpu_log = run_dir / "module-cpu.log"
    interpreter = write_timed_interpreter(run_dir / "python-timed", cpu_log, python)
    inventory = write_inventory(run_dir / "inventory.yml", [tree], interpreter)
    argv = [str(REPO / ".venv" / "bin" / "ansible"), "-i", str(inventory), "fleet", "-m", "rdma.k8s_node.rdma_facts",
            "-a", "host_root=%s" % tree]
    env = ansible_env(workdir, config)
    rounds = []
    for _run in range(max(3, repeat // 4)):
        rounds.append(run_playbook("facts-adhoc", argv, env, run_dir, cpu_log, 1))
    return {
        "name": "facts", "archetype": archetype, "vfs": made["vfs"],
        "rdma_devices": len(facts["devices"]), "gpus": len(facts["gpus"]),
        "in_process_ms_median": round(statistics.median(in_process), 1),
        "in_process_ms_min": round(min(in_process), 1),
        "module_process_wall_ms_median": round(1000 * statistics.median(r["module_wall_s"] for r in rounds), 1),
        "module_process_cpu_ms_median": round(1000 * statistics.median(r["cpu_modules_s"] for r in rounds), 1),
        "adhoc_wall_s_median": round(statistics.median(r["wall_s"] for r in rounds), 3),
        "rounds": rounds,
    }


# -- reporting --------------------------------------------------------------------------------------------------------
def ratios(rows: list[dict]) -> None:
    """Add each audit row's ratios against the baseline row of the same N (when there is one)."""
    base = dict(((r["hosts"], r.get("strategy")), r) for r in rows
                if r["name"] == run_name("baseline", strategy=r.get("strategy")))
    for row in rows:
        ref = base.get((row["hosts"], row.get("strategy")))
        if not row["name"].startswith("audit") or ref is None:
            continue
        row["vs_baseline"] = {
            "controller_cpu_x": _ratio(ref["cpu_controller_s"], row["cpu_controller_s"]),
            "total_cpu_x": _ratio(ref["cpu_total_s"], row["cpu_total_s"]),
            "wall_x": _ratio(ref["wall_s"], row["wall_s"]),
            "module_calls_x": _ratio(ref["module_calls"], row["module_calls"]),
        }


def versus_ssh(rows: list[dict]) -> list[str]:
    """Lines comparing each audit-ssh row (``--ssh``) with the local connection's audit row of the same N."""
    lines = []
    for row in rows:
        if not row.get("over_ssh"):
            continue
        for local in rows:
            if (local["name"] == run_name("audit", strategy=row.get("strategy")) and local["hosts"] == row["hosts"]
                    and local.get("controller_ms_per_host")):
                lines.append("N = %d, over SSH / local connection: controller CPU per host %.1f / %.1f ms = %.2fx "
                             "(the SSH clients and master connections: %.1f ms a host), wall %.2fx" % (
                                 row["hosts"], row["controller_ms_per_host"], local["controller_ms_per_host"],
                                 row["controller_ms_per_host"] / local["controller_ms_per_host"],
                                 row["controller_ms_per_host"] - local["controller_ms_per_host"],
                                 row["wall_s"] / local["wall_s"] if local["wall_s"] else 0))
    return lines


def versus_floor(rows: list[dict]) -> list[str]:
    """Lines splitting each audit row's controller CPU per host (``--only floor,audit``) into ansible-core's floor
    (one module task per host: ``floor``, ping; ``floor-facts``, rdma_facts as a plain task) and the rest."""
    lines = []
    by_name = dict(((r["name"], r["hosts"]), r) for r in rows)  # a row's name holds its strategy (run_name)
    for row in rows:
        # the floors run over the local connection: an audit over SSH would count SSH's cost as the collection's
        if not row["name"].startswith("audit") or row.get("over_ssh") or not row.get("controller_ms_per_host"):
            continue
        ping = by_name.get((run_name("floor", strategy=row.get("strategy")), row["hosts"]))
        facts = by_name.get((run_name("floor-facts", strategy=row.get("strategy")), row["hosts"]))
        if not ping or not facts:
            continue
        ours = row["controller_ms_per_host"]
        lines.append("N = %d, %s: controller CPU per host %.1f ms = ansible-core's floor %.1f (one ping task) + the "
                     "facts module and its result %.1f (one rdma_facts task: %.1f) + the collection's own %.1f "
                     "(the gather action, the comparison, the report); floor / %s = %.2f" % (
                         row["hosts"], row["name"], ours, ping["controller_ms_per_host"],
                         facts["controller_ms_per_host"] - ping["controller_ms_per_host"],
                         facts["controller_ms_per_host"], ours - facts["controller_ms_per_host"], row["name"],
                         facts["controller_ms_per_host"] / ours))
    return lines


def versus_revision(rows: list[dict]) -> list[str]:
    """Lines comparing each audit row with the audit@REV row of the same N (``--compare``): ours / theirs."""
    lines = []
    for row in rows:
        if row["name"] != run_name("audit", strategy=row.get("strategy")):
            continue
        for other in rows:
            if (other["name"].startswith("audit@") and other["hosts"] == row["hosts"]
                    and other.get("strategy") == row.get("strategy")):
                lines.append("N = %d, work tree / %s: controller CPU per host %.1f / %.1f ms = %.2fx, wall %.2fx, "
                             "peak RSS %.0f / %.0f MB = %.2fx" % (
                                 row["hosts"], other["name"][len("audit@"):], row["controller_ms_per_host"],
                                 other["controller_ms_per_host"],
                                 row["cpu_controller_s"] / other["cpu_controller_s"] if other["cpu_controller_s"] else 0,
                                 row["wall_s"] / other["wall_s"] if other["wall_s"] else 0,
                                 row["peak_rss_mb"], other["peak_rss_mb"],
                                 row["peak_rss_mb"] / other["peak_rss_mb"] if other["peak_rss_mb"] else 0))
    return lines


def node_note(row: dict) -> str:
    """The nodes' commands' CPU beside the modules' own, and the controller as counted before session 21."""
    if row.get("cpu_node_side_s") is None:
        return ""
    return "  node commands %.1f s (controller with them %.1f ms/host)" % (
        row["cpu_node_side_s"], row["controller_with_shells_ms_per_host"] or 0)


def cgroup_note(row: dict) -> str:
    """The cgroup's count of a run's CPU beside wait4's (``--cgroup-cpu``), and its controller ms/host from it."""
    if row.get("cpu_total_cgroup_s") is None or row.get("over_ssh"):
        return ""
    # the nodes' commands left the run's group for the nodes' own (node_shell): what stayed is the controller's
    controller = row["cpu_total_cgroup_s"] if row.get("cpu_node_side_s") is not None else max(
        row["cpu_total_cgroup_s"] - row["cpu_modules_s"], 0.0)
    return "  cgroup CPU %.1f s (wait4 %.1f s; controller %.1f ms/host)%s" % (
        row["cpu_total_cgroup_s"], row["cpu_total_s"], 1000.0 * controller / row["hosts"] if row["hosts"] else 0,
        ", %d processes still running" % row["cgroup_procs_left"] if row.get("cgroup_procs_left") else "")


def _ratio(baseline: float, ours: float) -> float | None:
    return round(baseline / ours, 1) if ours else None


def table(rows: list[dict], baseline_max: int, sizes: list[int]) -> str:
    """The fleet table (markdown)."""
    lines = ["| run | N | wall s | CPU s (controller + nodes) | controller ms/host (with local shells) | "
             "module calls/host | "
             "module ms/call | non-ok checks/host | peak RSS MB | controller CPU vs baseline | wall vs baseline |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row.get("skipped"):
            continue
        versus = row.get("vs_baseline") or {}
        lines.append("| %s | %d | %.1f | %.1f (%.1f + %.1f) | %s | %s | %s | %s | %s | %s | %s |" % (
            row["name"] + ("" if row["rc"] == 0 else " (rc %d)" % row["rc"]), row["hosts"], row["wall_s"],
            row["cpu_total_s"], row["cpu_controller_s"],
            row["cpu_modules_s"] if row.get("cpu_node_side_s") is None else row["cpu_node_side_s"],
            row["controller_ms_per_host"] if row.get("controller_with_shells_ms_per_host") is None else "%s (%s)" % (
                row["controller_ms_per_host"], row["controller_with_shells_ms_per_host"]),
            row["module_calls_per_host"], row["module_ms_per_call"],
            "%.0f" % row["findings_per_host"] if row.get("findings_per_host") is not None else "-",
            "%.0f" % row["peak_rss_mb"] if row.get("peak_rss_mb") is not None else "-",
            "%s×" % versus["controller_cpu_x"] if versus else "-", "%s×" % versus["wall_x"] if versus else "-"))
    capped = [n for n in sizes if n > baseline_max]
    if capped:
        lines.append("")
        lines.append("Baseline capped at %d hosts (--baseline-max): not run for N = %s." % (
            baseline_max, ", ".join(str(n) for n in capped)))
    return "\n".join(lines)


def machine() -> str:
    load = os.getloadavg()
    busy = []
    for pattern in ("qemu-system", "molecule"):
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False).stdout.split()
        found = [p for p in found if int(p) != os.getpid()]
        if found:
            busy.append("%s (%d processes)" % (pattern, len(found)))
    return "%d cores, %s, Python %s, load average %.1f/%.1f/%.1f at the end%s" % (
        os.cpu_count(), platform.platform(terse=True), platform.python_version(), load[0], load[1], load[2],
        "; also running: " + ", ".join(busy) if busy else "; nothing else heavy running")


def main(argv: list[str] | None = None) -> int:  # pylint: disable=too-many-locals,too-many-branches
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="1,10,100,1000", help="comma-separated host counts")
    parser.add_argument("--archetype", default="dgx-h100", help="hwsim archetype of every fleet host")
    parser.add_argument("--baseline-max", type=int, default=100, help="largest N the baseline runs at")
    parser.add_argument("--only", default="audit,baseline,converge,facts",
                        help="which measurements (audit, baseline, converge, facts, floor)")
    parser.add_argument("--config", default=str(DEFAULT_CONFIG),
                        help="ansible.cfg for every run; 'none' = Ansible's defaults")
    parser.add_argument("--forks", type=int, help="override the config's forks")
    parser.add_argument("--roots", choices=("assembled", "hardlink"), default="assembled")
    parser.add_argument("--facts-archetype", default="dgx-h100")
    parser.add_argument("--facts-vfs", type=int, default=8, help="VFs per SR-IOV PF for 'facts' (8 x 8 PFs = 64)")
    parser.add_argument("--converge-vfs", type=int, default=8, help="VFs per IB PF the converge provisions")
    parser.add_argument("--repeat", type=int, default=20, help="in-process repetitions for 'facts'")
    parser.add_argument("--compare", help="also run the audit of this revision (git archive) at every N, "
                                          "interleaved with the work tree's: row audit@REV")
    parser.add_argument("--workdir", help="keep everything here (reused: the fleet is built once)")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--node-python", default=node_python(),
                        help="interpreter of the simulated nodes' modules in every run (default: "
                             "/usr/bin/python3, a node's own Python; 'controller' = this venv's)")
    parser.add_argument("--strategy",
                        help="comma-separated strategy plugins to run every audit/baseline measurement with, in "
                             "turn at each N (e.g. linear,mitogen_linear): rows NAME/STRATEGY, each compared with "
                             "the first's controller CPU, wall, peak RSS and report files; mitogen_* needs "
                             "ansible_mitogen importable in --venv (default: the config's strategy, one row)")
    parser.add_argument("--cgroup-cpu", action="store_true",
                        help="also count each audit/baseline run's CPU in a cpuacct cgroup of its own (cgroup v1, "
                             "root): it includes processes nobody in the run waited for, which wait4 misses")
    parser.add_argument("--no-node-cgroup", dest="node_cgroup", action="store_false",
                        help="count the local connection's shells and the timing wrapper as the controller's, as "
                             "before session 21 (the default, where a cgroup v1 cpuacct hierarchy is writable, counts "
                             "every node command as the node's)")
    parser.add_argument("--ssh", metavar="USER@HOST:PORT",
                        help="also run each work-tree audit over SSH to this sshd (every host at that address, each "
                             "with its own master connection; the run's cgroup counts the SSH clients): row "
                             "audit-ssh (needs the cgroup v1 cpuacct hierarchy, root)")
    parser.add_argument("--ssh-key", help="private key for --ssh")
    parser.add_argument("--ssh-no-mux", action="store_true",
                        help="--ssh without master connections (examples/ansible.cfg's ControlMaster/ControlPersist)")
    parser.add_argument("--ssh-args", default="",
                        help="more ssh options for --ssh, e.g. '-o KexAlgorithms=curve25519-sha256'")
    parser.add_argument("--venv", default=str(DEFAULT_VENV),
                        help="the venv whose ansible-playbook runs the audit and baseline (default: .venv)")
    args = parser.parse_args(argv)
    if args.roots == "assembled":
        import hwsim.bind  # pylint: disable=import-outside-toplevel
        reason = hwsim.bind.available()  # the hosts' bind mounts live and die with this process
        if reason:
            parser.error("--roots assembled: %s (use --roots hardlink)" % reason)

    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    only = set(s.strip() for s in args.only.split(",") if s.strip())
    unknown = only - {"audit", "baseline", "converge", "facts", "floor"}
    if unknown:
        parser.error("unknown measurements: %s" % ", ".join(sorted(unknown)))
    venv = pathlib.Path(args.venv).resolve()
    if not os.access(venv / "bin" / "ansible-playbook", os.X_OK):
        parser.error("--venv %s: no bin/ansible-playbook there" % venv)
    strategies = [s.strip() for s in (args.strategy or "").split(",") if s.strip()] or [None]
    plugins = None
    if any(s and s.startswith("mitogen") for s in strategies):
        plugins = mitogen_strategy_dir(str(venv / "bin" / "python"))
        if plugins is None:
            parser.error("--strategy %s: %s cannot import ansible_mitogen (pip install mitogen into a venv of its "
                         "own and pass --venv)" % (args.strategy, venv / "bin" / "python"))
    try:
        for strategy in strategies:
            strategy_env(strategy, plugins)
    except ValueError as err:
        parser.error("--strategy: %s" % err)
    no_cgroup = cgroup_cpu_unavailable()
    if args.cgroup_cpu and no_cgroup:
        parser.error("--cgroup-cpu: %s" % no_cgroup)
    ssh = None
    if args.ssh:
        try:
            ssh = ssh_target(args.ssh, args.ssh_key)
        except ValueError as err:
            parser.error("--ssh: %s" % err)
        if no_cgroup:
            parser.error("--ssh: %s" % no_cgroup)
        ssh.update(args=args.ssh_args, mux=not args.ssh_no_mux)
        client = os.environ.get("ANSIBLE_SSH_EXECUTABLE") or "ssh"
        try:
            version = subprocess.run([client, "-V"], capture_output=True, text=True, check=False).stderr.strip()
        except OSError as err:
            parser.error("--ssh: the SSH client %s cannot run: %s" % (client, err))
        print("--ssh: %s (%s)%s" % (client, version, "" if ssh["mux"] else ", no master connections"), flush=True)
    node_cgroup = args.node_cgroup and no_cgroup is None
    if args.node_cgroup and not node_cgroup:
        print("the nodes' commands count as the controller's: %s" % no_cgroup, flush=True)
    config = None if args.config == "none" else pathlib.Path(args.config).resolve()
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="bench-fleet-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    python = sys.executable if args.node_python == "controller" else args.node_python
    rows = []
    extra = {"venv": str(venv), "versions": venv_versions(str(venv / "bin" / "python")),
             "strategies": strategies, "strategy_plugins": plugins}
    try:
        if only & {"audit", "baseline", "floor"} and sizes:
            start = time.perf_counter()
            roots = build_fleet(workdir, args.archetype, max(sizes), args.roots)
            extra["fleet_build_s"] = round(time.perf_counter() - start, 2)
            print("fleet: %d %s hosts (%s roots) in %s, built in %.1f s" % (
                max(sizes), args.archetype, args.roots, workdir, extra["fleet_build_s"]), flush=True)
            compare = None
            if args.compare and "audit" in only:
                import bench_layer_cost  # pylint: disable=import-outside-toplevel
                compare = bench_layer_cost.export_tree(args.compare, workdir / ("tree-" + args.compare))
            for count in sizes:
                # compare and audit-ssh come with audit (compare is only exported when audit is asked for)
                kinds = [k for k, wanted in (("baseline", "baseline" in only), ("floor", "floor" in only),
                                             ("floor-facts", "floor" in only), ("compare", compare is not None),
                                             ("audit", "audit" in only), ("audit-ssh", ssh and "audit" in only))
                         if wanted]
                for kind, strategy in [(k, s) for k in kinds for s in strategies]:
                    if kind == "baseline" and count > args.baseline_max:
                        if strategy == strategies[0]:
                            print("baseline   N=%-5d skipped (--baseline-max %d)" % (count, args.baseline_max),
                                  flush=True)
                        continue
                    if kind == "compare":
                        row = fleet_run("audit", workdir, roots[:count], config, args.forks, python, compare,
                                        run_name("audit", args.compare, strategy), strategy, plugins, venv,
                                        args.cgroup_cpu, node_cgroup)
                    elif kind == "audit-ssh":
                        row = fleet_run("audit", workdir, roots[:count], config, args.forks, python, None,
                                        run_name(kind, None, strategy), strategy, plugins, venv, ssh=ssh)
                    else:
                        row = fleet_run(kind, workdir, roots[:count], config, args.forks, python, None,
                                        run_name(kind, None, strategy), strategy, plugins, venv, args.cgroup_cpu,
                                        node_cgroup)
                    rows.append(row)
                    print("%-10s N=%-5d wall %7.1f s  controller %7.1f s (%6.1f ms/host)  modules %7.1f s in %d calls"
                          "  peak RSS %.0f MB%s%s%s" % (
                              row["name"], count, row["wall_s"], row["cpu_controller_s"], row["controller_ms_per_host"],
                              row["cpu_modules_s"], row["module_calls"], row["peak_rss_mb"], node_note(row),
                              cgroup_note(row),
                              "" if row["rc"] == 0 else "  rc=%d, see %s" % (row["rc"], row["log"])), flush=True)
            ratios(rows)
        if "converge" in only:
            extra["converge"] = converge_run(workdir, args.archetype, config, args.converge_vfs, python)
            conv = extra["converge"]
            if conv.get("skipped"):
                print("converge: skipped, %s" % conv["skipped"])
            else:
                print("converge (no-op second run): wall %.1f s, changed %d, failed %d; CPU: controller %.1f s, modules "
                      "%.1f s in %d calls (%.1f s of it in %d simulator shim processes), simulator daemon %.1f s "
                      "(first run: %.1f s, changed %d)" % (
                          conv["wall_s"], conv["changed"], conv["failed"], conv["cpu_controller_s"],
                          conv["cpu_modules_s"], conv["module_calls"], conv["cpu_shims_s"], conv["shim_calls"],
                          conv["cpu_simulator_s"], conv["first_run"]["wall_s"], conv["first_run"]["changed"]),
                      flush=True)
        if "facts" in only:
            extra["facts"] = facts_run(workdir, args.facts_archetype, args.facts_vfs, args.repeat, config, python)
            facts = extra["facts"]
            print("rdma_facts on %s with %d VFs (%d RDMA devices, %d GPUs): collection %.1f ms in-process (median), "
                  "module process %.0f ms wall / %.0f ms CPU, ansible ad-hoc %.2f s" % (
                      facts["archetype"], facts["vfs"], facts["rdma_devices"], facts["gpus"],
                      facts["in_process_ms_median"], facts["module_process_wall_ms_median"],
                      facts["module_process_cpu_ms_median"], facts["adhoc_wall_s_median"]), flush=True)
        print()
        if rows:
            print(table(rows, args.baseline_max, sizes))
            for line in versus_revision(rows) + versus_strategy(rows) + versus_ssh(rows) + versus_floor(rows):
                print(line)
        extra["machine"] = machine()
        extra["node_python"] = python
        print("\n%s; config %s; nodes' Python %s; started %s" % (extra["machine"], config or "Ansible defaults",
                                                                 extra["node_python"], started))
        print("ansible-playbook from %s: ansible-core %s, mitogen %s; strategies: %s" % (
            venv, extra["versions"]["ansible-core"], extra["versions"]["mitogen"] or "not installed",
            ", ".join(s or "the config's" for s in strategies)))
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps({
                "started": started, "sizes": sizes, "archetype": args.archetype, "roots": args.roots,
                "config": str(config) if config else None, "forks": args.forks, "baseline_max": args.baseline_max,
                "rows": rows, **extra}, indent=2) + "\n", encoding="utf-8")
    finally:
        if not args.workdir:
            with contextlib.suppress(OSError):
                shutil.rmtree(workdir)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
