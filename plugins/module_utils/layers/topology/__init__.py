# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``topology`` layer: GPU-NIC affinity, the RDMA netdevs' MTUs and the RDMA cgroup, one room, judged and not
provisioned.

* :mod:`.judge` -- the audit: ``topology.gpu_nic``, ``topology.numa``, ``mtu.node`` and ``cgroup.rdma`` per host, and
  ``mtu.inventory`` across the inventory (pure).

It has no observer of its own: it judges what ``rdma_facts``' discovery (``_rdma_discovery.py``) returns at the top
level of the facts (``gpus``, ``devices``, ``gpu_nic_affinity``, ``numa_nodes``, ``mtu``, ``rdma_cgroup``), which
other layers and the report's summary read too; :func:`judge.section_of` picks those keys (see :mod:`.judge`).
"""
