# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``health`` layer: PCIe and fabric health (issue 19, item 4), one room, judged and not provisioned.

* :mod:`.observe` -- node -> the raw link, ACS, port, counter and firmware values (``rdma_facts``' ``layers.health``);
* :mod:`.judge`   -- the audit: the values against the rules (pure), per host and across the inventory.
"""
