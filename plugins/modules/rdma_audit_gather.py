#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
---
module: rdma_audit_gather
short_description: Gather a node's RDMA facts and its desired state for the drift audit, in one task
version_added: 0.1.0
description:
  - An action plugin for the C(rdma.k8s_node.rdma_audit) role. It runs M(rdma.k8s_node.rdma_facts) on the node
    (the audit's only call to the node) and resolves the desired-state variables on the controller, with the task's
    variables in scope (play vars, role params, inventory, extra vars), in the same task.
  - Doing both in one task saves a worker fork and a result round per host against a separate C(set_fact),
    which is what bounds the audit's controller cost at hundreds of hosts.
  - The node's facts are returned as JSON text, RV(rdma_facts_json) (or compressed, RV(rdma_facts_json_zlib), with
    O(compress=true)), not as C(ansible_facts), so they do not go into the host's facts. ansible-core copies every
    returned fact into the fact cache, again into every later task's variables of that host, and walks every
    container of a registered result in its main process; as one
    string the facts of a large node (some 1,500 dicts and lists) cost none of that. Read them with
    C(registered | rdma.k8s_node.rdma_audit_facts) (or, uncompressed, C(registered.rdma_facts_json | from_json)),
    which is what M(rdma.k8s_node.rdma_facts) returns as C(ansible_facts.rdma).
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
extends_documentation_fragment:
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.info_module
  - rdma.k8s_node.host_root
options:
  desired_state:
    description:
      - Resolve every layer's desired-state variables, as the collection's layer registry lists them (the
        provisioning roles' variables the audit compares with), besides the ones named in O(desired_vars).
    type: bool
    default: false
  desired_vars:
    description:
      - Names of the variables to resolve on the controller and return in RV(rdma_audit_desired).
      - A variable that is not defined is returned as the string V(__unset__).
    type: list
    elements: str
    default: []
  counters_interval:
    description:
      - Passed to M(rdma.k8s_node.rdma_facts) - seconds between two readings of the RDMA ports' C(hw_counters), from
        V(0) to V(60) (V(0) reads them once); with two readings the audit judges their rates (docs/counters.md).
    type: float
    default: 0
  role_vars:
    description:
      - Take O(host_root), O(counters_interval) and O(desired_state) from the C(rdma.k8s_node.rdma_audit) role's
        variables when they are defined, C(rdma_audit_host_root), C(rdma_audit_hw_counter_interval) and
        C(rdma_audit_mode) (O(desired_state) is C(rdma_audit_mode == 'desired')); the variable wins over the option,
        as when a task passes the option as C("{{ variable }}").
      - Used by the role's own task - a template in a task's options is compiled by every host's forked worker
        (about 3 ms of controller CPU per option and host), a variable read here is templated only when it holds
        a template.
    type: bool
    default: false
  compress:
    description:
      - Return the facts compressed, as RV(rdma_facts_json_zlib), instead of RV(rdma_facts_json) (the node compresses
        them, M(rdma.k8s_node.rdma_facts)'s O(rdma.k8s_node.rdma_facts#module:compress)); read them with the
        P(rdma.k8s_node.rdma_audit_facts#filter) filter.
      - The facts of a DGX H100 are about 90 KB of JSON text and 12 KB compressed; the controller holds every host's
        result until the audit's report is written (the C(rdma.k8s_node.rdma_audit) role sets it).
    type: bool
    default: false
attributes:
  facts:
    description: The facts are returned as RV(rdma_facts_json) or RV(rdma_facts_json_zlib), not as C(ansible_facts); they do not update the host's facts.
    support: none
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
notes:
  - The node side is M(rdma.k8s_node.rdma_facts) and needs only the node's Python standard library.
  - When the node cannot be reached, the result is marked unreachable and still carries RV(rdma_audit_desired).
seealso:
  - module: rdma.k8s_node.rdma_facts
"""

EXAMPLES = r"""
- name: Facts and desired state of each host, for the audit filter
  rdma.k8s_node.rdma_audit_gather:
    desired_state: true
  register: audit_input

- name: The facts as a dictionary
  ansible.builtin.debug:
    msg: "{{ (audit_input.rdma_facts_json | from_json).devices | map(attribute='name') }}"

- name: Facts of many hosts, compressed on the node
  rdma.k8s_node.rdma_audit_gather:
    desired_state: true
    compress: true
  register: audit_input

- name: The compressed facts as a dictionary
  ansible.builtin.debug:
    msg: "{{ (audit_input | rdma.k8s_node.rdma_audit_facts).devices | map(attribute='name') }}"

- name: Facts and two chosen variables
  rdma.k8s_node.rdma_audit_gather:
    desired_vars: [rdma_netns_mode, containerd_rdma_memlock]
  register: audit_input
"""

RETURN = r"""
rdma_facts_json:
  description:
    - The facts of M(rdma.k8s_node.rdma_facts) (what it returns as C(ansible_facts.rdma)) as compact JSON text;
      C(| from_json) gives the dictionary.
    - Earlier versions of this action returned them as C(ansible_facts.rdma) (see the changelog).
  returned: when the node was reached, rdma_facts returned facts and O(compress=false)
  type: str
  sample: '{"devices":[{"name":"mlx5_0","netdevs":["ibp24s0"]}],"gpus":[],"problems":[]}'
rdma_facts_json_zlib:
  description:
    - The text of RV(rdma_facts_json) compressed (zlib, RFC 1950) and in base64 (RFC 4648);
      C(| rdma.k8s_node.rdma_audit_facts) on the registered result gives the dictionary.
  returned: when the node was reached, rdma_facts returned facts and O(compress=true)
  type: str
  sample: eJyrVkpJLctMTi1WsoquVspLzE1VslLKzakwjTdQ0lHKSy0BSoPklDKTCoxMig2UYmtjdZTSC0pBgkBWQVF+Uk5qLphXCwDYdxlM
rdma_audit_desired:
  description: Each variable resolved (O(desired_state), O(desired_vars)) with its value as the task saw it, or V(__unset__).
  returned: always
  type: dict
  sample: {"rdma_netns_mode": "exclusive", "containerd_rdma_memlock": "__unset__"}
"""
