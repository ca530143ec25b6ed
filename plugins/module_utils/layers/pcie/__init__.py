# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie`` layer: PCIe Max_Read_Request_Size of the RDMA NICs (issue 22, item 2), one room.

* :mod:`.config`  -- the PCI configuration space as the kernel serves it in sysfs (pure parsing);
* :mod:`.observe` -- node -> observed (live register per NIC, the boot unit's values);
* :mod:`.plan`    -- desired + observed -> actions (pure);
* :mod:`.apply`   -- runs exactly the planned actions;
* :mod:`.judge`   -- the audit: the planner run against the facts, a plan with work is drift.
"""
