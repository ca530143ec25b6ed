"""FUSE front end (mfusepy): serves the Node's tree at a mount point, plus the control file .hwsim/ctl.

Every error is the errno the state model raised, so callers (the code under test, possibly in a user-namespaced
container) see exactly what the kernel would return. Mounted with direct_io and zero attribute and negative-entry
timeouts: sysfs values change under the caller's feet and must never be served from the page cache, and a path
that appears (a new VF, a new rdma link) must be seen at once.

Positive directory entries are cached for ENTRY_TIMEOUT seconds, as the kernel caches sysfs's own dentries
(kernfs_dop_revalidate keeps a dentry while its node is active): without it every path component of every open
was a FUSE LOOKUP, about 8 round trips through this Python daemon for /sys/class/infiniband/<dev>/ports/1/
hw_counters/<name>.  A cached entry never answers for the daemon: the high-level API hands every open, read, stat
(attr_timeout 0), readlink and readdir to it by path, and it answers from the Node's state, so a path removed
within the timeout fails with ENOENT exactly as it did (tests/unit/hwsim/test_fusefs_cache.py).  Measured on
dgx-h100 (1,623 open+read+close of hw_counters and device attributes, one command): 3.80 -> 1.04 ms a read,
daemon CPU 3.38 -> 1.31 s.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any

import mfusepy as fuse

from . import control
from .mount import CTL, CTL_DIR, PID
from .state import BLOCKING_DELAYS, Node
from .vfs import Dir, File, st_mode


@dataclass
class Handle:
    """Per-open state: a read snapshot (sysfs reads are consistent per open) or a ctl exchange."""

    path: str
    data: bytes | None = None
    written: int = 0


class HwsimFS(fuse.Operations):
    """mfusepy operations backed by a Node."""

    use_ns = True

    def __init__(self, node: Node) -> None:
        self.node = node
        self.handles: dict[int, Handle] = {}
        self.ids = itertools.count(1)
        self.handle_lock = threading.Lock()
        self.mtime = time.time_ns()

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _rel(path: str) -> str:
        return path.strip("/")

    def _stat(self, mode: int, size: int = 0) -> dict[str, Any]:
        return {"st_mode": mode, "st_size": size, "st_nlink": 2 if stat.S_ISDIR(mode) else 1, "st_uid": 0,
                "st_gid": 0, "st_atime": self.mtime, "st_mtime": self.mtime, "st_ctime": self.mtime}

    def _handle(self, fh: int) -> Handle:
        with self.handle_lock:
            handle = self.handles.get(fh)
        if handle is None:
            raise fuse.FuseOSError(errno.EBADF)
        return handle

    def _new_handle(self, path: str) -> int:
        with self.handle_lock:
            fh = next(self.ids)
            self.handles[fh] = Handle(path)
        return fh

    # ---------------------------------------------------------------- metadata
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        rel = self._rel(path)
        if rel in ("", CTL_DIR):
            return self._stat(stat.S_IFDIR | 0o755)
        if rel == CTL:
            return self._stat(stat.S_IFREG | 0o666)
        if rel == PID:
            return self._stat(stat.S_IFREG | 0o444, 0)
        entry = self.node.lookup(rel, follow_last=False)[1]
        size = entry.size if isinstance(entry, File) else 0
        return self._stat(st_mode(entry), size)

    def opendir(self, path: str) -> int:
        """ENOENT (ENOTDIR) for a directory that is gone (is not one), as open() of a removed sysfs directory gives:
        libfuse's default opened any path whose dentry the kernel still held (ENTRY_TIMEOUT), and only the readdir
        after it failed (a VF's ``net`` directory after an unbind, seen by ib_vf_guids in the unit suite)."""
        rel = self._rel(path)
        if rel not in ("", CTL_DIR) and not isinstance(self.node.lookup(rel)[1], Dir):
            raise fuse.FuseOSError(errno.ENOTDIR)
        return 0

    def access(self, path: str, amode: int) -> int:
        """ENOENT for a path that is gone (libfuse's default answered 0 for any path the kernel still held)."""
        rel = self._rel(path)
        if rel not in ("", CTL_DIR, CTL, PID):
            self.node.lookup(rel, follow_last=False)
        return 0

    def readlink(self, path: str) -> str:
        return self.node.readlink(self._rel(path))

    def readdir(self, path: str, fh: int) -> list[str]:
        rel = self._rel(path)
        if rel == CTL_DIR:
            return [".", "..", "ctl", "pid"]
        names = self.node.readdir(rel)
        return [".", ".."] + names + ([CTL_DIR] if rel == "" else [])

    # ---------------------------------------------------------------- data
    def open(self, path: str, flags: int) -> int:
        rel = self._rel(path)
        if rel in (CTL, PID):
            if rel == PID and flags & os.O_ACCMODE != os.O_RDONLY:
                raise fuse.FuseOSError(errno.EACCES)
            return self._new_handle(rel)
        if flags & os.O_ACCMODE != os.O_RDONLY:
            self.node.check_writable(rel)
        if flags & os.O_ACCMODE != os.O_WRONLY:
            entry = self.node.lookup(rel)[1]
            if isinstance(entry, File) and entry.read is None:
                raise fuse.FuseOSError(errno.EACCES)
        return self._new_handle(rel)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        handle = self._handle(fh)
        if handle.path == PID:
            return f"{os.getpid()}\n".encode()[offset:offset + size]
        if handle.path == CTL:
            reply = handle.data or b""
            start = max(0, offset - handle.written)
            return reply[start:start + size]
        entry = self.node.lookup(handle.path)[1]
        if isinstance(entry, File) and entry.binary:
            return self.node.pread(handle.path, size, offset)
        if handle.data is None or offset == 0:
            handle.data = self.node.read(handle.path).encode()
        return handle.data[offset:offset + size]

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        handle = self._handle(fh)
        if handle.path == CTL:
            # The reply is read back sequentially after the write: file offset `written` is its first byte.
            handle.data = control.handle(self.node, data).encode()
            handle.written += len(data)
            return len(data)
        return self.node.pwrite(handle.path, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        """O_TRUNC on a sysfs attribute is ignored by the kernel; read-only ones still refuse the open."""
        rel = self._rel(path)
        if rel != CTL:
            self.node.check_writable(rel)
        return 0

    def release(self, path: str, fh: int) -> int:
        with self.handle_lock:
            self.handles.pop(fh, None)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    # ---------------------------------------------------------------- refused operations (sysfs has none of these)
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        raise fuse.FuseOSError(errno.EACCES)

    def mkdir(self, path: str, mode: int) -> int:
        """EPERM as on sysfs, except configfs groups (rdma_cm/<dev>, tests/hwsim/qos.py)."""
        self.node.mkdir(self._rel(path))
        return 0

    def rmdir(self, path: str) -> int:
        self.node.rmdir(self._rel(path))
        return 0

    def unlink(self, path: str) -> int:
        raise fuse.FuseOSError(errno.EPERM)

    def rename(self, old: str, new: str) -> int:
        raise fuse.FuseOSError(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise fuse.FuseOSError(errno.EPERM)

    def chmod(self, path: str, mode: int) -> int:
        raise fuse.FuseOSError(errno.EPERM)

    def chown(self, path: str, uid: int, gid: int) -> int:
        raise fuse.FuseOSError(errno.EPERM)

    def utimens(self, path: str, times: Any = None) -> int:
        return 0

    def destroy(self, path: str) -> None:
        """Release callers blocked in an injected hang so unmount does not wait for them."""
        self.node.faults.clear()


#: seconds the kernel keeps a path component it looked up (the module docstring says why this is safe)
ENTRY_TIMEOUT = 1.0


def serve(node: Node, mountpoint: str, foreground: bool = True, threads: bool = True) -> None:
    """Mount and serve until unmounted (blocks).

    ``threads=False`` serves one request at a time (libfuse's single-threaded loop): about twice as fast per request
    (measured on dgx-h100, open+read+close of a sysfs attribute: 380 -> 170 us; no GIL hand-over between libfuse's
    worker threads), for a mount with one caller at a time.  Nothing may block in it, so it refuses hang and delay
    faults and delays of the state model (a caller blocked in one would stall every other, the ctl file that
    releases it included): mount with threads to inject them.
    """
    if not threads:
        node.faults.no_blocking = "needs a mount that serves requests in threads (this one serves one at a time)"
        blocking = sorted(name for name in BLOCKING_DELAYS if node.delays.get(name, 0) > 0)
        if blocking:
            raise ValueError(f"the spec's delays {blocking} need a mount that serves requests in threads")
    fuse.FUSE(HwsimFS(node), mountpoint, foreground=foreground, allow_other=True, direct_io=True,
              attr_timeout=0, entry_timeout=ENTRY_TIMEOUT, negative_timeout=0, fsname="hwsim", subtype="hwsim",
              nothreads=not threads)
