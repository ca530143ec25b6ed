"""Fault injection: make a chosen path fail with an errno, hang, or respond slowly, on read and/or write; and make
an RDMA port retransmit while traffic runs through it (``retransmit`` faults, see Node.traffic()).

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


@dataclass
class RetransmitFault:
    """An RDMA port that loses packets while traffic runs (a bad cable or transceiver, a lossy RoCE hop): each
    second of traffic through it, ``per_second`` packets are lost and recovered by retransmission, the port delivers
    ``throughput`` of its line rate, and ``cnps_per_second`` congestion notifications are exchanged (RoCE only)."""

    ident: int
    path: str
    per_second: float
    throughput: float
    cnps_per_second: float

    def describe(self) -> dict[str, object]:
        """JSON-friendly view."""
        return {"id": self.ident, "path": self.path, "action": "retransmit", "per_second": self.per_second,
                "throughput": self.throughput, "cnps_per_second": self.cnps_per_second}


class FaultTable:
    """Thread-safe list of faults; `check` is called before every read/write of the simulated tree."""

    def __init__(self) -> None:
        #: None, or why a fault that blocks (hang, delay) cannot be served: a daemon serving one request at a time
        #: would stall every caller, the ctl file that clears the fault included
        self.no_blocking: str | None = None
        self._faults: list[Fault] = []
        self._retransmits: list[RetransmitFault] = []
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
        if action in ("hang", "delay") and self.no_blocking:
            raise ValueError(f"a {action} fault {self.no_blocking}")
        if errno_ is None:
            errno_ = errno.ETIMEDOUT if action == "hang" else errno.EIO
        fault = Fault(next(self._ids), path.strip("/"), op, action, errno_value(errno_), float(seconds), count)
        with self._lock:
            self._faults.append(fault)
        return fault

    def add_retransmit(self, path: str, per_second: float, throughput: float = 1.0,
                       cnps_per_second: float = 0.0) -> RetransmitFault:
        """Make the RDMA port at `path` (``sys/class/infiniband/<dev>/ports/<n>``, canonical, or a glob) retransmit
        while traffic runs; see :class:`RetransmitFault`."""
        per_second, throughput, cnps_per_second = float(per_second), float(throughput), float(cnps_per_second)
        if per_second < 0 or cnps_per_second < 0:
            raise ValueError("per_second and cnps_per_second must be >= 0")
        if not 0 < throughput <= 1:
            raise ValueError("throughput is the fraction of the line rate the port delivers: 0 < throughput <= 1")
        fault = RetransmitFault(next(self._ids), path.strip("/"), per_second, throughput, cnps_per_second)
        with self._lock:
            self._retransmits.append(fault)
        return fault

    def retransmit(self, path: str, canonical: Callable[[str], str]) -> RetransmitFault | None:
        """The first retransmit fault on the port at canonical `path`, or None."""
        with self._lock:
            for fault in self._retransmits:
                if _path_matches(fault.path, path, canonical):
                    return fault
        return None

    def clear(self, ident: int | None = None) -> int:
        """Remove one fault (or all); blocked hangs are released. Returns how many were removed."""
        with self._lock:
            gone = [f for f in self._faults if ident is None or f.ident == ident]
            self._faults = [f for f in self._faults if f not in gone]
            kept = [f for f in self._retransmits if ident is not None and f.ident != ident]
            removed = len(self._retransmits) - len(kept)
            self._retransmits = kept
        for fault in gone:
            fault.release.set()
        return len(gone) + removed

    def list(self) -> list[Fault | RetransmitFault]:
        """Current faults."""
        with self._lock:
            return list(self._faults) + list(self._retransmits)

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
