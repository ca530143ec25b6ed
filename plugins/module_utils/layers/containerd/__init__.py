# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``containerd`` layer: the memlock limit RDMA pods need (containerd's unit, the CRI runtimes' base runtime spec)
and CDI, one room.

* :mod:`.tomledit` -- a TOML 1.0 reader that keeps every statement's span, and the in-place editor (pure);
* :mod:`.rules`    -- limits, base specs (generate, derive, check), config versions and key paths, which file wins,
  the edits, the overrides, generated configs (pure);
* :mod:`.observe`  -- node -> observed: the unit and its drop-ins, the config containerd reads and its imports, the
  version, ``containerd config dump``, the base specs (one observer, for the module and for ``rdma_facts``);
* :mod:`.plan`     -- options + observed -> the file writes, what they change, the refusals (pure);
* :mod:`.apply`    -- runs exactly the planned writes (file transaction), then reload, ``config dump`` check,
  restart with rollback;
* :mod:`.judge`    -- the audit: the planner run against the facts, and the checks provisioning cannot fix.
"""
