# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place where the collection touches a node's filesystem.

Every node path (``/sys/...``, ``/proc/...``, ``/etc/...``) is written as the node sees it and goes through
:class:`HostRoot`.  In production the root is ``/``, or ``/host`` when an audit runs in a pod with the host
mounted; in tests it is a simulated node.

**Paths resolve exactly as inside a chroot at the root** (docs/security.md):

- an absolute symlink target is re-rooted (``/host/var/run -> /run`` reads ``/host/run``, never the pod's
  ``/run``); ``..`` at the root stays at the root; more than 40 links give ELOOP;
- the kernel does the walk where it can: ``openat2(2)`` with ``RESOLVE_IN_ROOT`` (Linux >= 5.6) keeps every
  component inside the root even when the tree changes during the walk; where it is missing (older kernels,
  seccomp filters) :meth:`HostRoot.resolve` walks component by component (systemd's ``chase()`` with
  ``CHASE_PREFIX_ROOT``) and the last component is opened with ``O_NOFOLLOW``;
- with the root ``/`` the kernel's own resolution already is that, and nothing changes for real nodes.

Reads open with ``O_NONBLOCK`` and refuse FIFOs, sockets and devices (no hang on a planted FIFO), refuse
directories where a file is expected, and read at most :data:`MAX_READ` bytes.  Writes go through directory
file descriptors (:meth:`HostRoot.open_dir`) so that no later component can be swapped for a link.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import os
import posixpath
import stat

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, HostRootError, InputError

# errnos that mean "this attribute is not there" on sysfs/procfs, as opposed to a real failure
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO)
#: symlinks followed in one resolution before ELOOP, as the kernel's MAXSYMLINKS
MAX_LINKS = 40
#: the largest file the collection reads from a node (configs are kilobytes; sysfs attributes a page)
MAX_READ = 16 * 1024 * 1024

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_PATH = getattr(os, "O_PATH", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | _O_CLOEXEC

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def file_kind(mode):
    """``"a FIFO"`` ... for anything that is not a regular file, None for a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None


def check_name(option, value, kind="netdev"):
    """Refuse a device name that the kernel could not have made, before it reaches a path or a command.

    ``netdev``: net/core/dev.c ``dev_valid_name()`` (1-15 bytes, not ``.``/``..``, no ``/``, ``:`` or whitespace);
    ``rdma``: an InfiniBand device name (1-63 bytes, no ``/``, whitespace or NUL).  The InputError names the option.
    """
    limit = 15 if kind == "netdev" else 63
    bad = "/:" if kind == "netdev" else "/"
    if (not isinstance(value, str) or not value or len(value.encode("utf-8", "surrogateescape")) > limit
            or value in (".", "..") or any(c in bad or c.isspace() or c == "\0" or not c.isprintable() for c in value)):
        raise InputError("%s %r is not a valid %s name (1-%d characters, no '/'%s, whitespace or control characters)"
                         % (option, value, "network interface" if kind == "netdev" else "RDMA device", limit,
                            ", ':'" if kind == "netdev" else ""), {"option": option, "value": value})
    return value


class _Openat2:
    """``openat2(2)`` through ctypes (syscall 437 on every Linux architecture), or None where unavailable."""

    RESOLVE_NO_MAGICLINKS = 0x02
    RESOLVE_IN_ROOT = 0x10
    _state = {}

    @classmethod
    def get(cls):
        """The callable ``(dir_fd, relative path, flags, mode) -> fd``, or None (checked once per process)."""
        if "call" not in cls._state:
            cls._state["call"] = cls._load()
        return cls._state["call"]

    @classmethod
    def _load(cls):
        try:
            import ctypes  # pylint: disable=import-outside-toplevel
        except ImportError:
            return None

        class OpenHow(ctypes.Structure):  # pylint: disable=too-few-public-methods
            """struct open_how"""
            _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            syscall = libc.syscall
        except (OSError, AttributeError):
            return None
        syscall.restype = ctypes.c_long

        def openat2(dir_fd, path, flags, mode=0):
            how = OpenHow(flags, mode, cls.RESOLVE_IN_ROOT | cls.RESOLVE_NO_MAGICLINKS)
            while True:
                fd = syscall(ctypes.c_long(437), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path)),
                             ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
                if fd >= 0:
                    return fd
                err = ctypes.get_errno()
                if err not in (errno.EINTR, errno.EAGAIN):
                    raise OSError(err, os.strerror(err), path)

        probe = os.open("/", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            os.close(openat2(probe, ".", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC))
        except OSError:
            return None  # ENOSYS (kernel < 5.6), EPERM (a seccomp filter): walk in Python instead
        finally:
            os.close(probe)
        return openat2


def _parse_int(text, base=10):
    """``int(text, base)`` of an attribute, or None when it is not one (or longer than any attribute's number)."""
    if len(text) > 64:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _split(node_path):
    return [part for part in node_path.split("/") if part and part != "."]


class HostRoot:
    """A node's filesystem seen through ``root``; all arguments are absolute node paths."""

    def __init__(self, root="/", use_openat2=True):
        if not isinstance(root, str) or not root:
            raise HostRootError("host_root must be a non-empty path, got %r" % (root,))
        if not os.path.isabs(root):
            raise HostRootError("host_root must be an absolute path, got %r" % (root,))
        if "\0" in root:
            raise HostRootError("host_root must not contain a NUL byte, got %r" % (root,))
        if not os.path.exists(root):
            raise HostRootError("host_root %s does not exist" % root, {"host_root": root})
        if not os.path.isdir(root):
            raise HostRootError("host_root %s is not a directory" % root, {"host_root": root})
        self.root = os.path.realpath(root)
        self._openat2 = _Openat2.get() if use_openat2 and self.root != "/" else None
        self._root_fd = None  # opened on the first openat2 (one descriptor for the module's life)

    def __del__(self):
        if getattr(self, "_root_fd", None) is not None:
            try:
                os.close(self._root_fd)
            except OSError:
                pass
            self._root_fd = None

    # -- resolution ---------------------------------------------------------------------
    @staticmethod
    def _check(node_path):
        if not isinstance(node_path, str) or not node_path.startswith("/"):
            raise HostRootError("node paths must be absolute, got %r" % (node_path,))
        if "\0" in node_path:
            raise HostRootError("node paths must not contain a NUL byte, got %r" % (node_path,))

    def _local(self, canonical):
        return canonical if self.root == "/" else (self.root + canonical if canonical != "/" else self.root)

    def lexical(self, node_path):
        """The local path of ``node_path`` with ``..`` applied lexically (no link followed)."""
        self._check(node_path)
        return self._local(posixpath.normpath("/" + node_path.lstrip("/")))

    def chase(self, node_path, follow_last=True, missing_ok=True):
        """The canonical node path of ``node_path``, resolved as inside a chroot at the root.

        Absolute link targets start again at the root, ``..`` at the root stays there.  A component that does not
        exist ends the walk: the rest is appended as written when ``missing_ok`` (``/etc/new.d/file`` for a file
        about to be created), else None.  A loop raises HostReadError (ELOOP) naming the path.
        """
        self._check(node_path)
        todo = _split(node_path)
        todo.reverse()
        done = []
        links = 0
        while todo:
            part = todo.pop()
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = "/" + "/".join(done + [part])
            try:
                info = os.lstat(self._local(candidate))
            except OSError as exc:
                if exc.errno in _ABSENT:
                    rest = [part] + list(reversed(todo))
                    if not missing_ok or ".." in rest:
                        return None  # the kernel fails a walk through a missing directory, ``..`` or not
                    return "/" + "/".join(done + rest)
                raise HostReadError("cannot resolve %s: %s at %s" % (node_path, os.strerror(exc.errno), candidate),
                                    {"path": node_path, "errno": exc.errno}) from exc
            if stat.S_ISLNK(info.st_mode) and (todo or follow_last):
                links += 1
                if links > MAX_LINKS:
                    raise HostReadError("cannot resolve %s: too many levels of symbolic links (a loop at %s)"
                                        % (node_path, candidate), {"path": node_path, "errno": errno.ELOOP})
                target = os.readlink(self._local(candidate))
                if target.startswith("/"):
                    done = []
                for piece in reversed(_split(target)):
                    todo.append(piece)
                continue
            if todo and not stat.S_ISDIR(info.st_mode):
                return None  # ENOTDIR: nothing can be below a file
            done.append(part)
        return "/" + "/".join(done)

    def path(self, node_path):
        """The local path of the node path after chroot-exact resolution (the last link is followed too).

        Only for handing a file to code that needs a name (a command's argument, a glob); reading and writing go
        through the methods below, which do not leave a window between resolving and opening."""
        if self.root == "/":
            return self.lexical(node_path)
        canonical = self.chase(node_path)
        return self._local(canonical) if canonical is not None else self.lexical(node_path)

    def resolve(self, node_path):
        """The node path a (possibly symlinked) path really is, or None if it does not exist."""
        if self.root == "/":
            self._check(node_path)
            local = os.path.realpath(node_path)
            return local if os.path.exists(local) else None
        canonical = self.chase(node_path, missing_ok=False)
        if canonical is None or not os.path.lexists(self._local(canonical)):
            return None
        return canonical

    def parent_and_name(self, node_path):
        """``(canonical parent directory, last component)``: links in the parents followed, the last one not."""
        self._check(node_path)
        clean = posixpath.normpath("/" + node_path.lstrip("/"))
        if clean == "/":
            raise HostRootError("%s has no parent directory" % node_path, {"path": node_path})
        parent, name = posixpath.split(clean)
        canonical = self.chase(parent)
        if canonical is None:
            raise OSError(errno.ENOTDIR, "a parent of %s is not a directory" % node_path, node_path)
        return canonical, name

    # -- opening ----------------------------------------------------------------------------
    def open_fd(self, node_path, flags=_READ_FLAGS, mode=0o644):
        """An fd of ``node_path`` opened with ``flags`` inside the root (raises the OSError of the open)."""
        if self.root == "/":
            self._check(node_path)
            return os.open(node_path, flags | _O_CLOEXEC, mode)
        if self._openat2 is not None:
            self._check(node_path)
            if self._root_fd is None:
                self._root_fd = os.open(self.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            # openat2 refuses a mode without O_CREAT (EINVAL), unlike open
            return self._openat2(self._root_fd, node_path.lstrip("/") or ".", flags | _O_CLOEXEC,
                                 mode if flags & os.O_CREAT else 0)
        follow = flags & _O_NOFOLLOW == 0
        canonical = self.chase(node_path, follow_last=follow, missing_ok=bool(flags & os.O_CREAT))
        if canonical is None:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), node_path)
        return os.open(self._local(canonical), flags | _O_CLOEXEC | _O_NOFOLLOW, mode)

    def open_dir(self, node_path):
        """``(fd, canonical node path)`` of a directory, for ``*at()`` calls that cannot be redirected by a link
        swapped in later.  Raises the OSError of the open (ENOENT, ENOTDIR, ELOOP ...)."""
        canonical = self.chase(node_path) if self.root != "/" else self.lexical(node_path)
        if canonical is None:
            raise OSError(errno.ENOTDIR, "%s is not a directory" % node_path, node_path)
        fd = os.open(self.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            for part in _split(canonical):
                # the canonical path has no links left: one appearing now is refused (ELOOP), never followed
                nxt = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, canonical

    # -- reads ----------------------------------------------------------------------------
    def _lstat(self, node_path):
        parent, name = self.parent_and_name(node_path)
        return os.lstat(self._local(parent) + "/" + name if parent != "/" else self._local("/" + name))

    def stat(self, node_path, follow=True):
        """``os.stat_result`` of the path (``follow=False``: of a link itself), or None when absent."""
        try:
            if follow:
                fd = self.open_fd(node_path, os.O_RDONLY | _O_PATH if _O_PATH else _READ_FLAGS)
                try:
                    return os.fstat(fd)
                finally:
                    os.close(fd)
            return self._lstat(node_path)
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            raise self._error("cannot stat", node_path, exc) from exc

    def exists(self, node_path):
        """True when the path exists (following symlinks)."""
        try:
            return self.stat(node_path) is not None
        except HostReadError:
            return False

    def isdir(self, node_path):
        """True when the path is a directory (following symlinks)."""
        try:
            info = self.stat(node_path)
        except HostReadError:
            return False
        return info is not None and stat.S_ISDIR(info.st_mode)

    def islink(self, node_path):
        """True when the path itself is a symlink."""
        try:
            info = self.stat(node_path, follow=False)
        except HostReadError:
            return False
        return info is not None and stat.S_ISLNK(info.st_mode)

    @staticmethod
    def _error(what, node_path, exc):
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno.ELOOP:
            reason = "too many levels of symbolic links, or a link where none is allowed"
        return HostReadError("%s %s: %s" % (what, node_path, reason), {"path": node_path, "errno": exc.errno})

    def read_bytes(self, node_path, default=None, limit=MAX_READ):
        """The whole file, or ``default`` when it does not exist.

        A file that exists but cannot be read (EACCES, EIO, a FIFO, a directory, a loop, more than ``limit``
        bytes) raises :class:`HostReadError` naming it: it is a finding, never an absence.
        """
        found = self.read_stat(node_path, limit)
        return default if found is None else found[1]

    def read_stat(self, node_path, limit=MAX_READ):
        """``(os.stat_result, the whole file)`` read through one descriptor (the status of the file that was read),
        or None when it does not exist; errors as :meth:`read_bytes`.  One open instead of a :meth:`stat` and a read
        (the IRQ observer's ``smp_affinity_list``: its mode and its value, for every vector)."""
        try:
            fd = self.open_fd(node_path, _READ_FLAGS)
        except HostReadError:
            raise
        except (IOError, OSError) as exc:
            if exc.errno in _ABSENT:
                return None
            raise self._error("cannot read", node_path, exc) from exc
        try:
            info = os.fstat(fd)
            kind = file_kind(info.st_mode)
            if kind:
                raise HostReadError("cannot read %s: it is %s, not a file" % (node_path, kind),
                                    {"path": node_path, "errno": errno.EISDIR if kind == "a directory" else None})
            chunks, size = [], 0
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise HostReadError("cannot read %s: larger than %d bytes" % (node_path, limit),
                                        {"path": node_path, "errno": errno.EFBIG})
                chunks.append(chunk)
            return info, b"".join(chunks)
        except (IOError, OSError) as exc:
            raise self._error("cannot read", node_path, exc) from exc
        finally:
            os.close(fd)

    def read_text(self, node_path, default=None):
        """The whole file as text (undecodable bytes replaced), or ``default`` when it does not exist."""
        data = self.read_bytes(node_path)
        if data is None:
            return default
        return data.decode("utf-8", "replace")

    def read_attr(self, node_path, default=None):
        """A sysfs/procfs attribute: its text without the trailing newline, or ``default`` when absent."""
        text = self.read_text(node_path)
        if text is None:
            return default
        return text.rstrip("\n").strip()

    @staticmethod
    def attr_text(data):
        """The bytes of an attribute (:meth:`read_bytes`, :meth:`read_stat`) as :meth:`read_attr` returns them."""
        return data.decode("utf-8", "replace").rstrip("\n").strip()

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
        value = _parse_int(text, base)
        if value is None:
            if problems is not None:
                problems.append({"path": node_path, "error": "not an integer: %r" % text[:64]})
            return default
        return value

    def read_int_strict(self, node_path, default=None, base=10):
        """An integer attribute for code that decides a write: absent gives ``default``, but a read error or a value
        that is not an integer raises HostReadError naming the file (it is never taken as 0 or absent)."""
        text = self.read_attr(node_path)
        if text is None:
            return default
        value = _parse_int(text, base)
        if value is None:
            raise HostReadError("%s holds %r, not an integer" % (node_path, text[:64]),
                                {"path": node_path, "value": text[:64]})
        return value

    def is_executable(self, node_path):
        """True when ``node_path`` (links followed inside the root) is an executable regular file."""
        try:
            info = self.stat(node_path)
        except HostReadError:
            return False
        return info is not None and stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o111)

    def listdir(self, node_path):
        """Sorted entry names of a directory; an absent directory lists as empty."""
        try:
            fd = self.open_fd(node_path, os.O_RDONLY | _O_DIRECTORY | getattr(os, "O_NONBLOCK", 0))
        except (IOError, OSError) as exc:
            if exc.errno in _ABSENT:
                return []
            raise self._error("cannot list", node_path, exc) from exc
        try:
            return sorted(os.listdir(fd))
        except (IOError, OSError) as exc:
            raise self._error("cannot list", node_path, exc) from exc
        finally:
            os.close(fd)

    def readlink(self, node_path):
        """The raw target of a symlink, or None when the path is not a symlink."""
        try:
            parent, name = self.parent_and_name(node_path)
            return os.readlink(self._local(parent).rstrip("/") + "/" + name)
        except (IOError, OSError, HostReadError, HostRootError):
            return None

    def follow(self, node_path, target=False):
        """The node path a class/bus entry points to: the entry itself when it is a plain directory.

        Kernel links are relative, so joining the target onto the link's directory is exact and costs one
        ``readlink`` (none when the caller already has ``target``) instead of a stat per path component;
        absolute targets are re-rooted, as in a chroot.
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

    def glob(self, pattern):
        """Node paths matching a glob (``*?[`` in the last components), sorted; links resolved in the root."""
        import fnmatch  # pylint: disable=import-outside-toplevel
        self._check(pattern)
        parts = _split(posixpath.normpath(pattern))
        found = ["/"]
        for part in parts:
            nxt = []
            for base in found:
                prefix = base.rstrip("/") + "/"
                if any(c in part for c in "*?["):
                    nxt.extend(prefix + name for name in self.listdir(base)
                               if fnmatch.fnmatchcase(name, part) and (part.startswith(".") or not name.startswith(".")))
                elif self.stat(prefix + part, follow=False) is not None:
                    nxt.append(prefix + part)
            found = nxt
        return sorted(found)

    # -- writes -----------------------------------------------------------------------------
    def rename(self, node_src, node_dst):
        """Rename an entry within its directory; a link at either name is moved or replaced, never followed."""
        parent, name = self.parent_and_name(node_src)
        other, new_name = self.parent_and_name(node_dst)
        if parent != other:
            raise HostRootError("%s and %s are not in one directory" % (node_src, node_dst))
        fd = self.open_dir(parent)[0]
        try:
            os.rename(name, new_name, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)

    def _in_parent(self, node_path, operation, *args):
        """``operation(name, *args, dir_fd=...)`` on the last name of ``node_path``, in its parent's descriptor:
        links in the parents resolve inside the root, the last name is never followed."""
        parent, name = self.parent_and_name(node_path)
        fd = self.open_dir(parent)[0]
        try:
            operation(name, *args, dir_fd=fd)
        finally:
            os.close(fd)

    def unlink(self, node_path):
        """Remove one directory entry (a link itself, never what it points to)."""
        self._in_parent(node_path, os.unlink)

    def mkdir(self, node_path, mode=0o755):
        """Make one directory (a configfs group) in its parent's descriptor: links in the parents resolve inside the
        root, an existing entry of that name (a link too) is EEXIST, never followed.  Errors are the original
        ``OSError``."""
        self._in_parent(node_path, os.mkdir, mode)

    def rmdir(self, node_path):
        """Remove one empty directory in its parent's descriptor; a link of that name is ENOTDIR, never followed.
        Errors are the original ``OSError``."""
        self._in_parent(node_path, os.rmdir)

    def write_attr(self, node_path, value):
        """Write one sysfs/procfs attribute in a single ``write()``, as the kernel expects.

        The last component is never a link and never a FIFO (both refused before anything is written).  Errors
        are raised as the original ``OSError`` so callers can map the errno (EBUSY, ERANGE, ...) to the message
        that explains it; this layer does not guess at meanings.
        """
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        fd = self.open_fd(node_path, os.O_WRONLY | _O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        try:
            kind = file_kind(os.fstat(fd).st_mode)
            if kind:
                raise OSError(errno.EINVAL, "%s is %s, not an attribute" % (node_path, kind))
            os.write(fd, data)
        finally:
            os.close(fd)

    def write_at(self, node_path, offset, data):
        """Write ``data`` at ``offset`` of a binary attribute (a PCI ``config``) in one ``pwrite()``; the last
        component is never a link, a FIFO or a directory.  Errors are the original ``OSError``."""
        fd = self.open_fd(node_path, os.O_WRONLY | _O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        try:
            kind = file_kind(os.fstat(fd).st_mode)
            if kind:
                raise OSError(errno.EINVAL, "%s is %s, not an attribute" % (node_path, kind))
            written = os.pwrite(fd, data, offset)
            if written != len(data):
                raise OSError(errno.EIO, "%s: %d of %d bytes written at 0x%x" % (node_path, written, len(data), offset))
        finally:
            os.close(fd)


#: where a node's tools are looked for under a host root (the PATH of HostCommands.CLEAN_ENV, in its order)
TOOL_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class HostCommands:
    """Runs node commands for a module, inside ``host_root`` when it is not ``/``.

    Commands that work on the node's *files* (``update-grub``, ``grubby``, sourcing GRUB defaults) must act on the
    tree under ``host_root``, so :meth:`run` chroots into it there, with a clean environment (``env -i``: C locale
    and a fixed PATH, nothing of the caller's) and a timeout; on ``/`` they run directly.  Output is parsed, so the
    locale is pinned to C for every command.
    """

    #: the environment of a command that works on node files
    CLEAN_ENV = ("LANG=C", "LC_ALL=C", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    #: seconds one file tool may take before it is stopped (update-initramfs takes a minute on a slow node)
    TIMEOUT = 600

    def __init__(self, module, host):
        self.module = module
        self.host = host
        module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C", "LANGUAGE": "C"}

    def find(self, name):
        """The command's path on the node, or None.  Under a host root this looks inside the root."""
        if not name or "/" in name or "\0" in name:
            raise HostRootError("command names must be plain names, got %r" % (name,))
        if self.host.root == "/":
            return self.module.get_bin_path(name)
        for directory in TOOL_DIRS:
            candidate = directory + "/" + name
            if self.host.is_executable(candidate):
                return candidate
        return None

    def run(self, argv, data=None, timeout=None):
        """``(rc, stdout, stderr)`` of a tool that works on the node's files: chrooted into ``host_root`` when it
        is not ``/``, with a clean environment, stopped after ``timeout`` seconds (rc 124, like timeout(1))."""
        prefix = []
        if self.host.root != "/":
            prefix = [self.module.get_bin_path("chroot", required=True), self.host.root]
        env = self.find("env")
        if env:
            prefix += [env, "-i"] + list(self.CLEAN_ENV)
        wrapper = self.module.get_bin_path("timeout")
        limit = self.TIMEOUT if timeout is None else timeout
        if wrapper:
            prefix = [wrapper, "--kill-after=5", "%ds" % max(1, int(limit))] + prefix
        return self.module.run_command(prefix + list(argv), data=data, check_rc=False)

    def run_kernel(self, argv, data=None):
        """``(rc, stdout, stderr)`` of a tool that talks to the *kernel* (``rdma``, ``ip``, ``modprobe``):
        it runs here, found on PATH, since a pod auditing ``/host`` shares the host's kernel, not its files.
        A missing tool gives rc 127 and says so, like a shell would."""
        path = self.module.get_bin_path(argv[0])
        if path is None:
            return 127, "", "%s: command not found" % argv[0]
        return self.module.run_command([path] + list(argv[1:]), data=data, check_rc=False)
