# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_peermem's planner: its options + :func:`observe.collect`'s output -> the GPUDirect path, the load, the file
plans, the overrides and the result the module returns; pure.

It raises what the module raises, with the partial result the module fails with: the method the node cannot do
(``choose_method``), a read the plan needs that failed (HostReadError), what keeps the persisted module from loading
at boot with ``on_conflict=fail`` (ConflictError).  Check mode returns :func:`plan`'s result; :func:`apply.apply`
runs exactly its load and file plans; the audit runs it on ``layers.drivers.observed`` (``gpudirect.config``).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import posixpath

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect, _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ConflictError, HostReadError, InputError, RdmaNodeError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import conf_name_pattern, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers.observe import (
    CONF_FILE, DROPIN_DIR, DROPIN_FILE, MODULE, MODULES_LOAD_DIR,
)

# what systemd and kmod read from a conf.d directory: no hidden files, one line-free name
CONF_NAME = conf_name_pattern(".conf")
#: the modprobe our drop-in runs where none is found on the node
DEFAULT_MODPROBE = "/sbin/modprobe"


def argument_spec():
    """nvidia_peermem's argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        method=dict(type="str", default="auto", choices=list(_gpudirect.METHODS)),
        persist=dict(type="bool", default=True),
        openibd_dropin=dict(type="str", default="auto", choices=["auto", "always", "never"]),
        on_conflict=dict(type="str", default="fail", choices=["fail", "ignore"]),
        conf_file=dict(type="path", default=CONF_FILE),
        dropin_file=dict(type="path", default=DROPIN_FILE),
        backup=dict(type="bool", default=False),
        host_root=dict(type="path", default="/"),
    )


def owned_path(path, directory, option):
    """A ``.conf`` file directly in ``directory`` (where systemd reads it), or an InputError."""
    if posixpath.dirname(path) != directory or not CONF_NAME.match(posixpath.basename(path)):
        raise InputError("%s must be a .conf file directly in %s whose name starts with a letter, digit, '_', '@', "
                         "'+' or '-' and has no blank, newline or NUL (systemd skips hidden files), got %r"
                         % (option, directory, path))
    return path


def paths(params):
    """``(conf, dropin)``: the module's two files, checked before any I/O."""
    return (owned_path(params["conf_file"], MODULES_LOAD_DIR, "conf_file"),
            owned_path(params["dropin_file"], DROPIN_DIR, "dropin_file"))


def _value(value):
    """An observed value, or the error reading it raised (the module fails where it needs the value)."""
    if isinstance(value, Exception):
        raise value
    return value


def overrides(observed, dropin, dropin_text):
    """:func:`_gpudirect.peermem_overrides` on the observed modprobe.d, command line and, when our drop-in is
    written (``dropin_text``), openibd.service's drop-ins with ours among them as it will be.  A file the node could
    not read is a HostReadError."""
    problems = list(observed["modprobe_problems"])
    dropins = None
    if dropin_text is not None:
        problems += observed["dropin_problems"]
        ours = [entry for entry in _systemd.parse_unit(dropin_text)
                if entry[0] == "Service" and entry[1] == "ExecStartPost"]
        dropins = _gpudirect.with_our_dropin(list(_value(observed["dropins"])), dropin, ours)
    if problems:
        raise HostReadError("cannot read %s: %s" % (problems[0]["path"], problems[0]["error"]), {"problems": problems})
    return _gpudirect.peermem_overrides(observed["modprobe"], ("/proc/cmdline", observed["cmdline"]), dropins, dropin,
                                        dropin_text)


def plan(params, observed, diff=False):
    """The module's plan: ``{"result" (the Result check mode returns; ``gpudirect``, ``observed``, ``overrides``,
    ``daemon_reload_required``, ``backup_files`` in its extra), "gpudirect" (that result's dict), "method",
    "capable", "load" (modprobe nvidia_peermem first), "files" (the FilePlans), "warnings", "ofed_present"}``;
    ``gpudirect.active`` is left to the caller (the path before or after the run).

    ``params``: the module's options (``conf_file`` and ``dropin_file`` as :func:`paths` checked them)."""
    conf, dropin = params["conf_file"], params["dropin_file"]
    result = Result()
    nvidia, release = _value(observed["nvidia"]), _value(observed["release"])
    ofed = observed["ofed"]
    ofed_present = ofed["installed"] or bool(ofed["running_version"])
    loaded, openibd = observed["peermem_loaded"], observed["openibd"]
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
                    dropin: _gpudirect.render_openibd_dropin(observed.get("dropin_modprobe") or observed["modprobe_path"]
                                                             or DEFAULT_MODPROBE)
                    if want_dropin else None}
    else:
        contents = {conf: None, dropin: None}
    files = []
    if method == "dmabuf" or params["persist"]:
        files = [plan_file(_value(observed["files"][path]), text, 0o644) for path, text in contents.items()]
    result.observed["files"] = dict((item.path, item.observed.as_dict()) for item in files)
    found = overrides(observed, dropin, contents[dropin]) if method == "peermem" and params["persist"] else []
    result.extra["overrides"] = found
    if found and params["on_conflict"] == "fail":
        raise ConflictError(
            "%s would not be loaded at boot as persisted: %s. Remove that line or file, or run with "
            "on_conflict=ignore; nothing was loaded or written" % (
                MODULE, "; ".join(_gpudirect.describe_peermem_override(item, dropin) for item in found)),
            {"overrides": found}, dict(result.as_dict(with_diff=False), changed=False, actions=[]))
    warnings = [_gpudirect.describe_peermem_override(item, dropin) for item in found]

    load = method == "peermem" and not loaded
    if load:
        result.add(action("load_module", MODULE))
    for item in files:
        if item.changed:
            result.add(item.action(), item.diff() if diff else None)
    result.extra["daemon_reload_required"] = any(item.changed for item in files if item.path == dropin)
    if method == "dmabuf" and loaded:
        warnings.append("nvidia_peermem is loaded although DMA-BUF is used; it is left loaded (unloading it under "
                        "running jobs is unsafe) and no longer loaded at boot by this module's files")
    return {"result": result, "gpudirect": gpudirect, "method": method, "capable": capable, "load": load,
            "files": files, "warnings": warnings, "ofed_present": ofed_present}
