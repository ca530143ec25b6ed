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
  - The node's facts are returned as JSON text, RV(rdma_facts_json), not as C(ansible_facts), so they do not go
    into the host's facts. ansible-core copies every returned fact into the fact cache, again into every later
    task's variables of that host, and walks every container of a registered result in its main process; as one
    string the facts of a large node (some 1,500 dicts and lists) cost none of that. Read them with
    C(registered.rdma_facts_json | from_json), which is what M(rdma.k8s_node.rdma_facts) returns as
    C(ansible_facts.rdma).
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
  hosts:
    description:
      - The fleet gather - gather every host named here from this one task (run it with C(run_once)), each on its
        own connection, instead of the host the task runs for; normally C(ansible_play_batch).
      - Each host is reached as ansible-core reaches it for a task of its own - its variables as the strategy makes
        them for this task (inventory, play, role and extra vars), its connection plugin with its connection, become
        and shell options (C(ansible_connection), C(ansible_host), C(ansible_user), C(ansible_port),
        C(ansible_ssh_*), C(ansible_become*), C(ansible_python_interpreter) or interpreter discovery), set up by the
        pieces of ansible-core's task executor; the other options (O(role_vars) included) are resolved from each
        host's own variables.
      - The result holds RV(rdma_audit_fleet), each host's result as this action returns it for that host alone; a
        host that cannot be reached is marked unreachable there (with its desired state), a host whose module or
        connection set-up fails is marked failed with the message, and the task itself does not fail for them.
      - There is no task, worker or callback line per host, and the hosts' results do not update their facts (the
        interpreter discovered on a node is not kept for later tasks).
    type: list
    elements: str
  forks:
    description:
      - With O(hosts), how many hosts are gathered at a time (threads of the one worker); V(0) is the run's forks
        (C(--forks), C(forks) in ansible.cfg).
    type: int
    default: 0
attributes:
  facts:
    description: The facts are returned as RV(rdma_facts_json), not as C(ansible_facts); they do not update the host's facts.
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

- name: Every host of the batch from one task (the fleet gather)
  rdma.k8s_node.rdma_audit_gather:
    hosts: "{{ ansible_play_batch }}"
    desired_state: true
  register: fleet_input
  run_once: true

- name: One host's facts from the fleet gather
  ansible.builtin.debug:
    msg: "{{ (fleet_input.rdma_audit_fleet[inventory_hostname].rdma_facts_json | from_json).gpus | length }}"

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
  returned: when the node was reached and rdma_facts returned facts (with O(hosts), in each host's entry of RV(rdma_audit_fleet))
  type: str
  sample: '{"devices":[{"name":"mlx5_0","netdevs":["ibp24s0"]}],"gpus":[],"problems":[]}'
rdma_audit_fleet:
  description:
    - With O(hosts), each host's result, as this action returns it for that host alone (RV(rdma_facts_json),
      RV(rdma_audit_desired), C(failed), C(unreachable), C(msg)).
  returned: with O(hosts)
  type: dict
  sample: {"node1": {"changed": false, "rdma_facts_json": "{}", "rdma_audit_desired": {}}}
msg:
  description: With O(hosts), how many hosts were gathered, at most how many at a time, and how many were ok, failed and unreachable.
  returned: with O(hosts)
  type: str
  sample: "rdma_facts on 3 hosts (3 at a time): 2 ok, 0 failed, 1 unreachable"
rdma_audit_desired:
  description: Each variable resolved (O(desired_state), O(desired_vars)) with its value as the task saw it, or V(__unset__).
  returned: without O(hosts)
  type: dict
  sample: {"rdma_netns_mode": "exclusive", "containerd_rdma_memlock": "__unset__"}
"""
