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
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import fcntl
import os
import re
import stat
import tempfile
import time

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, HostReadError, InputError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action

#: seconds to wait for another run's lock on a directory before giving up
LOCK_TIMEOUT = 60.0
_LOCK_POLL = 0.05
#: permission bits of backup copies: readable by root only
BACKUP_MODE = 0o600


class FileState:
    """What a file is now: ``exists`` plus content, permission bits and owner when it does."""

    def __init__(self, path, exists=False, content=None, mode=None, uid=None, gid=None):
        self.path = path
        self.exists = exists
        self.content = content
        self.mode = mode
        self.uid = uid
        self.gid = gid

    def as_dict(self):
        """Plain data for ``observed`` in module results (mode as an octal string, like ``stat``)."""
        return {
            "path": self.path,
            "exists": self.exists,
            "mode": "%04o" % self.mode if self.mode is not None else None,
            "uid": self.uid,
            "gid": self.gid,
        }


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
    """Pure planner: desired ``content`` (None = file must be absent) against the ``observed`` FileState."""
    if content is not None and not isinstance(content, str):
        raise InputError("file content for %s must be text" % observed.path)
    if mode is None or not 0 <= mode <= 0o7777:
        raise InputError("file mode for %s must be between 0000 and 7777" % observed.path)
    if content is None:
        kind = FilePlan.DELETE if observed.exists else None
    elif not observed.exists:
        kind = FilePlan.CREATE
    elif observed.content != content:
        kind = FilePlan.UPDATE
    elif (observed.mode, observed.uid, observed.gid) != (mode, uid, gid):
        kind = FilePlan.ATTRS
    else:
        kind = None
    return FilePlan(observed, kind, content, mode, uid, gid)


def observe_file(host, node_path):
    """Read the current state of ``node_path`` under ``host`` (a HostRoot)."""
    local = host.path(node_path)
    try:
        info = os.lstat(local)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return FileState(node_path)
        raise HostReadError("cannot stat %s: %s" % (node_path, os.strerror(exc.errno)), {"path": node_path}) from exc
    if stat.S_ISLNK(info.st_mode):
        info = os.stat(local)
    if not stat.S_ISREG(info.st_mode):
        raise HostReadError("%s exists but is not a regular file" % node_path, {"path": node_path})
    content = host.read_text(node_path, default="")
    return FileState(node_path, True, content, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _same_state(left, right):
    """True when two FileStates describe the same file (existence, content, mode, owner)."""
    if left.exists != right.exists:
        return False
    return not left.exists or (left.content, left.mode, left.uid, left.gid) == (right.content, right.mode, right.uid, right.gid)


def _holds_result(now, plan):
    """True when the file ``now`` already is what ``plan`` produces (another run applied the same change)."""
    if plan.kind == FilePlan.DELETE:
        return not now.exists
    if not now.exists or now.mode != plan.mode:
        return False
    if os.geteuid() == 0 and (now.uid, now.gid) != (plan.uid, plan.gid):
        return False
    return plan.content is None or now.content == plan.content


class DirectoryLock:
    """An exclusive ``flock`` on a directory, waited for up to ``timeout`` seconds.

    Locking the directory instead of a lock file next to the edited file leaves nothing behind that the
    node's tools could read as configuration (``*.conf`` globs, GRUB's ``*.cfg``), and serialises every edit
    of this collection in that directory, across processes and across containers sharing the host's files.
    """

    def __init__(self, directory, timeout=None):
        self.directory = directory
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EINTR):
                    os.close(self.fd)
                    self.fd = None
                    raise
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    raise OSError(errno.ETIMEDOUT, "another run has held the lock on %s for %ss" % (self.directory, self.timeout))
            time.sleep(_LOCK_POLL)

    def __exit__(self, *exc_info):
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None
        return False


def _backup_name(local_path):
    """Ansible's backup naming (``file.<pid>.<timestamp>~``), so operators find backups where they expect."""
    return "%s.%s.%s~" % (local_path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))


def _make_backup(local_path):
    """Copy ``local_path`` to a new backup file that is 0600 and root's from its creation; returns its path."""
    base = _backup_name(local_path)
    for attempt in range(100):
        saved = base if attempt == 0 else "%s.%d~" % (base[:-1], attempt)
        try:
            out = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), BACKUP_MODE)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free backup name for %s" % local_path)
    try:
        os.fchmod(out, BACKUP_MODE)  # the umask may have narrowed it; never wider
        if os.geteuid() == 0:
            os.fchown(out, 0, 0)
        with open(local_path, "rb") as source:
            while True:
                chunk = source.read(1 << 16)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
        os.fsync(out)
        info = os.stat(local_path)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
    except BaseException:
        os.close(out)
        os.unlink(saved)
        raise
    os.close(out)
    return saved


def _write_atomically(local_path, content, mode, uid, gid):
    """Write a temp file next to the target, fsync it, set mode/owner, then rename over the target."""
    directory = os.path.dirname(local_path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(local_path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if os.geteuid() == 0:
            os.chown(tmp, uid, gid)
        os.replace(tmp, local_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _put_back(saved, local, observed):
    """Restore a backup over ``local`` with the original mode and owner."""
    os.chmod(saved, observed.mode)
    if os.geteuid() == 0:
        os.chown(saved, observed.uid, observed.gid)
    os.replace(saved, local)


class FileTransaction:
    """Applies file plans in order; on failure restores every file already changed, newest first."""

    def __init__(self, host, backup=True, lock_timeout=None):
        self.host = host
        self.backup = backup
        self.lock_timeout = lock_timeout
        self.backups = {}
        self._undo = []

    def _local(self, plan):
        local = self.host.path(plan.path)
        if plan.observed.exists:
            local = os.path.realpath(local)
        return local

    def apply(self, plan):
        """Apply one plan (no-op when unchanged).  Returns the backup path or None.

        Under the directory lock the file is read again: when it is no longer what the plan was made from,
        nothing is written and ConflictError says so (or, when it already holds the plan's result, nothing is
        done at all)."""
        if not plan.changed:
            return None
        local = self._local(plan)
        directory = os.path.dirname(local)
        if not os.path.isdir(directory):
            missing = []
            probe = directory
            while probe and not os.path.isdir(probe):
                missing.append(probe)
                probe = os.path.dirname(probe)
            os.makedirs(directory, 0o755)
            plan.created_dirs = missing  # deepest first: what a rollback or revert removes again
        try:
            return self._apply_locked(plan, local, directory)
        except BaseException:
            if not any(entry[0] is plan for entry in self._undo):
                _remove_created_dirs(plan)
            raise

    def _apply_locked(self, plan, local, directory):
        """The part of :meth:`apply` that runs under the directory lock."""
        with DirectoryLock(directory, self.lock_timeout):
            now = observe_file(self.host, plan.path)
            if not _same_state(now, plan.observed):
                if _holds_result(now, plan):
                    return None
                raise ConflictError("%s changed on the node after this run read it (another run at the same time?); "
                                    "it was left as the other writer made it" % plan.path,
                                    {"path": plan.path, "conflict": True})
            saved = _make_backup(local) if plan.observed.exists else None
            self._undo.append((plan, local, saved))
            if plan.kind == FilePlan.DELETE:
                os.unlink(local)
            elif plan.kind == FilePlan.ATTRS:
                os.chmod(local, plan.mode)
                if os.geteuid() == 0:
                    os.chown(local, plan.uid, plan.gid)
            else:
                _write_atomically(local, plan.content, plan.mode, plan.uid, plan.gid)
        if saved and self.backup:
            self.backups[plan.path] = saved
        return saved if self.backup else None

    def apply_all(self, plans):
        """Apply every plan or none: any error rolls the finished ones back and raises ApplyError
        (``details['conflict']`` is true when another writer changed a file in between)."""
        try:
            for plan in plans:
                self.apply(plan)
        except (IOError, OSError, ConflictError) as exc:
            failed = plan.path  # pylint: disable=undefined-loop-variable
            restored, unrestored = self.rollback()
            if isinstance(exc, ConflictError):
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
            plan, local, saved = self._undo.pop()
            try:
                self._undo_one(plan, local, saved, restored, unrestored)
            finally:
                _remove_created_dirs(plan)
        self.backups = {}
        return restored, unrestored

    def _undo_one(self, plan, local, saved, restored, unrestored):
        """Rollback of one applied plan (see :meth:`rollback`): appends its path to ``restored`` or ``unrestored``."""
        try:
            with DirectoryLock(os.path.dirname(local), self.lock_timeout):
                now = observe_file(self.host, plan.path)
                if _same_state(now, plan.observed):
                    # the step that failed had not replaced the file: nothing to undo
                    if saved and os.path.exists(saved):
                        os.unlink(saved)
                    return
                partial_attrs = plan.kind == FilePlan.ATTRS and now.exists and now.content == plan.observed.content
                if not (_holds_result(now, plan) or partial_attrs):
                    unrestored.append(plan.path)
                    return
                if saved:
                    _put_back(saved, local, plan.observed)
                elif os.path.lexists(local):
                    os.unlink(local)
            restored.append(plan.path)
        except (IOError, OSError, HostReadError):
            unrestored.append(plan.path)

    def commit(self):
        """Forget the undo log; drop backup copies that the caller did not ask to keep."""
        if not self.backup:
            for dummy_plan, dummy_local, saved in self._undo:
                if saved and os.path.exists(saved):
                    os.unlink(saved)
        self._undo = []


def _remove_created_dirs(plan):
    """Remove the directories applying ``plan`` created, deepest first, as long as they are empty."""
    for directory in getattr(plan, "created_dirs", None) or []:
        try:
            os.rmdir(directory)
        except OSError:
            break  # not empty (another file arrived) or already gone: keep it and its parents
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
            _remove_created_dirs(plan)
    return [p.path for p in undo if p.changed]


def conf_name_pattern(suffix):
    """A compiled pattern for the name of a file we own in a conf.d-style directory (modprobe.d, modules-load.d,
    systemd drop-ins, grub.d): no hidden files (the readers skip them), no blanks, newline or NUL, and ``suffix``."""
    return re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*" + re.escape(suffix) + r"\Z")
