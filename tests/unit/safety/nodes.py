"""Nodes for the safety suite: every module on a node it can run against, with what it does recorded.

A *bench* is one module plus a node for it and a changing request:

* simulated nodes (hwsim FUSE mount, assembled host root, shims first on PATH) for the modules that talk to the
  kernel: ``sysctl_dropin``, ``rdma_netns``, ``sriov_vfs``, ``ib_vf_guids``, ``rdma_facts``;
* plain node trees with the node's tools stood in for (:class:`FakeTools`) for ``kernel_cmdline`` (GRUB),
  ``containerd_rdma`` and ``kubelet_topology`` (containerd, ctr, kubelet, systemctl, journalctl).  Molecule's
  ``runtime`` and ``kernel`` scenarios prove the real tools; here they only need to behave like them.

What a run did is observable three ways, which together are the "write log":

* :func:`snapshot` - bytes, mode, owner and link target of every entry of the node tree outside sys/proc;
* :class:`SimNodeBench` - a write probe in the simulator (a glob fault ``*`` with action ``delay`` and a huge
  ``count``: every write() the simulated kernel receives, sysfs or rtnetlink, decrements it) plus its state dump;
* :class:`FakeTools` - every command the module ran, with the ones that change a node flagged.
"""

import contextlib
import errno
import http.server
import io
import json
import os
import pathlib
import shutil
import socketserver
import stat
import sys
import threading
import time
import tomllib

from ansible.module_utils import basic

import hwsim
import hwsim.bind

from unit.plugins.modules.harness import ModuleExit, ModuleFail, run_module, sh_outside_root, unwrap_node_command
from unit.plugins.modules.simnode import SHIMS

PROBE_COUNT = 10 ** 9
SHIMS_DIR = str(SHIMS)
#: commands that only read
READ_ONLY = {"containerd", "ctr", "kubelet", "sh", "journalctl", "lsinitramfs", "lsinitrd", "ofed_info", "nvidia-smi",
             "zstd", "lz4", "lzop"}
SYSTEMCTL_READS = ("show", "is-active", "status", "cat", "is-enabled", "is-failed")


def mutating(argv):
    """True when a command changes the node (conservative: an unknown command counts as a change)."""
    name = os.path.basename(argv[0])
    words = argv[1:]
    if name in READ_ONLY:
        return False
    if name == "grubby":
        return not all(w.startswith("--info") for w in words)
    if name in ("ip", "rdma", "devlink"):
        return "set" in words or "add" in words or "del" in words
    if name == "sysctl":
        return "-w" in words or "--write" in words or any("=" in w for w in words if not w.startswith("-"))
    if name == "modprobe":
        return not ({"-n", "--dry-run", "--show-depends", "-c"} & set(words))
    if name in ("mstconfig", "mlxconfig"):
        return "set" in words or "reset" in words
    if name == "systemctl":
        return not words or words[0] not in SYSTEMCTL_READS
    return True


# -- the node tree ---------------------------------------------------------------------------------------------------
def snapshot(root, skip=("proc", "sys", "dev", "run")):
    """``{relative path: (kind, mode, uid, gid, bytes or link target)}`` of a node tree.  Top-level symlinks to
    directories (an assembled root's etc) are walked under their own name; ``skip`` names top-level entries."""
    root = str(root)
    out = {}

    def walk(real, alias):
        for dirpath, dirnames, filenames in os.walk(real):
            rel_dir = os.path.relpath(dirpath, real)
            base = alias if rel_dir == "." else os.path.join(alias, rel_dir)
            for name in sorted(dirnames + filenames):
                path = os.path.join(dirpath, name)
                info = os.lstat(path)
                rel = os.path.join(base, name)
                if stat.S_ISLNK(info.st_mode):
                    out[rel] = ("link", None, info.st_uid, info.st_gid, os.readlink(path))
                elif stat.S_ISDIR(info.st_mode):
                    out[rel] = ("dir", stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, None)
                else:
                    with open(path, "rb") as handle:
                        out[rel] = ("file", stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, handle.read())

    for name in sorted(os.listdir(root)):
        if name in skip:
            continue
        path = os.path.join(root, name)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) and os.path.isdir(path):
            walk(os.path.realpath(path), name)
        elif stat.S_ISDIR(info.st_mode):
            out[name] = ("dir", stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, None)
            walk(path, name)
        else:
            with open(path, "rb") as handle:
                out[name] = ("file", stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, handle.read())
    return out


def restore_tree(root, snap, skip=("proc", "sys", "dev", "run")):
    """Make the node tree match a :func:`snapshot` again (remove extras, rewrite what differs)."""
    root = pathlib.Path(root)
    now = snapshot(root, skip)
    for rel in sorted(set(now) - set(snap), key=lambda r: -r.count("/")):
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    for rel in sorted(snap, key=lambda r: r.count("/")):
        kind, mode, uid, gid, data = snap[rel]
        if now.get(rel) == snap[rel]:
            continue
        path = root / rel
        if kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "link":
            if os.path.lexists(path):
                path.unlink()
            os.symlink(data, path)
            continue
        else:
            if path.is_symlink():
                path.unlink()
            path.write_bytes(data)
        os.chmod(path, mode)
        os.lchown(path, uid, gid)


def tree_diff(before, after):
    """Human list of what differs between two snapshots (empty when byte-identical)."""
    lines = []
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        if old is None:
            lines.append("+ %s (%s)" % (rel, new[0]))
        elif new is None:
            lines.append("- %s (%s)" % (rel, old[0]))
        elif old[4] != new[4]:
            lines.append("~ %s: content %r -> %r" % (rel, old[4][:120] if old[4] else old[4],
                                                     new[4][:120] if new[4] else new[4]))
        else:
            lines.append("~ %s: mode/owner %s -> %s" % (rel, old[1:4], new[1:4]))
    return lines


# -- commands ---------------------------------------------------------------------------------------------------------
class CommandFault:
    """A node tool that fails: ``rc`` with ``stderr``, or a hang (blocks ``seconds``, then is killed)."""

    def __init__(self, name, kind="errno", errno_name="EIO", skip=0, count=1, seconds=0.3, match=None):
        self.name = name
        self.kind = kind
        self.errno_name = errno_name
        self.skip = skip
        self.count = count
        self.seconds = seconds
        self.match = match
        self.hits = 0

    def fire(self, argv):
        """None to let the command run, else its (rc, stdout, stderr)."""
        if os.path.basename(argv[0]) != self.name or (self.match and self.match not in argv):
            return None
        if self.skip > 0:
            self.skip -= 1
            return None
        if self.count is not None:
            if self.count <= 0:
                return None
            self.count -= 1
        self.hits += 1
        if self.kind == "hang":
            time.sleep(self.seconds)
            return -15, "", "%s: killed after %ss without an answer (hung)\n" % (self.name, self.seconds)
        code = getattr(errno, self.errno_name)
        return 1, "", "%s: error: %s (%s)\n" % (self.name, os.strerror(code), self.errno_name)


_ACTIVE = {"tools": None}
_SHIMS_REAL = os.path.realpath(str(SHIMS))
_SHIM_CODE = {}


class _Passthrough(Exception):
    """A shim wanted to exec the real tool: run it as a process instead."""


def run_shim_in_process(path, argv):
    """Run a hwsim shim's own code in this process (it talks to the simulator through the same control file), which
    spares an interpreter start per ``ip``/``sysctl``/``rdma`` call; ``(rc, stdout, stderr)``, or None when the shim
    hands over to the real tool (``os.execv``)."""
    code = _SHIM_CODE.get(path)
    if code is None:
        with open(path, encoding="utf-8") as handle:
            code = _SHIM_CODE[path] = compile(handle.read(), path, "exec")
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_execv = sys.argv, os.execv

    def execv(*dummy):
        raise _Passthrough()

    sys.argv = [path] + list(argv[1:])
    os.execv = execv
    rc = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(code, {"__name__": "__main__", "__file__": path})  # pylint: disable=exec-used
            except SystemExit as exc:
                if isinstance(exc.code, int):
                    rc = exc.code
                elif exc.code is not None:
                    print(exc.code, file=sys.stderr)
                    rc = 1
    except _Passthrough:
        return None
    finally:
        sys.argv, os.execv = saved_argv, saved_execv
    return rc, out.getvalue(), err.getvalue()


def _install_dispatch(monkeypatch):
    """Patch AnsibleModule.run_command once per process scope; it hands every call to the active bench's tools."""
    if getattr(basic.AnsibleModule.run_command, "safety_dispatch", False):
        return
    real = basic.AnsibleModule.run_command

    def run_command(module, args, *pos, **kwargs):
        tools = _ACTIVE["tools"]
        if tools is None:
            return real(module, args, *pos, **kwargs)
        return tools.dispatch(real, module, args, pos, kwargs)

    run_command.safety_dispatch = True
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)


class FakeTools:
    """What a module runs on one node: records every argv, flags string commands and shells, runs the stand-ins
    registered in ``handlers`` (by command name; chroot into the node root is unwrapped), fires CommandFaults,
    and passes everything else (the hwsim shims, sh) to the real run_command."""

    def __init__(self, root):
        self.root = str(root)
        self.calls = []
        self.unsafe = []
        self.handlers = {}
        self.faults = []

    def install(self, monkeypatch):
        _install_dispatch(monkeypatch)

    def activate(self):
        _ACTIVE["tools"] = self

    def dispatch(self, real, module, args, pos, kwargs):
        if isinstance(args, (str, bytes)) or kwargs.get("use_unsafe_shell"):
            self.unsafe.append(args)
        argv = [str(a) for a in (args if not isinstance(args, (str, bytes)) else str(args).split())]
        argv, chrooted = unwrap_node_command(argv, self.root)
        name = os.path.basename(argv[0])
        self.calls.append([name] + argv[1:])
        for fault in self.faults:
            answer = fault.fire(argv)
            if answer is not None:
                return answer
        handler = self.handlers.get(name)
        if handler is not None:
            return handler([name] + argv[1:])
        if chrooted and argv[:2] == ["/bin/sh", "-c"]:
            return sh_outside_root(argv, self.root)
        if chrooted:
            raise AssertionError("unexpected command inside host_root: %s" % argv)
        if os.path.dirname(os.path.realpath(argv[0])) == _SHIMS_REAL and kwargs.get("data") is None:
            answer = run_shim_in_process(os.path.realpath(argv[0]), argv)
            if answer is not None:
                return answer
        return real(module, args, *pos, **kwargs)

    def mutations(self, since=0):
        """The node-changing commands run since call number ``since``."""
        return [argv for argv in self.calls[since:] if mutating(argv)]


# -- regular-file faults (the node's /etc, /var/lib) -------------------------------------------------------------------
def _norm(path):
    path = os.fspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


class FileFault:
    """One fault on one file: ``phase`` is where in an atomic replace it strikes."""

    PHASES = ("create", "write", "replace", "backup", "delete", "move")

    def __init__(self, target, phase, kind="errno", errno_name="EIO", skip=0, count=1, seconds=0.3):
        assert phase in self.PHASES, phase
        self.target = _norm(target)
        self.phase = phase
        self.kind = kind
        self.errno_name = errno_name
        self.skip = skip
        self.count = count
        self.seconds = seconds
        self.hits = 0

    def strike(self, phase, path):
        if phase != self.phase or not self._matches(path):
            return
        if self.skip > 0:
            self.skip -= 1
            return
        if self.count is not None:
            if self.count <= 0:
                return
            self.count -= 1
        self.hits += 1
        if self.kind == "hang":
            time.sleep(self.seconds)
            raise OSError(errno.ETIMEDOUT, "%s (the write blocked for %ss)" % (os.strerror(errno.ETIMEDOUT), self.seconds),
                          path)
        code = getattr(errno, self.errno_name)
        raise OSError(code, os.strerror(code), path)

    def _matches(self, path):
        path = _norm(path)
        if self.phase in ("create", "write"):
            # the temp file next to the target: .<name>.XXXXXX.tmp
            prefix = os.path.join(os.path.dirname(self.target), "." + os.path.basename(self.target) + ".")
            return path == self.target or (path.startswith(prefix) and path.endswith(".tmp"))
        if self.phase == "backup":
            return path.startswith(self.target + ".") and path.endswith("~")
        return path == self.target


FILE_FAULTS = []


class FileFaults:
    """Test-only fault hook for regular files outside sysfs: wraps ``tempfile.mkstemp``, ``os.fsync``, ``os.replace``,
    ``os.rename``, ``shutil.move``, ``os.open`` (O_CREAT|O_EXCL: backups) and ``os.unlink`` process-wide (once per scope) for the
    duration of a test; every path that no fault in :data:`FILE_FAULTS` names passes straight through.  Production
    code is untouched."""

    def __init__(self, monkeypatch):
        if getattr(os.replace, "safety_hook", False):
            return
        real = {name: getattr(os, name) for name in ("fsync", "replace", "rename", "open", "unlink")}
        real_mkstemp = __import__("tempfile").mkstemp
        strike = self.strike

        def mkstemp(suffix=None, prefix=None, dir=None, text=False):  # pylint: disable=redefined-builtin
            if dir is not None and prefix:
                strike("create", os.path.join(dir, prefix + "XXXXXX" + (suffix or "")))
            return real_mkstemp(suffix=suffix, prefix=prefix, dir=dir, text=text)

        def full(path, dir_fd):
            """The path a ``*at()`` call names: ``name`` relative to ``dir_fd`` as an absolute path."""
            path = os.fsdecode(path)
            if dir_fd is None or path.startswith("/"):
                return path
            return os.path.join(os.readlink("/proc/self/fd/%d" % dir_fd), path)

        def fsync(fd):
            if FILE_FAULTS:
                try:
                    path = os.readlink("/proc/self/fd/%d" % fd)
                except OSError:
                    path = None
                if path:
                    strike("write", path)
            return real["fsync"](fd)

        def replace(src, dst, *args, **kwargs):
            strike("replace", full(dst, kwargs.get("dst_dir_fd")))
            return real["replace"](src, dst, *args, **kwargs)

        def rename(src, dst, *args, **kwargs):
            strike("move", full(src, kwargs.get("src_dir_fd")))  # HostRoot.rename: moving a state file aside
            strike("replace", full(dst, kwargs.get("dst_dir_fd")))
            return real["rename"](src, dst, *args, **kwargs)

        real_move = shutil.move

        def move(src, dst, *args, **kwargs):
            strike("move", src)  # moving the file fails as a whole (rename and shutil's copy fallback alike)
            return real_move(src, dst, *args, **kwargs)

        def open_(path, flags, *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)) and flags & os.O_CREAT and flags & os.O_EXCL:
                named = full(path, kwargs.get("dir_fd"))
                strike("create", named)  # the temp file of an atomic replace (.<name>.<random>.tmp)
                strike("backup", named)
            return real["open"](path, flags, *args, **kwargs)

        def unlink(path, *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)):
                strike("delete", full(path, kwargs.get("dir_fd")))
            return real["unlink"](path, *args, **kwargs)

        replace.safety_hook = True
        monkeypatch.setattr("tempfile.mkstemp", mkstemp)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(shutil, "move", move)
        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "unlink", unlink)

    @staticmethod
    def add(fault):
        FILE_FAULTS.append(fault)
        return fault

    @staticmethod
    def clear():
        del FILE_FAULTS[:]

    @staticmethod
    def strike(phase, path):
        for fault in list(FILE_FAULTS):
            fault.strike(phase, path)


# -- systemd and the services it runs ------------------------------------------------------------------------------------
def _systemd_bytes(value):
    value = value.strip()
    if value in ("infinity", ""):
        return "infinity" if value else None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if value[-1:].upper() in units:
        return str(int(value[:-1]) * units[value[-1].upper()])
    return str(int(value))


class FakeSystemd:
    """systemctl/journalctl for services of a node tree: show, is-active, daemon-reload, start/stop/restart.

    A started service gets a new pid with ``/proc/<pid>/{limits,stat,cmdline,comm}`` in the node tree (memlock from
    the unit files loaded at the last daemon-reload, like systemd).  ``fail_start[name](root)`` decides whether a
    start fails (the service then is ``failed``); ``fail_reload`` makes daemon-reload fail.  A service in
    ``restart_always`` (``Restart=always``, as kubeadm's kubelet.service) is ``activating`` after a failed start
    instead, and systemd tries again each time its state is asked (one ``RestartSec`` per poll), counting
    ``NRestarts``; an explicit start or restart resets the count, as systemd's does (the VM's journal: "restart
    counter is at 1" after ``systemctl restart``)."""

    def __init__(self, root, services):
        self.root = pathlib.Path(root)
        self.services = {}
        self.fail_start = {}
        self.fail_reload = False
        self.restart_always = set()
        self.next_pid = 4000
        self.log = []
        for name, cmdline in services.items():
            self.services[name] = {"state": "inactive", "pid": 0, "cmdline": cmdline, "limit": None, "restarts": 0}
        self.daemon_reload()
        for name in services:
            self._start(name)

    def unit_limit(self, name):
        value = None
        files = [self.root / ("lib/systemd/system/%s.service" % name)]
        for directory in ("lib/systemd/system", "etc/systemd/system"):
            dropins = self.root / directory / ("%s.service.d" % name)
            if dropins.is_dir():
                files += sorted(dropins.glob("*.conf"), key=lambda p: p.name)
        ordered = files[:1] + sorted(files[1:], key=lambda p: p.name)
        for path in ordered:
            if not path.is_file():
                continue
            section = None
            for line in path.read_text().splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line
                elif section == "[Service]" and line.startswith("LimitMEMLOCK="):
                    value = _systemd_bytes(line.split("=", 1)[1])
        return value or "8388608"

    def daemon_reload(self):
        for name, svc in self.services.items():
            svc["limit"] = self.unit_limit(name)

    def _start(self, name):
        svc = self.services[name]
        check = self.fail_start.get(name)
        if check is not None and check(self.root):
            svc.update(state="activating" if name in self.restart_always else "failed", pid=0)
            return 1, "", ("Job for %s.service failed because the control process exited with error code.\nSee "
                           "\"systemctl status %s.service\" and \"journalctl -xeu %s.service\" for details.\n"
                           % (name, name, name))
        self.next_pid += 1
        pid = self.next_pid
        proc = self.root / "proc" / str(pid)
        proc.mkdir(parents=True, exist_ok=True)
        limit = "unlimited" if svc["limit"] == "infinity" else svc["limit"]
        (proc / "limits").write_text("Limit                     Soft Limit           Hard Limit           Units     \n"
                                     "Max locked memory         %-20s %-20s bytes     \n" % (limit, limit))
        boot = int((self.root / "proc/stat").read_text().split("btime ", 1)[1].split()[0])
        ticks = int((time.time() - boot) * os.sysconf("SC_CLK_TCK"))
        (proc / "stat").write_text("%d (%s) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n"
                                   % (pid, name, pid, pid, ticks))
        (proc / "comm").write_text(name + "\n")
        (proc / "cmdline").write_text("\0".join(svc["cmdline"]) + "\0")
        svc.update(state="active", pid=pid)
        return 0, "", ""

    def _stop(self, name):
        svc = self.services[name]
        if svc["pid"]:
            shutil.rmtree(self.root / "proc" / str(svc["pid"]), ignore_errors=True)
        svc.update(state="inactive", pid=0)
        return 0, "", ""

    def systemctl(self, argv):
        words = [w for w in argv[1:] if w not in ("--no-pager", "--quiet", "-q")]
        self.log.append(words)
        verb = words[0]
        if verb == "daemon-reload":
            if self.fail_reload:
                return 1, "", "Failed to reload daemon: Access denied\n"
            self.daemon_reload()
            return 0, "", ""
        name = words[1].replace(".service", "")
        if name not in self.services:
            return 4, "", "Unit %s.service could not be found.\n" % name
        svc = self.services[name]
        if verb in ("show", "is-active") and svc["state"] == "activating":
            svc["restarts"] += 1      # RestartSec passed: systemd's next try
            self._start(name)
        if verb == "show":
            props = [words[i + 1] for i, w in enumerate(words) if w == "-p"]
            values = {"ActiveState": svc["state"], "MainPID": str(svc["pid"]),
                      "LimitMEMLOCK": "infinity" if svc["limit"] == "infinity" else svc["limit"],
                      "NRestarts": str(svc["restarts"])}
            if "--value" in words:
                return 0, "".join(values[p] + "\n" for p in props), ""
            return 0, "".join("%s=%s\n" % (p, values[p]) for p in props), ""
        if verb == "is-active":
            return (0 if svc["state"] == "active" else 3), svc["state"] + "\n", ""
        if verb == "stop":
            return self._stop(name)
        if verb in ("start", "restart"):
            svc["restarts"] = 0
            self._stop(name)
            return self._start(name)
        return 1, "", "unknown verb %s\n" % verb

    def journalctl(self, argv):
        return 0, "-- No entries --\n", ""

    def active(self, name):
        return self.services[name]["state"] == "active"


def base_tree(root):
    """Directories and /proc files every plain node tree has."""
    for directory in ("etc", "proc", "usr/bin", "usr/sbin", "lib/systemd/system", "etc/systemd/system"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "proc/stat").write_text("cpu  1 0 1 1\nbtime %d\n" % (int(time.time()) - 100000))


def tool(root, path):
    """An executable placeholder so that the module finds the tool inside host_root (FakeTools runs it)."""
    full = root / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text("#!/bin/sh\necho 'stand-in: the test intercepts this command' >&2\nexit 99\n")
    full.chmod(0o755)


# -- benches --------------------------------------------------------------------------------------------------------------
class Bench:
    """One module on one node.  Subclasses set ``main`` and build the node in ``setup``."""

    main = None
    name = None

    def __init__(self, tmp_path, monkeypatch):
        self.tmp = pathlib.Path(tmp_path)
        self.monkeypatch = monkeypatch
        self.root = self.tmp / "root"
        self.tools = FakeTools(self.root)
        self.tools.install(monkeypatch)

    def args(self, **extra):
        out = {"host_root": str(self.root)}
        out.update(extra)
        return out

    def activate(self):
        """Make this node the one the intercepted commands and environment refer to."""
        self.tools.activate()

    def run(self, args, check=False, expect=ModuleExit, diff=True):
        return self.run_main(self.main, args, check=check, expect=expect, diff=diff)

    def run_main(self, main, args, monkeypatch=None, check=False, expect=ModuleExit, diff=True):
        """Run a module's ``main`` on this node."""
        self.activate()
        return run_module(monkeypatch or self.monkeypatch, main, args, check=check, diff=diff, expect=expect)

    def run_either(self, args, monkeypatch=None):
        """``(True, result)`` or ``(False, failure)`` of the bench's module."""
        try:
            return True, self.run_main(self.main, args, monkeypatch)
        except ModuleFail as exc:
            return False, exc.args[0]

    # what a run did
    def observe(self):
        """Everything a run could change, as comparable data."""
        return {"tree": snapshot(self.root)}

    def state(self):
        """What must be back as it was after a failed run (``observe`` without logs and kernel bookkeeping)."""
        return self.observe()

    # the fault campaign
    options = {}
    systemd = None

    @classmethod
    def paths(cls, **options):  # pylint: disable=unused-argument
        """The module's write paths (see benches.WritePath)."""
        return []

    def write_paths(self):
        return self.paths(**self.options)

    def mark_baseline(self):
        self.baseline = self.state()
        self.baseline_tree = snapshot(self.root)

    def clear_faults(self):
        """Remove every injected fault (files, commands, services)."""
        FileFaults.clear()
        self.tools.faults = []
        if self.systemd is not None:
            self.systemd.fail_start = {}
            self.systemd.fail_reload = False

    def restore_baseline(self):
        """Put the node back as it was right after the bench was built."""
        restore_tree(self.root, self.baseline_tree)
        if self.systemd is not None:
            self.systemd.daemon_reload()
            for name in self.systemd.services:
                if self.systemd.services[name]["state"] != "active":
                    self.systemd.systemctl(["systemctl", "start", name])

    def close(self):
        """Release what the bench holds (mounts, servers)."""


class SimNodeBench(Bench):
    """A hwsim-simulated node (``spec``) seen through an assembled host root, as unit/plugins/modules/simnode.py
    builds it, plus ``usr/sbin`` stand-ins for boot tools and a recorder standing in for the real sysctl."""

    spec = "dgx-h100"
    sysctl_keys = ()

    def __init__(self, tmp_path, monkeypatch, spec=None):
        super().__init__(tmp_path, monkeypatch)
        reason = hwsim.fuse_available()
        if reason:
            import pytest  # pylint: disable=import-outside-toplevel
            pytest.skip("FUSE unavailable: %s" % reason)
        if spec is None:
            from unit.safety.benches import safety_spec  # pylint: disable=import-outside-toplevel
            spec = safety_spec(self.tmp)
        self.spec = spec
        self.etc = self.tmp / "etc"
        for directory in ("modprobe.d", "modules-load.d", "sysctl.d"):
            (self.etc / directory).mkdir(parents=True, exist_ok=True)
        self.mnt = self.tmp / "mnt"
        self.mnt.mkdir()
        reason = hwsim.bind.available()
        if reason:
            import pytest  # pylint: disable=import-outside-toplevel
            pytest.skip(reason)
        self._stack = contextlib.ExitStack()
        self.mount = self._stack.enter_context(hwsim.mounted(self.spec, self.mnt, etc=self.etc))
        # bind mounts, as a pod sees /host (the collection resolves paths as in a chroot at the root); closed
        # before the FUSE mount they hold
        self._stack.enter_context(hwsim.bind.Assembled(
            self.root, {"sys": self.mnt / "sys", "proc": self.mnt / "proc", "etc": self.etc}))
        (self.root / "usr/sbin").mkdir(parents=True)
        recorder = self.tmp / "real-sysctl"
        self.real_sysctl_log = self.tmp / "real-sysctl.log"
        recorder.write_text('#!/bin/sh\necho "$*" >> "%s"\n' % self.real_sysctl_log)
        recorder.chmod(0o755)
        self.recorder = recorder
        self.activate()

    def activate(self):
        super().activate()
        if SHIMS_DIR not in os.environ.get("PATH", "").split(":"):
            self.monkeypatch.setenv("PATH", "%s:%s" % (SHIMS_DIR, os.environ.get("PATH", "")))
        self.monkeypatch.setenv("HWSIM_ROOT", str(self.mnt))
        self.monkeypatch.setenv("HWSIM_REAL_SYSCTL", str(self.recorder))

    def call(self, command):
        return self.mount.call(command)

    def dump(self):
        state = self.call({"cmd": "dump"})
        state.pop("faults", None)
        state.pop("boot_log", None)
        return state

    def state(self):
        dump = self.dump()
        return {"tree": snapshot(self.root), "sysctl": self.sysctls(),
                "sim": {key: dump[key] for key in ("pfs", "netns_mode", "modules", "netdevs", "netns", "cmdline")},
                "vfs": self.vf_view()}

    def vf_view(self):
        """Driver and RDMA node GUID of every VF of every PF, as sysfs shows them."""
        out = {}
        devices = self.root / "sys/bus/pci/devices"
        for pf in sorted(self.dump()["pfs"]):
            for index in range(64):
                vf = devices / pf / ("virtfn%d" % index)
                if not os.path.lexists(vf):
                    break
                driver = os.path.basename(os.readlink(vf / "driver")) if os.path.lexists(vf / "driver") else None
                ib = sorted(os.listdir(vf / "infiniband")) if (vf / "infiniband").is_dir() else []
                guid = (vf / "infiniband" / ib[0] / "node_guid").read_text().strip() if ib else None
                out["%s/%d" % (pf, index)] = (driver, guid)
        return out

    def clear_faults(self):
        super().clear_faults()
        self.call({"cmd": "fault_clear"})
        settle_writers()

    def restore_baseline(self):
        restore_tree(self.root, self.baseline_tree)
        self.reset()
        self.baseline_run()

    def baseline_run(self):
        """What the bench did after mounting (VFs, GUIDs, files) to reach its baseline."""

    def sysctls(self):
        out = {}
        for key in self.sysctl_keys:
            path = self.root / "proc/sys" / key.replace(".", "/")
            out[key] = path.read_text().strip() if path.exists() else None
        return out

    def observe(self):
        return {"tree": snapshot(self.root), "sim": self.dump(), "sysctl": self.sysctls(),
                "real_sysctl": self.real_sysctl_log.read_text() if self.real_sysctl_log.exists() else ""}

    # the write probe
    def arm_probe(self):
        """Count every write() the simulated kernel gets from now on (sysfs attributes and rtnetlink VF calls)."""
        self.call({"cmd": "fault_clear"})
        self.probe = self.call({"cmd": "fault_add", "path": "*", "op": "write", "action": "delay", "seconds": 1e-6,
                                "count": PROBE_COUNT})

    def probed_writes(self):
        faults = [f for f in self.call({"cmd": "dump"})["faults"] if f["id"] == self.probe["id"]]
        return PROBE_COUNT - faults[0]["count"] if faults else None

    def reset(self):
        """Power-on reset of the simulated hardware, faults and delays cleared."""
        self.call({"cmd": "fault_clear"})
        for name in ("vf_probe", "sriov_numvfs_write", "bind"):
            self.call({"cmd": "set_delay", "name": name, "seconds": 0})
        self.call({"cmd": "reset"})

    def close(self):
        self._stack.close()


def settle_writers(timeout=10.0):
    """Wait for sysfs writes a module abandoned after its timeout (``write_with_timeout`` daemon threads) to end, so
    they cannot land in the next scenario."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name == "sysfs-write" and thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))


class HealthServer:
    """The kubelet's /healthz: ``ok`` while the fake systemd says the kubelet is active, 503 otherwise."""

    def __init__(self, systemd):
        parent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802  pylint: disable=invalid-name
                ok = parent.systemd.active("kubelet")
                body = b"ok" if ok else b"kubelet is not running"
                self.send_response(200 if ok else 503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        self.systemd = systemd
        self.server = socketserver.TCPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/healthz" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# -- containerd stand-ins ----------------------------------------------------------------------------------------------
CONTAINERD_VERSIONS = {
    (1, 6): "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1",
    (1, 7): "containerd containerd.io 1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182",
    (2, 1): "containerd github.com/containerd/containerd/v2 v2.1.4 unknown",
}


def containerd_default(version):
    """The parts of ``containerd config default`` the module reads, per version (1.6 has no CDI keys)."""
    runc = {"runtime_type": "io.containerd.runc.v2", "base_runtime_spec": "", "options": {"SystemdCgroup": False}}
    if version >= (2, 0):
        return {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {
            "enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"],
            "containerd": {"default_runtime_name": "runc", "runtimes": {"runc": runc}}}}}
    cri = {"sandbox_image": "registry.k8s.io/pause:3.8",
           "containerd": {"default_runtime_name": "runc", "runtimes": {"runc": runc}}}
    if version >= (1, 7):
        cri.update(enable_cdi=False, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"])
    return {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": cri}}


def _merge(base, over):
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _toml_key(key):
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an element of an array of tables (containerd 1.7+'s unpack_config), inline
        return "{" + ", ".join("%s = %s" % (_toml_key(k), _toml_value(v)) for k, v in value.items()) + "}"
    return json.dumps(value)


def render_toml(data, prefix=()):
    """A small TOML writer for config dumps: scalars first, then sub-tables."""
    lines = []
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    if prefix and (scalars or not tables):
        lines.append("[%s]" % ".".join(_toml_key(p) for p in prefix))
    for key, value in scalars:
        lines.append("%s = %s" % (_toml_key(key), _toml_value(value)))
    for key, value in tables:
        lines.append(render_toml(value, prefix + (key,)))
    return "\n".join(lines)


def _merge_1x(base, over, path=()):
    """How containerd 1.x lays a config file over its defaults (TOML decoding into the default struct): tables
    merge into structs key by key, but a Go map the file names -- ``runtimes`` -- is decoded into a fresh map, so
    the built-in runtimes are gone (containerd 1.7.34's `config dump` of a file naming only runtimes.nvidia has no
    runc) and a runtime the file names starts from zero values."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "runtimes":
            out[key] = _merge_1x(out[key], value, path + (key,))
        else:
            out[key] = value
    return out


def _imports_1x(base, over):
    """containerd 1.x merging an imported file: a plugin section the later file names replaces the earlier
    one whole (services/server/config: "Replace entire sections instead of merging map's values")."""
    out = _merge({k: v for k, v in base.items() if k != "plugins"}, {k: v for k, v in over.items() if k != "plugins"})
    if "plugins" in base or "plugins" in over:
        out["plugins"] = dict(base.get("plugins") or {}, **(over.get("plugins") or {}))
    return out


def _migrate_v2(data):
    """containerd 2.x reading a version 2 file: the CRI keys the module reads move to their version 3 plugin
    (``containerd config migrate``; the runtime settings go to io.containerd.cri.v1.runtime)."""
    if data.get("version", 1) >= 3:
        return data
    data = json.loads(json.dumps(data))
    old = (data.get("plugins") or {}).pop("io.containerd.grpc.v1.cri", None) or {}
    new = {key: old[key] for key in ("enable_cdi", "cdi_spec_dirs") if key in old}
    if "containerd" in old:
        new["containerd"] = {key: value for key, value in old["containerd"].items() if key in ("runtimes", "default_runtime_name")}
    data["version"] = 3
    if new:
        data.setdefault("plugins", {})["io.containerd.cri.v1.runtime"] = new
    return data


class FakeContainerd:
    """``containerd --version``, ``ctr oci spec``, ``containerd [--config F] config dump|default`` for a node tree:
    the dump is the version's defaults with the config file and its imports laid over them the way that version
    does it (2.x: key by key; 1.x: an imported plugin section replaces the earlier one, and a runtime table
    replaces the built-in runtime of that name); a file that is not TOML fails like containerd does."""

    def __init__(self, root, version):
        self.root = pathlib.Path(root)
        self.version = version
        self.version_text = None

    def __call__(self, argv):
        if argv[0] == "ctr":
            spec = {"ociVersion": "1.1.0", "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/",
                                                       "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]},
                    "root": {"path": "rootfs"}, "linux": {"namespaces": [{"type": "pid"}]}}
            return 0, json.dumps(spec, indent=4) + "\n", ""
        words = argv[1:]
        if words == ["--version"]:
            return 0, (self.version_text or CONTAINERD_VERSIONS[self.version]) + "\n", ""
        config = None
        if words[:1] == ["--config"]:
            config, words = words[1], words[2:]
        data = containerd_default(self.version)
        if words == ["config", "dump"] and config:
            try:
                loaded = self._load(config, set())
                data = _merge(data, loaded) if self.version >= (2, 0) else _merge_1x(data, loaded)
            except (tomllib.TOMLDecodeError, ValueError) as exc:
                return 1, "", ('containerd: failed to load TOML from %s: %s\n' % (config, exc))
        elif words != ["config", "default"]:
            return 1, "", "containerd: unknown command %s\n" % words
        return 0, render_toml(data) + "\n", ""

    def _load(self, path, seen):
        """The files as containerd's LoadConfig reads them: the main file, then its imports in order, each
        merged over what came before (breadth first; a file is read once)."""
        merged, pending = {}, [path]
        while pending:
            path, pending = pending[0], pending[1:]
            if path in seen:
                continue
            seen.add(path)
            local = self.root / path.lstrip("/")
            data = tomllib.loads(local.read_text()) if local.exists() else {}
            if self.version >= (2, 0):
                data = _migrate_v2(data)
            merged = self._combine(merged, {k: v for k, v in data.items() if k != "imports"})
            for entry in data.get("imports") or []:
                entry = entry if entry.startswith("/") else os.path.join(os.path.dirname(path), entry)
                pending.extend("/" + str(m.relative_to(self.root)) for m in sorted(self.root.glob(entry.lstrip("/"))))
        return merged

    def _combine(self, base, over):
        return _merge(base, over) if self.version >= (2, 0) else _imports_1x(base, over)
