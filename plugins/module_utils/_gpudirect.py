# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUDirect RDMA: which kernel path a node can use and why a load of nvidia_peermem failed.  Pure.

Two kernel paths let an RDMA NIC read and write GPU memory:

* **DMA-BUF** (what NVIDIA recommends): the open GPU kernel modules export GPU memory as dma-buf and the RDMA core
  imports it (Linux 5.12 and later).  No extra module, no dependency on MLNX/DOCA-OFED.
* **nvidia_peermem** (legacy): a module of the NVIDIA driver that registers with the MLNX/DOCA-OFED peer-memory API
  (``ib_register_peer_memory_client``).  Mainline ib_core does not export that API, so the module only works when
  the NVIDIA driver was *built* after OFED was installed; otherwise its init is ``return -EINVAL``, and a module
  built against another OFED than the one running fails the same way (the symbol CRCs disagree).

``/proc/driver/nvidia/version`` tells the flavour: ``NVIDIA UNIX Open Kernel Module for x86_64  <ver> ...`` for the
open modules, ``NVIDIA UNIX x86_64 Kernel Module  <ver> ...`` for the proprietary ones.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe, _ofed, _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError

METHODS = ("auto", "peermem", "dmabuf")
MODULE = "nvidia_peermem"
OPENIBD_UNIT = "openibd.service"
#: where openibd is installed (DOCA-OFED and MLNX_OFED ship the unit, older releases the init script)
OPENIBD_UNITS = ("/etc/systemd/system/openibd.service", "/usr/lib/systemd/system/openibd.service",
                 "/lib/systemd/system/openibd.service", "/etc/init.d/openibd")
#: Linux gained RDMA dma-buf import (ib_umem_dmabuf) in 5.12
DMABUF_MIN_KERNEL = (5, 12)

_BANNER = re.compile(r"NVRM version:\s+NVIDIA UNIX\s+(?:(Open) Kernel Module for (\S+)|(\S+) Kernel Module)\s+"
                     r"(\d+(?:\.\d+)+)")
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


def parse_nvidia_version(text):
    """``/proc/driver/nvidia/version`` as ``{version, open, arch}``; None when the file is absent (driver not loaded).

    Raises nothing on an unknown banner: ``{version: None, open: None}`` so callers can say it is unrecognised.
    """
    if text is None:
        return None
    match = _BANNER.search(text)
    if not match:
        return {"version": None, "open": None, "arch": None}
    return {"version": match.group(4), "open": match.group(1) == "Open", "arch": match.group(2) or match.group(3)}


def kernel_version(release):
    """``(major, minor, patch)`` of a kernel release such as ``6.1.0-28-amd64``; None when it does not parse."""
    match = _RELEASE.match(release or "")
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def dmabuf_capable(nvidia, release):
    """``(capable, reason)``: DMA-BUF needs the open GPU kernel modules and Linux >= 5.12."""
    if nvidia is None:
        return False, "the NVIDIA driver is not loaded (no /proc/driver/nvidia/version)"
    if nvidia.get("open") is None:
        return False, "the NVIDIA driver banner in /proc/driver/nvidia/version is not recognised"
    if not nvidia["open"]:
        return False, "the NVIDIA driver %s is the proprietary kernel module; DMA-BUF needs the open GPU kernel modules" % (
            nvidia["version"])
    version = kernel_version(release)
    if version is None:
        return False, "the kernel release %r does not parse" % (release,)
    if version[:2] < DMABUF_MIN_KERNEL:
        return False, "kernel %s is older than %d.%d, the first with RDMA dma-buf import" % ((release,) + DMABUF_MIN_KERNEL)
    return True, "open GPU kernel modules %s on kernel %s" % (nvidia["version"], release)


def choose_method(requested, nvidia, release, ofed_present):
    """``(method, reason)`` for ``requested`` (auto|peermem|dmabuf), or raise when the node cannot do it.

    ``auto`` picks DMA-BUF when the node is capable, else nvidia_peermem - but only where the OFED peer-memory API
    can exist (MLNX/DOCA-OFED installed); with neither, there is no GPUDirect RDMA path to set up.
    """
    if requested not in METHODS:
        raise InputError("method must be one of %s, got %r" % (", ".join(METHODS), requested))
    capable, why = dmabuf_capable(nvidia, release)
    if requested == "dmabuf":
        if not capable:
            raise ConflictError("DMA-BUF GPUDirect RDMA is not possible here: %s" % why, {"dmabuf_capable": False})
        return "dmabuf", why
    if requested == "peermem":
        return "peermem", "requested"
    if capable:
        return "dmabuf", why
    if not ofed_present:
        raise ConflictError(
            "no GPUDirect RDMA path: DMA-BUF is not possible (%s) and nvidia_peermem needs MLNX/DOCA-OFED's "
            "peer-memory API, which inbox ib_core does not have; install DOCA-OFED (rdma.k8s_node.doca_ofed) and "
            "rebuild the NVIDIA kernel modules after it, or use the open GPU kernel modules" % why,
            {"dmabuf_capable": False, "ofed": False})
    return "peermem", why


def diagnose_load(rc, stderr, module=MODULE, ofed_present=True):
    """``{kind, message}`` for a failed ``modprobe <module>``; kinds: einval, missing, unknown_symbol, other.

    The message names the cause and the fix; kmod's own words are in ``stderr``.
    """
    text = (stderr or "").strip()
    if "Invalid argument" in text:
        cause = ("%s failed to load with EINVAL (Invalid argument): the NVIDIA driver's %s was built without the "
                 "MLNX/DOCA-OFED peer-memory symbols (ib_register_peer_memory_client) - the NVIDIA kernel modules were "
                 "built before DOCA-OFED was installed, or against another OFED version than the one running "
                 "(dmesg then says 'disagrees about version of symbol')" % (module, module))
        if not ofed_present:
            cause += "; no MLNX/DOCA-OFED is installed at all, and inbox ib_core has no peer-memory API"
        fix = ("rebuild the NVIDIA kernel modules after DOCA-OFED (dkms remove nvidia/<version> --all && dkms install "
               "nvidia/<version>, or reinstall the driver package), then run this again; or use DMA-BUF with the open "
               "GPU kernel modules (method=dmabuf)")
        return {"kind": "einval", "message": "%s. Fix: %s. Nothing was persisted." % (cause, fix)}
    if "not found in directory" in text:
        return {"kind": "missing", "message": (
            "%s is not installed for the running kernel (%s): install an NVIDIA driver (R470 or later ships "
            "nvidia-peermem) built for this kernel. Nothing was persisted." % (module, text))}
    if "Unknown symbol" in text:
        return {"kind": "unknown_symbol", "message": (
            "%s needs symbols the running ib_core does not export (%s): it was built against MLNX/DOCA-OFED but the "
            "inbox RDMA modules are loaded - restart openibd (or reboot) so OFED's modules run, or rebuild the NVIDIA "
            "kernel modules against what is installed. Nothing was persisted." % (module, text))}
    return {"kind": "other", "message": "modprobe %s failed (rc=%s): %s. Nothing was persisted." % (module, rc, text)}


def render_modules_load(module=MODULE):
    """The modules-load.d file: systemd-modules-load loads the module at boot (with its dependencies)."""
    return ("# Managed by rdma.k8s_node.nvidia_peermem: GPUDirect RDMA through the OFED peer-memory API.\n"
            "# Written only after %s loaded on this node (a module that cannot load fails every boot).\n"
            "%s\n" % (module, module))


def render_openibd_dropin(modprobe, module=MODULE):
    """The openibd drop-in: openibd (re)loads the RDMA stack and takes nvidia_peermem down with ib_core, so load it
    again afterwards (azhpc-images does the same); ``-`` keeps openibd active if that fails."""
    return ("# Managed by rdma.k8s_node.nvidia_peermem: openibd restarts the RDMA stack and unloads %s with\n"
            "# ib_core; load it again once OFED's modules are up.\n"
            "[Service]\n"
            "ExecStartPost=-%s %s\n" % (module, modprobe, module))


def active_path(method, dmabuf_ok, peermem_loaded):
    """The GPUDirect RDMA path in effect: peermem when the module is loaded, else dmabuf when the node is capable and
    DMA-BUF was chosen, else none."""
    if peermem_loaded:
        return "peermem"
    if method == "dmabuf" and dmabuf_ok:
        return "dmabuf"
    return "none"


def gpudirect_facts(host, problems=None):
    """Read-only view for rdma_facts: ``{active, peermem_loaded, peermem_persisted, dmabuf_capable, dmabuf_reason,
    nvidia_driver: {version, open}, kernel_release}``.  ``active`` is what a node would use now: peermem when
    loaded, else dmabuf when capable, else none."""
    problems = problems if problems is not None else []
    nvidia = parse_nvidia_version(host.try_attr("/proc/driver/nvidia/version", None, problems))
    release = host.try_attr("/proc/sys/kernel/osrelease", None, problems)
    loaded = host.isdir("/sys/module/%s" % MODULE)
    persisted = peermem_persisted(host, problems)
    return gpudirect_report(nvidia, release, loaded, any(host.exists(path) for path in OPENIBD_UNITS),
                            openibd_dropins(host, problems=problems), persisted)


def peermem_persisted(host, problems=None):
    """Whether a modules-load.d file names nvidia_peermem (unreadable files are appended to ``problems``)."""
    persisted = False
    for directory in ("/etc/modules-load.d", "/run/modules-load.d", "/usr/local/lib/modules-load.d",
                      "/usr/lib/modules-load.d", "/lib/modules-load.d"):
        for name in host.listdir(directory):
            if name.endswith(".conf"):
                text = host.try_attr("%s/%s" % (directory, name), "", problems)
                words = [line.split("#", 1)[0].split(";", 1)[0].strip().replace("-", "_") for line in text.splitlines()]
                persisted = persisted or MODULE in words
    return persisted


def gpudirect_report(nvidia, release, loaded, openibd, dropins, persisted):
    """:func:`gpudirect_facts`' dict from what was read (``dropins``: :func:`openibd_dropins` without ours); pure."""
    capable, reason = dmabuf_capable(nvidia, release)
    return {
        "active": active_path("dmabuf", capable, loaded),
        "openibd": openibd,
        "openibd_dropins": [{"path": path, "entries": [list(entry) for entry in entries]} for path, entries in dropins],
        "peermem_loaded": loaded,
        "peermem_persisted": persisted,
        "dmabuf_capable": capable,
        "dmabuf_reason": reason,
        "nvidia_driver": {"version": nvidia["version"], "open": nvidia["open"]} if nvidia else None,
        "kernel_release": release,
    }


def openibd_dropins(host, ours=None, text=None, problems=None):
    """openibd.service's drop-ins in systemd's order as ``[(path, entries)]`` (:func:`_systemd.parse_unit` entries of
    ``[Service] ExecStartPost=`` only); with ``ours``, our drop-in is among them as ``text`` will be.  A drop-in that
    links to /dev/null reads as empty; one that cannot be read is appended to ``problems`` and read as empty."""
    listing = dict((directory, host.listdir(directory)) for directory in _systemd.dropin_dirs(OPENIBD_UNIT))
    if ours:
        directory, name = ours.rsplit("/", 1)
        listing[directory] = sorted(set(listing.get(directory, [])) | {name})
    out = []
    for path in _systemd.dropin_order(listing, OPENIBD_UNIT):
        if path == ours:
            body = text or ""
        elif host.readlink(path) == "/dev/null":
            body = ""
        else:
            body = host.try_attr(path, "", problems) if problems is not None else host.read_text(path, default="")
        out.append((path, [entry for entry in _systemd.parse_unit(body)
                           if entry[0] == "Service" and entry[1] == "ExecStartPost"]))
    return out


def drivers_facts(host):
    """``{ofed: <_ofed.ofed_facts>, gpudirect: <gpudirect_facts>, problems}``, from files only (an audit pod with the
    host mounted can read it): ``rdma_facts``' ``drivers`` key, which rdma_facts now takes from the drivers room's
    observer (``layers/drivers/observe.py``, the same readers), for callers without the room."""
    problems = []
    return {"ofed": _ofed.ofed_facts(host, problems=problems), "gpudirect": gpudirect_facts(host, problems),
            "problems": problems}


# -- what keeps the persisted nvidia_peermem from loading at boot ---------------------------------------------------
#: an install command that still inserts the module: ``modprobe --ignore-install <module>`` (MLNX_OFED's pattern)
_CHAINS = re.compile(r"(^|[\s;&|(])(\S*/)?modprobe\s+([^;&|]*\s)?(-i|--ignore-install)(\s[^;&|]*)?\snvidia[-_]peermem(\s|$)")


def dropin_setting(text):
    """``[(section, key, value)]`` our openibd drop-in writes (:func:`render_openibd_dropin`'s text)."""
    return [(section, key, value) for section, key, value, dummy in _systemd.parse_unit(text)]


def peermem_overrides(layers, cmdline=None, dropins=None, dropin=None, dropin_text=None, module=MODULE):
    """What keeps the persisted ``module`` from loading at boot, pure.

    ``layers``: modprobe.d as ``[(path, directives)]`` in kmod's order; ``cmdline``: ``(source, text)`` of the kernel
    command line; ``dropins``: openibd.service's drop-ins ``[(path, text or parsed entries)]`` in systemd's order with
    ours (``dropin``, as ``dropin_text`` will be) among them, or None when no drop-in is written.  Returns
    ``[{file, line, kind, value, what}]``: ``blacklist`` (kmod's blacklist, which systemd-modules-load applies: the
    modules-load.d file is skipped at boot), ``install`` (an install command that does not insert the module),
    ``masked``/``reset`` (our openibd drop-in is not read, or a later drop-in empties ``ExecStartPost=``).
    """
    found = [{"file": path, "line": line, "kind": "blacklist", "value": None, "what": "modules-load.d"}
             for path, line in _modprobe.blacklisted(layers, module, cmdline)]
    install = _modprobe.install_command(layers, module)
    if install is not None and not _CHAINS.search(install[2]):
        found.append({"file": install[0], "line": install[1], "kind": "install", "value": install[2],
                      "what": "modules-load.d"})
    if dropins is not None and dropin is not None:
        for item in _systemd.dropin_overrides(dropins, dropin, dropin_setting(dropin_text or "")):
            found.append({"file": item["file"], "line": item["line"], "kind": item["kind"], "value": item["value"],
                          "what": OPENIBD_UNIT})
    return found


def with_our_dropin(dropins, ours, entries):
    """``dropins`` (``[(path, entries)]`` in systemd's order, as rdma_facts reports them) with our drop-in ``ours`` put
    in as ``entries``: it replaces a file of its name from a less important directory, is left out when a more
    important one has that name (systemd reads that one), and sorts by name among the others."""
    dirs = _systemd.dropin_dirs(OPENIBD_UNIT)
    name = ours.rsplit("/", 1)[-1]
    rank = dirs.index(ours.rsplit("/", 1)[0]) if ours.rsplit("/", 1)[0] in dirs else len(dirs)
    kept = []
    for path, found in dropins:
        if path.rsplit("/", 1)[-1] == name and path != ours:
            directory = path.rsplit("/", 1)[0]
            if (dirs.index(directory) if directory in dirs else len(dirs)) < rank:
                return list(dropins)
            continue
        if path != ours:
            kept.append((path, found))
    kept.append((ours, entries))
    return sorted(kept, key=lambda item: item[0].rsplit("/", 1)[-1])


def describe_peermem_override(item, dropin=None, module=MODULE):
    """One line for a warning or an error."""
    where = "%s%s" % (item["file"], ":%s" % item["line"] if item["line"] else "")
    if item["kind"] == "blacklist":
        return ("%s blacklists %s: systemd-modules-load skips it at boot (\"deny-listed (by kmod)\"), so the modules-load.d "
                "file does not load it (an explicit modprobe still would)" % (where, module))
    if item["kind"] == "install":
        return "%s replaces loading %s with '%s', which does not insert it" % (where, module, item["value"])
    return _systemd.describe_dropin_override(dict(item, key="ExecStartPost"), dropin)
