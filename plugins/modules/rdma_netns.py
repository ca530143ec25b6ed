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
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe, _netns
from ansible_collections.rdma.k8s_node.plugins.module_utils._cmdline import last_value
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

NETNS_PARAM = "/sys/module/ib_core/parameters/netns_mode"
MODPROBE_DIR = "/etc/modprobe.d"
SHARED_DEVICE_PLUGIN = "k8s-rdma-shared"  # /proc/<pid>/comm is cut at 15 characters


def read_live(host):
    """``(loaded, mode)`` of the running kernel from ib_core's parameter file."""
    if not host.isdir("/sys/module/ib_core"):
        return False, None
    return True, _netns.mode_of(host.read_attr(NETNS_PARAM))


def modprobe_layers(host, ours=None, content=None):
    """``[(path, directives)]`` in kmod's reading order; with ``ours``, our file as ``content`` will be."""
    listing = {d: host.listdir(d) for d in _modprobe.CONFIG_DIRS}
    layers = []
    for directory, name in _modprobe.config_files(listing):
        path = directory + "/" + name
        if path != ours:
            layers.append((path, _modprobe.directives(host.read_text(path, default=""))))
    if ours:
        layers = _modprobe.with_ours(layers, ours, _modprobe.directives(content))
    return layers


def shared_plugin_running(host):
    """True when a process of the RDMA shared device plugin runs on the node."""
    for pid in host.listdir("/proc"):
        if pid.isdigit() and (host.try_attr("/proc/%s/comm" % pid) or "").startswith(SHARED_DEVICE_PLUGIN):
            return True
    return False


# -- initramfs probe: the image's cpio member names, read here --------------------------------------------------
# lsinitramfs/lsinitrd unpack the whole image through shell pipelines and cpio (about 15 s for a 35 MB image in an
# emulated VM); reading only the member names, in-process and stopping at the first ib_core module, costs at most
# one pass of decompression (about 1 s natively for that image).  The kernel's initramfs format: newc/crc cpio archives, uncompressed or
# compressed, one after another with NUL padding between them (early microcode + main image).
IB_CORE_FILES = (b"ib_core.ko", b"ib_core.ko.xz", b"ib_core.ko.zst", b"ib_core.ko.gz")
CPIO_MAGICS = (b"070701", b"070702")
CPIO_HEADER_LEN = 110
CPIO_TRAILER = b"TRAILER!!!"
# (magic, method); stdlib decompresses gzip, bzip2, xz and lzma, the others go through their own command
COMPRESSIONS = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x5d\x00\x00", "lzma"),
                (b"\x28\xb5\x2f\xfd", "zstd"), (b"\x02\x21\x4c\x18", "lz4"), (b"\x89LZO", "lzo"))
EXTERNAL_DECOMPRESSORS = {"zstd": ["zstd", "-d", "-c", "-q"], "lz4": ["lz4", "-d", "-c", "-q"],
                          "lzo": ["lzop", "-d", "-c", "-q"]}
_NON_NUL = re.compile(b"[^\x00]")


class InitramfsFormatError(Exception):
    """The image is not what the kernel would unpack, or a segment cannot be decompressed here."""


def _align4(length):
    return (length + 3) & ~3


class CpioNames:
    """Member names of newc/crc cpio archives fed in pieces of any size.

    ``feed(data)`` returns the names completed by ``data``.  With ``one_archive`` the reader stops after the first
    ``TRAILER!!!`` and keeps what follows in ``buf`` (an uncompressed segment followed by another one); otherwise
    archives may follow each other with NUL padding, as inside one decompressed segment.
    """

    def __init__(self, one_archive=False):
        self.one_archive = one_archive
        self.buf = bytearray()
        self.skip = 0            # file data still to drop
        self.in_archive = False  # between a header and the trailer
        self.done = False

    def feed(self, data):
        """Consume ``data``; return the member names whose headers it completed."""
        view = memoryview(data)
        if self.skip and not self.done:
            dropped = min(self.skip, len(view))
            self.skip -= dropped
            view = view[dropped:]
        self.buf += view
        names = []
        buf = self.buf
        while not self.done:
            if not self.in_archive:
                start = _NON_NUL.search(buf)
                if start is None:
                    del buf[:]
                    break
                del buf[:start.start()]
            if len(buf) < CPIO_HEADER_LEN:
                break
            if bytes(buf[:6]) not in CPIO_MAGICS:
                raise InitramfsFormatError("no cpio header where one must start (%r)" % bytes(buf[:6]))
            try:
                filesize = int(bytes(buf[54:62]), 16)
                namesize = int(bytes(buf[94:102]), 16)
            except ValueError as exc:
                raise InitramfsFormatError("a cpio header with non-hex sizes") from exc
            header = _align4(CPIO_HEADER_LEN + namesize)
            if len(buf) < header:
                break
            name = bytes(buf[CPIO_HEADER_LEN:CPIO_HEADER_LEN + namesize]).rstrip(b"\x00")
            del buf[:header]
            if name == CPIO_TRAILER:
                self.in_archive = False
                self.done = self.one_archive
                continue
            self.in_archive = True
            names.append(name)
            body = _align4(filesize)
            if len(buf) >= body:
                del buf[:body]
            else:
                self.skip = body - len(buf)
                del buf[:]
        return names

    def finish(self):
        """Raise unless the data ended at an archive boundary (a truncated image)."""
        if self.in_archive or self.skip:
            raise InitramfsFormatError("the image ends inside a cpio archive")


def _stdlib_decompressor(method):
    import bz2  # pylint: disable=import-outside-toplevel
    import lzma  # pylint: disable=import-outside-toplevel
    import zlib  # pylint: disable=import-outside-toplevel
    if method == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if method == "bzip2":
        return bz2.BZ2Decompressor()
    if method == "xz":
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    if method == "lzma":
        return lzma.LZMADecompressor(lzma.FORMAT_ALONE)
    return None


def initramfs_names(read, decompress, chunk=1 << 20):
    """Yield the member names (bytes) of an initramfs image, segment by segment, as the kernel unpacks it.

    ``read(n)`` reads the image; ``decompress(method, data)`` returns the decompressed bytes of a segment the
    standard library cannot decompress (zstd, lz4, lzo), which then runs to the end of the image.
    """
    pending = b""
    while True:
        start = _NON_NUL.search(pending)
        while start is None:
            pending = read(chunk)
            if not pending:
                return
            start = _NON_NUL.search(pending)
        pending = pending[start.start():]
        while len(pending) < 6:
            more = read(chunk)
            if not more:
                break
            pending += more
        if pending[:6] in CPIO_MAGICS:
            archive = CpioNames(one_archive=True)
            data = pending
            while True:
                yield from archive.feed(data)
                if archive.done:
                    pending = bytes(archive.buf)
                    break
                data = read(chunk)
                if not data:
                    archive.finish()
                    raise InitramfsFormatError("the image ends inside an uncompressed cpio archive")
            continue
        method = next((m for magic, m in COMPRESSIONS if pending.startswith(magic)), None)
        if method is None:
            raise InitramfsFormatError("a segment that is neither cpio nor compressed (%r)" % pending[:6])
        archives = CpioNames()
        decompressor = _stdlib_decompressor(method)
        if decompressor is None:
            rest = [pending]
            while True:
                more = read(chunk)
                if not more:
                    break
                rest.append(more)
            yield from archives.feed(decompress(method, b"".join(rest)))
            archives.finish()
            return
        data = pending
        while True:
            yield from archives.feed(decompressor.decompress(data))
            if decompressor.eof:
                pending = decompressor.unused_data
                archives.finish()
                break
            data = read(chunk)
            if not data:
                raise InitramfsFormatError("the image ends inside a %s stream" % method)


def external_decompressor(module, commands):
    """``decompress(method, data)`` for initramfs_names: the method's own command as a stdin->stdout filter.

    A filter's output does not depend on whose copy runs, so the one on this PATH comes first; a pod auditing a
    mounted host without it uses the host's, chrooted.
    """
    def decompress(method, data):
        argv = list(EXTERNAL_DECOMPRESSORS[method])
        path = module.get_bin_path(argv[0])
        if path is not None:
            argv[0] = path
        elif commands.host.root != "/" and commands.find(argv[0]):
            argv = [module.get_bin_path("chroot", required=True), commands.host.root, commands.find(argv[0])] + argv[1:]
        else:
            raise InitramfsFormatError("the image is %s-compressed and %s is not installed" % (method, argv[0]))
        rc, out, err = module.run_command(argv, data=data, binary_data=True, encoding=None, check_rc=False)
        if rc != 0:
            raise InitramfsFormatError("%s failed (rc=%s): %s" % (argv[0], rc, err.decode("utf-8", "replace").strip()))
        return out
    return decompress


def initramfs_has_ib_core(module, host, commands):
    """Whether the running kernel's initramfs contains ib_core (so it loads before /etc/modprobe.d is read).

    Reads the image's member names (stops at the first ib_core module); an image that cannot be read counts as
    containing it, with a warning: regenerating needlessly costs time, missing it costs the setting.
    """
    release = host.read_attr("/proc/sys/kernel/osrelease")
    if not release:
        return False
    for image in ("/boot/initrd.img-%s" % release, "/boot/initramfs-%s.img" % release):
        if not host.exists(image):
            continue
        try:
            with os.fdopen(host.open_fd(image), "rb") as raw:  # resolved inside the root, as every node read
                return any(os.path.basename(name) in IB_CORE_FILES
                           for name in initramfs_names(raw.read, external_decompressor(module, commands)))
        except (InitramfsFormatError, EnvironmentError) as exc:
            module.warn("cannot list %s (%s); assuming ib_core is in the initramfs" % (image, exc))
            return True
    return False


def initramfs_argv(host, commands):
    """The initramfs regeneration command for the running kernel on this node."""
    release = host.read_attr("/proc/sys/kernel/osrelease") or ""
    if commands.find("update-initramfs"):
        return ["update-initramfs", "-u", "-k", release or "all"]
    if commands.find("dracut"):
        return ["dracut", "-f", "--kver", release] if release else ["dracut", "-f"]
    raise ApplyError("neither update-initramfs nor dracut is installed; cannot put the option into the initramfs")


# what kmod reads from modprobe.d: no hidden files, one line-free name
CONF_NAME = conf_name_pattern(".conf")


def run_module(module):
    params = module.params
    mode = params["mode"]
    conf = params["conf_file"]
    if os.path.dirname(conf) != MODPROBE_DIR or not CONF_NAME.match(os.path.basename(conf)):
        raise InputError("conf_file must be a .conf file directly in %s (kmod reads nothing else there) whose name "
                         "starts with a letter, digit, '_', '@', '+' or '-' and has no blank, newline or NUL "
                         "(kmod skips hidden files), got %r" % (MODPROBE_DIR, conf))
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    result = Result()

    loaded, live = read_live(host)
    cmdline_value = last_value(host.read_attr("/proc/cmdline", default=""), "ib_core.netns_mode")
    cmdline_mode = _netns.mode_of(cmdline_value)

    plan = plan_file(observe_file(host, conf), _netns.render_conf(mode), 0o644)
    settings = _modprobe.settings_of(modprobe_layers(host, conf, plan.content), "ib_core", "netns_mode")
    found = _netns.overrides(settings, conf, mode)
    winner = settings[-1][1] if settings else None
    result.observed.update({"ib_core_loaded": loaded, "live": live,
                            "persisted": mode if not found else found[-1]["mode"],
                            "persisted_by": winner, "cmdline": cmdline_mode})
    result.extra["overrides"] = found
    if found and params["on_conflict"] == "fail":
        raise ConflictError(
            "another modprobe.d file would win over %s when ib_core loads: %s. Remove that setting, choose a conf_file "
            "that sorts after it, or run with on_conflict=ignore; nothing was written" % (
                conf, "; ".join(_netns.describe_override(item, mode) for item in found)),
            {"overriding_file": found[-1]["file"], "overrides": found},
            dict(result.as_dict(with_diff=False), changed=False, actions=[]))
    for item in found:
        module.warn(_netns.describe_override(item, mode))
    if cmdline_mode is not None and cmdline_mode != mode:
        module.warn("the running kernel was booted with ib_core.netns_mode=%s, which kmod applies over modprobe.d; "
                    "unless the boot configuration changes too (rdma.k8s_node.kernel_cmdline), the next boot is %s "
                    "again" % (cmdline_value, cmdline_mode))
    if mode == "exclusive" and shared_plugin_running(host):
        module.warn("the RDMA shared device plugin runs on this node; in exclusive mode it stops seeing RDMA devices "
                    "in pods, so move those workloads to SR-IOV with the RDMA CNI")

    regen = None
    if plan.changed:
        result.add(plan.action(), plan.diff() if module._diff else None)
        wanted = params["initramfs"]
        if wanted == "always" or (wanted == "auto" and initramfs_has_ib_core(module, host, commands)):
            regen = initramfs_argv(host, commands)
            result.add(action("run", " ".join(regen)))

    decision = _netns.live_decision(mode, live, loaded, params["live"])
    switch_argv = ["rdma", "system", "set", "netns", mode]
    if decision == "switch":
        result.add(action("run", " ".join(switch_argv)))
    result.extra["live_switch"] = "not_needed" if decision == "none" else "skipped"
    result.reboot_required = decision != "none"

    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)

    txn = FileTransaction(host, backup=params["backup"])
    backups = txn.apply_all([plan])
    if backups:
        result.extra["backup_files"] = backups
    if regen:
        rc, out, err = commands.run(regen)
        if rc != 0:
            revert(host, [plan])
            raise ApplyError("%s failed (rc=%s): %s; %s was restored" % (" ".join(regen), rc, err.strip(), conf),
                             {"rc": rc, "stdout": out, "stderr": err})
    if decision == "switch":
        rc, dummy_out, err = commands.run_kernel(switch_argv)
        if rc == 0:
            dummy_loaded, now = read_live(host)
            if now != mode:
                raise VerifyError("rdma system set netns %s succeeded but %s reads %s" % (mode, NETNS_PARAM, now))
            result.extra["live_switch"] = "switched"
            result.reboot_required = False
        elif _netns.is_busy(rc, err):
            result.extra["live_switch"] = "refused_busy"
            module.warn("the kernel refused to switch the RDMA netns mode now because non-init network namespaces "
                        "exist (pods, containers); %s is persisted and applies at the next boot" % mode)
        else:
            raise ApplyError("rdma system set netns %s failed (rc=%s): %s; the persistent setting in %s is in place"
                             % (mode, rc, err.strip(), conf), {"rc": rc, "stderr": err})
    return result.as_dict(with_diff=module._diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", required=True, choices=list(_netns.MODES)),
            conf_file=dict(type="path", default="/etc/modprobe.d/rdma-k8s-node-ib_core.conf"),
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
