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

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline, grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, InputError, VerifyError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import (
    FileTransaction,
    conf_name_pattern,
    observe_file,
    plan_file,
    revert,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action, exit_module

GRUB_DEFAULTS = "/etc/default/grub"
GRUB_DEFAULTS_DIR = "/etc/default/grub.d"
GRUB_CFG = "/boot/grub/grub.cfg"
BLS_DIR = "/boot/loader/entries"
KERNEL_CMDLINE_FILE = "/etc/kernel/cmdline"
# what grub-mkconfig's `for i in /etc/default/grub.d/*.cfg` picks up (the shell's * skips dot files)
DROPIN_NAME_RE = conf_name_pattern(".cfg")


def cpu_vendor(host):
    """``vendor_id`` of the first CPU in /proc/cpuinfo, or None."""
    for line in (host.read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith("vendor_id"):
            return line.split(":", 1)[1].strip()
    return None


def wanted_args(host, params):
    """``present`` plus the vendor IOMMU switch when asked, validated before anything else is read."""
    present = list(params["present"])
    if params["vendor_iommu"]:
        vendor = cpu_vendor(host)
        arg = _cmdline.iommu_vendor_arg(vendor)
        if arg is None:
            raise InputError("vendor_iommu: no IOMMU switch known for CPU vendor %r (from /proc/cpuinfo)" % (vendor,))
        if not any(_cmdline.same_arg(arg, other) for other in present):
            present.append(arg)
    return _cmdline.validate_request(present, params["absent"])


def detect_bootloader(host, commands, requested):
    """The mode to use; ``auto`` looks at what the node has, and an unknown layout is an error, not a guess."""
    if requested != "auto":
        return requested
    if commands.find("grubby") and any(name.endswith(".conf") for name in host.listdir(BLS_DIR)):
        return "grubby"
    if host.exists(GRUB_DEFAULTS):
        return "grub_dropin"
    raise InputError("bootloader=auto found neither grubby with BLS entries (%s) nor %s on this node; "
                     "set bootloader explicitly if GRUB lives elsewhere" % (BLS_DIR, GRUB_DEFAULTS))


def pending_changes(live, present, absent):
    """What the running kernel lacks or has too much, restricted to what this module manages."""
    missing = _cmdline.missing_from(live, present)
    names = set(_cmdline.key_of(arg) for arg in present)
    unwanted = [arg for arg in live
                if any(_cmdline.matches_absent(arg, pattern) for pattern in absent)
                or (_cmdline.key_of(arg) in names and not any(_cmdline.same_arg(arg, want) for want in present))]
    return {"missing": missing, "unwanted": unwanted}


class GrubFiles:
    """The ``grub_dropin`` and ``grub_default`` modes: files under /etc/default, then update-grub."""

    def __init__(self, module, host, commands, mode):
        self.module = module
        self.host = host
        self.commands = commands
        self.mode = mode
        self.dropin = module.params["dropin"]

    def _sources(self, dropin_content=None, defaults_content=None):
        """What grub-mkconfig sources, in its order, as ``F:<node path>`` (a file) or ``T:<text>`` (a candidate
        content standing in for our drop-in or /etc/default/grub)."""
        sources = ["T:" + defaults_content if defaults_content is not None else "F:" + GRUB_DEFAULTS]
        names = sorted(n for n in self.host.listdir(GRUB_DEFAULTS_DIR) if n.endswith(".cfg"))
        ours = os.path.basename(self.dropin) if os.path.dirname(self.dropin) == GRUB_DEFAULTS_DIR else None
        if dropin_content is not None and ours and ours not in names:
            names = sorted(names + [ours])
        for name in names:
            if name == ours and dropin_content is not None:
                sources.append("T:" + dropin_content)
            else:
                sources.append("F:" + GRUB_DEFAULTS_DIR + "/" + name)
        return sources

    def evaluate(self, dropin_content=None, defaults_content=None):
        """What the GRUB defaults configure, learned by sourcing them with sh like grub-mkconfig.

        The shell runs chrooted into ``host_root`` with a clean environment and a timeout (the defaults are shell
        code of the node: they must see the node's files, never the auditing machine's).  Candidate contents
        (check mode, or before writing) are handed to it as arguments, so nothing is written to find out what a
        change would do.
        """
        sources = self._sources(dropin_content, defaults_content)
        rc, out, err = self.commands.run(["/bin/sh", "-c", _grub.evaluate_script(), "sh"] + sources, timeout=60)
        if rc != 0:
            raise ApplyError("sourcing the GRUB defaults (%s) failed (rc=%s): %s" % (
                ", ".join(src[2:] if src.startswith("F:") else "a candidate" for src in sources), rc, err.strip()),
                {"rc": rc, "stderr": err})
        return _grub.parse_evaluation(out)

    def plan(self, present, absent, result):
        """File plans for the request, plus what the next boot is configured to get before and after."""
        before_values = self.evaluate()
        if self.mode == "grub_dropin":
            plans = [plan_file(observe_file(self.host, self.dropin), _grub.render_dropin(present, absent), 0o644)]
            after_values = self.evaluate(dropin_content=plans[0].content)
        else:
            observed = observe_file(self.host, GRUB_DEFAULTS)
            text = observed.content or ""
            for var in _grub.CMDLINE_VARS:
                dummy_index, value = _grub.find_assignment(text, var, GRUB_DEFAULTS)
                wanted = present if var == "GRUB_CMDLINE_LINUX" else []
                new_args, changes = _cmdline.plan(_cmdline.split_raw(value or ""), wanted, absent)
                if var == "GRUB_CMDLINE_LINUX_DEFAULT":
                    # a wanted name must not come back from the DEFAULT variable either
                    names = set(_cmdline.key_of(arg) for arg in present)
                    kept = [arg for arg in new_args if _cmdline.key_of(arg) not in names]
                    changes = changes or kept != new_args
                    new_args = kept
                if changes:
                    text = _grub.set_assignment(text, var, " ".join(new_args), GRUB_DEFAULTS)
            plans = [plan_file(observed, text, observed.mode if observed.exists else 0o644,
                               observed.uid if observed.exists else 0, observed.gid if observed.exists else 0)]
            after_values = self.evaluate(defaults_content=plans[0].content)
        result.observed["before"] = _grub.default_entry_args(before_values)
        result.observed["configured"] = _grub.default_entry_args(after_values)
        overridden = _cmdline.missing_from(result.observed["configured"], present)
        if overridden:
            later = [n for n in self.host.listdir(GRUB_DEFAULTS_DIR)
                     if n.endswith(".cfg") and n > os.path.basename(self.dropin)]
            raise ConflictError(
                "after this change the next boot would still lack %s: another GRUB defaults file overrides it "
                "(files sourced after ours: %s)" % (" ".join(overridden), ", ".join(later) or "none"),
                {"overridden": overridden, "later_files": later})
        return plans

    def generated_is_stale(self, configured):
        """True when grub.cfg's first kernel line lacks what the defaults configure (an earlier update failed)."""
        lines = _grub.grub_cfg_linux_lines(self.host.read_text(GRUB_CFG) or "")
        if not lines:
            return False  # no generated config to compare with (not installed, or EFI layout elsewhere)
        return bool(_cmdline.missing_from(lines[0]["args"], configured))

    def update_argv(self):
        """The regeneration command the node has."""
        if self.commands.find("update-grub"):
            return ["update-grub"]
        if self.commands.find("grub-mkconfig"):
            return ["grub-mkconfig", "-o", GRUB_CFG]
        raise ApplyError("neither update-grub nor grub-mkconfig is installed; cannot regenerate %s" % GRUB_CFG)


def run_grub(module, host, commands, mode, present, absent, result):
    """Plan, apply and verify the GRUB-file modes."""
    grub = GrubFiles(module, host, commands, mode)
    plans = grub.plan(present, absent, result)
    for plan in plans:
        if plan.changed:
            result.add(plan.action(), plan.diff() if module._diff else None)
    update = module.params["update"] and (any(p.changed for p in plans)
                                          or grub.generated_is_stale(result.observed["configured"]))
    update_argv = grub.update_argv() if update else None
    if update:
        result.add(action("run", " ".join(update_argv)))
    if module.check_mode or not result.changed:
        return
    result.extra["backup_files"] = FileTransaction(host, backup=module.params["backup"]).apply_all(plans)
    if update:
        rc, out, err = commands.run(update_argv)
        if rc != 0:
            problem = "%s failed (rc=%s): %s" % (" ".join(update_argv), rc, err.strip())
            restored = revert(host, plans, cause=problem)
            raise ApplyError("%s failed (rc=%s); the GRUB files were restored: %s" % (" ".join(update_argv), rc, err.strip()),
                             {"rc": rc, "stdout": out, "stderr": err, "restored": restored})
        if grub.generated_is_stale(result.observed["configured"]):
            restored = revert(host, plans, cause="%s ran but %s still lacks the new arguments" % (" ".join(update_argv),
                                                                                                  GRUB_CFG))
            raise VerifyError("%s ran but %s still lacks %s; the GRUB files were restored"
                              % (" ".join(update_argv), GRUB_CFG, _cmdline.missing_from(
                                  _grub.grub_cfg_linux_lines(host.read_text(GRUB_CFG) or "")[0]["args"],
                                  result.observed["configured"])), {"restored": restored})


def run_grubby(module, host, commands, present, absent, result):
    """EL: every BLS entry through grubby, and GRUB_CMDLINE_LINUX / /etc/kernel/cmdline for future kernels."""
    rc, out, err = commands.run(["grubby", "--info=ALL"])
    if rc != 0:
        raise ApplyError("grubby --info=ALL failed: %s" % err.strip(), {"rc": rc, "stderr": err})
    entries = [e for e in _grub.parse_grubby_info(out) if e["kernel"]]
    if not entries:
        raise ApplyError("grubby --info=ALL lists no boot entries")
    removes, adds = [], []
    for entry in entries:
        dummy_new, changes = _cmdline.plan(entry["args"], present, absent)
        for change in changes:
            bucket = adds if change["op"] == "add" else removes
            if change["arg"] not in bucket:
                bucket.append(change["arg"])
    result.observed["before"] = entries[0]["args"]
    result.observed["configured"] = _cmdline.plan(entries[0]["args"], present, absent)[0]
    grubby_steps = []
    if removes:
        grubby_steps.append(["grubby", "--update-kernel=ALL", "--remove-args=%s" % " ".join(removes)])
    if adds:
        grubby_steps.append(["grubby", "--update-kernel=ALL", "--args=%s" % " ".join(adds)])
    for argv in grubby_steps:
        result.add(action("run", " ".join(argv)))
    if module._diff and grubby_steps:
        result.diffs.append({"before": " ".join(result.observed["before"]) + "\n",
                             "after": " ".join(result.observed["configured"]) + "\n",
                             "before_header": "boot entries (grubby)", "after_header": "boot entries (grubby)"})

    plans = []
    observed = observe_file(host, GRUB_DEFAULTS)
    if observed.exists:
        dummy_index, value = _grub.find_assignment(observed.content, "GRUB_CMDLINE_LINUX", GRUB_DEFAULTS)
        new_args, changes = _cmdline.plan(_cmdline.split_raw(value or ""), present, absent)
        if changes:
            plans.append(plan_file(observed, _grub.set_assignment(observed.content, "GRUB_CMDLINE_LINUX", " ".join(new_args), GRUB_DEFAULTS),
                                   observed.mode, observed.uid, observed.gid))
    kernel_file = observe_file(host, KERNEL_CMDLINE_FILE)
    if kernel_file.exists:
        new_args, changes = _cmdline.plan(_cmdline.split_raw(kernel_file.content), present, absent)
        if changes:
            plans.append(plan_file(kernel_file, " ".join(new_args) + "\n", kernel_file.mode, kernel_file.uid, kernel_file.gid))
    for plan in plans:
        result.add(plan.action(), plan.diff() if module._diff else None)
    if module.check_mode or not result.changed:
        return
    result.extra["backup_files"] = FileTransaction(host, backup=module.params["backup"]).apply_all(plans)
    for argv in grubby_steps:
        rc, out, err = commands.run(argv)
        if rc != 0:
            restored = revert(host, plans, cause="%s failed (rc=%s): %s" % (" ".join(argv), rc, err.strip()))
            raise ApplyError("%s failed (rc=%s): %s; the GRUB defaults were restored, boot entries changed by earlier "
                             "grubby calls were not" % (" ".join(argv), rc, err.strip()),
                             {"rc": rc, "stderr": err, "restored": restored})
    rc, out, err = commands.run(["grubby", "--info=ALL"])
    for entry in _grub.parse_grubby_info(out):
        if entry["kernel"] and _cmdline.plan(entry["args"], present, absent)[1]:
            raise VerifyError("after grubby, boot entry %s (%s) still differs: %s"
                              % (entry["index"], entry["kernel"], " ".join(entry["args"])))


def run_module(module):
    """observe -> plan -> apply -> verify, returning the result dict."""
    params = module.params
    dropin = params["dropin"]
    if os.path.dirname(dropin) != GRUB_DEFAULTS_DIR or not DROPIN_NAME_RE.match(os.path.basename(dropin)):
        raise InputError("dropin must be a .cfg file directly in %s, named with letters, digits and _ . @ + - and not "
                         "starting with a dot (GRUB sources nothing else), got %r" % (GRUB_DEFAULTS_DIR, dropin))
    host = HostRoot(params["host_root"])
    present, absent = wanted_args(host, params)
    commands = HostCommands(module, host)
    mode = detect_bootloader(host, commands, params["bootloader"])
    result = Result()
    result.extra["bootloader"] = mode
    result.extra["backup_files"] = {}
    result.observed["live"] = _cmdline.kernel_args(host.read_attr("/proc/cmdline", default=""))
    if mode == "grubby":
        run_grubby(module, host, commands, present, absent, result)
    else:
        run_grub(module, host, commands, mode, present, absent, result)
    pending = pending_changes(result.observed["live"], present, absent)
    result.extra["pending"] = pending
    result.reboot_required = bool(pending["missing"] or pending["unwanted"])
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            present=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            vendor_iommu=dict(type="bool", default=False),
            bootloader=dict(type="str", default="auto", choices=["auto", "grub_dropin", "grub_default", "grubby"]),
            dropin=dict(type="path", default="/etc/default/grub.d/99-rdma-k8s-node.cfg"),
            update=dict(type="bool", default=True),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
