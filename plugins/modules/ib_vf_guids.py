#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ib_vf_guids
short_description: Give every VF of an InfiniBand PF a non-zero, unique, stable node and port GUID
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - A new mlx5 InfiniBand VF has an all-zero node and port GUID; the subnet manager gives it no LID and the pod's
    port stays DOWN. This module sets the same non-zero GUID as node and port GUID of every VF of one PF, then
    re-binds the VF to its driver so the GUID takes effect, and looks the VF's netdev and RDMA device up again by
    PCI address (the re-bind may rename them; see RV(netdev_renames)).
  - GUIDs are set with C(ip link set <pf> vf N node_guid ... port_guid ...) (netlink, inbox and OFED drivers), or
    through C(sriov/<n>/{node,port}) in the PF's sysfs directory when MLNX/DOCA OFED provides it.
  - A zero GUID, or one that differs from the wanted value, is drift (reported as a change in check mode).
  - A wanted GUID already used on this node (another PF's VF, any RDMA device) or listed in O(exclude_guids)
    is an error before any write. The C(rdma.k8s_node.sriov) role fills O(exclude_guids) with what the other hosts of
    the play want, so GUIDs are unique across the inventory.
  - When a write or re-bind fails, the VFs already changed get their previous GUIDs back, and the failure says so.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  netdev:
    description: The PF by its IPoIB interface name (for example V(ibp24s0)).
    type: str
  rdma_device:
    description: The PF by its RDMA device name (for example V(mlx5_0)).
    type: str
  pci_address:
    description: The PF by its PCI address (for example V(0000:18:00.0)).
    type: str
  scheme:
    description:
      - V(pf_guid) derives each VF's GUID from the PF's firmware node GUID and the VF index
        (C(<guid_prefix>:<OUI fold>:<40-bit extension of the PF GUID>:<VF index>)); unique and stable, see the
        collection's C(docs/sriov.md) for the collision argument.
      - V(list) takes VF i's GUID from O(guids).
      - V(pool_file) reads sriov-network-operator's pool file O(pool_file) (keys C(pciAddress)/C(pfGuid) and
        C(guids)/C(guidsRange) C({start, end}), as the operator's code reads them; a C(pfGuid) is the PF netdev's
        hardware address as Linux prints it, 20 octets for IPoIB, and the last entry for a PF wins).
    type: str
    choices: [pf_guid, list, pool_file]
    default: pf_guid
  guid_prefix:
    description:
      - First octet of V(pf_guid) GUIDs, in hex. It must have the locally-administered bit (V(0x02)) set, so a VF GUID
        can never equal a vendor-burned GUID. ib-kubernetes' default pod GUID pool is all of V(02:*); if it runs
        in the same fabric, pick another prefix (for example V(06)) or narrow its pool.
    type: str
    default: "02"
  guids:
    description: With O(scheme=list), the GUID of VF 0, 1, ... (at least as many as VFs).
    type: list
    elements: str
  pool_file:
    description:
      - The operator-format pool file read by O(scheme=pool_file) and written by O(export_pool_file).
      - An absolute path without C(.) or C(..) components.
    type: path
    default: /etc/sriov-operator/infiniband/guids
  export_pool_file:
    description:
      - Write this PF's GUIDs into O(pool_file) (an entry with C(pciAddress) and C(guids), written last so that the
        operator's map by PCI address keeps it; every other entry kept as it is, in its place). sriov-network-operator
        re-assigns IB VF GUIDs even for C(externallyManaged) policies; with this file it assigns the same ones instead
        of random GUIDs.
      - Unset (the default) means on when sriov-network-operator's config daemon works on this node (its
        C(sriov-config.service)/C(sriov-config-post-network.service) units or binary, its modprobe file, state in
        C(/etc/sriov-operator), or its running process; RV(sriov_network_operator)), except with O(scheme=pool_file).
      - The file is read and written exactly as the operator's code reads it (Go's C(net.ParseMAC) of 8 octets for
        every GUID, keys matched as Go's C(encoding/json) matches them); a file it would refuse - any entry - is
        refused with the entry named, since the operator would then refuse the whole file. With no VFs the entry is
        left out (the operator refuses one without GUIDs), and a file left empty is removed.
    type: bool
  backup:
    description:
      - Keep a timestamped copy of O(pool_file) before it is replaced (with O(export_pool_file)).
      - Backups are created mode C(0600), owned by root; RV(backup_files) names them.
    type: bool
    default: false
  exclude_guids:
    description: GUIDs in use elsewhere (other nodes); wanting one of them is an error before any write.
    type: list
    elements: str
  allow_vf_reset:
    description: Allow re-binding VFs that look in use (a pod's netdev, a user-space driver); the re-bind disrupts them.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for each sysfs write and for the re-bound VFs to come back.
    type: int
    default: 60
seealso:
  - module: rdma.k8s_node.sriov_vfs
  - module: rdma.k8s_node.rdma_facts
"""

EXAMPLES = r"""
- name: Deterministic GUIDs on every VF of the first IB rail
  rdma.k8s_node.ib_vf_guids:
    netdev: ibp24s0

- name: Explicit GUIDs, shared with sriov-network-operator through its pool file
  rdma.k8s_node.ib_vf_guids:
    rdma_device: mlx5_3
    scheme: list
    guids: ["06:00:00:00:00:01:00:00", "06:00:00:00:00:01:00:01"]
    export_pool_file: true
"""

RETURN = r"""
changed:
  description: Whether a GUID, a re-bind or the pool file was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_guid", "target": "ibp24s0 vf 0", "node_guid": "02:33:03:00:55:1e:20:00",
            "port_guid": "02:33:03:00:55:1e:20:00", "via": "netlink", "reason": "zero GUID"},
           {"action": "rebind", "target": "0000:18:00.1", "driver": "mlx5_core", "vf": 0, "netdevs": ["ib0"],
            "netdevs_after": ["ib1"]}]
netdev_renames:
  description:
    - VFs whose netdev name changed through the re-bind (C(vf), C(pci_address), C(old) and C(new) netdev names),
      found again by PCI address. A re-bind removes the VF's netdev and registers a new one, which the kernel names
      with the lowest free C(ib%d)/C(eth%d) and udev may rename. After the run, the C(rebind)/C(bind) actions carry
      C(vf), C(netdevs) (before) and C(netdevs_after); in check mode C(rebind) actions carry C(vf) and C(netdevs).
    - When the old name was given by udev (C(name_assign_type) 4), the module waits up to 10 s for udev to rename
      the new netdev too, and warns if it does not.
  returned: always
  type: list
  elements: dict
  sample: [{"vf": 1, "pci_address": "0000:18:00.2", "old": ["ib1"], "new": ["ib0"]}]
reboot_required:
  description: Always false.
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
    pf_node_guid:
      description: The PF's firmware node GUID.
      type: str
    num_vfs:
      description: How many VFs the PF has.
      type: int
    via:
      description: V(netlink) or V(ofed_sysfs), the path used to set GUIDs.
      type: str
    vfs:
      description: The VFs with the GUIDs they show (C(node_guid), C(port_guid)) and hold (C(admin)).
      type: list
      elements: dict
    zero_guid_vfs:
      description: Indexes of VFs whose GUID is zero.
      type: list
      elements: int
sriov_network_operator:
  description: What was found of sriov-network-operator's config daemon on this node.
  returned: always
  type: dict
  contains:
    present:
      description: Whether it works on this node.
      type: bool
    mode:
      description: V(systemd) (its boot units or binary are installed), V(daemon) (its pod), or null.
      type: str
    running:
      description: Whether its process runs now.
      type: bool
    evidence:
      description: The files (and process) found.
      type: list
      elements: str
  sample: {"present": true, "mode": "systemd", "running": false,
           "evidence": ["/etc/systemd/system/sriov-config.service", "/etc/sriov-operator/sriov-interface-config.yaml"]}
export_pool_file:
  description: Whether the pool file was (or in check mode would be) written, after O(export_pool_file)'s default.
  returned: always
  type: bool
guids:
  description: The wanted GUID of each VF (node and port GUID alike), with its PCI address, netdevs and RDMA device.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "pci_address": "0000:18:00.1", "guid": "02:33:03:00:55:1e:20:00", "netdevs": ["ibp24s0v0"],
            "rdma_device": "mlx5_12"}]
diff:
  description: VF GUIDs before and after, and the pool file (with C(--diff)).
  returned: when diff mode is on and something changes
  type: raw
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)); the only file this module edits is O(pool_file), and its
      copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change of the file, or a new file).
  returned: always
  type: dict
  sample: {"/etc/sriov-operator/infiniband/guids": "/etc/sriov-operator/infiniband/guids.12345.2026-01-01@10:00:00~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._result import exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import plan as _plan


def main():
    module = AnsibleModule(
        argument_spec=_plan.guids_argument_spec(),
        mutually_exclusive=_plan.MUTUALLY_EXCLUSIVE,
        required_one_of=_plan.REQUIRED_ONE_OF,
        required_if=_plan.GUIDS_REQUIRED_IF,
        supports_check_mode=True,
    )
    exit_module(module, _apply.run_ib_vf_guids)


if __name__ == "__main__":
    main()
