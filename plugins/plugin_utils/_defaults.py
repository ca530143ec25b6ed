# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The layers' desired-state defaults: the registry's variables as the roles' ``defaults/main.yml`` set them.

The roles' defaults files are the one place a default is written (Ansible reads them there); the controller code
that needs a default for a host that sets nothing (the audit, the pre-flight) reads the same files, found next to
the plugins in the collection (``<collection>/roles``), for the roles the layer registry names.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os

from ansible.module_utils.common.yaml import yaml_load

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")
_CACHE = {}


def role_defaults(roles_dir=ROLES_DIR, names=None):
    """``{variable: default}`` of the registry's desired-state variables (or ``names``) that a role defaults."""
    key = (roles_dir, tuple(names) if names is not None else None)
    if key not in _CACHE:
        merged = {}
        for role in _registry.default_roles():
            path = os.path.join(roles_dir, role, "defaults", "main.yml")
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as handle:
                merged.update(yaml_load(handle) or {})
        wanted = _registry.desired_vars() if names is None else names
        _CACHE[key] = dict((k, merged[k]) for k in wanted if k in merged)
    return dict(_CACHE[key])
