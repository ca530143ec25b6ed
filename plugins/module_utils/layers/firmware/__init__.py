# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``firmware`` layer: ConnectX firmware (NVCONFIG) parameters of the RDMA NICs (issue 22, item 1), one room.

* :mod:`.mlxconfig` -- ``mlxconfig``/``mstconfig`` output and values (pure parsing);
* :mod:`.observe`   -- node -> observed (each card's functions, and its parameters: Default, Current, Next Boot);
* :mod:`.plan`      -- desired + observed -> actions, pending changes, problems (pure);
* :mod:`.apply`     -- runs exactly the planned actions (stages Next Boot values; a firmware reset only when asked);
* :mod:`.judge`     -- the audit: the planner run against the facts; across the inventory, one configuration a model.
"""
