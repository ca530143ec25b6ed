# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``drivers`` layer: MLNX/DOCA-OFED as installed and running, and the GPUDirect RDMA path (DMA-BUF or
nvidia_peermem), one room.

* :mod:`.observe` -- node -> observed: OFED, the GPUDirect state, the loaded modules, the RDMA devices' drivers and the
  GPUs (``rdma_facts``' ``layers.drivers``), and what nvidia_peermem's planner reads (:func:`observe.collect`);
* :mod:`.plan`    -- nvidia_peermem's options + observed -> the path, the file plans, the load, the overrides (pure);
* :mod:`.apply`   -- runs exactly the planned load and file writes (test-load first, file transaction);
* :mod:`.judge`   -- the audit: the layer's checks and nvidia_peermem's planner run against the facts.

The pure GPUDirect rules (the NVIDIA banner, DMA-BUF capability, the method, the load diagnosis, our files' text, the
overrides) stay in ``module_utils/_gpudirect.py``, and OFED's in ``_ofed.py``: other code reads them too.
"""
