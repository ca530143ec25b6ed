#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kubelet_topology
short_description: Set the kubelet's Topology Manager and the CPU/memory manager settings it needs
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Sets C(topologyManagerPolicy), C(topologyManagerScope), C(topologyManagerPolicyOptions), C(cpuManagerPolicy)
    with C(reservedSystemCPUs), and C(memoryManagerPolicy) with C(reservedMemory) in the KubeletConfiguration.
  - Refuses, before writing anything and with the reason, what the kubelet would refuse at start (and crash-loop on)
    an unknown policy, an option the installed kubelet does not accept, C(static) CPU manager without reserved CPUs,
    C(Static) memory manager whose reserved memory does not equal kube + system reserved + the hard eviction
    threshold, reserved CPUs that are not online, NUMA nodes that do not exist.
  - Reads the kubelet as it starts. The command line is the running kubelet's C(/proc/<pid>/cmdline) (what runs now)
    and the one systemd builds for the next start from C(kubelet.service), its drop-ins (an empty C(ExecStart=)
    resets), C(Environment=) and C(EnvironmentFile=) (C(-) prefix optional), with C($VAR) and C(${VAR}) expanded as
    systemd does (kubeadm's C(kubeadm-flags.env), C(/etc/default/kubelet), C(/etc/sysconfig/kubelet), EKS's and
    kubespray's files). Without a unit and without a running kubelet those three files are read as they are.
  - Writes a drop-in in the kubelet's C(--config-dir) when the kubelet runs with one and is 1.30 or later (it survives
    C(kubeadm upgrade), which rewrites C(config.yaml)); otherwise edits only the managed top-level keys of the
    kubelet's C(--config) file, keeping the rest of the file as it is. A JSON file (EKS
    C(/etc/kubernetes/kubelet/kubelet-config.json), nodeadm C(config.json)) stays JSON with its key order, values and
    indentation; a YAML file stays YAML with its comments. The result is parsed back and must differ from the
    original only in the collection's keys, or nothing is written.
  - Merges the config file, every C(*.conf) under C(--config-dir) in the kubelet's order (its directory walk, by name,
    later wins; JSON content in a C(.conf) file is read too) and the command-line flags that override configuration
    fields (C(--topology-manager-policy), C(--topology-manager-scope), C(--topology-manager-policy-options),
    C(--cpu-manager-policy), C(--reserved-cpus), C(--memory-manager-policy), C(--reserved-memory), and for the checks
    C(--kube-reserved), C(--system-reserved), C(--eviction-hard), C(--feature-gates)). A later drop-in or a flag that
    overrides a value this module sets is a conflict, handled as O(on_conflict) says.
  - Every change the kubelet checks against its checkpoint at start needs the kubelet stopped, the state file
    removed, and a start, so it requires O(restart=true) (drain the node first; the C(kubelet_topology) role can)
    C(cpu_manager_state) for a CPU manager policy change and for a C(reservedSystemCPUs) change under C(static);
    C(memory_manager_state) for a memory manager policy change and for a change of the bytes C(reservedMemory)
    reserves on a NUMA node under C(Static). A checkpoint the kubelet would already refuse (another policy, a
    C(static) checkpoint whose C(defaultCpuSet) lacks a reserved CPU, a C(Static) one whose per-NUMA
    C(systemReserved) differs from the reservation) is removed the same way. Other changes restart only with
    O(restart=true).
  - After a restart the kubelet must be active and answer C(healthz); otherwise files and state files are restored,
    the kubelet is started again, and the module fails saying whether it is back.
  - On k3s and rke2 nodes (a C(k3s), C(k3s-agent), C(rke2-server) or C(rke2-agent) unit) the kubelet runs inside
    k3s/rke2 with C(--config-dir=<data-dir>/agent/etc/kubelet.conf.d) and the C(kubelet-arg) values of
    C(/etc/rancher/<tool>/config.yaml), its C(config.yaml.d/*.yaml) (k3s's merge order, C(kubelet-arg+) appends) and
    the unit's C(ExecStart=). The drop-in is written into that directory (k3s and rke2 1.32 and later; older ones are
    refused with the way to do it by hand), a C(kubelet-arg) that overrides it is a conflict (never edited), and the
    restart is of the k3s/rke2 unit. See C(docs/kubelet.md), "k3s and rke2".
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is per KubeletConfiguration key.
  idempotent:
    support: full
options:
  topology_manager_policy:
    description: C(topologyManagerPolicy). Unset leaves it as it is.
    type: str
    choices: [none, best-effort, restricted, single-numa-node]
  topology_manager_scope:
    description: C(topologyManagerScope).
    type: str
    choices: [container, pod]
  topology_manager_policy_options:
    description:
      - "C(topologyManagerPolicyOptions), for example C({prefer-closest-numa-nodes: \"true\"})."
      - C(prefer-closest-numa-nodes) needs kubelet 1.28 (1.26 and 1.27 with C(featureGates.TopologyManagerPolicyOptions)
        and C(featureGates.TopologyManagerPolicyBetaOptions)), C(max-allowable-numa-nodes) 1.31,
        C(numa-allocation-strategy) and C(numa-score-weights) 1.38 with C(featureGates.TopologyManagerPolicyAlphaOptions).
      - An option the kubelet would refuse fails the module before anything is written.
    type: dict
  topology_manager_default_options:
    description:
      - Policy options applied only where they fit, for example C(prefer-closest-numa-nodes) set to V(true) (the
        role's default).
      - Each is added to C(topologyManagerPolicyOptions) unless O(topology_manager_policy_options) sets it, the node's
        own configuration (config file, other drop-ins, flags) already sets it, the installed kubelet would refuse it
        with its version and feature gates, or (C(prefer-closest-numa-nodes)) the policy is not V(best-effort) or
        V(restricted). Each one left out is a warning and is listed in RV(default_options).
    type: dict
  cpu_manager_policy:
    description: C(cpuManagerPolicy). V(static) needs O(reserved_system_cpus) or a CPU reservation in the config.
    type: str
    choices: [none, static]
  reserved_system_cpus:
    description: C(reservedSystemCPUs), a CPU list such as V(0-1,32-33); every CPU must be online.
    type: str
  memory_manager_policy:
    description: C(memoryManagerPolicy) (capitalised). V(Static) needs O(reserved_memory).
    type: str
    choices: [None, Static]
  reserved_memory:
    description: C(reservedMemory) per NUMA node.
    type: list
    elements: dict
    suboptions:
      numa_node:
        description: NUMA node number.
        type: int
        required: true
      limits:
        description: "Reserved amounts, for example C({memory: 1124Mi})."
        type: dict
        required: true
  mode:
    description:
      - V(auto) writes a drop-in when the kubelet runs with C(--config-dir) and is 1.30 or later, else edits the config file.
      - V(dropin) and V(config) force one; V(dropin) fails when the kubelet has no C(--config-dir).
    type: str
    choices: [auto, dropin, config]
    default: auto
  dropin_name:
    description:
      - File name of the drop-in this module owns in the C(--config-dir) directory, C(*.conf) with letters, digits and
        C(_ . @ + -), not starting with a dot.
    type: str
    default: 50-rdma-k8s-node-topology.conf
  config:
    description:
      - The kubelet config file when nothing says how the kubelet starts (no running kubelet, no C(kubelet.service),
        no flag file). When its command line is known, its C(--config) is used, and a kubelet without C(--config) has
        no config file to edit (O(mode=config) then fails).
    type: path
    default: /var/lib/kubelet/config.yaml
  restart:
    description: Restart the kubelet when the change has not reached it (required for a CPU/memory manager policy change).
    type: bool
    default: false
  restart_timeout:
    description:
      - Seconds (at least 1) to wait for the kubelet to be active and healthy after a restart.
      - The wait ends early, as a failure, when systemd gives up on the unit (C(failed)) or its C(Restart=) has started
        it twice since the module's restart (C(NRestarts)). A kubelet refusing its configuration or checkpoint exits at
        every start, and the rollback should not wait for the timeout.
    type: int
    default: 60
  settle_time:
    description:
      - Seconds the kubelet must stay healthy after it first answers O(healthz_url), with the same main process.
      - The kubelet serves healthz before it starts its container manager; a CPU or memory manager that refuses its
        checkpoint or configuration stops it only then, so a single V(ok) does not prove the change is accepted.
      - V(0) accepts the first V(ok).
    type: int
    default: 15
  healthz_url:
    description: The kubelet's health endpoint, an C(http://) or C(https://) URL.
    type: str
    default: http://127.0.0.1:10248/healthz
  on_conflict:
    description:
      - What to do when a later drop-in in C(--config-dir) or a command-line flag overrides a value this module sets
        (the kubelet would never see the module's value).
      - V(fail) refuses, names every overriding file or flag and writes nothing.
      - V(override) makes the module's value win. Against a drop-in, the module's own drop-in is renamed to sort after
        every drop-in that sets another value (V(99-<name>), then V(zz-<name>) ...; the old one is removed); the other
        tool's file is not touched, so its own regeneration (nodeadm writes its drop-in at every boot) cannot undo it.
        Against a flag set in an environment file (C(kubeadm-flags.env), C(/etc/default/kubelet), an
        C(EnvironmentFile=)), the flag is taken out of that variable (the diff shows the file); the config files then
        decide. A flag written in a systemd unit (C(ExecStart=), C(Environment=)) or an override of the config file by
        a drop-in (O(mode=config)) is refused with the reason.
      - V(ignore) writes the module's file as usual, warns, and returns the overrides in RV(conflicts); the other side
        keeps winning until it is removed.
    type: str
    choices: [fail, override, ignore]
    default: fail
  backup:
    description:
      - Keep a timestamped copy of each edited file next to it.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
requirements:
  - PyYAML on the node (C(python3-yaml)) for YAML configuration files; JSON ones (EKS) need nothing but Python.
notes:
  - The kubelet's version comes from C(kubelet --version).
  - A flag only the running kubelet still has (its unit no longer sets it) is reported and needs a restart.
  - See C(docs/kubelet.md) for the order the kubelet reads its sources in and what each tool (kubeadm, EKS, kubespray)
    writes.
seealso:
  - module: rdma.k8s_node.containerd_rdma
"""

EXAMPLES = r"""
- name: Topology-aligned pods, whole-node pods included (restricted admits a pod whose devices span both sockets)
  rdma.k8s_node.kubelet_topology:
    topology_manager_policy: restricted
    topology_manager_default_options: {prefer-closest-numa-nodes: "true"}
    topology_manager_scope: pod
    cpu_manager_policy: static
    reserved_system_cpus: "0-1"
    restart: true

- name: The same on a node whose kubeadm-flags.env passes --cpu-manager-policy=none (the flag is taken out)
  rdma.k8s_node.kubelet_topology:
    cpu_manager_policy: static
    reserved_system_cpus: "0-1"
    on_conflict: override
    restart: true
"""

RETURN = r"""
changed:
  description: Whether a file changed or the kubelet was restarted (or would be, in check mode).
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create_file", "target": "/etc/kubernetes/kubelet.conf.d/50-rdma-k8s-node-topology.conf", "mode": "0644"}]
reboot_required:
  description: Always false.
  returned: always
  type: bool
restart_required:
  description: C([kubelet]) (on k3s/rke2 their unit, C([k3s]), C([rke2-agent]) ...) when the change needs a restart that O(restart) did not allow.
  returned: always
  type: list
  elements: str
changes:
  description: Per key, the persisted effective value before and the value after.
  returned: always
  type: dict
  sample: {"topologyManagerPolicy": {"before": "none", "after": "single-numa-node"}}
target:
  description: Where the settings are persisted (C(mode) dropin or config, and the path).
  returned: always
  type: dict
  sample: {"mode": "dropin", "path": "/etc/kubernetes/kubelet.conf.d/50-rdma-k8s-node-topology.conf"}
observed:
  description: What the module read.
  returned: always
  type: dict
  contains:
    kubelet_version:
      description: The installed kubelet's version.
      type: str
    persisted:
      description: The managed keys as the kubelet gets them before the change (config file, drop-ins, then flags).
      type: dict
    state_files:
      description: C(policyName) of each manager state file (null when absent).
      type: dict
    command_line:
      description:
        - How the kubelet starts, C(source) V(process), V(unit) or V(env files) (where C(config) and C(config_dir)
          come from), the unit, the pid, and the flags that override configuration fields with where each is set.
      type: dict
    config_format:
      description: V(json) or V(yaml), the format of the config file.
      type: str
    dropins:
      description: The drop-ins the kubelet merges, in its order.
      type: list
      elements: str
  sample: {"kubelet_version": "1.31.4", "persisted": {"topologyManagerPolicy": "none"},
           "state_files": {"/var/lib/kubelet/cpu_manager_state": "none"}}
conflicts:
  description:
    - With O(on_conflict=ignore), the overrides left in place; each names the key (and option), the wanted and the
      effective value, and the overriding drop-in or flag with the file that sets it.
  returned: always
  type: list
  elements: dict
  sample: [{"key": "cpuManagerPolicy", "option": null, "want": "static", "value": "none", "kind": "flags",
            "path": "/usr/lib/systemd/system/kubelet.service",
            "source": "--cpu-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)", "flags": []}]
overridden:
  description: With O(on_conflict=override), the overrides the module beat (same shape as RV(conflicts)).
  returned: always
  type: list
  elements: dict
default_options:
  description: The O(topology_manager_default_options) applied (C(applied)) and those left out with the reason (C(left_out)).
  returned: always
  type: dict
  sample: {"applied": {}, "left_out": {"prefer-closest-numa-nodes": "prefer-closest-numa-nodes needs kubelet 1.28 or later ..."}}
stale_state_files:
  description: Per state file, why the kubelet would refuse it after the change (it is removed with O(restart=true)).
  returned: always
  type: dict
  sample: {"/var/lib/kubelet/memory_manager_state": "reservedMemory changes under the Static memory manager"}
removed_state_files:
  description: State files removed because the kubelet would refuse them after the change (see RV(stale_state_files)).
  returned: always
  type: list
  elements: str
diff:
  description: Per-key before and after (with C(--diff)).
  returned: when diff mode is on and something changes
  type: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the configuration files replaced or removed (the
      kubelet config file, the module's drop-in or an older one of its own, an environment file a flag was taken out
      of); each copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, or only new files were written).
    - Stale state files are not in it; see RV(removed_state_files).
  returned: always
  type: dict
  sample: {"/var/lib/kubelet/config.yaml": "/var/lib/kubelet/config.yaml.12345.2026-01-01@10:00:00~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import plan as _plan


def run_module(module):
    """observe -> plan -> (check mode: the plan) -> apply: stop, state files aside, write, restart, healthz watch
    (rollback on failure); the layer's room does each step (plugins/module_utils/layers/kubelet/)."""
    params = module.params
    want = _plan.validate(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.collect(host, commands, config=params["config"], dropin_name=params["dropin_name"])
    planned = _plan.plan(params, want, observed, warn=module.warn)
    result = Result()
    result.observed = planned["report"]
    result.extra.update(planned["extra"])
    result.diffs.extend(planned["diffs"])
    for step in planned["actions"]:
        result.add(step)
    if planned["needs_restart"] and not planned["restarting"]:
        result.need_restart(planned["service"])
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    _apply.apply(_apply.Service(commands, planned["service"]), host, params, planned, result, warn=module.warn)
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=_plan.argument_spec(),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
