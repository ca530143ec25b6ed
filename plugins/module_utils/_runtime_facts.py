# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd and kubelet settings for rdma_facts and the audit: running vs persisted, read-only (the containerd and
kubelet rooms' observers, ``layers/containerd/observe.py`` and ``layers/kubelet/observe.py``).

``runtime_facts(host, commands=None, pids=None, layers=None)`` never writes and never fails on a missing piece: what
cannot be read is None, and ``problems`` lists why.  Without ``commands`` (a HostCommands), only files and /proc are
read.  With ``layers`` (rdma_facts' rooms), containerd and the kubelet are not read again.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe


def pids_of(host, comms):
    """``{comm: pid}`` of the first process of each name in ``comms``, in one pass over /proc."""
    found = {}
    for entry in host.listdir("/proc"):
        if len(found) == len(comms):
            break
        if entry.isdigit() and entry.isascii():  # ('²'.isdigit() is true, int('²') a ValueError)
            comm = host.try_attr("/proc/%s/comm" % entry)
            if comm in comms:
                found.setdefault(comm, int(entry))
    return found


def runtime_facts(host, commands=None, pids=None, layers=None):
    """``{"containerd": {...}, "kubelet": {...}}``: the containerd and kubelet rooms' facts without their planners'
    input.  ``layers``: rdma_facts' ``layers``, whose ``containerd`` and ``kubelet`` are used as they are; when a
    room's observer failed there (None, and rdma_facts' ``problems`` says why), it is not observed a second time: its
    key is absent, as the facts of a room whose observer failed are.  What ``layers`` does not hold is observed here."""
    if pids is None:
        pids = pids_of(host, ("containerd", "kubelet"))  # one pass over /proc for both
    out = {}
    kubelet = layers["kubelet"] if layers is not None and "kubelet" in layers else \
        kubelet_observe.facts(host, commands, pids=pids)
    if kubelet is not None:
        out["kubelet"] = kubelet_observe.report_of(kubelet)
    containerd = ctdh.facts(host, commands, pids=pids) if layers is None else layers.get("containerd")
    if containerd is not None:
        out["containerd"] = ctdh.report_of(containerd)
    return out
