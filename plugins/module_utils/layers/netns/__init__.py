# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer: the RDMA subsystem network-namespace mode (ib_core's ``netns_mode``), one room.

* :mod:`.mode`      -- the parameter's spellings and our modprobe.d file (pure);
* :mod:`.initramfs` -- whether the running kernel's initramfs holds ib_core (its cpio member names, read in-process);
* :mod:`.observe`   -- node -> observed (live mode, modprobe.d, the boot's mode, the shared device plugin);
* :mod:`.plan`      -- desired + observed -> actions, overrides, warnings, reboot (pure);
* :mod:`.apply`     -- runs exactly the planned actions (file transaction, initramfs, live switch);
* :mod:`.judge`     -- the audit: the planner run against the facts.
"""
