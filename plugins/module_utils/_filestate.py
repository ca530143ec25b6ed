# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a file is now (:class:`FileState`), read through a :class:`~._host.HostRoot` (:func:`observe_file`).

The observing step of ``_fileedit.py``'s whole-file edits, on its own so that the observers (and ``rdma_facts``,
which runs them all) do not compile the edits, backups, locks and rollback; ``_fileedit`` imports both names.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import stat

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import file_kind


class FileState:
    """What a file is now: ``exists`` plus content, permission bits and owner when it does.

    ``link`` is the target text when the path itself is a symbolic link (the content is then what the link leads to,
    resolved inside the host root).  The collection reads through such a link but never writes through it.
    """

    def __init__(self, path, exists=False, content=None, mode=None, uid=None, gid=None, link=None):
        self.path = path
        self.exists = exists
        self.content = content
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.link = link

    def as_dict(self):
        """Plain data for ``observed`` in module results (mode as an octal string, like ``stat``)."""
        out = {
            "path": self.path,
            "exists": self.exists,
            "mode": "%04o" % self.mode if self.mode is not None else None,
            "uid": self.uid,
            "gid": self.gid,
        }
        if self.link is not None:
            out["link"] = self.link
        return out


def observe_file(host, node_path):
    """Read the current state of ``node_path`` under ``host`` (a HostRoot), without following a link at it for
    the metadata; a link's content is read through it (resolved inside the root)."""
    try:
        info = host.stat(node_path, follow=False)
    except HostReadError:
        raise
    if info is None:
        return FileState(node_path)
    link = None
    if stat.S_ISLNK(info.st_mode):
        link = host.readlink(node_path)
        info = host.stat(node_path)
        if info is None:
            return FileState(node_path, link=link)  # dangling
    kind = file_kind(info.st_mode)
    if kind:
        raise HostReadError("%s exists but is %s, not a regular file" % (node_path, kind), {"path": node_path})
    content = host.read_text(node_path, default="")
    return FileState(node_path, True, content, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, link)
