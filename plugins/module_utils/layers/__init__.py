# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's layers: the registry (``_registry.py``) and one package per layer built as a room (observer,
pure planner, applier, audit judgement; see docs/architecture.md)."""
