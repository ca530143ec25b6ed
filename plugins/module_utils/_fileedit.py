# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole-file edits: observe -> plan (pure) -> diff -> backup -> atomic replace, with rollback.

Modules own whole files (drop-ins under ``/etc/modprobe.d``, ``/etc/sysctl.d``, ...), so an edit is
"this file should contain exactly this text with this mode and owner".  :func:`plan_file` is pure
and testable on its own; :class:`FileTransaction` applies a list of plans and, if one fails, puts
every file it already touched back as it was, so a node is never left half-configured.

Two runs against one node at once (two controllers, a retry while the first run still works, the boot
applier) must not lose each other's edits.  Every replace, delete and rollback therefore happens under an
exclusive ``flock`` on the directory that holds the file (no lock file is left next to configuration that
tools read by glob), and re-reads the file under that lock first: compare-before-replace.  If the file no
longer is what the plan was made from, another writer got there first and the edit stops with a
:class:`ConflictError` (nothing is overwritten) - unless the file already holds exactly what this plan wanted.

Backups (``file.<pid>.<timestamp>~``) may hold secrets (registry credentials in containerd's config), so they
are created ``0600`` and owned by root from their first byte; the original mode and owner are put back
when a backup is restored.

The observing step (:class:`FileState`, :func:`observe_file`) is ``_filestate.py``, which the observers import alone
(``rdma_facts`` does not compile the edits); its names are imported here too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import binascii
import errno
import fcntl
import os
import re
import stat
import time

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, HostReadError, HostRootError, InputError,
)
# what a file is now, read (the observers' part): here too for the planners, the appliers and the tests
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import (  # pylint: disable=unused-import
    FileState, observe_file,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import file_kind
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action

#: seconds to wait for another run's lock on a directory before giving up
LOCK_TIMEOUT = 60.0
_LOCK_POLL = 0.05
#: permission bits of backup copies: readable by root only
BACKUP_MODE = 0o600
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class FilePlan:
    """The change one file needs.  ``kind`` is None when the file is already as desired."""

    CREATE = "create_file"
    UPDATE = "update_file"
    DELETE = "delete_file"
    ATTRS = "set_file_attributes"

    def __init__(self, observed, kind, content, mode, uid, gid):
        self.observed = observed
        self.created_dirs = []
        self.kind = kind
        self.content = content
        self.mode = mode
        self.uid = uid
        self.gid = gid

    @property
    def path(self):
        """The node path this plan edits."""
        return self.observed.path

    @property
    def changed(self):
        """True when applying the plan would change the node."""
        return self.kind is not None

    def action(self):
        """The plan as one entry of a result's ``actions`` list (None when nothing to do)."""
        if self.kind is None:
            return None
        detail = {}
        if self.kind != self.DELETE:
            detail["mode"] = "%04o" % self.mode
        return action(self.kind, self.path, **detail)

    def diff(self):
        """``{before, after, before_header, after_header}`` in the shape Ansible's ``--diff`` prints."""
        before = self.observed.content if self.observed.exists else ""
        after = "" if self.kind == self.DELETE else (self.content if self.content is not None else before)
        out = {
            "before": before,
            "after": after,
            "before_header": "%s (content)" % self.path if self.observed.exists else "%s (absent)" % self.path,
            "after_header": "%s (absent)" % self.path if self.kind == self.DELETE else "%s (content)" % self.path,
        }
        if self.kind == self.ATTRS or (self.observed.exists and self.observed.mode != self.mode and self.kind != self.DELETE):
            out["before_header"] += " mode %s" % ("%04o" % self.observed.mode if self.observed.mode is not None else "?")
            out["after_header"] += " mode %04o" % self.mode
        return out


def plan_file(observed, content, mode=0o644, uid=0, gid=0):
    """Pure planner: desired ``content`` (None = file must be absent) against the ``observed`` FileState.

    A file the collection owns that is a symbolic link is refused (:class:`HostRootError`) whenever it would have
    to change: writing through the link could reach any file (of the node, or outside ``host_root``), replacing it
    would silently break whoever made it.  The message names the link and its target; check mode says the same.
    """
    if content is not None and not isinstance(content, str):
        raise InputError("file content for %s must be text" % observed.path)
    if mode is None or not 0 <= mode <= 0o7777:
        raise InputError("file mode for %s must be between 0000 and 7777" % observed.path)
    if content is None:
        kind = FilePlan.DELETE if observed.exists or observed.link is not None else None
    elif not observed.exists:
        kind = FilePlan.CREATE
    elif observed.content != content:
        kind = FilePlan.UPDATE
    elif (observed.mode, observed.uid, observed.gid) != (mode, uid, gid):
        kind = FilePlan.ATTRS
    else:
        kind = None
    if kind is not None and observed.link is not None:
        raise HostRootError(
            "%s is a symbolic link (to %s): the collection does not write, replace or delete through links; make it "
            "a regular file or point the option at the file itself" % (observed.path, observed.link),
            {"path": observed.path, "link": observed.link})
    return FilePlan(observed, kind, content, mode, uid, gid)


def _same_state(left, right):
    """True when two FileStates describe the same file (existence, content, mode, owner, link)."""
    if left.exists != right.exists or left.link != right.link:
        return False
    return not left.exists or (left.content, left.mode, left.uid, left.gid) == (right.content, right.mode, right.uid, right.gid)


def _holds_result(now, plan):
    """True when the file ``now`` already is what ``plan`` produces (another run applied the same change)."""
    if now.link is not None:
        return False
    if plan.kind == FilePlan.DELETE:
        return not now.exists
    if not now.exists or now.mode != plan.mode:
        return False
    if os.geteuid() == 0 and (now.uid, now.gid) != (plan.uid, plan.gid):
        return False
    return plan.content is None or now.content == plan.content


class DirectoryLock:
    """An exclusive ``flock`` on a directory of the node, waited for up to ``timeout`` seconds.

    The directory is opened through :meth:`HostRoot.open_dir` (no link swapped in later can redirect it) and every
    change under the lock is made relative to that descriptor (``fd``).  Locking the directory instead of a lock
    file next to the edited file leaves nothing behind that the node's tools could read as configuration
    (``*.conf`` globs, GRUB's ``*.cfg``), and serialises every edit of this collection in that directory, across
    processes and across containers sharing the host's files.
    """

    def __init__(self, host, directory, timeout=None):
        self.host = host
        self.directory = directory
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.fd = None

    def __enter__(self):
        self.fd = self.host.open_dir(self.directory)[0]
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EINTR):
                    self._close()
                    raise
                if time.monotonic() >= deadline:
                    self._close()
                    raise OSError(errno.ETIMEDOUT, "another run has held the lock on %s for %ss" % (self.directory, self.timeout))
            time.sleep(_LOCK_POLL)

    def _close(self):
        os.close(self.fd)
        self.fd = None

    def __exit__(self, *exc_info):
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                self._close()
        return False


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
_EXISTING = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _backup_name(name):
    """Ansible's backup naming (``file.<pid>.<timestamp>~``), so operators find backups where they expect."""
    return "%s.%s.%s~" % (name, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))


def _open_regular(dir_fd, name):
    """An fd of the regular file ``name`` in ``dir_fd``: ELOOP for a link, EINVAL for anything but a file."""
    fd = os.open(name, _EXISTING, dir_fd=dir_fd)
    if file_kind(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "%s is not a regular file" % name)
    return fd


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _make_backup(dir_fd, name):
    """Copy ``name`` to a new backup file in the same directory, 0600 and root's from its creation; its name."""
    base = _backup_name(name)
    for attempt in range(100):
        saved = base if attempt == 0 else "%s.%d~" % (base[:-1], attempt)
        try:
            out = os.open(saved, _NEW, BACKUP_MODE, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free backup name for %s" % name)
    try:
        os.fchmod(out, BACKUP_MODE)  # the umask may have narrowed it; never wider
        if os.geteuid() == 0:
            os.fchown(out, 0, 0)
        source = _open_regular(dir_fd, name)
        try:
            while True:
                chunk = os.read(source, 1 << 16)
                if not chunk:
                    break
                _write_all(out, chunk)
            info = os.fstat(source)
        finally:
            os.close(source)
        os.fsync(out)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
    except BaseException:
        os.close(out)
        os.unlink(saved, dir_fd=dir_fd)
        raise
    os.close(out)
    return saved


def _write_atomically(dir_fd, name, content, mode, uid, gid):
    """Write a new temp file next to the target, fsync it, set mode/owner, then rename it over the target (the
    rename replaces whatever entry is there, a link included, and never follows it)."""
    tmp = ".%s.%s.tmp" % (name, binascii.hexlify(os.urandom(6)).decode("ascii"))
    fd = os.open(tmp, _NEW, 0o600, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, content.encode("utf-8"))
            os.fsync(fd)
            os.fchmod(fd, mode)
            if os.geteuid() == 0:
                os.fchown(fd, uid, gid)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def _set_attrs(dir_fd, name, mode, uid, gid):
    fd = _open_regular(dir_fd, name)
    try:
        os.fchmod(fd, mode)
        if os.geteuid() == 0:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _delete(dir_fd, name):
    """Remove the regular file ``name`` (a link or anything else at the name is refused, never followed)."""
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "%s is not a regular file; not removed" % name)
    os.unlink(name, dir_fd=dir_fd)


def _put_back(dir_fd, saved, name, observed):
    """Restore a backup over ``name`` with the original mode and owner."""
    _set_attrs(dir_fd, saved, observed.mode, observed.uid, observed.gid)
    os.replace(saved, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _make_dirs(host, directory):
    """Create ``directory`` (a canonical node path) and its missing parents, each with ``mkdir`` relative to its
    parent's descriptor; returns the node paths created, deepest first."""
    parts = [p for p in directory.split("/") if p]
    fd = host.open_dir("/")[0]
    created = []
    try:
        here = ""
        for part in parts:
            here += "/" + part
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                created.append(here)
            except FileExistsError:
                pass
            nxt = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    created.reverse()
    return created


class FileTransaction:
    """Applies file plans in order; on failure restores every file already changed, newest first."""

    def __init__(self, host, backup=True, lock_timeout=None):
        self.host = host
        self.backup = backup
        self.lock_timeout = lock_timeout
        self.backups = {}
        self._undo = []

    def apply(self, plan):
        """Apply one plan (no-op when unchanged).  Returns the backup path or None.

        Under the directory lock the file is read again: when it is no longer what the plan was made from,
        nothing is written and ConflictError says so (or, when it already holds the plan's result, nothing is
        done at all)."""
        if not plan.changed:
            return None
        directory, name = self.host.parent_and_name(plan.path)
        if not self.host.isdir(directory):
            plan.created_dirs = _make_dirs(self.host, directory)  # deepest first: what a rollback removes again
            directory, name = self.host.parent_and_name(plan.path)
        try:
            return self._apply_locked(plan, directory, name)
        except BaseException:
            if not any(entry[0] is plan for entry in self._undo):
                _remove_created_dirs(self.host, plan)
            raise

    def _apply_locked(self, plan, directory, name):
        """The part of :meth:`apply` that runs under the directory lock."""
        with DirectoryLock(self.host, directory, self.lock_timeout) as lock:
            now = observe_file(self.host, plan.path)
            if not _same_state(now, plan.observed):
                if _holds_result(now, plan):
                    return None
                raise ConflictError("%s changed on the node after this run read it (another run at the same time?); "
                                    "it was left as the other writer made it" % plan.path,
                                    {"path": plan.path, "conflict": True})
            saved = _make_backup(lock.fd, name) if plan.observed.exists else None
            self._undo.append((plan, directory, name, saved))
            if plan.kind == FilePlan.DELETE:
                _delete(lock.fd, name)
            elif plan.kind == FilePlan.ATTRS:
                _set_attrs(lock.fd, name, plan.mode, plan.uid, plan.gid)
            else:
                _write_atomically(lock.fd, name, plan.content, plan.mode, plan.uid, plan.gid)
        local = self.host.lexical(directory.rstrip("/") + "/" + saved) if saved else None
        if saved and self.backup:
            self.backups[plan.path] = local
        return local if self.backup else None

    def apply_all(self, plans):
        """Apply every plan or none: any error rolls the finished ones back and raises ApplyError
        (``details['conflict']`` is true when another writer changed a file in between)."""
        try:
            for plan in plans:
                self.apply(plan)
        except (IOError, OSError, ConflictError, HostReadError, HostRootError) as exc:
            failed = plan.path  # pylint: disable=undefined-loop-variable
            restored, unrestored = self.rollback()
            if isinstance(exc, (ConflictError, HostReadError, HostRootError)):
                reason, code = exc.msg, None
            else:
                reason, code = "writing %s failed (%s)" % (failed, _describe(exc)), exc.errno
            raise ApplyError(
                "%s; %s" % (reason, "all earlier changes were rolled back" if not unrestored
                            else "could NOT restore %s" % ", ".join(unrestored)),
                {"path": failed, "errno": code, "conflict": isinstance(exc, ConflictError),
                 "rolled_back": restored, "not_rolled_back": unrestored},
            ) from exc
        self.commit()
        return dict(self.backups)

    def rollback(self):
        """Undo applied plans newest first.  Returns (restored paths, paths that could not be restored).

        A file that holds neither what this transaction wrote nor what it found (another writer replaced it
        since) is not overwritten: it is reported as not restored."""
        restored, unrestored = [], []
        while self._undo:
            plan, directory, name, saved = self._undo.pop()
            try:
                self._undo_one(plan, directory, name, saved, restored, unrestored)
            finally:
                _remove_created_dirs(self.host, plan)
        self.backups = {}
        return restored, unrestored

    def _undo_one(self, plan, directory, name, saved, restored, unrestored):
        """Rollback of one applied plan (see :meth:`rollback`): appends its path to ``restored`` or ``unrestored``."""
        try:
            with DirectoryLock(self.host, directory, self.lock_timeout) as lock:
                now = observe_file(self.host, plan.path)
                if _same_state(now, plan.observed):
                    # the step that failed had not replaced the file: nothing to undo
                    if saved:
                        _unlink_quietly(lock.fd, saved)
                    return
                partial_attrs = plan.kind == FilePlan.ATTRS and now.exists and now.content == plan.observed.content
                if not (_holds_result(now, plan) or partial_attrs):
                    unrestored.append(plan.path)
                    return
                if saved:
                    _put_back(lock.fd, saved, name, plan.observed)
                elif now.exists:
                    _delete(lock.fd, name)
            restored.append(plan.path)
        except (IOError, OSError, HostReadError, HostRootError):
            unrestored.append(plan.path)

    def commit(self):
        """Forget the undo log; drop backup copies that the caller did not ask to keep."""
        if not self.backup:
            for dummy_plan, directory, dummy_name, saved in self._undo:
                if saved:
                    try:
                        fd = self.host.open_dir(directory)[0]
                    except OSError:
                        continue
                    try:
                        _unlink_quietly(fd, saved)
                    finally:
                        os.close(fd)
        self._undo = []


def _unlink_quietly(dir_fd, name):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _remove_created_dirs(host, plan):
    """Remove the directories applying ``plan`` created, deepest first, as long as they are empty."""
    for directory in getattr(plan, "created_dirs", None) or []:
        parent, name = host.parent_and_name(directory)
        try:
            fd = host.open_dir(parent)[0]
        except (OSError, HostReadError):
            break
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            break  # not empty (another file arrived) or already gone: keep it and its parents
        finally:
            os.close(fd)
    plan.created_dirs = []


def _describe(exc):
    """``Input/output error`` for an OSError with an errno (its own text when it has one), else its text."""
    if getattr(exc, "errno", None):
        return exc.strerror or os.strerror(exc.errno)
    return str(exc)


def revert(host, plans, cause=None):
    """Put the files of applied ``plans`` back to what was observed before them.

    Used when a later step of the same change (``update-grub``, ``update-initramfs``, a service restart) fails
    after the files were already replaced and their transaction committed.  Returns the reverted node paths.
    A file that no longer holds what the plan wrote (another run changed it since) is left alone.  If putting a
    file back fails, ApplyError says so, starting with ``cause`` (what failed first) when it is given.
    """
    undo = []
    for plan in plans:
        if plan.changed:
            now = observe_file(host, plan.path)
            if not _holds_result(now, plan):
                continue
            before = plan.observed
            undo.append(plan_file(now, before.content if before.exists else None,
                                  before.mode if before.exists else 0o644,
                                  before.uid if before.exists else 0, before.gid if before.exists else 0))
    try:
        FileTransaction(host, backup=False).apply_all(undo)
    except ApplyError as exc:
        raise ApplyError("%sputting the previous files back FAILED: %s" % ("%s; " % cause if cause else "", exc.msg),
                         dict(exc.details, cause=cause)) from exc
    for plan in plans:
        if plan.changed and not plan.observed.exists:
            _remove_created_dirs(host, plan)
    return [p.path for p in undo if p.changed]


def conf_name_pattern(suffix):
    """A compiled pattern for the name of a file we own in a conf.d-style directory (modprobe.d, modules-load.d,
    systemd drop-ins, grub.d): no hidden files (the readers skip them), no blanks, newline or NUL, and ``suffix``."""
    return re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*" + re.escape(suffix) + r"\Z")
