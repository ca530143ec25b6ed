"""Write the power-on tree as plain files and relative symlinks, for fast read-only tests without FUSE."""

from __future__ import annotations

import os
from pathlib import Path

from .spec import Spec, load
from .state import Node
from .vfs import Dir, File, Link


def render(spec: Spec | str | Path, directory: str | Path, node: Node | None = None) -> Path:
    """Materialise `spec` (or an existing node's current state) under `directory`; returns the directory.

    Attributes whose read fails in the kernel (carrier of a down link, ndevs of an IB GID) are left out, since a
    plain file cannot return an errno; read-only attributes get mode 0444 like in sysfs.
    """
    if node is None:
        node = Node(spec if isinstance(spec, Spec) else load(spec))
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    _write(node.tree().root, root)
    return root


def _write(entry: Dir, target: Path) -> None:
    for name, child in entry.children.items():
        path = target / name
        if isinstance(child, Dir):
            path.mkdir(exist_ok=True)
            _write(child, path)
        elif isinstance(child, Link):
            os.symlink(child.target, path)
        elif isinstance(child, File) and child.read is not None:
            try:
                text = child.read()
            except OSError:
                continue
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text, encoding="utf-8")
            os.chmod(path, child.mode if child.mode & 0o444 else 0o644)
