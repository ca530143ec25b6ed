# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side filter that builds the rdma_sysctl role's settings (documented in rdma_sysctl_settings.yml).

The code is in plugins/plugin_utils/_sysctl_settings.py, which the audit uses too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._sysctl_settings import rdma_sysctl_settings


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node sysctl helpers."""

    def filters(self):
        return {"rdma_sysctl_settings": rdma_sysctl_settings}
