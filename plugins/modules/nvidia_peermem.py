#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_peermem
short_description: Set up the GPUDirect RDMA kernel path - DMA-BUF, or nvidia_peermem loaded and persisted safely
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Chooses the GPUDirect RDMA path. V(auto) takes DMA-BUF (what NVIDIA recommends) when the open GPU kernel modules
    run (C(/proc/driver/nvidia/version) says C(Open Kernel Module)) on Linux 5.12 or later, and the legacy
    C(nvidia_peermem) module otherwise - only where MLNX/DOCA-OFED is installed, since inbox ib_core has no
    peer-memory API.
  - For C(nvidia_peermem) it test-loads the module first and only then persists it in C(modules-load.d), so a module
    that cannot load never makes every boot fail. It also adds an C(openibd.service) drop-in that loads the module
    again after openibd restarts the RDMA stack (which unloads it with ib_core), as Azure's HPC images do.
  - "The classic failure - the NVIDIA driver was built before DOCA-OFED was installed, so nvidia-peermem's init
    returns EINVAL (C(could not insert 'nvidia_peermem': Invalid argument)) - is named in the error with its fix
    (rebuild the NVIDIA kernel modules after DOCA-OFED, or use DMA-BUF); nothing is persisted then."
  - For DMA-BUF it removes the persistence files this module wrote for nvidia_peermem, and leaves a loaded module
    alone (unloading it under running jobs is unsafe).
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  method:
    description:
      - V(auto) picks V(dmabuf) when the node can use it, else V(peermem). V(peermem) and V(dmabuf) insist, and fail
        with the reason when the node cannot.
    type: str
    choices: [auto, peermem, dmabuf]
    default: auto
  persist:
    description: Write the modules-load.d file (and the openibd drop-in) for V(peermem); V(false) only loads it now.
    type: bool
    default: true
  openibd_dropin:
    description:
      - V(auto) writes the C(openibd.service) drop-in only where openibd is installed (DOCA-OFED and MLNX_OFED ship
        it); V(always) and V(never) force the choice (V(never) removes a drop-in this module wrote).
    type: str
    choices: [auto, always, never]
    default: auto
  on_conflict:
    description:
      - What to do, for V(peermem) with O(persist), when another file keeps the persisted module from loading at boot -
        a C(blacklist nvidia_peermem) in modprobe.d or C(modprobe.blacklist=) on the running kernel's command line
        (systemd-modules-load applies kmod's blacklist and skips the module, "deny-listed (by kmod)"), an C(install
        nvidia_peermem ...) line that does not insert it (kmod runs the first matching one instead), a drop-in of
        openibd.service read after ours that empties C(ExecStartPost=), or one of the same name in a more important
        directory (C(/etc/systemd/system.control), C(/run/systemd/transient) ...) that systemd reads instead of ours.
      - V(fail) refuses before loading or writing anything and names each file and line.
      - V(ignore) goes on, warns and returns them in RV(overrides). Other tools' files are never edited.
    type: str
    choices: [fail, ignore]
    default: fail
  conf_file:
    description: The modules-load.d file this module owns; a C(.conf) file directly in C(/etc/modules-load.d).
    type: path
    default: /etc/modules-load.d/nvidia-peermem.conf
  dropin_file:
    description: The drop-in this module owns; a C(.conf) file directly in C(/etc/systemd/system/openibd.service.d).
    type: path
    default: /etc/systemd/system/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf
  backup:
    description: Keep timestamped copies of files this module replaces or removes.
    type: bool
    default: false
notes:
  - Modules are loaded with the C(modprobe) found on PATH (it talks to the running kernel); files are written under
    O(host_root).
  - After a change of the drop-in, systemd must reload its units (RV(daemon_reload_required)); the
    M(rdma.k8s_node.nvidia_peermem) role does it.
  - In check mode a module that is not loaded cannot be test-loaded; C(modprobe -n) still tells whether it exists.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - name: GPU Operator - GPUDirect RDMA and GPUDirect Storage
    description: DMA-BUF versus the legacy nvidia-peermem module.
    link: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html
"""

EXAMPLES = r"""
- name: GPUDirect RDMA with whatever the node supports
  rdma.k8s_node.nvidia_peermem:
  register: gpudirect

- name: Show the active path
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }} uses {{ gpudirect.gpudirect.active }} ({{ gpudirect.gpudirect.reason }})"

- name: Insist on nvidia_peermem (DOCA-OFED nodes with the proprietary driver)
  rdma.k8s_node.nvidia_peermem:
    method: peermem
"""

RETURN = r"""
changed:
  description: Whether the module was loaded or a file was (or in check mode would be) written or removed.
  returned: always
  type: bool
actions:
  description: Steps taken, or that would be taken in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "load_module", "target": "nvidia_peermem"},
           {"action": "create_file", "target": "/etc/modules-load.d/nvidia-peermem.conf", "mode": "0644"}]
reboot_required:
  description: Always V(false); the change takes effect now (and the files make it survive reboots).
  returned: always
  type: bool
restart_required:
  description: Always empty.
  returned: always
  type: list
  elements: str
daemon_reload_required:
  description: True when the openibd drop-in changed, so systemd must reload its units.
  returned: always
  type: bool
gpudirect:
  description: The GPUDirect RDMA path.
  returned: always
  type: dict
  contains:
    requested:
      description: The O(method) asked for.
      type: str
    method:
      description: The path chosen, V(peermem) or V(dmabuf).
      type: str
    reason:
      description: Why that path (or the DMA-BUF capability verdict).
      type: str
    active:
      description: The path in effect after the run - V(peermem) (module loaded), V(dmabuf), or V(none).
      type: str
    peermem_loaded:
      description: Whether nvidia_peermem is loaded after the run (in check mode, before it).
      type: bool
    dmabuf_capable:
      description: Whether the open GPU kernel modules run on Linux 5.12 or later.
      type: bool
    nvidia_driver:
      description: The NVIDIA driver version and whether it is the open kernel module; null when not loaded.
      type: dict
    ofed:
      description: The installed MLNX/DOCA-OFED (C(flavor), C(version)) and the version of the running ib_core.
      type: dict
  sample: {"requested": "auto", "method": "peermem", "active": "peermem", "peermem_loaded": true,
           "dmabuf_capable": false, "reason": "the NVIDIA driver 550.127.05 is the proprietary kernel module; ...",
           "nvidia_driver": {"version": "550.127.05", "open": false},
           "ofed": {"flavor": "doca", "version": "24.10-1.1.4.0.200", "running_version": "24.10-1.1.4"}}
observed:
  description: What the module read before acting.
  returned: always
  type: dict
  sample: {"kernel_release": "6.1.0-28-amd64", "peermem_loaded": false, "openibd": true,
           "files": {"/etc/modules-load.d/nvidia-peermem.conf": {"exists": false}}}
overrides:
  description:
    - What keeps the persisted module from loading at boot (see O(on_conflict)); empty when nothing does.
    - C(kind) is V(blacklist), V(install) (C(value) is the command), V(reset) or V(masked) (openibd.service drop-ins);
      C(what) is the persistence it defeats (V(modules-load.d) or V(openibd.service)).
  returned: always
  type: list
  elements: dict
  sample: [{"file": "/etc/modprobe.d/blacklist-gpu.conf", "line": 3, "kind": "blacklist", "value": null,
            "what": "modules-load.d"}]
diagnosis:
  description: On a failed load, the cause by name - V(einval) (built before or against another OFED), V(missing),
    V(unknown_symbol) or V(other) - with the fix in the failure message.
  returned: on failure to load
  type: str
  sample: einval
diff:
  description: Before and after of each file (with C(--diff)).
  returned: when diff mode is on and a file changes
  type: raw
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the files replaced or removed; each copy holds the
      file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, or only new files were written).
  returned: always
  type: dict
  sample: {"/etc/modules-load.d/nvidia-peermem.conf": "/etc/modules-load.d/nvidia-peermem.conf.12345.2026-01-01@10:00:00~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import plan as _plan


def run_module(module):
    """observe -> plan -> (check mode: the plan) -> apply; the drivers room (module_utils/layers/drivers/)."""
    params = module.params
    conf, dropin = _plan.paths(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.collect(host, commands, conf, dropin)
    planned = _plan.plan(params, observed, diff=module._diff)
    for warning in planned["warnings"]:
        module.warn(warning)
    return _apply.apply(host, commands, planned, check_mode=module.check_mode, backup=params["backup"],
                        diff=module._diff)


def main():
    module = AnsibleModule(argument_spec=_plan.argument_spec(), supports_check_mode=True)
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
