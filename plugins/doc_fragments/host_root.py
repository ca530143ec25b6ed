# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``host_root`` option shared by every module that reads or writes node files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """Documentation of ``host_root``."""

    DOCUMENTATION = r"""
options:
  host_root:
    description:
      - Directory under which the node's filesystem is seen. Every node path (C(/sys), C(/proc), C(/etc)) is read
        and written under it.
      - Use V(/) on the node itself, or the mount point of the host's root when running from a pod or container that
        mounts it (for example V(/host)).
      - Paths resolve exactly as inside a chroot at this directory (docs/security.md) - an absolute symbolic link
        target starts again at it, C(..) never climbs above it, and a file the module owns that is itself a symbolic
        link is never written through. Trees mounted under it (a pod's C(/host) with the host's mounts) are seen as
        the host sees them.
      - It must be an existing directory; the module fails before reading anything otherwise.
    type: path
    default: /
"""
