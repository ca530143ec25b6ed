# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` layer: lossless RoCE QoS of the RoCE netdevs (issue 22, item 3), one room.

* :mod:`.tools`   -- mlnx_qos and iproute2 ``dcb``: their arguments and the parsing of their output (pure);
* :mod:`.observe` -- node -> observed (per RoCE port: trust, DSCP map, PFC, ECN, CNP, RoCE ToS, traffic class);
* :mod:`.plan`    -- desired + observed -> actions, the boot script and unit (pure);
* :mod:`.apply`   -- runs exactly the planned actions;
* :mod:`.judge`   -- the audit: the planner run against the facts, and one DSCP/priority across the inventory.
"""
