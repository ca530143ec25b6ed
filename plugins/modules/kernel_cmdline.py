#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kernel_cmdline
short_description: Ensure kernel boot arguments (iommu=pt and friends) through GRUB or grubby
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Ensures kernel command-line arguments are present or absent for the next boot, and reports whether the running
    kernel (C(/proc/cmdline)) already has them. It never reboots.
  - Arguments compare as whole tokens with the kernel's rules (C(iommu=pt) is not inside C(amd_iommu=pt);
    C(-) and C(_) are the same in names). A wanted C(name=value) replaces other values of that name.
  - "On Debian and Ubuntu (O(bootloader=grub_dropin)) it owns one drop-in, C(/etc/default/grub.d/99-rdma-k8s-node.cfg),
    that strips the names it sets and the O(absent) arguments from C(GRUB_CMDLINE_LINUX) and
    C(GRUB_CMDLINE_LINUX_DEFAULT) and appends the wanted ones; then it runs C(update-grub)."
  - With O(bootloader=grub_default) it edits the C(GRUB_CMDLINE_LINUX) line of C(/etc/default/grub) instead.
  - On EL 8/9/10 (O(bootloader=grubby)) it changes every boot entry with C(grubby --update-kernel=ALL) and keeps
    C(GRUB_CMDLINE_LINUX) in C(/etc/default/grub) (and C(/etc/kernel/cmdline) when present) in step for future kernels.
  - If regenerating the boot configuration fails, the files it wrote are restored and the module fails.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  present:
    description:
      - Arguments the next boot must have, such as V(iommu=pt) or V(ib_core.netns_mode=0).
      - "Letters, digits and C(_ . , : / + @ % = -) only; no spaces, quotes or shell characters."
    type: list
    elements: str
    default: []
  absent:
    description:
      - Arguments the next boot must not have. A bare name (V(iommu)) removes it with any value, V(name=value)
        removes that exact argument, and a glob (V(*_iommu=*)) removes every match.
      - "Letters, digits, C(_ . , : / + @ % = -) and the glob characters C(* ? [ ] !) only: the patterns go into a
        shell file that C(grub-mkconfig) sources."
    type: list
    elements: str
    default: []
  vendor_iommu:
    description:
      - Also ensure the CPU vendor's IOMMU switch, read from C(/proc/cpuinfo) C(vendor_id)
        (V(intel_iommu=on) on Intel, V(amd_iommu=on) on AMD and Hygon). Fails on other vendors.
    type: bool
    default: false
  bootloader:
    description:
      - How the boot configuration is managed. V(auto) uses V(grubby) when C(grubby) and BLS entries
        (C(/boot/loader/entries)) exist, else V(grub_dropin) when C(/etc/default/grub) exists, and fails otherwise.
    type: str
    choices: [auto, grub_dropin, grub_default, grubby]
    default: auto
  dropin:
    description:
      - The drop-in file owned by this module in V(grub_dropin) mode, directly in C(/etc/default/grub.d), named
        C(*.cfg) with letters, digits and C(_ . @ + -), not starting with a dot (GRUB's C(*.cfg) glob skips those).
    type: path
    default: /etc/default/grub.d/99-rdma-k8s-node.cfg
  update:
    description:
      - Regenerate the GRUB configuration (C(update-grub), else C(grub-mkconfig -o /boot/grub/grub.cfg)) after a
        change in V(grub_dropin) and V(grub_default) modes, and when the generated C(grub.cfg) lacks what the files
        configure (a previous regeneration failed). With V(false), only the files change.
    type: bool
    default: true
  backup:
    description:
      - Keep a timestamped copy of each edited file next to it.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
notes:
  - A reboot is needed for the running kernel to see the change; RV(reboot_required) says so. Reboot with
    M(ansible.builtin.reboot) or the collection's C(provision.yml), never from here.
  - When O(host_root) is not V(/), commands run through C(chroot) into it.
seealso:
  - module: rdma.k8s_node.rdma_facts
"""

EXAMPLES = r"""
- name: IOMMU in pass-through mode, with the vendor switch
  rdma.k8s_node.kernel_cmdline:
    present: [iommu=pt]
    vendor_iommu: true
  register: cmdline

- name: RDMA exclusive netns mode from the first moment ib_core loads
  rdma.k8s_node.kernel_cmdline:
    present: [ib_core.netns_mode=0]

- name: Drop an old IOMMU setting, whatever its value
  rdma.k8s_node.kernel_cmdline:
    absent: [intel_iommu, "iommu=off"]

- name: Tell the operator
  ansible.builtin.debug:
    msg: "Reboot needed for: {{ cmdline.pending }}"
  when: cmdline.reboot_required
"""

RETURN = r"""
changed:
  description: Whether a file or a boot entry was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create_file", "target": "/etc/default/grub.d/99-rdma-k8s-node.cfg", "mode": "0644"},
           {"action": "run", "target": "update-grub"}]
reboot_required:
  description: True when the running kernel's C(/proc/cmdline) differs from what the next boot gets, in the arguments
    this module manages.
  returned: always
  type: bool
restart_required:
  description: Services to restart; always empty (a boot argument needs a reboot, not a restart).
  returned: always
  type: list
  elements: str
pending:
  description: The managed differences between the running kernel and the next boot.
  returned: always
  type: dict
  contains:
    missing:
      description: Wanted arguments the running kernel does not have.
      type: list
      elements: str
    unwanted:
      description: Arguments of the running kernel that O(absent) or a wanted value of the same name removes.
      type: list
      elements: str
  sample: {"missing": ["iommu=pt"], "unwanted": []}
bootloader:
  description: The mode used, after V(auto) detection.
  returned: always
  type: str
  sample: grub_dropin
observed:
  description: What the module read.
  returned: always
  type: dict
  contains:
    live:
      description: Kernel arguments of the running kernel (before C(--)).
      type: list
      elements: str
    configured:
      description: Kernel arguments of the default boot entry for the next boot, after the change.
      type: list
      elements: str
    before:
      description: Kernel arguments of the default boot entry for the next boot, before the change.
      type: list
      elements: str
  sample: {"live": ["ro", "quiet"], "before": ["ro", "quiet"], "configured": ["ro", "quiet", "iommu=pt"]}
diff:
  description: Before and after of each edited file (with C(--diff)).
  returned: when diff mode is on and something changes
  type: raw
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the files replaced (O(dropin), C(/etc/default/grub),
      C(/etc/kernel/cmdline)); each copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, only boot entries changed through
      C(grubby), or only new files were written).
  returned: always
  type: dict
  sample: {"/etc/default/grub.d/99-rdma-k8s-node.cfg": "/etc/default/grub.d/99-rdma-k8s-node.cfg.12345.2026-01-01@10:00:00~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import plan as _plan


def run_module(module):
    """observe -> plan -> (check mode: the plan) -> apply, returning the result dict."""
    params = module.params
    _plan.validate(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.collect(host, commands, params["bootloader"], params["dropin"])
    planned = _plan.plan(params, observed)
    result = Result()
    for step in planned["actions"]:
        result.add(step)
    if module._diff:
        result.diffs.extend(planned["diffs"])
    result.observed.update(planned["observed"])
    result.extra["bootloader"] = planned["bootloader"]
    result.extra["backup_files"] = {}
    result.extra["pending"] = planned["pending"]
    result.reboot_required = planned["reboot_required"]
    if planned["actions"] and not module.check_mode:
        result.extra["backup_files"] = _apply.apply(host, commands, planned, params["backup"])
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(argument_spec=_plan.argument_spec(), supports_check_mode=True)
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
