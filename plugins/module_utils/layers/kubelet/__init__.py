# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kubelet`` layer: the Topology, CPU and Memory Managers of the kubelet, one room.

* :mod:`.rules`   -- KubeletConfiguration documents (JSON, YAML), flags, the kubelet's layers and how they merge, the
  conflicts, default options, the checkpoints the kubelet refuses, environment-file edits (pure);
* :mod:`.host`    -- the kubelet as its node starts it: unit files, command line, config file and drop-ins (reads);
* :mod:`.rancher` -- the same for k3s/rke2, which run the kubelet themselves (reads);
* :mod:`.observe` -- node -> observed: everything the planner reads (:func:`observe.collect`, one collector for the
  module and for ``rdma_facts``);
* :mod:`.plan`    -- options + observed -> the file writes, the flag edits, the stale state files, the restart, the
  warnings, the refusals (pure);
* :mod:`.apply`   -- stop, state files aside, the file transaction, restart, healthz watch, rollback;
* :mod:`.judge`   -- the audit: the planner run against the facts (``kubelet.config``), and the checks the audit made
  before the room (``kubelet.topology``, ``override``, ``state_file``, ``whole_node``).
"""
