# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole-file edits: observe -> plan (pure) -> diff -> backup -> atomic replace, with rollback.

Modules own whole files (drop-ins under ``/etc/modprobe.d``, ``/etc/sysctl.d``, ...), so an edit is
"this file should contain exactly this text with this mode and owner".  :func:`plan_file` is pure
and testable on its own; :class:`FileTransaction` applies a list of plans and, if one fails, puts
every file it already touched back as it was, so a node is never left half-configured.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import os
import shutil
import stat
import tempfile
import time

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action


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


def _backup_name(local_path):
    """Ansible's backup naming (``file.<pid>.<timestamp>~``), so operators find backups where they expect."""
    return "%s.%s.%s~" % (local_path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))


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


class FileTransaction:
    """Applies file plans in order; on failure restores every file already changed, newest first."""

    def __init__(self, host, backup=True):
        self.host = host
        self.backup = backup
        self.backups = {}
        self._undo = []

    def apply(self, plan):
        """Apply one plan (no-op when unchanged).  Returns the backup path or None."""
        if not plan.changed:
            return None
        local = self.host.path(plan.path)
        if plan.observed.exists:
            local = os.path.realpath(local)
        saved = None
        if plan.observed.exists:
            saved = _backup_name(local)
            shutil.copy2(local, saved)
            if os.geteuid() == 0:
                os.chown(saved, plan.observed.uid, plan.observed.gid)
        self._undo.append((plan, local, saved))
        if plan.kind == FilePlan.DELETE:
            os.unlink(local)
        elif plan.kind == FilePlan.ATTRS:
            os.chmod(local, plan.mode)
            if os.geteuid() == 0:
                os.chown(local, plan.uid, plan.gid)
        else:
            directory = os.path.dirname(local)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            _write_atomically(local, plan.content, plan.mode, plan.uid, plan.gid)
        if saved and self.backup:
            self.backups[plan.path] = saved
        return saved if self.backup else None

    def apply_all(self, plans):
        """Apply every plan or none: any error rolls the finished ones back and raises ApplyError."""
        try:
            for plan in plans:
                self.apply(plan)
        except (IOError, OSError) as exc:
            failed = plan.path  # pylint: disable=undefined-loop-variable
            restored, unrestored = self.rollback()
            raise ApplyError(
                "writing %s failed (%s); %s" % (
                    failed, os.strerror(exc.errno) if exc.errno else exc,
                    "all earlier changes were rolled back" if not unrestored else "could NOT restore %s" % ", ".join(unrestored)),
                {"path": failed, "errno": exc.errno, "rolled_back": restored, "not_rolled_back": unrestored},
            ) from exc
        self.commit()
        return dict(self.backups)

    def rollback(self):
        """Undo applied plans newest first.  Returns (restored paths, paths that could not be restored)."""
        restored, unrestored = [], []
        while self._undo:
            plan, local, saved = self._undo.pop()
            try:
                if saved:
                    os.replace(saved, local)
                elif os.path.lexists(local):
                    os.unlink(local)
                else:
                    continue  # the step that failed had not created anything: nothing to undo
                restored.append(plan.path)
            except (IOError, OSError):
                unrestored.append(plan.path)
        self.backups = {}
        return restored, unrestored

    def commit(self):
        """Forget the undo log; drop backup copies that the caller did not ask to keep."""
        if not self.backup:
            for dummy_plan, dummy_local, saved in self._undo:
                if saved and os.path.exists(saved):
                    os.unlink(saved)
        self._undo = []


def revert(host, plans):
    """Put the files of applied ``plans`` back to what was observed before them.

    Used when a later step of the same change (``update-grub``, ``update-initramfs``, a service restart) fails
    after the files were already replaced and their transaction committed.  Returns the reverted node paths.
    """
    undo = []
    for plan in plans:
        if plan.changed:
            before = plan.observed
            undo.append(plan_file(observe_file(host, plan.path), before.content if before.exists else None,
                                  before.mode if before.exists else 0o644,
                                  before.uid if before.exists else 0, before.gid if before.exists else 0))
    FileTransaction(host, backup=False).apply_all(undo)
    return [p.path for p in undo if p.changed]
