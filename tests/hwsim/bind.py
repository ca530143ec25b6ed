"""Host roots assembled with bind mounts, as a pod sees the host it mounts at ``/host``.

A test node is a directory whose ``sys/`` and ``proc/`` are the simulator's trees and whose ``etc/`` is a real
directory.  The collection resolves node paths exactly as inside a chroot at the root, so these pieces must be
*mounted* there, not linked: an absolute link ``root/sys -> /tmp/x/mnt/sys`` is re-rooted to ``root/tmp/x/mnt/sys``
(as the kernel would in a chroot), which is the point.  Bind mounts are what a real pod has, so they are what the
tests use.

The mounts live in a private mount namespace of the test process (entered once, on first use), so nothing a test
mounts is seen by the rest of the machine and everything goes away with the process, even after a crash.
Needs root (CAP_SYS_ADMIN); :func:`available` says why not otherwise, for a clean skip.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

_STATE: dict[str, object] = {}


def _libc():
    if "libc" not in _STATE:
        _STATE["libc"] = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _STATE["libc"]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def available() -> str | None:
    """None when this process can bind-mount in a private namespace, else the reason it cannot."""
    if "reason" not in _STATE:
        try:
            private_namespace()
            _STATE["reason"] = None
        except OSError as exc:
            _STATE["reason"] = "no private mount namespace (needs root): %s" % exc
    return _STATE["reason"]  # type: ignore[return-value]


def private_namespace() -> None:
    """Enter a private mount namespace once per process (mounts made later are invisible outside it)."""
    if _STATE.get("pid") == os.getpid():
        return
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _STATE["pid"] = os.getpid()


def bind(source: str | Path, target: str | Path) -> None:
    """``mount --rbind source target`` (the target directory is created)."""
    private_namespace()
    Path(target).mkdir(parents=True, exist_ok=True)
    _check(_libc().mount(os.fsencode(str(source)), os.fsencode(str(target)), None, MS_BIND | MS_REC, None),
           "mount --rbind %s %s" % (source, target))


def unbind(target: str | Path) -> None:
    """Detach a bind mount (lazily: a process still inside it keeps it until it leaves)."""
    _check(_libc().umount2(os.fsencode(str(target)), MNT_DETACH), "umount -l %s" % target)


def is_mount(path: str | Path) -> bool:
    """True when ``path`` is a mount point of this process's namespace (``os.path.ismount`` misses a bind mount of a
    directory of the same filesystem: same device, different inode)."""
    want = os.path.realpath(str(path))
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == want:
                return True
    return False


class Assembled:
    """A host root with trees bind-mounted at top-level names; ``close()`` (or ``with``) unmounts them."""

    def __init__(self, root: str | Path, trees: dict[str, str | Path]):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.mounted: list[Path] = []
        try:
            for name, source in trees.items():
                target = self.root / name
                bind(source, target)
                self.mounted.append(target)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        while self.mounted:
            unbind(self.mounted.pop())

    def __enter__(self) -> "Assembled":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
