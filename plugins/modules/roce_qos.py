#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: roce_qos
short_description: Lossless RoCE QoS of the RoCE netdevs (trust DSCP, PFC, ECN, RDMA-CM ToS), live and at every boot
version_added: 0.2.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Configures each RoCE port of the RDMA NICs (the Ethernet ports of their physical functions) for a lossless
    RoCEv2 fabric - the port trusts DSCP, the RoCE DSCP and the CNP DSCP map to their priorities, PFC is enabled on
    the RDMA priority only, ECN/DCQCN is enabled on that priority, the RDMA-CM default ToS of the port's RDMA device
    is the RoCE DSCP shifted into the ToS byte, and so is the device's traffic class.
  - Trust, DSCP map and PFC are set with C(mlnx_qos) when the node runs MLNX/DOCA-OFED's driver and has it, else
    with iproute2's C(dcb). The ECN switches (C(/sys/class/net/IF/ecn/roce_np|roce_rp/enable/PRIO)), the CNP marking
    and the traffic class (C(/sys/class/infiniband/DEV/tc/PORT/traffic_class)) exist only with the OFED driver; with
    the inbox driver the module says so and the firmware (C(ROCE_CC_PRIO_MASK), M(rdma.k8s_node.nic_firmware)) decides.
  - The RDMA-CM ToS is written in configfs (C(/sys/kernel/config/rdma_cm/DEV/ports/PORT/default_roce_tos)), after
    creating the device's group with C(mkdir) when it does not exist.
  - None of it survives a reboot or a driver reload, so a boot script and a systemd unit the module owns apply it
    again after the netdevs appear and whenever C(openibd) (re)starts.
  - All or nothing - every step is read back; when one fails or does not stick, the steps already done and the
    files are put back.
  - On a node without RoCE ports (InfiniBand only) the module changes nothing and says why (C(skipped_reason)).
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  priority:
    description: The lossless RDMA priority (802.1p, 0-7) - PFC and ECN are enabled on it, the RoCE DSCP maps to it.
    type: int
    default: 3
  dscp:
    description: The DSCP of RoCE traffic (0-63); the RDMA-CM default ToS and the traffic class are O(dscp) * 4.
    type: int
    default: 26
  cnp_dscp:
    description: The DSCP of congestion notification packets (0-63), mapped to O(cnp_priority).
    type: int
    default: 48
  cnp_priority:
    description: The priority of congestion notification packets (0-7).
    type: int
    default: 6
  ecn:
    description: Enable ECN/DCQCN (notification and reaction point) on O(priority) where the driver exposes it.
    type: bool
    default: true
  interfaces:
    description: RoCE netdevs to configure; empty means every RoCE port of the RDMA NICs' physical functions.
    type: list
    elements: str
    default: []
  tool:
    description:
      - V(auto) uses C(mlnx_qos) when the running mlx5 driver is MLNX/DOCA-OFED's and C(mlnx_qos) is installed,
        else C(dcb) (iproute2 5.12 or later).
    type: str
    choices: [auto, mlnx_qos, dcb]
    default: auto
  boot_unit:
    description: Install (or update) the boot script and unit that apply the settings again at every boot.
    type: bool
    default: true
  unit:
    description: The systemd unit file the module owns.
    type: path
    default: /etc/systemd/system/rdma-k8s-node-roce-qos.service
  script:
    description: The boot script the module owns (run by the unit).
    type: path
    default: /etc/rdma-k8s-node/roce-qos.sh
  backup:
    description: Keep timestamped copies of the previous script and unit.
    type: bool
    default: false
notes:
  - The switches must match - the same DSCP to the same lossless priority, PFC on it, ECN marking on its queue, and
    CNPs (DSCP O(cnp_dscp)) on a strict-priority queue. See docs/roce.md.
  - The unit is written, not enabled - the C(roce_qos) role runs C(systemctl daemon-reload) and enables it.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - module: rdma.k8s_node.nic_firmware
  - name: The layer, its sources and what the switches must match
    description: docs/roce.md in the collection.
    link: https://github.com/rdma-k8s-node/rdma.k8s_node/blob/main/docs/roce.md
"""

EXAMPLES = r"""
- name: Lossless RoCE on priority 3 with DSCP 26 (NVIDIA's usual values), now and at every boot
  rdma.k8s_node.roce_qos:
  register: qos

- name: Another priority and DSCP on two netdevs, with iproute2's dcb
  rdma.k8s_node.roce_qos:
    priority: 5
    dscp: 40
    interfaces: [ens1f0np0, ens1f1np1]
    tool: dcb
"""

RETURN = r"""
changed:
  description: Whether a setting or a boot file was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description:
    - The planned steps, applied exactly - per port C(set_trust), C(set_dscp2prio), C(set_pfc) (with the tool's
      C(argv)), C(set_ecn), C(set_cnp), C(set_roce_tos), C(set_traffic_class) (with the file's C(path)), each with
      C(before) and C(after); then C(write_script) and C(write_unit).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_pfc", "target": "ens1f0np0", "before": [0, 0, 0, 0, 0, 0, 0, 0],
            "after": [0, 0, 0, 1, 0, 0, 0, 0], "argv": ["/usr/bin/dcb", "pfc", "set", "dev", "ens1f0np0", "prio-pfc",
            "0:off", "1:off", "2:off", "3:on", "4:off", "5:off", "6:off", "7:off"]}]
reboot_required:
  description: Always false; the settings apply at once.
  returned: always
  type: bool
restart_required:
  description: Always empty. Connections RDMA-CM set up before keep their ToS; new ones take the new default.
  returned: always
  type: list
  elements: str
unit_changed:
  description: Whether the boot script or unit changed (the role then reloads systemd and enables the unit).
  returned: always
  type: bool
tool:
  description: The tool used for trust, DSCP map and PFC (C(name), C(path)).
  returned: always
  type: dict
  sample: {"name": "mlnx_qos", "path": "/usr/bin/mlnx_qos"}
tos:
  description: The ToS byte (O(dscp) * 4) - what pods set as C(NCCL_IB_TC).
  returned: always
  type: int
  sample: 104
notes:
  description: What the driver does not offer (no ECN switches or traffic class with the inbox driver).
  returned: always
  type: list
  elements: str
skipped_reason:
  description: Why nothing applies on this node (no RoCE port), else null.
  returned: always
  type: str
observed:
  description: What the module read - per RoCE port its trust, DSCP entries, PFC, ECN, CNP, RoCE ToS, traffic class.
  returned: always
  type: dict
diff:
  description: Before and after of each setting and boot file (with C(--diff)).
  returned: when diff mode is on and something changes
  type: list
  elements: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the boot files replaced (O(unit), O(script)); each
      copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, only live settings changed, or only
      new files were written).
  returned: always
  type: dict
  sample: {"/etc/systemd/system/rdma-k8s-node-roce-qos.service": "/etc/systemd/system/rdma-k8s-node-roce-qos.service.12345.2026-01-01@10:00:00~"}
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import plan as _plan

_RANGES = (("priority", 0, 7), ("dscp", 0, 63), ("cnp_dscp", 0, 63), ("cnp_priority", 0, 7))


def check_params(params):
    """InputError naming the option and its value for anything out of range or inconsistent."""
    for name, low, high in _RANGES:
        if not low <= params[name] <= high:
            raise InputError("%s must be %d..%d, got %r" % (name, low, high, params[name]))
    if params["cnp_dscp"] == params["dscp"] and params["cnp_priority"] != params["priority"]:
        values = (params["cnp_dscp"], params["cnp_priority"], params["priority"])
        raise InputError("cnp_dscp %d is the RoCE dscp: one DSCP maps to one priority, so cnp_priority (%d) must be "
                         "priority (%d) or cnp_dscp another value" % values)
    for option in ("unit", "script"):
        if not params[option].startswith("/etc/"):
            raise InputError("%s must be a file under /etc (the node's configuration), got %r" % (option, params[option]))
    for name in params["interfaces"]:
        if not name or "/" in name or len(name) > 15:
            raise InputError("interfaces: %r is not a netdev name" % (name,))


def run_module(module):
    params = module.params
    check_params(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.observe(host, commands, tool=params["tool"], interfaces=params["interfaces"] or None,
                                unit=params["unit"], script=params["script"])
    desired = dict((key, params[key]) for key in _plan.DEFAULTS)
    planned = _plan.plan(desired, observed)
    result = Result()
    result.observed = dict((k, v) for k, v in observed.items() if k not in ("unit", "script"))
    result.extra.update(tool=planned["tool"], tos=_plan.tos_of(params["dscp"]), notes=planned["notes"],
                        skipped_reason=planned["skip"], unit_changed=False, backup_files={})
    unknown = [p for p in planned["problems"] if p.startswith("interfaces: ")]
    if unknown:
        raise InputError("; ".join(unknown), {"problems": unknown})
    if planned["problems"]:
        raise HostReadError("nothing was changed: %s" % "; ".join(planned["problems"]),
                            {"problems": planned["problems"]}, dict(result.as_dict(with_diff=False), changed=False))
    file_plans = _apply.file_plans(host, planned)
    result.add_plan(planned["actions"], file_plans, label=lambda step: "%s %s" % (step["target"], step["action"][4:]),
                    render=lambda value: json.dumps(value) + "\n", with_diff=module._diff)
    result.extra["unit_changed"] = any(p.changed for p in file_plans)
    for note in planned["notes"]:
        module.warn(note)
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    result.extra["backup_files"] = _apply.apply(host, commands, planned, backup=params["backup"])
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            priority=dict(type="int", default=3),
            dscp=dict(type="int", default=26),
            cnp_dscp=dict(type="int", default=48),
            cnp_priority=dict(type="int", default=6),
            ecn=dict(type="bool", default=True),
            interfaces=dict(type="list", elements="str", default=[]),
            tool=dict(type="str", default="auto", choices=["auto", "mlnx_qos", "dcb"]),
            boot_unit=dict(type="bool", default=True),
            unit=dict(type="path", default=_observe.UNIT),
            script=dict(type="path", default=_observe.SCRIPT),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
