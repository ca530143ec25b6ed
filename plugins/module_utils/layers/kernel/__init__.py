# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kernel`` layer: the kernel's boot arguments (``iommu=pt`` and others), one room.

* :mod:`.cmdline` -- kernel command lines: split like the kernel, compare whole arguments, plan additions and
  removals (pure);
* :mod:`.grub`    -- GRUB configuration: the collection's ``/etc/default/grub.d`` drop-in, ``GRUB_CMDLINE_LINUX``
  lines, grubby and grub.cfg output (pure);
(the module, kernel_cmdline, still plans and applies itself; the audit's ``_audit._kernel`` judges the layer.)
"""
