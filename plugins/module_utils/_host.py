# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place where the collection touches a node's filesystem.

Every node path (``/sys/...``, ``/proc/...``, ``/etc/...``) is written as the node sees it and
goes through :class:`HostRoot`, which prefixes ``host_root``.  In production the root is ``/``,
or ``/host`` when an audit runs in a pod with the host mounted; in tests it is a simulated node.

Symlinks are resolved by the operating system, as the kernel would for a bind-mounted host
tree.  Kernel trees (sysfs) only contain relative links, so they resolve inside the root;
:meth:`HostRoot.resolve` reports a link that leaves the root as unresolvable rather than
silently reading the auditing machine's own files.

A root may also be *assembled*: its top-level entries symlinks to other trees (a simulated
node's ``sys`` and ``proc`` next to a container's real ``etc``).  Paths that resolve into such
a top-level target map back to the node path under it.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import os
import posixpath

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, HostRootError

# errnos that mean "this attribute is not there" on sysfs/procfs, as opposed to a real failure
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO)


class HostRoot:
    """A node's filesystem seen through ``root``; all arguments are absolute node paths."""

    def __init__(self, root="/"):
        if not isinstance(root, str) or not root:
            raise HostRootError("host_root must be a non-empty path, got %r" % (root,))
        if not os.path.isabs(root):
            raise HostRootError("host_root must be an absolute path, got %r" % (root,))
        if not os.path.exists(root):
            raise HostRootError("host_root %s does not exist" % root, {"host_root": root})
        if not os.path.isdir(root):
            raise HostRootError("host_root %s is not a directory" % root, {"host_root": root})
        self.root = os.path.realpath(root)
        self._aliases = None

    # -- path mapping -------------------------------------------------------------------
    def path(self, node_path):
        """Map an absolute node path to the local path under the root.  ``..`` cannot climb above the root."""
        if not node_path.startswith("/"):
            raise HostRootError("node paths must be absolute, got %r" % (node_path,))
        clean = posixpath.normpath("/" + node_path.lstrip("/"))
        if self.root == "/":
            return clean
        return self.root + clean if clean != "/" else self.root

    def node_path(self, local_path):
        """The inverse of :meth:`path`: the node path of a local path, or None if it lies outside the root."""
        local = os.path.normpath(local_path)
        if self.root == "/":
            return local
        if local == self.root:
            return "/"
        if local.startswith(self.root + "/"):
            return local[len(self.root):]
        for real, node in self._top_level_aliases():
            if local == real or local.startswith(real + "/"):
                return node + local[len(real):]
        return None

    def _top_level_aliases(self):
        """``[(real directory, "/name")]`` for top-level entries of the root that are symlinks to directories."""
        if self._aliases is None:
            self._aliases = []
            for name in sorted(os.listdir(self.root)):
                local = os.path.join(self.root, name)
                if os.path.islink(local) and os.path.isdir(local):
                    real = os.path.realpath(local)
                    if real != "/":
                        self._aliases.append((real, "/" + name))
            self._aliases.sort(key=lambda alias: -len(alias[0]))
        return self._aliases

    # -- reads ----------------------------------------------------------------------------
    def exists(self, node_path):
        """True when the path exists (following symlinks)."""
        return os.path.exists(self.path(node_path))

    def isdir(self, node_path):
        """True when the path is a directory (following symlinks)."""
        return os.path.isdir(self.path(node_path))

    def islink(self, node_path):
        """True when the path itself is a symlink."""
        return os.path.islink(self.path(node_path))

    def read_text(self, node_path, default=None):
        """The whole file as text, or ``default`` when it does not exist.

        Other errors (EACCES, EIO, a hung attribute's EINTR ...) raise :class:`HostReadError`, because a file that
        exists but cannot be read is a finding, not an absence.
        """
        try:
            with open(self.path(node_path), "r", encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            if exc.errno in _ABSENT or isinstance(exc, IsADirectoryError):
                return default
            raise HostReadError(
                "cannot read %s: %s" % (node_path, os.strerror(exc.errno) if exc.errno else exc),
                {"path": node_path, "errno": exc.errno},
            ) from exc

    def read_attr(self, node_path, default=None):
        """A sysfs/procfs attribute: its text without the trailing newline, or ``default`` when absent."""
        text = self.read_text(node_path)
        if text is None:
            return default
        return text.rstrip("\n").strip()

    def try_attr(self, node_path, default=None, problems=None):
        """Like :meth:`read_attr` but never raises: an unreadable attribute gives ``default``.

        When ``problems`` (a list) is given, the failure is appended to it so read-only reports can show
        what could not be read instead of hiding it.
        """
        try:
            return self.read_attr(node_path, default)
        except HostReadError as exc:
            if problems is not None:
                problems.append({"path": node_path, "error": exc.msg})
            return default

    def read_int(self, node_path, default=None, base=10, problems=None):
        """An integer attribute (``base=0`` accepts ``0x`` prefixes), or ``default`` when absent or malformed."""
        text = self.try_attr(node_path, None, problems)
        if text is None or text == "":
            return default
        try:
            return int(text, base)
        except ValueError:
            if problems is not None:
                problems.append({"path": node_path, "error": "not an integer: %r" % text})
            return default

    def listdir(self, node_path):
        """Sorted entry names of a directory; an absent directory lists as empty."""
        try:
            return sorted(os.listdir(self.path(node_path)))
        except (IOError, OSError) as exc:
            if exc.errno in _ABSENT:
                return []
            raise HostReadError(
                "cannot list %s: %s" % (node_path, os.strerror(exc.errno)), {"path": node_path, "errno": exc.errno}
            ) from exc

    def readlink(self, node_path):
        """The raw target of a symlink, or None when the path is not a symlink."""
        try:
            return os.readlink(self.path(node_path))
        except (IOError, OSError):
            return None

    def resolve(self, node_path):
        """The node path a (possibly symlinked) path really is, or None if absent or resolving outside the root."""
        local = self.path(node_path)
        if not os.path.exists(local):
            return None
        return self.node_path(os.path.realpath(local))

    def follow(self, node_path, target=False):
        """The node path a class/bus entry points to: the entry itself when it is a plain directory.

        Kernel links are relative, so joining the target onto the link's directory is exact and costs one
        ``readlink`` (none when the caller already has ``target``) instead of a ``realpath()`` stat per path
        component; absolute targets (hand-made fixtures) go through :meth:`resolve`.
        """
        if target is False:
            target = self.readlink(node_path)
        if target is None:
            return node_path
        if target.startswith("/"):
            return self.resolve(node_path)
        return posixpath.normpath(posixpath.join(posixpath.dirname(node_path), target))

    def link_name(self, node_path):
        """Basename of what a symlink points to (``driver`` -> ``mlx5_core``, ``physfn`` -> a BDF), or None."""
        target = self.readlink(node_path)
        if not target:
            return None
        return posixpath.basename(target.rstrip("/"))

    # -- writes -----------------------------------------------------------------------------
    def write_attr(self, node_path, value):
        """Write one sysfs/procfs attribute in a single ``write()``, as the kernel expects.

        Errors are raised as the original ``OSError`` so callers can map the errno (EBUSY, ERANGE, ...)
        to the message that explains it; this layer does not guess at meanings.
        """
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        fd = os.open(self.path(node_path), os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


class HostCommands:
    """Runs node commands for a module, inside ``host_root`` when it is not ``/``.

    Commands that change boot state (``update-grub``, ``grubby``) must act on the tree under ``host_root``, so
    they run through ``chroot <host_root>`` there; on ``/`` they run directly, found on the node's PATH.
    Output is parsed, so the locale is pinned to C.
    """

    def __init__(self, module, host):
        self.module = module
        self.host = host
        module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C", "LANGUAGE": "C"}

    def find(self, name):
        """The command's path on the node, or None.  Under a host root this looks inside the root."""
        if self.host.root == "/":
            return self.module.get_bin_path(name)
        for directory in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
            candidate = directory + "/" + name
            if os.access(self.host.path(candidate), os.X_OK):
                return candidate
        return None

    def run(self, argv, data=None):
        """``(rc, stdout, stderr)`` of a tool that works on the node's *files* (``update-grub``, ``grubby``,
        ``update-initramfs``): chrooted into ``host_root`` when it is not ``/``."""
        if self.host.root != "/":
            argv = [self.module.get_bin_path("chroot", required=True), self.host.root] + list(argv)
        return self.module.run_command(argv, data=data, check_rc=False)

    def run_kernel(self, argv, data=None):
        """``(rc, stdout, stderr)`` of a tool that talks to the *kernel* (``rdma``, ``ip``, ``modprobe``):
        it runs here, found on PATH, since a pod auditing ``/host`` shares the host's kernel, not its files.
        A missing tool gives rc 127 and says so, like a shell would."""
        path = self.module.get_bin_path(argv[0])
        if path is None:
            return 127, "", "%s: command not found" % argv[0]
        return self.module.run_command([path] + list(argv[1:]), data=data, check_rc=False)
