# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer: SR-IOV VFs on ConnectX PFs, persistent across reboot, and InfiniBand VF GUIDs, one room.

* :mod:`.rules`   -- what the node reports (``ip link`` VF lines, ``mstconfig``, eswitch mode) parsed, the VF count
  and VF attributes planned, sriov-network-operator's presence (pure);
* :mod:`.guid`    -- InfiniBand VF GUIDs: spellings, the deterministic scheme, the operator's pool file, the plan
  (pure);
* :mod:`.host`    -- the node's reads and writes: the PF an option names, its VFs, VFs in use, admin attributes and
  GUIDs, the GUIDs taken elsewhere, sriov-network-operator's traces; sysfs writes bounded in time, re-binds, restores;
* :mod:`.observe` -- node -> observed: everything the planners read (:func:`observe.collect`, the one collector);
* :mod:`.plan`    -- options + observed -> the ``sriov_numvfs`` writes, the ``ip link`` VF changes, the GUIDs set, the
  re-binds, the pool file, the warnings, the refusals (pure); the modules' argument specs;
* :mod:`.apply`   -- exactly the planned actions, verified, the PF restored on a failure; ``run_sriov_vfs`` /
  ``run_ib_vf_guids``, shared by the modules and the role's boot-time applier (which bundles these files, not this
  package's ``__init__``).
* :mod:`.judge`   -- the audit: the planners on rdma_facts' ``layers.sriov`` (``sriov.config``), ``sriov.num_vfs``,
  ``vf_attrs``, ``vf_guids`` and, across the inventory, ``sriov.guid_inventory`` (controller-side; not bundled).
"""
