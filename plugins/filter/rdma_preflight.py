# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-flight filter of provision.yml (documented in rdma_preflight.yml); the rules are plugin_utils/_preflight.py."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _defaults
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _preflight
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain

UNSET = "__unset__"


def rdma_preflight(given):
    """``{"refused", "ignored"}`` of one host: ``given`` maps the rule variables to their values (``__unset__`` or
    null for unset), the roles' defaults fill the unset ones."""
    if not isinstance(given, Mapping):
        raise AnsibleFilterError("rdma_preflight: expected a mapping of variables, got %r" % (given,))
    defaults = _defaults.role_defaults(names=_preflight.VARIABLES)
    desired = {}
    for name in _preflight.VARIABLES:
        value = plain(given.get(name, UNSET))
        desired[name] = defaults.get(name) if value in (None, UNSET) else value
    return _preflight.check(desired)


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node pre-flight."""

    def filters(self):
        return {"rdma_preflight": rdma_preflight}
