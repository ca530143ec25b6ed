# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side filters that turn ``ansible_facts.rdma`` (from ``rdma.k8s_node.rdma_facts``) into text.

Documentation lives in the sidecar files ``rdma_device_table.yml`` and ``rdma_topo_matrix.yml``; the code is in
plugins/plugin_utils/_summary.py, which the audit uses too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._summary import rdma_device_table, rdma_topo_matrix


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node text summaries of ansible_facts.rdma."""

    def filters(self):
        return {
            "rdma_device_table": rdma_device_table,
            "rdma_topo_matrix": rdma_topo_matrix,
        }
