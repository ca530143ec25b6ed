#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: containerd_rdma
short_description: Give CRI containers the memlock limit RDMA needs (containerd unit limit, base runtime spec, CDI)
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - RDMA registers (pins) memory, and a pod's C(RLIMIT_MEMLOCK) bounds how much. Without a change, CRI containers
    inherit containerd's limit (8 MiB on most distributions) and C(ibv_reg_mr) fails with C(ENOMEM); NCCL then
    silently falls back to TCP. C(CAP_IPC_LOCK) does not help a non-root process.
  - "Owns a systemd drop-in for containerd.service with C(LimitMEMLOCK=) O(memlock), and runs C(systemctl daemon-reload)
    when it changes."
  - Gives every runc-type CRI runtime (C(runc), C(nvidia) when the NVIDIA runtime is configured), or the runtimes
    named in O(runtimes), a base runtime spec with C(RLIMIT_MEMLOCK) soft and hard set to O(memlock). A runtime
    without a base spec gets one generated from the installed containerd (C(ctr oci spec)) at O(base_runtime_spec),
    with C(RLIMIT_NOFILE) set too (the generated spec caps it at 1024).
  - "A runtime that already points at another tool's spec (EKS AL2023 nodeadm's C(/etc/containerd/base-runtime-spec.json),
    kubespray's C(/etc/containerd/cri-base.json), a hand-made one) keeps that spec: the module never writes the
    owner's file. It writes a derived copy next to it, C(rdma-k8s-node.<name>), that is the owner's file byte for
    byte except the C(RLIMIT_MEMLOCK) entry (and C(RLIMIT_NOFILE) when O(nofile) is set), and points the runtime at
    the copy; every later run derives the copy again from the owner's current file. When the owner's spec already
    has the wanted limits, nothing changes. The result's C(observed.base_specs) says, per runtime, whose file it is."
  - Sets C(enable_cdi) and C(cdi_spec_dirs) where the version needs it (containerd 1.7 has CDI off by default;
    2.x has it on; 1.6 has no CDI and only gets a warning).
  - Edits C(config.toml) in place with config version 2 (containerd 1.6/1.7) or 3 and 4 (2.x, 2.3) key paths,
    keeping every other setting, comment and the file's order.
  - "Files the config imports (NVIDIA Container Toolkit's C(conf.d/99-nvidia.toml), EKS's C(config.d)) are other
    tools' and are not edited. containerd merges them after the main file (2.x key by key, the last file wins;
    1.x replaces the whole CRI section with the one of the last file that names it), so when one of them would
    override a key the module sets, the module fails naming the file, the key and its value, unless
    O(edit_imports=true) lets it write the key into that file."
  - "A config that says it is regenerated is not edited. k3s and rke2 render their containerd C(config.toml) at
    every start; when it imports a drop-in directory (k3s/rke2 with containerd 2.x, C(config-v3.toml.d)), the
    module writes its keys into its own drop-in C(50-rdma-k8s-node.toml) there, else it fails saying what to do.
    Any other file whose header says it is generated is refused unless O(edit_generated=true)."
  - Before anything is restarted, C(containerd config dump) must show the new settings (containerd only warns
    about unknown keys, so a misplaced key would otherwise fail silently); if it does not, the files are restored.
  - Restarts containerd only with O(restart=true), then checks that it is active, answers on its socket and runs
    with the new memlock limit. If not, every file is restored, containerd is restarted again, and the module
    fails saying whether containerd is back.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is per key (C(LimitMEMLOCK), the spec's rlimits, each config key), not per line.
  idempotent:
    support: full
options:
  memlock:
    description:
      - The memlock limit for containerd and every CRI container, soft and hard.
      - V(unlimited) (also V(infinity)), or a byte count such as V(4194304) or V(64M) (K, M, G, T are powers of 1024).
    type: str
    default: unlimited
  nofile:
    description:
      - C(RLIMIT_NOFILE) (soft and hard) of containers created from the base runtime spec.
      - Unset, a generated spec gets 1048576 and another tool's spec keeps its own value; set, both get this value.
    type: int
  config:
    description: containerd's main configuration file. Files it imports are followed.
    type: path
    default: /etc/containerd/config.toml
  base_runtime_spec:
    description:
      - Where the spec generated for runtimes without a base spec is written; those runtimes point at this path.
      - This module owns the file and writes it again from C(ctr oci spec) whenever it differs, so it must be a path
        no other tool writes (not kubespray's C(/etc/containerd/cri-base.json)). It must not be named
        C(rdma-k8s-node.*), the names of derived copies.
    type: path
    default: /etc/containerd/rdma-k8s-node-base-spec.json
  runtimes:
    description:
      - CRI runtimes to point at the base runtime spec. Empty means every runtime of type C(io.containerd.runc.v2)
        in the effective configuration. A named runtime that is not configured is an error.
    type: list
    elements: str
    default: []
  cdi:
    description:
      - Enable the Container Device Interface (C(enable_cdi = true)) where containerd supports it (1.7 and later).
      - V(false) leaves the CDI settings as they are.
    type: bool
    default: true
  cdi_spec_dirs:
    description: Directories containerd reads CDI specs from (with O(cdi=true)).
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  edit_imports:
    description:
      - Write a key into the imported file that would override it (the last one that sets it on containerd 2.x, the
        last one that names the CRI plugin on 1.x) instead of failing. That file belongs to another tool, which may
        write it again (nvidia-ctk does whenever it runs), so run this module after it.
    type: bool
    default: false
  edit_generated:
    description:
      - Edit a main config whose header says it is generated. The edit is lost when its generator runs again.
      - Never applies to k3s's and rke2's config, which they render at every start (see the description).
    type: bool
    default: false
  unit_dropin:
    description:
      - The systemd drop-in this module owns; it must be a C(.conf) file in C(/etc/systemd/system/<service>.service.d).
      - Default C(/etc/systemd/system/<service>.service.d/50-rdma-k8s-node-memlock.conf).
    type: path
  service:
    description:
      - "The systemd service that runs containerd: letters, digits and C(_ . @ -) (and C(:)), not starting with
        C(-) or C(.)."
      - On k3s and rke2 containerd runs inside their own service (C(k3s), C(k3s-agent), C(rke2-server),
        C(rke2-agent)); the module refuses V(containerd) with their config.
    type: str
    default: containerd
  restart:
    description:
      - Restart containerd when a change (or a previous run's change) has not reached the running daemon.
      - "Running containers keep the limits they were created with: pods must be recreated to get the new limit."
    type: bool
    default: false
  restart_timeout:
    description: Seconds to wait for containerd to become active after a restart.
    type: int
    default: 60
  backup:
    description:
      - Keep a timestamped copy of each edited file next to it.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
notes:
  - TOML cannot hold 18446744073709551615 (RLIM_INFINITY), which is why the limit lives in the JSON base spec and
    the unit, never in C(config.toml).
  - C(base_runtime_spec) applies to containers created through CRI (kubelet, crictl), not to C(ctr run).
  - Commands C(containerd), C(ctr) run inside O(host_root) (through C(chroot) when it is not V(/)); C(systemctl)
    runs as found on C(PATH). With a k3s or rke2 config they are also looked for in C(<data-dir>/data/current/bin)
    (k3s) and C(<data-dir>/bin) (rke2).
  - See docs/containerd.md for whose files the module writes and why.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - module: rdma.k8s_node.kubelet_topology
"""

EXAMPLES = r"""
- name: Unlimited memlock for RDMA pods, CDI on, restart containerd now
  rdma.k8s_node.containerd_rdma:
    restart: true
  register: containerd

- name: Only the runc runtime, keep CDI untouched, restart later
  rdma.k8s_node.containerd_rdma:
    runtimes: [runc]
    cdi: false

- name: Tell the operator
  ansible.builtin.debug:
    msg: "containerd must be restarted: {{ containerd.restart_required }}"
  when: containerd.restart_required | length > 0
"""

RETURN = r"""
changed:
  description: Whether a file changed, or containerd was restarted (or would be, in check mode).
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "update_file", "target": "/etc/containerd/config.toml", "mode": "0644"},
           {"action": "run", "target": "systemctl daemon-reload"}, {"action": "restart", "target": "containerd"}]
reboot_required:
  description: Always false.
  returned: always
  type: bool
restart_required:
  description: C([containerd]) when the running daemon does not have the configured settings and O(restart) is off.
  returned: always
  type: list
  elements: str
changes:
  description: Per key, the effective value before and the value after the change.
  returned: always
  type: dict
  sample: {"LimitMEMLOCK": {"before": "8388608", "after": "infinity"},
           "runtimes.runc.base_runtime_spec": {"before": "", "after": "/etc/containerd/rdma-k8s-node-base-spec.json"}}
observed:
  description: What the module read before changing anything.
  returned: always
  type: dict
  contains:
    containerd_version:
      description: The installed containerd's version.
      type: str
    config_version:
      description: The effective configuration's version (2, 3 or 4).
      type: int
    config_files:
      description: The main configuration file and the files it imports, in containerd's load order.
      type: list
      elements: str
    config_generated:
      description:
        - Null, or what regenerates the main config (C(tool) k3s, rke2 or null, the C(header) line saying so, C(path)).
      type: dict
    config_dropin:
      description: The collection's drop-in under a generated k3s/rke2 config (only then).
      type: str
    imported_overrides:
      description:
        - Imported files that would override a key the module sets (C(file), C(key), its C(value) there, the
          C(wanted) value, C(why)). Non-empty only with O(edit_imports=true); otherwise the module fails listing them.
      type: list
      elements: dict
    runtimes:
      description: Effective CRI runtimes with their type and base runtime spec.
      type: dict
    key_sources:
      description:
        - "Per key the collection sets (C(LimitMEMLOCK), C(runtimes.<name>.base_runtime_spec), C(enable_cdi),
          C(cdi_spec_dirs)), the file the value in effect comes from before the change: C(file), C(value), C(how)
          (V(set), V(section) when a containerd 1.x import replaced the CRI section without the key, or null)."
      type: dict
    base_specs:
      description:
        - "Per managed runtime, whose base spec it is and what is done: C(path) (its base spec now), C(owner)
          (V(rdma.k8s_node) or V(other)), C(written_by) (the tool known to write that path), C(action)
          (V(generate), V(derive) or V(keep)), C(spec) (the spec it points at afterwards), C(derived_from), C(note)."
      type: dict
    enable_cdi:
      description: Effective C(enable_cdi) (null on containerd 1.6).
      type: bool
    cdi_spec_dirs:
      description: Effective C(cdi_spec_dirs).
      type: list
      elements: str
    unit_memlock:
      description: C(LimitMEMLOCK) systemd applies to the service, from its unit files (C(infinity) or bytes).
      type: str
    running:
      description: The running daemon (C(pid), C(memlock) soft/hard) or null when it does not run.
      type: dict
  sample: {"containerd_version": "1.7.24", "config_version": 2, "config_files": ["/etc/containerd/config.toml"],
           "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2", "base_runtime_spec": ""}},
           "base_specs": {"runc": {"path": null, "owner": "rdma.k8s_node", "action": "generate",
                                   "spec": "/etc/containerd/rdma-k8s-node-base-spec.json"}},
           "enable_cdi": false, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "unit_memlock": "8388608",
           "running": {"pid": 812, "memlock": {"soft": "8388608", "hard": "8388608"}, "stale": false}}
diff:
  description: Per-key before and after of each edited file (with C(--diff)).
  returned: when diff mode is on and something changes
  type: raw
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)); the copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, or the file did not exist before).
  returned: always
  type: dict
  sample: {"/etc/containerd/config.toml": "/etc/containerd/config.toml.12345.2026-01-01@10:00:00~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import plan as _plan

validate = _plan.validate


def run_module(module):
    """observe -> plan -> (check mode: the plan) -> apply -> verify -> restart -> health check (rollback on failure);
    the layer's room does each step (plugins/module_utils/layers/containerd/)."""
    params = module.params
    want = _plan.validate(params)
    host = HostRoot(params["host_root"])
    node = _observe.Node(host, HostCommands(module, host), params, warn=module.warn)
    observed = _observe.observe_node(node, want, refuse=lambda base: _plan.refuse_service(base, params["service"]))
    planned = _plan.plan(want, params, observed, warn=module.warn)
    result = Result()
    result.observed.update(planned["report"])
    result.diffs.extend(planned["diffs"])
    result.extra["changes"] = planned["changes"]
    result.extra["backup_files"] = {}
    for step in planned["actions"]:
        result.add(step)
    if planned["restart"] and params["restart"]:
        if not node.systemd:
            raise ApplyError("restart=true but systemd cannot be asked about %s (systemctl show failed)" % node.service)
    elif planned["restart"]:
        result.need_restart(node.service)
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    _apply.apply(node, planned, result, backup=params["backup"],
                 restart=bool(planned["restart"] and params["restart"]))
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=_plan.argument_spec(),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
