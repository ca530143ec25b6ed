#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nic_firmware
short_description: Set the firmware (NVCONFIG) parameters of the ConnectX RDMA NICs with mlxconfig or mstconfig
version_added: 0.2.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Stages firmware configuration parameters of NVIDIA ConnectX cards - port link type, SR-IOV, ATS, the PCIe read
    budget, RoCE congestion control priorities and CNP marking, and any other parameter the card lists - with
    C(mlxconfig) (MFT, DOCA) or C(mstconfig) (mstflint), whichever is installed.
  - The firmware keeps a Current and a Next Boot configuration. A set changes Next Boot only; the card runs the new
    values after a firmware reset (C(mlxfwreset --level 3), only with O(reset=true)) or a reboot. Until then the
    change is pending, and the module returns RV(reboot_required) and the cards in RV(reset_required).
  - Idempotent against Next Boot - a value already staged is not staged again, even while it is still pending.
  - Every parameter is checked against what the card's own query lists before anything is staged; a card that lacks
    one (a ConnectX-6 Dx has no LINK_TYPE) fails the task with nothing staged. If a set fails or does not read back,
    the values this run staged before it are staged back.
  - A card is the set of functions in one PCI slot; its parameters are shared (C(_P1), C(_P2) per port), so a card is
    queried and set once, through its first function.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  nics:
    description:
      - The desired parameters, one entry per group of NICs. An entry selects cards with O(nics[].devices) or
        O(nics[].model) (neither - every NVIDIA RDMA NIC card) and sets the options it gives; two entries that give
        one parameter of one card two values fail.
    type: list
    elements: dict
    required: true
    suboptions:
      devices:
        description: PCI addresses (V(0000:18:00.0), V(18:00.0)), netdev names or RDMA device names; their cards.
        type: list
        elements: str
      model:
        description:
          - Every card of this model, as mlxconfig's C(Device type) names it (V(ConnectX7), V(ConnectX6DX)); case,
            spaces and dashes are ignored (V(ConnectX-7) is V(ConnectX7)). Not with O(nics[].devices).
        type: str
      link_type:
        description:
          - C(LINK_TYPE_P<n>) - V(IB) or V(ETH) for every port, or a list with one value per port. A card without the
            parameter (Ethernet-only, such as ConnectX-6 Dx) passes when its ports already have that link layer.
        type: raw
      sriov_en:
        description: C(SRIOV_EN).
        type: bool
      num_of_vfs:
        description: C(NUM_OF_VFS), the VFs each physical function offers (the SR-IOV capability C(sriov_totalvfs)).
        type: int
      ats_enabled:
        description:
          - C(ATS_ENABLED). V(false) for GPUDirect RDMA on bare metal - with ATS the NIC's peer-to-peer reads to the
            GPU are translated through the root complex.
        type: bool
      max_acc_out_read:
        description:
          - C(MAX_ACC_OUT_READ), the outstanding PCIe read budget in 1 KB units (V(0) - the device's default). The
            firmware lists it only while C(ADVANCED_PCI_SETTINGS) is set, so the module stages
            C(ADVANCED_PCI_SETTINGS=True) first.
        type: int
      roce_cc_prio_mask:
        description: C(ROCE_CC_PRIO_MASK_P<n>) of every port, one bit per priority on which RoCE congestion control (DCQCN) runs (0-255).
        type: int
      cnp_dscp:
        description: C(CNP_DSCP_P<n>) of every port, the DSCP of the congestion notification packets the NIC sends (0-63).
        type: int
      cnp_802p_prio:
        description: C(CNP_802P_PRIO_P<n>) of every port, their 802.1p priority (0-7).
        type: int
      raw:
        description:
          - Other parameters, C(NAME - value) with the name as the card's query prints it and the value as the tool
            takes it (a number or an enum name such as V(ROCE_ENABLE); V(true)/V(false) for booleans). Array
            parameters are not supported.
        type: dict
  tool:
    description: The configuration tool; V(auto) uses C(mlxconfig), else C(mstconfig).
    type: str
    choices: [auto, mlxconfig, mstconfig]
    default: auto
  reset:
    description:
      - Reset the firmware of every card left with pending values, so that Next Boot becomes Current now
        (C(mlxfwreset) or C(mstfwreset) C(-d <device> --level <reset_level> -y reset)). The driver restarts on that
        card - its netdevs and RDMA devices go away and come back and its VFs are destroyed - so only on a drained node.
      - V(false) leaves the values pending until a reboot (RV(reboot_required)).
    type: bool
    default: false
  reset_level:
    description:
      - The reset level. V(3) (Driver restart and PCI reset) is the one that loads new configuration without
        rebooting the host; level 4 is a warm reboot the tool triggers itself, which the reboot role does instead.
    type: int
    choices: [3]
    default: 3
notes:
  - mlxconfig talks to the device through the kernel, so it runs where the module runs (a pod with O(host_root=/host)
    needs the tool in its image), found on PATH.
  - A query takes about a second per card on real hardware.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - module: rdma.k8s_node.sriov_vfs
  - name: The layer, its sources and its audit
    description: docs/firmware.md in the collection.
    link: https://github.com/rdma-k8s-node/rdma.k8s_node/blob/main/docs/firmware.md
"""

EXAMPLES = r"""
- name: Ethernet ports, 16 VFs, ATS off for GPUDirect, RoCE CC on priority 3 on every ConnectX-7
  rdma.k8s_node.nic_firmware:
    nics:
      - model: ConnectX-7
        link_type: ETH
        sriov_en: true
        num_of_vfs: 16
        ats_enabled: false
        roce_cc_prio_mask: 8
        cnp_dscp: 48
        cnp_802p_prio: 6
  register: firmware

- name: One card by RDMA device, a raw parameter, and apply now with a firmware reset (drained node)
  rdma.k8s_node.nic_firmware:
    nics:
      - devices: [mlx5_0]
        raw:
          ROCE_CC_LEGACY_DCQCN: false
    reset: true
"""

RETURN = r"""
changed:
  description: Whether a value was (or in check mode would be) staged, or a firmware reset run.
  returned: always
  type: bool
actions:
  description:
    - The planned steps, applied exactly - C(set) per card (C(phase) 2 for C(MAX_ACC_OUT_READ) after
      C(ADVANCED_PCI_SETTINGS)), each parameter with C(before) (Next Boot), C(after), C(current) and C(undo); then
      C(reset) per card with pending values when O(reset=true).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set", "target": "0000:18:00.0", "phase": 1,
            "params": {"ATS_ENABLED": {"before": "True(1)", "after": "False", "current": "True(1)", "undo": "1"}}}]
reboot_required:
  description: Whether a card still has pending values (Next Boot differs from Current) after the run.
  returned: always
  type: bool
reset_required:
  description: The cards (first function) whose pending values need a firmware reset or a reboot.
  returned: always
  type: list
  elements: str
  sample: ["0000:18:00.0"]
restart_required:
  description: Always empty.
  returned: always
  type: list
  elements: str
firmware:
  description:
    - Per selected card, its C(subject), C(device_type), each desired parameter's C(desired), C(default), C(current)
      and C(next) (before the run), and C(pending), the parameters whose Current will differ from Next Boot.
  returned: always
  type: dict
  sample: {"0000:18:00": {"device": "0000:18:00.0", "subject": "0000:18:00.0 (mlx5_0)", "device_type": "ConnectX7",
           "params": {"ATS_ENABLED": {"desired": "False", "default": "False(0)", "current": "True(1)",
                                      "next": "True(1)"}},
           "pending": {"ATS_ENABLED": {"current": "True(1)", "next": "False"}}}}
observed:
  description: The tool found (C(name), C(path), C(reset), C(reset_path)) and per card its functions and device type (or C(error)).
  returned: always
  type: dict
notes:
  description: Remarks that did not stop the run (a model that matches no card on this node).
  returned: always
  type: list
  elements: str
diff:
  description: Per card, its Next Boot values before and after (with C(--diff)).
  returned: when diff mode is on and something changes
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import plan as _plan

ENTRY = dict(
    devices=dict(type="list", elements="str"),
    model=dict(type="str"),
    link_type=dict(type="raw"),
    sriov_en=dict(type="bool"),
    num_of_vfs=dict(type="int"),
    ats_enabled=dict(type="bool"),
    max_acc_out_read=dict(type="int"),
    roce_cc_prio_mask=dict(type="int"),
    cnp_dscp=dict(type="int"),
    cnp_802p_prio=dict(type="int"),
    raw=dict(type="dict"),
)


def _diff(card, step):
    before = "".join("%s=%s (current %s)\n" % (name, change["before"], change["current"])
                     for name, change in step["params"].items())
    after = "".join("%s=%s\n" % (name, change["after"]) for name, change in step["params"].items())
    header = "%s Next Boot" % card["subject"]
    return {"before_header": header, "before": before, "after_header": header, "after": after}


def run_module(module):
    params = module.params
    entries = _plan.normalize(params["nics"])
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.observe(host, commands, params["tool"])
    planned = _plan.plan(entries, observed, reset=params["reset"], level=params["reset_level"])
    result = Result()
    result.observed = {"tool": observed["tool"], "cards": dict(
        (card_id, dict((key, value) for key, value in card.items() if key != "params"))
        for card_id, card in observed["cards"].items())}
    result.extra.update(firmware=planned["cards"], notes=planned["notes"], reset_required=planned["reset_required"])
    if planned["problems"]:
        raise InputError("nothing was staged: %s" % "; ".join(planned["problems"]), {"problems": planned["problems"]},
                         dict(result.as_dict(with_diff=False), changed=False))
    by_device = dict((card["device"], card) for card in planned["cards"].values())
    for step in planned["actions"]:
        diff = _diff(by_device[step["target"]], step) if module._diff and step["action"] == "set" else None
        result.add(step, diff)
    result.reboot_required = bool(planned["reset_required"])
    for note in planned["notes"]:
        module.warn(note)
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    _apply.apply(commands, observed["tool"], planned)
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nics=dict(type="list", elements="dict", required=True, options=ENTRY),
            tool=dict(type="str", default="auto", choices=["auto", "mlxconfig", "mstconfig"]),
            reset=dict(type="bool", default=False),
            reset_level=dict(type="int", default=3, choices=[3]),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
