#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sysctl_dropin
short_description: Own one /etc/sysctl.d file and apply its settings live, in one round trip
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Writes exactly the given settings into one C(/etc/sysctl.d) file that the module owns (so settings for an interface
    that is gone or renamed disappear with the next run), and sets the live values that differ with one C(sysctl -w)
    call.
  - Reports, for the C(arp_ignore), C(arp_announce) and C(rp_filter) keys of each interface it sets, the value the
    kernel acts on, which is the maximum of C(conf/all) and C(conf/<interface>).
  - If setting the live values fails, the file and the values already changed are put back.
  - Finds every other file that beats this one for a key it sets, with the rules of the programs that read them
    (systemd-sysctl at boot, C(sysctl --system) of procps when run by hand or by a tool) - a file read after ours with
    another value, a C(-key) line read after ours that makes systemd-sysctl skip the key, C(/etc/sysctl.conf) read
    last by C(sysctl --system) - and returns them in RV(overrides); see O(on_conflict).
  - Why not M(ansible.posix.sysctl) - it handles one key per task (42 module round trips for a DGX-class node), has no
    diff, keeps stale keys of vanished interfaces, and has no backup; this module is one round trip with all four.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.changes
options:
  path:
    description:
      - The file this module owns; a C(.conf) file directly in C(/etc/sysctl.d), named with letters, digits and
        C(_ . @ + -), not starting with a dot (C(systemd-sysctl) skips those).
    type: path
    default: /etc/sysctl.d/90-rdma-k8s-node.conf
  settings:
    description:
      - Keys and values, in the order they are written. Keys with dots (V(net.ipv4.conf.all.arp_ignore)), or with
        slashes when a component holds a dot (V(net/ipv4/conf/eth0.100/rp_filter)).
    type: dict
    required: true
  live:
    description:
      - Also set the running kernel's values. Keys that do not exist now (an interface not created yet) are skipped
        with a warning; the file applies them when C(systemd-sysctl) or C(sysctl --system) runs after the interface
        appears.
    type: bool
    default: true
  on_conflict:
    description:
      - What to do when another file would win over this one for a key it sets.
      - V(fail) refuses when systemd-sysctl would apply another value at boot (the setting would not be the effective
        one after the next reboot), names each file, line and value, and writes nothing. An override that only
        C(sysctl --system) applies (C(/etc/sysctl.conf), or a file name that sorts before ours with a link read
        later) never fails the run; it is warned about and returned.
      - V(ignore) writes and sets the values as usual, warns about each override and returns them in RV(overrides); the
        other file keeps winning at boot until it is changed.
      - The other tool's file is never edited; rename O(path) to sort after it, or change that file.
    type: str
    choices: [fail, ignore]
    default: fail
  backup:
    description:
      - Keep a timestamped copy of the previous file.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
notes:
  - Live values are read from C(<host_root>/proc/sys) and set with the C(sysctl) command. Network keys are per network
    namespace, so an audit or change from a pod must run in the host's network namespace (C(hostNetwork)).
seealso:
  - module: rdma.k8s_node.rdma_facts
  - module: ansible.posix.sysctl
"""

EXAMPLES = r"""
- name: ARP and reverse-path filtering for multi-NIC RoCE
  rdma.k8s_node.sysctl_dropin:
    settings:
      net.ipv4.conf.all.arp_ignore: 1
      net.ipv4.conf.all.arp_announce: 2
      net.ipv4.conf.all.rp_filter: 2
      net.ipv4.conf.ens1f0np0.arp_ignore: 2
"""

RETURN = r"""
changed:
  description: Whether the file or a live value was (or in check mode would be) changed.
  returned: always
  type: bool
actions:
  description: Steps taken, or that would be taken in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "update_file", "target": "/etc/sysctl.d/90-rdma-k8s-node.conf", "mode": "0644"},
           {"action": "set_live", "target": "net.ipv4.conf.all.arp_ignore", "before": "0", "after": "1"}]
reboot_required:
  description: Always false; sysctls apply live.
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
    live:
      description: Live value of each key (null when the key does not exist now).
      type: dict
    effective:
      description: For interfaces with max-rule keys, the value the kernel acts on after the change (max of all and
        the interface), by interface and key.
      type: dict
  sample: {"live": {"net.ipv4.conf.all.arp_ignore": "0"}, "effective": {"ens1f0np0": {"arp_ignore": 2}}}
overrides:
  description:
    - Other files that beat this one for a key it sets, from the files as they are (ours as it will be). Empty when none.
    - C(reader) is who applies the other value - V(systemd-sysctl) (at every boot) or V(sysctl --system) (procps, when
      run); C(kind) is V(later_file), V(excluded) (a C(-key) line read after ours; C(value) is null) or V(sysctl_conf);
      C(link) is the target when the file is a symlink (Debian's C(99-sysctl.conf -> ../sysctl.conf)).
  returned: always
  type: list
  elements: dict
  sample: [{"key": "net.ipv4.conf.all.rp_filter", "want": "2", "value": "1", "file": "/etc/sysctl.d/99-sysctl.conf",
            "line": 21, "reader": "systemd-sysctl", "kind": "later_file", "link": "../sysctl.conf"}]
missing:
  description: Keys that do not exist in the running kernel (skipped live).
  returned: always
  type: list
  elements: str
diff:
  description: Before and after of the file (with C(--diff)).
  returned: when diff mode is on and the file changes
  type: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)); the copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, or the file did not exist before).
  returned: always
  type: dict
  sample: {"/etc/sysctl.d/90-rdma-k8s-node.conf": "/etc/sysctl.d/90-rdma-k8s-node.conf.12345.2026-01-01@10:00:00~"}
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import apply as _apply
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as _sysctl

SYSCTL_DIR = _observe.SYSCTL_DIR
# what systemd-sysctl reads from /etc/sysctl.d: *.conf, hidden files skipped
CONF_NAME_RE = re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.conf\Z")


def run_module(module):
    params = module.params
    path = params["path"]
    if os.path.dirname(path) != SYSCTL_DIR or not CONF_NAME_RE.match(os.path.basename(path)):
        raise InputError("path must be a .conf file directly in %s, named with letters, digits and _ . @ + - and not "
                         "starting with a dot (systemd-sysctl reads nothing else there), got %r" % (SYSCTL_DIR, path))
    settings = _sysctl.validate(params["settings"])
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    result = Result()
    result.extra["backup_files"] = {}

    planned = _plan.plan(settings, _observe.observe(host, path, settings), path, live=params["live"])
    result.observed["live"] = planned["live"]
    result.observed["effective"] = planned["effective"]
    result.extra["missing"] = planned["missing"]
    found = planned["overrides"]
    result.extra["overrides"] = found
    if planned["boot_overrides"] and params["on_conflict"] == "fail":
        raise ConflictError(
            "another sysctl file would win over %s at boot: %s. Change or remove that setting, rename path to sort after "
            "it, or run with on_conflict=ignore; nothing was written" % (
                path, "; ".join(_sysctl.describe_override(item) for item in planned["boot_overrides"])),
            {"overrides": found}, dict(result.as_dict(with_diff=False), changed=False, actions=[]))
    for item in found:
        module.warn(_sysctl.describe_override(item))
    for step in planned["actions"]:
        result.add(step, planned["file"].diff() if module._diff and step["action"] != "set_live" else None)
    if params["live"] and planned["missing"]:
        module.warn("not in the running kernel now, persisted only: %s" % ", ".join(planned["missing"]))

    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)

    result.extra["backup_files"] = _apply.apply(host, commands, planned, backup=params["backup"])
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=_observe.CONF_FILE),
            settings=dict(type="dict", required=True),
            live=dict(type="bool", default=True),
            on_conflict=dict(type="str", default="fail", choices=["fail", "ignore"]),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
