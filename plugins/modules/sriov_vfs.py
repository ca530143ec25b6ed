#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sriov_vfs
short_description: Create SR-IOV virtual functions on a PF and set their attributes, following the kernel's rules
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Sets the number of VFs of one physical function through C(sriov_numvfs), then waits until every VF has its
    C(virtfnN) link, its driver and, when the PF has them, its netdev and RDMA device.
  - The kernel refuses to change a non-zero VF count to another non-zero count (EBUSY), so such a change writes 0 first.
    That destroys every VF, which pods may be using, so the module only does it with O(allow_vf_reset=true);
    otherwise it fails and names the VFs that look in use.
  - A count above C(sriov_totalvfs) is refused before any write. When C(mstconfig) or C(mlxconfig) is installed,
    the firmware's C(SRIOV_EN)/C(NUM_OF_VFS) Current and Next values are checked and a firmware that is not ready
    (or only ready after a reboot) is a failure, never a silent success.
  - Sets per-VF attributes with C(ip link set <pf> vf N ...) (trust, spoofchk, link state, VLAN/QoS, MAC on Ethernet;
    link state on InfiniBand).
  - When a write fails, the PF is put back to its previous VF count, attributes and InfiniBand GUIDs, and the failure
    says whether that worked and what state the PF is in.
  - VF creation is not persistent across reboots; the M(rdma.k8s_node.sriov_vfs) logic is re-run at boot by the
    C(rdma.k8s_node.sriov) role's systemd unit. VFs made this way suit sriov-network-operator's
    C(externallyManaged=true) policies.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  netdev:
    description: The PF by its network interface name (for example V(ibp24s0) or V(ens1f0np0)).
    type: str
  rdma_device:
    description: The PF by its RDMA device name (for example V(mlx5_0)).
    type: str
  pci_address:
    description: The PF by its PCI address (for example V(0000:18:00.0); the domain may be left out).
    type: str
  num_vfs:
    description: How many VFs the PF must have. V(0) removes them all.
    type: int
    required: true
  allow_vf_reset:
    description:
      - Allow changing between two non-zero counts, which goes through 0 and destroys every existing VF (and its
        netdev, RDMA device and GUIDs) - drain the node first.
    type: bool
    default: false
  vf_defaults:
    description: Attributes for every VF; O(vfs) entries override them per VF.
    type: dict
    suboptions:
      link_state:
        description: VF link state, C(ip link ... state). InfiniBand VFs start V(disable); V(auto) follows the PF.
        type: str
        choices: [auto, enable, disable]
      trust:
        description: Trusted VF (Ethernet only).
        type: bool
      spoofchk:
        description: MAC spoof checking (Ethernet only).
        type: bool
      vlan:
        description: Port VLAN 0..4095, V(0) for none (Ethernet only).
        type: int
      qos:
        description: 802.1p priority 0..7 of the port VLAN (Ethernet only).
        type: int
      mac:
        description: Administrative MAC address (Ethernet only).
        type: str
  vfs:
    description: Per-VF attributes.
    type: list
    elements: dict
    suboptions:
      index:
        description: The VF index, V(0) to O(num_vfs) - 1.
        type: int
        required: true
      link_state:
        description: VF link state, C(ip link ... state).
        type: str
        choices: [auto, enable, disable]
      trust:
        description: Trusted VF (Ethernet only).
        type: bool
      spoofchk:
        description: MAC spoof checking (Ethernet only).
        type: bool
      vlan:
        description: Port VLAN 0..4095 (Ethernet only).
        type: int
      qos:
        description: 802.1p priority 0..7 of the port VLAN (Ethernet only).
        type: int
      mac:
        description: Administrative MAC address (Ethernet only).
        type: str
  firmware_check:
    description:
      - V(auto) checks C(SRIOV_EN)/C(NUM_OF_VFS) with C(mstconfig) or C(mlxconfig) when one is installed and the
        kernel's C(sriov_totalvfs) (what the firmware's Current values allow) is missing or below O(num_vfs);
        V(always) always checks and fails without the tools; V(never) skips the check.
    type: str
    choices: [auto, always, never]
    default: auto
  timeout:
    description: Seconds to wait for each sysfs write and for the VFs to appear.
    type: int
    default: 120
notes:
  - A PF in switchdev eswitch mode (C(devlink dev eswitch show)) is refused; this module manages legacy SR-IOV.
seealso:
  - module: rdma.k8s_node.ib_vf_guids
  - module: rdma.k8s_node.rdma_facts
"""

EXAMPLES = r"""
- name: Eight VFs on the first IB rail, following the PF link state
  rdma.k8s_node.sriov_vfs:
    netdev: ibp24s0
    num_vfs: 8
    vf_defaults:
      link_state: auto

- name: RoCE VFs with a port VLAN on VF 0 (on a drained node, allowing a count change)
  rdma.k8s_node.sriov_vfs:
    pci_address: "0000:01:00.0"
    num_vfs: 4
    allow_vf_reset: true
    vf_defaults:
      trust: true
      spoofchk: false
    vfs:
      - index: 0
        vlan: 100
        qos: 3
"""

RETURN = r"""
changed:
  description: Whether the VF count or an attribute was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "write", "target": "/sys/devices/pci0000:15/0000:15:01.0/.../0000:18:00.0/sriov_numvfs", "value": "4"},
           {"action": "wait_for_vfs", "target": "0000:18:00.0", "count": 4, "timeout": 120},
           {"action": "set_vf", "target": "ibp24s0 vf 0", "link_state": "auto"}]
reboot_required:
  description: Always false; a firmware change that needs a reboot is reported as a failure.
  returned: always
  type: bool
restart_required:
  description: Always empty.
  returned: always
  type: list
  elements: str
observed:
  description: What the module read before changing anything.
  returned: always
  type: dict
  contains:
    pf:
      description: The PF (C(pci_address), C(netdev), C(rdma_device), C(link_layer), C(selected_by)).
      type: dict
    eswitch_mode:
      description: V(legacy), V(switchdev), or null when devlink reports none (InfiniBand, no devlink).
      type: str
    firmware:
      description: C(SRIOV_EN) and C(NUM_OF_VFS) (default, current, next) when the firmware was asked, else null.
      type: dict
    num_vfs:
      description: The VF count before the change.
      type: int
    totalvfs:
      description: C(sriov_totalvfs), null when the PF has no SR-IOV capability.
      type: int
    in_use:
      description: VF index to the reason it looks in use (user-space driver, netdev up, moved to a pod).
      type: dict
    vfs:
      description: The VFs before the change (as in RV(vfs)).
      type: list
      elements: dict
vfs:
  description:
    - The VFs after the change (before it in check mode) - C(index), C(pci_address), C(driver), C(netdevs),
      C(rdma_device), C(node_guid)/C(port_guid) as the VF shows them, and C(admin) (what the PF driver holds).
  returned: always
  type: list
  elements: dict
diff:
  description: VF count and attributes before and after (with C(--diff)).
  returned: when diff mode is on and something changes
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._result import exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import plan as _plan


def main():
    module = AnsibleModule(
        argument_spec=_plan.vfs_argument_spec(),
        mutually_exclusive=_plan.MUTUALLY_EXCLUSIVE,
        required_one_of=_plan.REQUIRED_ONE_OF,
        supports_check_mode=True,
    )
    exit_module(module, _apply.run_sriov_vfs)


if __name__ == "__main__":
    main()
