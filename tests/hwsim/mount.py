"""Start and stop the FUSE daemon, and a context manager for tests.

The daemon is always a separate process (`python -m hwsim mount ... --foreground`): the code under test then talks
to a real filesystem exactly as it would on a node, and a test process that crashes cannot wedge the mount.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from .spec import Spec

CTL_DIR = ".hwsim"
CTL = f"{CTL_DIR}/ctl"
PID = f"{CTL_DIR}/pid"

PACKAGE_PARENT = Path(__file__).resolve().parent.parent
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class HwsimError(RuntimeError):
    """A control command failed; `errno` holds the symbolic errno the simulator reported."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(f"{reply.get('errno')}: {reply.get('error')}")
        self.errno = reply.get("errno")
        self.reply = reply


def fuse_available() -> str | None:
    """None if FUSE mounts can work here, else the reason they cannot."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return None


def spec_argument(spec: Spec | str | Path) -> str:
    """What to pass to the daemon for a spec: its file path, or the archetype name."""
    if isinstance(spec, Spec):
        if spec.path is None:
            raise ValueError("a Spec built in memory has no file; write it to YAML first")
        return str(spec.path)
    return str(spec)


def start(spec: Spec | str | Path, mountpoint: str | Path, etc: str | Path | None = None, timeout: float = 20.0,
          log: str | Path | None = None, threads: bool = True) -> int:
    """Start the daemon in its own session and return its pid once MOUNTPOINT/sys exists."""
    mountpoint = Path(mountpoint)
    if os.path.ismount(mountpoint):
        raise RuntimeError(f"{mountpoint} is already a mount point (hwsim already mounted?)")
    mountpoint.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "hwsim", "mount", spec_argument(spec), str(mountpoint), "--foreground"]
    if etc is not None:
        args += ["--etc", str(etc)]
    if not threads:
        args.append("--single-thread")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PACKAGE_PARENT), os.environ.get("PYTHONPATH", "")]))
    log_path = Path(log) if log else mountpoint.parent / f".{mountpoint.name}.hwsim.log"
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env,  # pylint: disable=consider-using-with
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"hwsim daemon exited with {proc.returncode}; see {log_path}:\n"
                               f"{log_path.read_text(encoding='utf-8', errors='replace')[-2000:]}")
        if os.path.ismount(mountpoint) and (mountpoint / "sys").is_dir():
            _CHILDREN[proc.pid] = proc
            return proc.pid
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"hwsim mount at {mountpoint} not ready after {timeout} s; see {log_path}")


def stop(mountpoint: str | Path, timeout: float = 10.0) -> None:
    """Unmount (releasing injected hangs first) and wait for the daemon to exit."""
    mountpoint = Path(mountpoint)
    if not os.path.ismount(mountpoint):
        raise RuntimeError(f"{mountpoint} is not mounted")
    pid = None
    with contextlib.suppress(OSError, ValueError):
        pid = int((mountpoint / PID).read_text(encoding="utf-8"))
    with contextlib.suppress(OSError, ValueError, HwsimError):
        call(mountpoint, {"cmd": "fault_clear"})
    result = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True, check=False)
    if pid is not None:
        _wait_exit(pid, timeout)


def _wait_exit(pid: int, timeout: float) -> None:
    """Wait for the daemon: our own child is reaped; a daemon started by another process is polled."""
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, 9)


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (an orphan may never be reaped on this host)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def ctl(mountpoint: str | Path, command: dict[str, Any] | str) -> dict[str, Any]:
    """Send one JSON command through MOUNTPOINT/.hwsim/ctl and return the decoded reply."""
    payload = (command if isinstance(command, str) else json.dumps(command)).encode()
    fd = os.open(Path(mountpoint) / CTL, os.O_RDWR)
    try:
        os.write(fd, payload)
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return json.loads(b"".join(chunks))


def call(mountpoint: str | Path, command: dict[str, Any]) -> Any:
    """Like ctl() but returns the result and raises HwsimError when the command failed."""
    reply = ctl(mountpoint, command)
    if not reply.get("ok"):
        raise HwsimError(reply)
    return reply.get("result")


class Mounted:
    """A live mount: `root` is the simulated host root; `call`/`ctl` drive the control interface."""

    def __init__(self, root: Path, pid: int) -> None:
        self.root = root
        self.pid = pid

    def ctl(self, command: dict[str, Any]) -> dict[str, Any]:
        """Raw reply."""
        return ctl(self.root, command)

    def call(self, command: dict[str, Any]) -> Any:
        """Result, or HwsimError."""
        return call(self.root, command)


@contextlib.contextmanager
def mounted(spec: Spec | str | Path, mountpoint: str | Path, etc: str | Path | None = None,
            threads: bool = True) -> Iterator[Mounted]:
    """Mount for the duration of a with-block; always unmounts, even when the block fails.  ``threads=False``: one
    request at a time, faster, no hang or delay faults (fusefs.serve)."""
    reason = fuse_available()
    if reason:
        raise OSError(errno.ENODEV, f"FUSE unavailable: {reason}")
    root = Path(mountpoint)
    pid = start(spec, root, etc, threads=threads)
    try:
        yield Mounted(root, pid)
    finally:
        stop(root)
