#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: rdma_netns
short_description: Set the RDMA subsystem network-namespace mode (shared or exclusive), live and persistent
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Persists the mode as C(options ib_core netns_mode=1|0) in a modprobe.d file it owns, and finds every other
    modprobe.d setting that ib_core would get after it (kmod reads the files sorted by name, a name in C(/etc) hiding
    the same name in C(/run), C(/usr/local/lib), C(/usr/lib) and C(/lib); the kernel keeps the last value of a
    parameter), such as sriov-network-operator's C(sriov_network_operator_modules_config.conf); see O(on_conflict).
  - Switches the running kernel with C(rdma system set netns) when ib_core is loaded and the mode differs. The
    kernel refuses while any non-init network namespace exists (every pod sandbox has one); the module then reports
    RV(reboot_required) instead of failing, and never retries in a loop.
  - Regenerates the initramfs when ib_core is inside it, so the option applies as early as the module loads.
  - Warns when exclusive mode meets the RDMA shared device plugin, which stops seeing devices in that mode.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  mode:
    description:
      - V(shared) (the kernel default) shows every RDMA device in every network namespace. V(exclusive) binds each
        device to one namespace, as SR-IOV pods with the RDMA CNI need.
    type: str
    required: true
    choices: [shared, exclusive]
  conf_file:
    description: The modprobe.d file this module owns. It must be a C(.conf) file directly in C(/etc/modprobe.d).
    type: path
    default: /etc/modprobe.d/rdma-k8s-node-ib_core.conf
  live:
    description: Try to switch the running kernel now. With V(false), a difference is only reported.
    type: bool
    default: true
  on_conflict:
    description:
      - What to do when another modprobe.d file sets C(netns_mode) after ours (or sets a value the kernel refuses, which
        makes ib_core fail to load), so the wanted mode would not be the one ib_core gets at boot.
      - V(fail) refuses, names each file, line and value, and writes nothing.
      - V(ignore) writes our file as usual, warns and returns the settings in RV(overrides); the other file keeps
        winning until it is changed. The other tool's file is never edited.
    type: str
    choices: [fail, ignore]
    default: fail
  initramfs:
    description:
      - V(auto) regenerates the initramfs (C(update-initramfs -u) or C(dracut -f)) after a file change when the
        running kernel's initramfs contains ib_core; V(always) and V(never) force the choice.
    type: str
    choices: [auto, always, never]
    default: auto
  backup:
    description: Keep a timestamped copy of the previous file.
    type: bool
    default: false
notes:
  - The kernel command line (C(ib_core.netns_mode=)) overrides modprobe.d when ib_core loads. The module warns when
    the running kernel was booted with a conflicting value; manage it with M(rdma.k8s_node.kernel_cmdline).
seealso:
  - module: rdma.k8s_node.kernel_cmdline
  - module: rdma.k8s_node.rdma_facts
"""

EXAMPLES = r"""
- name: Exclusive RDMA netns mode for SR-IOV pods
  rdma.k8s_node.rdma_netns:
    mode: exclusive
  register: netns

- name: Say when a reboot is still needed
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }} switches to exclusive mode at the next boot"
  when: netns.reboot_required
"""

RETURN = r"""
changed:
  description: Whether the file, the initramfs or the live mode was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create_file", "target": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", "mode": "0644"},
           {"action": "run", "target": "rdma system set netns exclusive"}]
reboot_required:
  description: True when the running kernel is not in the wanted mode and could not be switched live.
  returned: always
  type: bool
restart_required:
  description: Always empty; the mode needs a live switch or a reboot, not a service restart.
  returned: always
  type: list
  elements: str
observed:
  description: What the module read.
  returned: always
  type: dict
  contains:
    ib_core_loaded:
      description: Whether ib_core is loaded (C(/sys/module/ib_core) exists).
      type: bool
    live:
      description: The running kernel's mode before any switch, or null when ib_core is not loaded.
      type: str
    persisted:
      description: The mode modprobe.d configures after the change (null when nothing sets it).
      type: str
    persisted_by:
      description: The modprobe.d file whose setting wins.
      type: str
    cmdline:
      description: The mode the running kernel's command line sets with C(ib_core.netns_mode=), or null.
      type: str
  sample: {"ib_core_loaded": true, "live": "shared", "persisted": "exclusive",
           "persisted_by": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", "cmdline": null}
overrides:
  description:
    - The modprobe.d settings read after ours that give ib_core another mode (C(mode)) or a value the kernel refuses
      (C(mode) null), in the order kmod applies them; empty when ours wins.
  returned: always
  type: list
  elements: dict
  sample: [{"file": "/etc/modprobe.d/sriov_network_operator_modules_config.conf", "line": 2, "value": "1",
            "mode": "shared"}]
live_switch:
  description: Outcome of the live switch - V(not_needed), V(switched), V(refused_busy) (namespaces exist) or
    V(skipped) (live=false, or check mode).
  returned: always
  type: str
diff:
  description: Before and after of the modprobe.d file (with C(--diff)).
  returned: when diff mode is on and the file changes
  type: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)); the only file this module edits is O(conf_file), and
      its copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change of the file, or a new file).
  returned: always
  type: dict
  sample: {"/etc/modprobe.d/rdma-k8s-node-ib_core.conf": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf.12345.2026-01-01@10:00:00~"}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import conf_name_pattern
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.initramfs import initramfs_argv, initramfs_has_ib_core
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.mode import MODES

# what kmod reads from modprobe.d: no hidden files, one line-free name
CONF_NAME = conf_name_pattern(".conf")


def run_module(module):
    params = module.params
    mode = params["mode"]
    conf = params["conf_file"]
    if os.path.dirname(conf) != _observe.MODPROBE_DIR or not CONF_NAME.match(os.path.basename(conf)):
        raise InputError("conf_file must be a .conf file directly in %s (kmod reads nothing else there) whose name "
                         "starts with a letter, digit, '_', '@', '+' or '-' and has no blank, newline or NUL "
                         "(kmod skips hidden files), got %r" % (_observe.MODPROBE_DIR, conf))
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    result = Result()
    result.extra["backup_files"] = {}

    observed = _observe.observe(host, conf)
    planned = _plan.plan(mode, observed, conf, live=params["live"])
    result.observed.update(planned["observed"])
    found = planned["overrides"]
    result.extra["overrides"] = found
    if found and params["on_conflict"] == "fail":
        raise ConflictError(
            "another modprobe.d file would win over %s when ib_core loads: %s. Remove that setting, choose a conf_file "
            "that sorts after it, or run with on_conflict=ignore; nothing was written" % (
                conf, "; ".join(_plan.describe_override(item, mode) for item in found)),
            {"overriding_file": found[-1]["file"], "overrides": found},
            dict(result.as_dict(with_diff=False), changed=False, actions=[]))
    for warning in planned["warnings"]:
        module.warn(warning)
    if planned["file"].changed:
        wanted = params["initramfs"]
        if wanted == "always" or (wanted == "auto" and initramfs_has_ib_core(module, host, commands)):
            planned = _plan.plan(mode, observed, conf, live=params["live"], regenerate=initramfs_argv(host, commands))
    for step in planned["actions"]:
        result.add(step, planned["file"].diff() if module._diff and step["target"] == conf else None)
    result.extra["live_switch"] = "not_needed" if planned["live_decision"] == "none" else "skipped"
    result.reboot_required = planned["reboot_required"]

    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)

    outcome = _apply.apply(host, commands, planned, mode, backup=params["backup"])
    result.extra["backup_files"] = outcome["backup_files"]
    for warning in outcome["warnings"]:
        module.warn(warning)
    result.extra["live_switch"] = outcome["live_switch"]
    result.reboot_required = outcome["reboot_required"]
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", required=True, choices=list(MODES)),
            conf_file=dict(type="path", default=_observe.CONF_FILE),
            live=dict(type="bool", default=True),
            on_conflict=dict(type="str", default="fail", choices=["fail", "ignore"]),
            initramfs=dict(type="str", default="auto", choices=["auto", "always", "never"]),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
