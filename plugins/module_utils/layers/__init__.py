# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's layers: the registry (``_registry.py``) and one package per layer built as a room (observer,
pure planner, applier, audit judgement; see docs/architecture.md)."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible.module_utils.common.validation import check_type_bool


def desired_bool(desired, name, default=True):
    """A role's boolean variable as its module receives it: converted as the argument spec's ``type: bool`` converts
    (``-e rdma_sysctl_live=false`` is the string ``"false"``, which the module takes as False), so a judge plans what
    the module would.  A value the module would refuse counts as ``default``: the role fails on it before any
    change, and the audit's other checks still say what the node is."""
    try:
        return check_type_bool(desired.get(name, default))
    except TypeError:
        return default
