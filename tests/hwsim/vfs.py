"""A tiny in-memory tree of directories, attribute files and relative symlinks, shaped like sysfs/procfs.

File contents are callables so that reads always see the live state; writes go to a store callable that
raises OSError with the errno the kernel would return.
"""

from __future__ import annotations

import errno
import stat
from dataclasses import dataclass, field
from typing import Callable, Union

from .fmt import oserror

Reader = Callable[[], str]
Writer = Callable[[str], None]


@dataclass
class File:
    """A sysfs/procfs attribute. No reader means write-only (e.g. drivers/*/bind), no writer read-only."""

    read: Reader | None
    write: Writer | None = None
    mode: int = 0o444
    size: int = 4096
    #: a binary attribute (sysfs bin_attribute such as a PCI `config`): `read` returns bytes, reads and writes
    #: take an offset through pread(offset, size) / pwrite(offset, data) -> count
    binary: bool = False
    pread: Callable[[int, int], bytes] | None = None
    pwrite: Callable[[int, bytes], int] | None = None


@dataclass
class Link:
    """A symlink with the relative target text the kernel would produce."""

    target: str


@dataclass
class Dir:
    """A directory."""

    children: dict[str, "Entry"] = field(default_factory=dict)


Entry = Union[File, Link, Dir]


def split(path: str) -> list[str]:
    """Path components, ignoring leading/trailing/double slashes."""
    return [part for part in path.split("/") if part and part != "."]


def relative_target(link_dir: list[str], target: list[str]) -> str:
    """Relative symlink text as kernfs_get_target_path() builds it.

    The kernel climbs from the link's directory until it reaches a *strict* ancestor of the target, which is why
    net/ib0/device reads '../../../0000:82:00.0' and not '../..' (compare realdata/hwloc 32em64t capture).
    """
    strict_ancestors = target[:-1]
    common = 0
    while common < len(link_dir) and common < len(strict_ancestors) and link_dir[common] == strict_ancestors[common]:
        common += 1
    ups = len(link_dir) - common
    return "/".join([".."] * ups + target[common:])


class Tree:
    """Root directory plus helpers to build and walk it."""

    def __init__(self) -> None:
        self.root = Dir()

    def mkdir(self, path: str | list[str]) -> Dir:
        """Create a directory and its parents; return it."""
        node = self.root
        for part in split(path) if isinstance(path, str) else path:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = Dir()
            if not isinstance(child, Dir):
                raise ValueError(f"{path}: {part} is not a directory")
            node = child
        return node

    def add_file(self, path: str, read: Reader | None, write: Writer | None = None, mode: int | None = None,
                 size: int = 4096) -> None:
        """Add an attribute; the default mode follows from which callables exist (0444, 0644, 0200)."""
        parts = split(path)
        if mode is None:
            mode = (0o444 if read else 0) | (0o200 if write else 0)
            if read and write:
                mode = 0o644
        self.mkdir(parts[:-1]).children[parts[-1]] = File(read, write, mode, size)

    def add_binary(self, path: str, size: int, pread: Callable[[int, int], bytes],
                   pwrite: Callable[[int, bytes], int] | None, mode: int = 0o644) -> None:
        """Add a binary attribute of a fixed size (sysfs bin_attribute: st_size is the attribute's size)."""
        parts = split(path)
        self.mkdir(parts[:-1]).children[parts[-1]] = File(lambda: pread(0, size), None, mode, size, True, pread,
                                                          pwrite)

    def add_value(self, path: str, value: str) -> None:
        """Add a read-only attribute with a fixed value (a trailing newline is added, as sysfs_emit does)."""
        text = value + "\n"
        self.add_file(path, lambda: text)

    def add_link(self, path: str, target: str) -> None:
        """Add a symlink whose text is computed relative to its directory, as sysfs does."""
        parts = split(path)
        self.mkdir(parts[:-1]).children[parts[-1]] = Link(relative_target(parts[:-1], split(target)))

    def lookup(self, path: str, follow_last: bool = True) -> tuple[list[str], Entry]:
        """Resolve a path (following symlinks, like the VFS does) to its canonical components and entry."""
        return self._walk(split(path), follow_last, 0)

    def _walk(self, parts: list[str], follow_last: bool, depth: int) -> tuple[list[str], Entry]:
        if depth > 40:
            raise oserror(errno.ELOOP)
        node: Entry = self.root
        done: list[str] = []
        for idx, part in enumerate(parts):
            if not isinstance(node, Dir):
                raise oserror(errno.ENOTDIR, "/".join(done))
            if part == "..":
                done = done[:-1]
                node = self._walk(done, True, depth + 1)[1]
                continue
            child = node.children.get(part)
            if child is None:
                raise oserror(errno.ENOENT, "/".join(done + [part]))
            last = idx == len(parts) - 1
            if isinstance(child, Link) and (follow_last or not last):
                done, node = self._walk(done + split(child.target), True, depth + 1)
                continue
            done.append(part)
            node = child
        return done, node


def st_mode(entry: Entry) -> int:
    """stat mode bits for an entry: sysfs dirs 0755, links 0777, files their own mode."""
    if isinstance(entry, Dir):
        return stat.S_IFDIR | 0o755
    if isinstance(entry, Link):
        return stat.S_IFLNK | 0o777
    return stat.S_IFREG | entry.mode
