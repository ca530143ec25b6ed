# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer: ARP and reverse-path filtering sysctls of the RDMA netdevs in one sysctl.d file, one room.

* :mod:`.rules`    -- key spelling, our drop-in's text, the kernel's max rule, how systemd-sysctl and
  ``sysctl --system`` read the other sysctl.d files and which of them beat ours (pure);
* :mod:`.settings` -- the rdma_sysctl role's settings from its variables and the node's RDMA netdevs (pure);
* :mod:`.observe`  -- node -> observed (live values, our file, every sysctl.d file, /etc/sysctl.conf);
* :mod:`.plan`     -- settings + observed -> the file write, the live writes, the overrides (pure);
* :mod:`.apply`    -- runs exactly the planned actions (file transaction, one ``sysctl -w``, rollback);
* :mod:`.judge`    -- the audit: the planner run against the facts.
"""
