"""Fault injection: make a chosen path fail with an errno, hang, or respond slowly, on read and/or write.

Faults match the *canonical* path (symlinks resolved), because that is what a FUSE daemon sees after the kernel
has walked the symlinks; a fault set on /sys/class/net/ib0/device/sriov_numvfs therefore also hits
/sys/bus/pci/devices/<bdf>/sriov_numvfs. Hangs wait on an Event so that clearing the fault (or unmounting)
releases the blocked caller instead of leaving a stuck thread behind.
"""

from __future__ import annotations

import errno
import fnmatch
import itertools
import threading
from dataclasses import dataclass, field
from typing import Callable

from .fmt import oserror

ACTIONS = ("errno", "hang", "delay")
OPS = ("read", "write", "any")


def errno_value(value: int | str) -> int:
    """Accept 'EBUSY', 'ebusy' or 16."""
    if isinstance(value, int):
        return value
    code = getattr(errno, str(value).upper(), None)
    if not isinstance(code, int):
        raise ValueError(f"unknown errno {value!r}")
    return code


@dataclass
class Fault:
    """One injected fault."""

    ident: int
    path: str
    op: str
    action: str
    errno: int
    seconds: float
    count: int | None
    release: threading.Event = field(default_factory=threading.Event)

    def describe(self) -> dict[str, object]:
        """JSON-friendly view."""
        return {"id": self.ident, "path": self.path, "op": self.op, "action": self.action,
                "errno": errno.errorcode.get(self.errno, self.errno), "seconds": self.seconds, "count": self.count}


class FaultTable:
    """Thread-safe list of faults; `check` is called before every read/write of the simulated tree."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, path: str, op: str = "any", action: str = "errno", errno_: int | str | None = None,
            seconds: float = 0.0, count: int | None = None) -> Fault:
        """Register a fault; `path` is relative to the simulated root and may be a glob.

        The errno defaults to EIO for `errno` faults and to ETIMEDOUT for `hang` (what mlx5 returns when a firmware
        command times out; EINTR would be retried transparently by most callers, Python included); `delay` ignores
        it and lets the operation proceed.
        """
        if op not in OPS:
            raise ValueError(f"op must be one of {OPS}")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}")
        if action in ("hang", "delay") and seconds <= 0:
            raise ValueError(f"{action} needs seconds > 0")
        if errno_ is None:
            errno_ = errno.ETIMEDOUT if action == "hang" else errno.EIO
        fault = Fault(next(self._ids), path.strip("/"), op, action, errno_value(errno_), float(seconds), count)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self, ident: int | None = None) -> int:
        """Remove one fault (or all); blocked hangs are released. Returns how many were removed."""
        with self._lock:
            gone = [f for f in self._faults if ident is None or f.ident == ident]
            self._faults = [f for f in self._faults if f not in gone]
        for fault in gone:
            fault.release.set()
        return len(gone)

    def list(self) -> list[Fault]:
        """Current faults."""
        with self._lock:
            return list(self._faults)

    def check(self, op: str, path: str, canonical: Callable[[str], str]) -> None:
        """Apply the first matching fault: raise its errno, or block for its time (then fail or proceed)."""
        fault = self._match(op, path, canonical)
        if fault is None:
            return
        if fault.action == "errno":
            raise oserror(fault.errno, path)
        fault.release.wait(fault.seconds)
        if fault.action == "hang":
            raise oserror(fault.errno, path)

    def _match(self, op: str, path: str, canonical: Callable[[str], str]) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.op not in (op, "any"):
                    continue
                if not _path_matches(fault.path, path, canonical):
                    continue
                if fault.count is not None:
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                return fault
        return None


def _path_matches(pattern: str, path: str, canonical: Callable[[str], str]) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return pattern == path or canonical(pattern) == path
