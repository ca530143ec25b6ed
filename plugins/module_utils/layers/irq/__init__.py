# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``irq`` layer: the RDMA NICs' interrupts on the kubelet's reserved CPUs of their own NUMA node (issue 22,
item 4), one room.

* :mod:`.interrupts` -- ``/proc/interrupts`` and the irqbalance environment file, pure parsing;
* :mod:`.observe`    -- node -> observed (each NIC's vectors and their affinity, the boot files, irqbalance);
* :mod:`.compact`    -- ``rdma_facts``' form of it (a table per NIC, not a dict per vector) and back (pure);
* :mod:`.plan`       -- desired + observed -> actions (pure);
* :mod:`.apply`      -- runs exactly the planned actions;
* :mod:`.judge`      -- the audit: the planner run against the facts, a plan with work is drift.
"""
