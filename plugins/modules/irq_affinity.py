#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: irq_affinity
short_description: Put the RDMA NICs' interrupts on the reserved CPUs of their NUMA node, live and at every boot
version_added: 0.2.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Writes C(/proc/irq/<n>/smp_affinity_list) of every MSI vector of each RDMA NIC's physical function (the vectors
    C(/sys/bus/pci/devices/<address>/msi_irqs/) lists, whatever the driver; C(/proc/interrupts) only labels them and
    is cross-checked where its rows name an address), so that the NIC's interrupts run on the CPUs the kubelet keeps for the system
    (O(cpus), its C(reservedSystemCPUs)) that are on the NIC's own NUMA node, and not on the CPUs the static CPU
    manager gives pods exclusively.
  - When no reserved CPU is on a NIC's NUMA node, O(on_disjoint) decides (refuse by default).
  - Interrupts whose affinity the kernel manages are reported (RV(managed), RV(refused)) and left alone.
  - Affinities do not survive a reboot or a driver reload (the vectors get new numbers and the driver's own
    affinities), so a boot unit the module owns writes them again after the NICs probe and whenever C(openibd)
    restarts; irqbalance is told to leave these interrupts alone through a policy script (O(irqbalance)).
  - All or nothing - when a write fails or does not stick, the vectors already written and the files are put back.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  cpus:
    description:
      - The CPUs reserved for the system, as a CPU list (V(0-3,64-67)); the kubelet's C(reservedSystemCPUs). The
        C(irq_affinity) role passes C(kubelet_topology_reserved_system_cpus).
      - Unset or empty - no CPU is reserved (no static CPU manager) and each NIC's interrupts go to its NUMA-local CPUs.
    type: str
  on_disjoint:
    description:
      - What to do with a NIC none of whose NUMA node's CPUs is reserved.
      - V(fail) refuses before anything is written, naming the NIC, its node and the reserved set.
      - V(local) uses the NIC's NUMA-local CPUs (pods may get them too) and warns.
      - V(reserved) uses the reserved CPUs of the other node(s) (off the pods' CPUs, across the inter-socket link) and warns.
    type: str
    choices: [fail, local, reserved]
    default: fail
  devices:
    description: PCI addresses or RDMA device names of the NICs; empty means every RDMA NIC's physical function.
    type: list
    elements: str
    default: []
  boot_unit:
    description: Install (or update) the boot unit and its script; V(false) sets the live affinities only.
    type: bool
    default: true
  boot_wait:
    description: Seconds the boot script waits per NIC for its driver's vectors.
    type: int
    default: 120
  irqbalance:
    description:
      - V(policy) installs a policy script that answers C(ban=true) for the NICs' interrupts and adds
        C(--policyscript=<script>) to C(IRQBALANCE_ARGS) in irqbalance's environment file (irqbalance must then be
        restarted, RV(restart_required)). A policy script bans by device, so it holds when IRQ numbers change; an
        C(--banirq) list would not.
      - V(stop) and V(ignore) leave irqbalance's files alone (the role stops and disables irqbalance for V(stop)).
    type: str
    choices: [policy, stop, ignore]
    default: policy
  irqbalance_env_file:
    description: irqbalance's environment file; default the first of C(/etc/default/irqbalance) (Debian, Ubuntu) and
      C(/etc/sysconfig/irqbalance) (Fedora, RHEL, SUSE) that exists.
    type: path
  unit:
    description: The systemd unit file the module owns.
    type: path
    default: /etc/systemd/system/rdma-k8s-node-irq.service
  backup:
    description: Keep timestamped copies of the files the module changes.
    type: bool
    default: false
notes:
  - Needs root on the node (or a privileged pod with the host's C(/proc) and C(/sys)).
  - The unit is written, not enabled - the C(irq_affinity) role reloads systemd, enables it and restarts irqbalance.
  - mlx5 kernels that allocate completion vectors on first use may add vectors after boot with the driver's
    affinity; the audit reports them as drift until the role or the boot unit runs again.
seealso:
  - module: rdma.k8s_node.kubelet_topology
  - module: rdma.k8s_node.rdma_facts
  - name: The layer, its sources and its audit
    description: docs/irq.md in the collection.
    link: https://github.com/rdma-k8s-node/rdma.k8s_node/blob/main/docs/irq.md
"""

EXAMPLES = r"""
- name: NIC interrupts on the kubelet's reserved CPUs of each NIC's NUMA node
  rdma.k8s_node.irq_affinity:
    cpus: "0-3,56-59"

- name: Two NICs, fall back to the NUMA-local CPUs where nothing is reserved there, irqbalance stopped by the role
  rdma.k8s_node.irq_affinity:
    cpus: "0-3"
    devices: [mlx5_0, "0000:b1:00.0"]
    on_disjoint: local
    irqbalance: stop
"""

RETURN = r"""
changed:
  description: Whether an affinity or a file was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: >-
    The planned steps, applied exactly: C(write_script), C(write_policy), C(edit_irqbalance_env), C(write_unit), then
    C(set_affinity) per vector (C(target) the IRQ number, C(device), C(name), C(before), C(after)).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_affinity", "target": "27", "device": "0000:b1:00.0", "name": "mlx5_comp2@pci:0000:b1:00.0",
            "before": "18", "after": "16-19"}]
targets:
  description: The CPU list each NIC's interrupts go to.
  returned: always
  type: dict
  sample: {"0000:b1:00.0": "16-19"}
managed:
  description: Vectors whose affinity the kernel manages (read-only C(smp_affinity_list)), left alone.
  returned: always
  type: list
  elements: dict
refused:
  description: Vectors whose write the kernel refused with EPERM or EIO (kernel-managed on older kernels), left alone.
  returned: always
  type: list
  elements: dict
reboot_required:
  description: Always false; affinities apply at once.
  returned: always
  type: bool
restart_required:
  description: C(irqbalance.service) when its policy script or environment file changed.
  returned: always
  type: list
  elements: str
unit_changed:
  description: Whether the unit file changed (the role then reloads systemd and enables the unit).
  returned: always
  type: bool
observed:
  description: >-
    What the module read - online CPUs, NUMA nodes, per NIC its NUMA node, local CPUs and vectors (C(mismatched) where
    C(/proc/interrupts) and C(msi_irqs/) disagree), the files.
  returned: always
  type: dict
diff:
  description: Before and after of each file and of each affinity (with C(--diff)).
  returned: when diff mode is on and something changes
  type: list
  elements: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the files replaced (the boot unit, its script, the
      irqbalance policy script, the irqbalance environment file); each copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, only affinities changed, or only new
      files were written).
  returned: always
  type: dict
  sample: {"/etc/default/irqbalance": "/etc/default/irqbalance.12345.2026-01-01@10:00:00~"}
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import parse_cpulist
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import observe as _pcie_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie.observe import rdma_pfs

_UNIT = re.compile(r"^/etc/systemd/system/[A-Za-z0-9:_.@-]+\.service$")


def _cpus(text):
    if text is None or not str(text).strip():
        return None
    try:
        cpus = parse_cpulist(str(text))
    except ValueError as exc:
        raise InputError("cpus: %r is not a CPU list like 0-3,64-67 (%s)" % (text, exc)) from exc
    if not cpus:
        raise InputError("cpus: %r names no CPU" % (text,))
    return cpus


def run_module(module):
    params = module.params
    if not _UNIT.match(params["unit"]):
        raise InputError("unit must be a .service file directly in /etc/systemd/system, got %r" % (params["unit"],))
    if params["boot_wait"] < 0 or params["boot_wait"] > 3600:
        raise InputError("boot_wait must be between 0 and 3600 seconds, got %d" % params["boot_wait"])
    cpus = _cpus(params["cpus"])
    host = HostRoot(params["host_root"])
    pfs = rdma_pfs(host)
    devices = _pcie_observe.resolve_devices(params["devices"], pfs) if params["devices"] else list(pfs)
    observed = _observe.observe(host, devices=devices, unit=params["unit"], env_file=params["irqbalance_env_file"])
    desired = {"cpus": cpus, "on_disjoint": params["on_disjoint"], "devices": devices, "boot_unit": params["boot_unit"],
               "irqbalance": params["irqbalance"], "wait": params["boot_wait"], "unit": params["unit"],
               "script": _observe.SCRIPT, "policy": _observe.POLICY}
    planned = _plan.plan(desired, observed)
    result = Result()
    result.observed = _strip_texts(observed)
    result.extra.update(targets=planned["targets"], managed=planned["managed"], refused=[], backup_files={})
    if planned["problems"]:
        raise HostReadError("nothing was changed: %s" % "; ".join(planned["problems"]),
                            {"problems": planned["problems"]}, dict(result.as_dict(with_diff=False), changed=False))
    for warning in planned["warnings"]:
        module.warn(warning)
    result.add_plan(planned["actions"], _apply.file_plans(host, planned),
                    label=lambda step: "IRQ %s (%s) smp_affinity_list" % (step["target"], step.get("name")),
                    render=lambda value: "%s\n" % value, with_diff=module._diff)
    result.extra["unit_changed"] = any(s["action"] == "write_unit" for s in planned["actions"])
    if any(s["action"] in ("write_policy", "edit_irqbalance_env") for s in planned["actions"]):
        result.need_restart("irqbalance.service")
    if not devices:
        module.warn("no RDMA NIC on this node: nothing to place")
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    backups, refused = _apply.apply(host, planned, backup=params["backup"])
    for step in refused:
        module.warn("IRQ %s (%s) of %s: the kernel refused a new affinity (%s: kernel-managed); left alone" % (
            step["target"], step.get("name"), step["device"], step["errno"]))
    result.extra["refused"] = refused
    result.extra["backup_files"] = backups
    return result.as_dict(with_diff=module._diff)


def _strip_texts(observed):
    out = dict(observed)
    for key in ("unit", "script", "policy"):
        out[key] = dict((k, v) for k, v in (observed.get(key) or {}).items() if k != "text")
    balance = dict(observed.get("irqbalance") or {})
    if balance.get("env_file"):
        balance["env_file"] = dict((k, v) for k, v in balance["env_file"].items() if k != "text")
    out["irqbalance"] = balance
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cpus=dict(type="str"),
            on_disjoint=dict(type="str", default="fail", choices=list(_plan.ON_DISJOINT)),
            devices=dict(type="list", elements="str", default=[]),
            boot_unit=dict(type="bool", default=True),
            boot_wait=dict(type="int", default=_plan.UNIT_WAIT),
            irqbalance=dict(type="str", default="policy", choices=list(_plan.IRQBALANCE)),
            irqbalance_env_file=dict(type="path"),
            unit=dict(type="path", default=_observe.UNIT),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
