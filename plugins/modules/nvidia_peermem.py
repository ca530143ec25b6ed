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

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect, _ofed, _persisted
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, HostReadError, InputError, RdmaNodeError, VerifyError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import (
    FileTransaction,
    conf_name_pattern,
    observe_file,
    plan_file,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action, exit_module

MODULE = _gpudirect.MODULE
MODULES_LOAD_DIR = "/etc/modules-load.d"
DROPIN_DIR = "/etc/systemd/system/openibd.service.d"
OPENIBD_UNITS = _gpudirect.OPENIBD_UNITS


# what systemd and kmod read from a conf.d directory: no hidden files, one line-free name
CONF_NAME = conf_name_pattern(".conf")


def owned_path(path, directory, option):
    """A ``.conf`` file directly in ``directory`` (where systemd reads it), or an InputError."""
    if os.path.dirname(path) != directory or not CONF_NAME.match(os.path.basename(path)):
        raise InputError("%s must be a .conf file directly in %s whose name starts with a letter, digit, '_', '@', "
                         "'+' or '-' and has no blank, newline or NUL (systemd skips hidden files), got %r"
                         % (option, directory, path))
    return path


def peermem_loaded(host):
    """Whether the running kernel has nvidia_peermem (``/sys/module/nvidia_peermem``)."""
    return host.isdir("/sys/module/%s" % MODULE)


def find_overrides(host, dropin, dropin_text):
    """:func:`_gpudirect.peermem_overrides` on the node: modprobe.d, the running kernel's command line and, when our
    drop-in is written, openibd.service's drop-ins with ours as it will be.  An unreadable file is an error."""
    problems = []
    layers = _persisted.modprobe_layers(_persisted.Reader(host, problems))
    cmdline = ("/proc/cmdline", host.try_attr("/proc/cmdline", "", problems))
    dropins = _gpudirect.openibd_dropins(host, dropin, dropin_text, problems) if dropin_text is not None else None
    if problems:
        raise HostReadError("cannot read %s: %s" % (problems[0]["path"], problems[0]["error"]), {"problems": problems})
    return _gpudirect.peermem_overrides(layers, cmdline, dropins, dropin, dropin_text)


def run_module(module):
    params = module.params
    conf = owned_path(params["conf_file"], MODULES_LOAD_DIR, "conf_file")
    dropin = owned_path(params["dropin_file"], DROPIN_DIR, "dropin_file")
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    result = Result()

    nvidia = _gpudirect.parse_nvidia_version(host.read_text("/proc/driver/nvidia/version"))
    release = host.read_attr("/proc/sys/kernel/osrelease")
    ofed = _ofed.ofed_facts(host, modules=("ib_core", "mlx5_core"))
    ofed_present = ofed["installed"] or bool(ofed["running_version"])
    loaded = peermem_loaded(host)
    openibd = any(host.exists(path) for path in OPENIBD_UNITS)
    capable = _gpudirect.dmabuf_capable(nvidia, release)[0]
    gpudirect = {
        "requested": params["method"], "method": None, "reason": None, "active": None, "peermem_loaded": loaded,
        "dmabuf_capable": capable,
        "nvidia_driver": {"version": nvidia["version"], "open": nvidia["open"]} if nvidia else None,
        "ofed": {"flavor": ofed["flavor"], "version": ofed["version"], "running_version": ofed["running_version"]},
    }
    result.extra.update({"gpudirect": gpudirect, "daemon_reload_required": False, "backup_files": {}})
    result.observed.update({"kernel_release": release, "peermem_loaded": loaded, "openibd": openibd})

    try:
        method, reason = _gpudirect.choose_method(params["method"], nvidia, release, ofed_present)
    except RdmaNodeError as exc:
        exc.result = result.as_dict(with_diff=False)
        raise
    gpudirect.update({"method": method, "reason": reason})

    want_dropin = params["openibd_dropin"] == "always" or (params["openibd_dropin"] == "auto" and openibd)
    if method == "peermem":
        contents = {conf: _gpudirect.render_modules_load(),
                    dropin: _gpudirect.render_openibd_dropin(commands.find("modprobe") or "/sbin/modprobe")
                    if want_dropin else None}
    else:
        contents = {conf: None, dropin: None}
    plans = []
    if method == "dmabuf" or params["persist"]:
        plans = [plan_file(observe_file(host, path), text, 0o644) for path, text in contents.items()]
    result.observed["files"] = {plan.path: plan.observed.as_dict() for plan in plans}
    found = find_overrides(host, dropin, contents[dropin]) if method == "peermem" and params["persist"] else []
    result.extra["overrides"] = found
    if found and params["on_conflict"] == "fail":
        raise ConflictError(
            "%s would not be loaded at boot as persisted: %s. Remove that line or file, or run with "
            "on_conflict=ignore; nothing was loaded or written" % (
                MODULE, "; ".join(_gpudirect.describe_peermem_override(item, dropin) for item in found)),
            {"overrides": found}, dict(result.as_dict(with_diff=False), changed=False, actions=[]))
    for item in found:
        module.warn(_gpudirect.describe_peermem_override(item, dropin))

    load = method == "peermem" and not loaded
    if load:
        result.add(action("load_module", MODULE))
    for plan in plans:
        if plan.changed:
            result.add(plan.action(), plan.diff() if module._diff else None)
    result.extra["daemon_reload_required"] = any(plan.changed for plan in plans if plan.path == dropin)
    if method == "dmabuf" and loaded:
        module.warn("nvidia_peermem is loaded although DMA-BUF is used; it is left loaded (unloading it under running "
                    "jobs is unsafe) and no longer loaded at boot by this module's files")

    def failed(rc, err, verb):
        diagnosis = _gpudirect.diagnose_load(rc, err, MODULE, ofed_present)
        partial = result.as_dict(with_diff=False)
        partial.update({"changed": False, "actions": [], "diagnosis": diagnosis["kind"]})
        return ApplyError(diagnosis["message"], {"rc": rc, "stderr": err, "command": verb}, partial)

    if load and module.check_mode:
        rc, dummy_out, err = commands.run_kernel(["modprobe", "-n", MODULE])
        if rc != 0:
            raise failed(rc, err, "modprobe -n %s" % MODULE)
    if module.check_mode or not result.changed:
        gpudirect["active"] = _gpudirect.active_path(method, capable, loaded)
        return result.as_dict(with_diff=module._diff)

    if load:
        rc, dummy_out, err = commands.run_kernel(["modprobe", MODULE])
        if rc != 0:
            raise failed(rc, err, "modprobe %s" % MODULE)
        if not peermem_loaded(host):
            raise VerifyError("modprobe %s succeeded but /sys/module/%s does not exist; nothing was persisted"
                              % (MODULE, MODULE))
    try:
        backups = FileTransaction(host, backup=params["backup"]).apply_all(plans)
    except ApplyError as exc:
        if load:
            exc.msg += "; %s stays loaded for this boot but is not persisted" % MODULE
        raise
    result.extra["backup_files"] = backups
    loaded = peermem_loaded(host)
    gpudirect["peermem_loaded"] = loaded
    gpudirect["active"] = _gpudirect.active_path(method, capable, loaded)
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            method=dict(type="str", default="auto", choices=list(_gpudirect.METHODS)),
            persist=dict(type="bool", default=True),
            openibd_dropin=dict(type="str", default="auto", choices=["auto", "always", "never"]),
            on_conflict=dict(type="str", default="fail", choices=["fail", "ignore"]),
            conf_file=dict(type="path", default="/etc/modules-load.d/nvidia-peermem.conf"),
            dropin_file=dict(type="path", default=DROPIN_DIR + "/10-rdma-k8s-node-nvidia-peermem.conf"),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
