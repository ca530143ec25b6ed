# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rdma_sysctl role's settings and the RDMA netdevs they apply to, as a filter raises its errors.

The rules are the sysctl room's (plugins/module_utils/layers/sysctl/settings.py), which the audit's judgement uses
too; the filter ``rdma_sysctl_settings`` (plugins/filter/sysctl_settings.py) calls this.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import settings as _settings

rdma_netdevs = _settings.rdma_netdevs


def rdma_sysctl_settings(interfaces, host, per_interface, rdma=None):
    """Ordered ``{key: value}``: ``all`` and ``default`` from ``host``, then each interface from ``per_interface``."""
    try:
        return _settings.role_settings(interfaces, host, per_interface,
                                       rdma_netdevs(rdma) if not interfaces else ())
    except InputError as exc:
        raise AnsibleFilterError(exc.msg) from exc
