#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
---
module: rdma_audit_report
short_description: Compare every audited host with its desired state and write the audit's report files
version_added: 0.1.0
description:
  - An action plugin for the C(rdma.k8s_node.rdma_audit) role; it runs on the controller only, once for the play
    (C(run_once)). It reads each host's registered M(rdma.k8s_node.rdma_audit_gather) result, runs the audit
    (the same comparison as P(rdma.k8s_node.rdma_audit#filter)) and writes C(report.json), C(report.md),
    C(report.html) and C(junit.xml) into O(dest), each atomically.
  - Its result is the report (the document of C(report.json), plus the keys every Ansible result has); register it
    as C(rdma_audit_report). The callbacks get a censored copy of a successful result (the report can be tens of
    megabytes); the registered variable and the files have all of it.
  - Doing this in one action instead of a C(set_fact) with the filter and a C(copy) per report saves the template
    engine's pass over every value of the report (docs/benchmarks.md).
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
extends_documentation_fragment:
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.info_module
options:
  hosts:
    description: The inventory hosts to audit (normally C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  mode:
    description: V(desired) compares with the desired state; V(facts_only) reports known-bad conditions only.
    type: str
    choices: [desired, facts_only]
    default: desired
  layers:
    description: Layers to check on hosts that do not set C(rdma_audit_layers); empty means all.
    type: list
    elements: str
    default: []
  dest:
    description: Controller directory for the report files (created when missing); unset writes none.
    type: path
  formats:
    description:
      - Which files to write - V(json) C(report.json), V(md) C(report.md), V(html) C(report.html) (report.md as one
        self-contained page, nothing loaded from elsewhere), V(junit) C(junit.xml).
    type: list
    elements: str
    choices: [json, md, html, junit]
    default: [json, md, html, junit]
  summary_lines:
    description: At most this many non-ok checks in RV(summary_lines).
    type: int
    default: 20
  checks:
    description:
      - Whether RV(hosts) holds every host's checks. V(false) returns each host's status, counts, summary and labels
        only (the report files have every check either way) - at thousands of hosts the checks are most of what
        ansible-core passes from the action's worker to its main process and keeps there for the rest of the play.
      - With V(true), each host's C(checks) is a tuple, which ansible-core's C(register) does not copy; templates
        read it as a list (C(set_fact) and C(to_json) make it one).
    type: bool
    default: true
  result_var:
    description: The variable each host's M(rdma.k8s_node.rdma_audit_gather) result is registered as.
    type: str
    default: rdma_audit__facts
  desired_var:
    description: A per-host variable with the desired state, read when the gather result has none.
    type: str
    default: rdma_audit__desired
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
notes:
  - Writes controller-side files only, in check mode too; nothing on a node changes.
seealso:
  - module: rdma.k8s_node.rdma_audit_gather
"""

EXAMPLES = r"""
- name: Audit the play's hosts and write the reports
  rdma.k8s_node.rdma_audit_report:
    hosts: "{{ ansible_play_hosts_all }}"
    dest: "{{ playbook_dir }}/rdma-audit"
  register: rdma_audit_report
  run_once: true

- name: Only report.json and junit.xml, for CI
  rdma.k8s_node.rdma_audit_report:
    hosts: "{{ ansible_play_hosts_all }}"
    dest: /tmp/rdma-audit
    formats: [json, junit]
  register: rdma_audit_report
  run_once: true

- name: A fleet - every check in the files, the registered result per host status, counts, summary and labels
  rdma.k8s_node.rdma_audit_report:
    hosts: "{{ ansible_play_hosts_all }}"
    dest: /srv/rdma-audit
    checks: false
  register: rdma_audit_report
  run_once: true
"""

RETURN = r"""
schema_version:
  description: The report's schema version (docs/audit.md).
  returned: always
  type: int
  sample: 1
generated:
  description: When the report was made (UTC).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
summary:
  description: Hosts, the inventory's status, hosts and checks by status.
  returned: always
  type: dict
hosts:
  description: Per host its status, counts, summary, labels and checks, as in C(report.json); no C(checks) with
    O(checks=false).
  returned: always
  type: dict
files:
  description: The files written, by format.
  returned: always
  type: dict
  sample: {"json": "/tmp/rdma-audit/report.json", "html": "/tmp/rdma-audit/report.html"}
summary_lines:
  description: The verdict and the first non-ok checks, for the end of the play.
  returned: always
  type: list
  elements: str
"""
