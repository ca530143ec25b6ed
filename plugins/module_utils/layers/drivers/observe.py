# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``drivers`` layer's observer: written once, used by nvidia_peermem (:func:`collect`) and by ``rdma_facts``
(:func:`facts`, ``layers.drivers``; its top-level ``drivers`` key is that section's ``ofed``, ``gpudirect`` and
``problems``).

:func:`collect` reads what nvidia_peermem's planner (:func:`plan.plan`) reads: the NVIDIA driver banner, the kernel
release, OFED's installed and running version, whether nvidia_peermem is loaded, openibd, the ``modprobe`` the
drop-in runs, the two files the module owns, the modprobe.d lines about nvidia_peermem in kmod's order, the kernel
command line and openibd.service's drop-ins.  A read the module needs only on some paths (a file, the modprobe.d
and drop-in reads) is kept as its error, which the planner raises where the module needs the value, so the module
fails exactly where it failed before the room.  :func:`facts` adds what the audit judges the layer on: all of OFED
(``_ofed.ofed_facts``), the GPUDirect report (``_gpudirect.gpudirect_report``), the loaded modules, the RDMA
devices' drivers and the GPUs; every file is read once.
"""

from __future__ import absolute_import, annotations, division, print_function

import re

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect, _ofed, _persisted
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import _Discovery

MODULE = _gpudirect.MODULE
#: the modprobe our openibd drop-in runs (:func:`_gpudirect.render_openibd_dropin`)
_DROPIN_MODPROBE = re.compile(r"^ExecStartPost=-(/\S*/modprobe) %s$" % MODULE, re.M)
MODULES_LOAD_DIR = "/etc/modules-load.d"
DROPIN_DIR = "/etc/systemd/system/openibd.service.d"
#: the files nvidia_peermem owns by default (the role does not change them)
CONF_FILE = MODULES_LOAD_DIR + "/nvidia-peermem.conf"
DROPIN_FILE = DROPIN_DIR + "/10-rdma-k8s-node-nvidia-peermem.conf"
#: the OFED modules whose version nvidia_peermem reports as OFED's running version
PLAN_OFED_MODULES = ("ib_core", "mlx5_core")
_UNSET = object()


def peermem_loaded(host):
    """Whether the running kernel has nvidia_peermem (``/sys/module/nvidia_peermem``)."""
    return host.isdir("/sys/module/%s" % MODULE)


def _kept(read):
    """``read()``, or the RdmaNodeError it raised: the planner raises it where it needs the value."""
    try:
        return read()
    except RdmaNodeError as exc:
        return exc


def _driver(host, problems):
    """``(nvidia, release)``: raised when unreadable (``problems`` None, the module: before any plan), else the
    error is appended to ``problems`` and kept."""
    values = []
    for path, read in (("/proc/driver/nvidia/version", lambda: _gpudirect.parse_nvidia_version(
            host.read_text("/proc/driver/nvidia/version"))),
            ("/proc/sys/kernel/osrelease", lambda: host.read_attr("/proc/sys/kernel/osrelease"))):
        if problems is None:
            values.append(read())
            continue
        value = _kept(read)
        if isinstance(value, RdmaNodeError):
            problems.append({"path": path, "error": value.msg})
        values.append(value)
    return values


def collect(host, commands, conf=CONF_FILE, dropin=DROPIN_FILE, ofed=None, problems=None):
    """What nvidia_peermem's planner reads: ``{"nvidia", "release", "ofed" ({installed, flavor, version,
    running_version}), "peermem_loaded", "openibd", "modprobe_path" (the ``modprobe`` found on the node, None when
    none; absent without ``commands``), "dropin_modprobe" (:func:`dropin_modprobe`), "files" ({path: FileState or the error reading it} of ``conf`` and
    ``dropin``), "modprobe" (``[[path, directives]]`` of every modprobe.d file in kmod's order with its lines about
    nvidia_peermem), "cmdline" (``/proc/cmdline``), "modprobe_problems", "dropins" (openibd.service's drop-ins in
    systemd's order, ``[[path, ExecStartPost entries]]``, or the error listing them), "dropin_problems"}``.

    ``ofed``: :func:`_ofed.ofed_facts` already read (rdma_facts reads all of it), else the two modules the planner
    reports are read.  ``problems`` None (the module): an unreadable driver banner or kernel release raises, as it
    always did before any plan; a list (rdma_facts): they are appended to it and kept as errors."""
    nvidia, release = _driver(host, problems)
    if ofed is None:
        ofed = _ofed.ofed_facts(host, modules=PLAN_OFED_MODULES)
    observed = {
        "nvidia": nvidia, "release": release,
        "ofed": dict((key, ofed[key]) for key in ("installed", "flavor", "version", "running_version")),
        "peermem_loaded": peermem_loaded(host),
        "openibd": any(host.exists(path) for path in _gpudirect.OPENIBD_UNITS),
        "files": dict((path, _kept(lambda path=path: observe_file(host, path))) for path in (conf, dropin)),
    }
    if commands is not None:
        observed["modprobe_path"] = commands.find("modprobe")
    observed["dropin_modprobe"] = dropin_modprobe(host, observed["files"][dropin])
    modprobe_problems, dropin_problems = [], []
    layers = _persisted.modprobe_facts(_persisted.modprobe_layers(_persisted.Reader(host, modprobe_problems)),
                                       (MODULE,))
    observed.update(
        modprobe=[[item["path"], item["directives"]] for item in layers],
        cmdline=host.try_attr("/proc/cmdline", "", modprobe_problems), modprobe_problems=modprobe_problems,
        dropins=_kept(lambda: [[path, [list(entry) for entry in entries]]
                               for path, entries in _gpudirect.openibd_dropins(host, problems=dropin_problems)]),
        dropin_problems=dropin_problems)
    return observed


def dropin_modprobe(host, state):
    """The modprobe our existing drop-in runs when it is an executable on the node, else None.  The planner keeps
    it: which modprobe a run finds depends on its PATH (sudo's secure_path has /sbin first, systemd's and a pod's
    /host view /usr/sbin), so rewriting the drop-in with the found one would make two runs disagree for ever."""
    if isinstance(state, RdmaNodeError) or not state.exists or not state.content:
        return None
    found = _DROPIN_MODPROBE.search(state.content)
    if found is None:
        return None
    try:
        return found.group(1) if host.is_executable(found.group(1)) else None
    except RdmaNodeError:
        return None


def _file_facts(state):
    if isinstance(state, RdmaNodeError):
        return {"error": state.msg}
    return {"path": state.path, "exists": state.exists, "content": state.content, "mode": state.mode,
            "uid": state.uid, "gid": state.gid, "link": state.link}


def planner_facts(observed):
    """:func:`collect`'s output as plain data (``layers.drivers.observed``): files as dicts, the error reading the
    driver banner, the kernel release or the drop-in directories in ``errors`` (the value None)."""
    out = dict(observed)
    out["files"] = dict((path, _file_facts(state)) for path, state in observed["files"].items())
    out["errors"] = dict((key, observed[key].msg) for key in ("nvidia", "release", "dropins")
                         if isinstance(observed[key], RdmaNodeError))
    for key in out["errors"]:
        out[key] = None
    return out


def facts(host, commands=None, discovery=None, modules=_UNSET):
    """``rdma_facts``' ``layers.drivers``: ``{"ofed" (:func:`_ofed.ofed_facts`), "gpudirect"
    (:func:`_gpudirect.gpudirect_report`), "modules" (the loaded modules, None when ``/proc/modules`` could not be
    read), "devices" (``[{name, driver}]`` of the RDMA devices), "gpus" (their PCI addresses), "observed"
    (:func:`planner_facts`: what nvidia_peermem's planner reads, for its default files), "problems"}``.

    ``discovery``: the one rdma_facts' gather() used, whose devices and GPUs are reused; ``modules``: the list
    gather() read (else ``/proc/modules`` is read here)."""
    problems = []
    ofed = _ofed.ofed_facts(host, problems=problems)
    observed = collect(host, commands, ofed=ofed, problems=problems)
    nvidia = observed["nvidia"] if not isinstance(observed["nvidia"], RdmaNodeError) else None
    release = observed["release"] if not isinstance(observed["release"], RdmaNodeError) else None
    persisted = _gpudirect.peermem_persisted(host, problems)
    dropins = observed["dropins"]
    if isinstance(dropins, RdmaNodeError):
        problems.append({"path": _gpudirect.OPENIBD_UNIT + " drop-ins", "error": dropins.msg})
        dropins = []
    problems.extend(observed["dropin_problems"])
    gpudirect = _gpudirect.gpudirect_report(nvidia, release, observed["peermem_loaded"], observed["openibd"],
                                            dropins, persisted)
    disc = discovery if discovery is not None else _Discovery(host, commands)
    found = disc.found()
    if modules is _UNSET:
        modules = _modules(host, problems)
    return {"ofed": ofed, "gpudirect": gpudirect, "modules": modules,
            "devices": [{"name": device.get("name"), "driver": device.get("driver")} for device in found["devices"]],
            "gpus": [gpu.get("pci_address") for gpu in found["gpus"]],
            "observed": planner_facts(observed), "problems": problems}


def _modules(host, problems):
    try:
        text = host.read_text("/proc/modules")
    except HostReadError as exc:
        problems.append({"path": "/proc/modules", "error": exc.msg})
        return None
    if text is None:
        return None
    return sorted({line.split()[0] for line in text.splitlines() if line.strip()})


def drivers_key(section):
    """rdma_facts' top-level ``drivers`` (``{ofed, gpudirect, problems}``, as older readers take it) from the room's
    section; None when the observer failed."""
    if section is None:
        return None
    return {"ofed": section["ofed"], "gpudirect": section["gpudirect"], "problems": section["problems"]}
