# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``counters`` layer: retransmission and congestion counters of the RDMA ports (issue 22, item 5), one room,
judged and not provisioned.

* :mod:`.catalogue` -- the mlx5 ``hw_counters`` names, what each counts, which end of a connection counts it, and
  the default thresholds (pure data);
* :mod:`.observe`   -- node -> each RDMA port's ``hw_counters``, once or twice ``interval`` seconds apart
  (``rdma_facts``' ``layers.counters``; rdma_perftest's ``counters`` action reads the same way);
* :mod:`.judge`     -- the audit: totals against thresholds, rates between the two readings (pure), and the
  counters that grew between two readings (validate's before/after of a perftest run).
"""
