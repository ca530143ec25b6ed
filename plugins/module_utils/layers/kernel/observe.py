# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kernel`` layer's observer: everything kernel_cmdline's planner (:func:`plan.plan`) reads, read once.

:func:`collect` is the one reader, for the module (strict: typed errors, and only what the chosen boot loader mode
needs) and for ``rdma_facts`` (:func:`facts`: whatever the node has, problems listed instead of raised).

What GRUB's files configure is learned the way grub-mkconfig learns it, by sourcing them with ``/bin/sh`` chrooted
into the node (:func:`grub.evaluate_script`); the planner must stay pure, so the observer evaluates everything the
plan needs whatever the request is:

* ``before``: what every file configures now;
* ``prefix``: what the files sourced before the collection's drop-in configure (its input);
* ``suffix``: what the files sourced after the drop-in do with its output, as two evaluations that start from
  sentinel values (:data:`PROBES`) instead: a file that assigns, prepends or appends gives the same template for
  both, and the planner substitutes its own values into it; a file that computes the command line from its words
  gives two different templates, and the planner refuses to guess;
* ``defaults_probe``: the same for ``/etc/default/grub`` itself with its last ``GRUB_CMDLINE_*`` assignments set to
  the sentinels, then every drop-in (the ``grub_default`` mode rewrites those assignments).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, InputError, ParseError, RdmaNodeError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils import _persisted
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import FileState, observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub

GRUB_DEFAULTS = "/etc/default/grub"
GRUB_DEFAULTS_DIR = "/etc/default/grub.d"
GRUB_CFG = "/boot/grub/grub.cfg"
BLS_DIR = "/boot/loader/entries"
KERNEL_CMDLINE_FILE = "/etc/kernel/cmdline"
DEFAULT_DROPIN = "/etc/default/grub.d/99-rdma-k8s-node.cfg"
MODES = ("auto", "grub_dropin", "grub_default", "grubby")
TOOLS = ("grubby", "update-grub", "grub-mkconfig")
READ = object()  # facts(): read it here
#: the sentinel values the suffix and defaults evaluations start from: one word each, then two words each
PROBES = (("@rdma_k8s_node_L1@", "@rdma_k8s_node_D1@"),
          ("@rdma_k8s_node_L2a@ @rdma_k8s_node_L2b@", "@rdma_k8s_node_D2a@ @rdma_k8s_node_D2b@"))


def cpu_vendor(host):
    """``vendor_id`` of the first CPU in /proc/cpuinfo, or None."""
    for line in (host.read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith("vendor_id"):
            return line.split(":", 1)[1].strip()
    return None


def detect_bootloader(observed, requested):
    """The mode to use (pure); ``auto`` looks at what the node has, and an unknown layout is an error, not a guess."""
    if requested != "auto":
        return requested
    if observed["tools"]["grubby"] and observed["bls_entries"]:
        return "grubby"
    if observed["defaults_exists"]:
        return "grub_dropin"
    raise InputError("bootloader=auto found neither grubby with BLS entries (%s) nor %s on this node; "
                     "set bootloader explicitly if GRUB lives elsewhere" % (BLS_DIR, GRUB_DEFAULTS))


def dropin_split(names, dropin):
    """``(before, later)``: the drop-ins grub-mkconfig sources before ``dropin`` and after it (``names`` sorted)."""
    ours = os.path.basename(dropin)
    return [n for n in names if n < ours], [n for n in names if n > ours]


def _evaluate(commands, sources):
    """``[GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT]`` after sourcing ``sources`` (``F:path`` or ``T:text``)."""
    rc, out, err = commands.run(["/bin/sh", "-c", _grub.evaluate_script(), "sh"] + sources, timeout=60)
    if rc != 0:
        raise ApplyError("sourcing the GRUB defaults (%s) failed (rc=%s): %s" % (
            ", ".join(src[2:] if src.startswith("F:") else "a candidate" for src in sources), rc, err.strip()),
            {"rc": rc, "stderr": err})
    values = _grub.parse_evaluation(out)
    return [values["GRUB_CMDLINE_LINUX"], values["GRUB_CMDLINE_LINUX_DEFAULT"]]


def _sentinels(probe):
    return "T:GRUB_CMDLINE_LINUX='%s'; GRUB_CMDLINE_LINUX_DEFAULT='%s'" % probe


def evaluate_grub(commands, names, dropin, defaults_text, mode):
    """The GRUB evaluations (module docstring) for ``mode`` (None: those of both GRUB modes)."""
    files = ["F:%s/%s" % (GRUB_DEFAULTS_DIR, name) for name in names]
    out = {"dropin": dropin, "names": list(names), "before": _evaluate(commands, ["F:" + GRUB_DEFAULTS] + files)}
    if mode in (None, "grub_dropin"):
        before, later = dropin_split(names, dropin)
        head = ["F:" + GRUB_DEFAULTS] + ["F:%s/%s" % (GRUB_DEFAULTS_DIR, name) for name in before]
        out["prefix"] = out["before"] if head == ["F:" + GRUB_DEFAULTS] + files else _evaluate(commands, head)
        tail = ["F:%s/%s" % (GRUB_DEFAULTS_DIR, name) for name in later]
        out["suffix"] = {"files": later, "probes": [_evaluate(commands, head + [_sentinels(p)] + tail)
                                                    for p in PROBES] if later else None}
    if mode in (None, "grub_default"):
        out["defaults_probe"] = None
        try:
            probes = []
            for probe in PROBES:
                text = _grub.set_assignment(defaults_text or "", "GRUB_CMDLINE_LINUX", probe[0], GRUB_DEFAULTS)
                text = _grub.set_assignment(text, "GRUB_CMDLINE_LINUX_DEFAULT", probe[1], GRUB_DEFAULTS)
                probes.append(_evaluate(commands, ["T:" + text] + files))
            out["defaults_probe"] = probes
        except ParseError as exc:
            if mode is not None:
                raise
            out["defaults_error"] = exc.msg  # the plan meets it again when it reads the assignments
    return out


def _grubby(commands):
    rc, out, err = commands.run(["grubby", "--info=ALL"])
    if rc != 0:
        raise ApplyError("grubby --info=ALL failed: %s" % err.strip(), {"rc": rc, "stderr": err})
    return [e for e in _grub.parse_grubby_info(out) if e["kernel"]]


def collect(host, commands, requested="auto", dropin=DEFAULT_DROPIN, live=None, vendor=None, problems=None):
    """Everything kernel_cmdline's planner reads: ``{"live" (the running kernel's arguments before ``--``),
    "cpu_vendor", "tools" ({tool: found}), "bls_entries", "defaults_exists", "bootloader" (the mode ``requested``
    resolves to, None when it cannot), "files" ({path: FileState}: /etc/default/grub, ``dropin``,
    /etc/kernel/cmdline), "grub_cfg" (the first ``linux`` line's arguments of grub.cfg, None without one),
    "grub" (:func:`evaluate_grub`, None when not read), "grubby" (boot entries, None when not read)}``.

    With ``problems`` None (the module) only what the resolved mode needs is read and failures raise, in the
    module's order; with a list (the facts) every source the node has is read, and a failure is ``<what>_error``
    plus a ``problems`` entry.  ``live`` and ``vendor``: /proc/cmdline's text and the CPU vendor already read."""
    strict = problems is None
    out = {"live": _cmdline.kernel_args(host.read_attr("/proc/cmdline", default="") if live is None else live),
           "cpu_vendor": cpu_vendor(host) if vendor is None and strict else vendor,
           "tools": dict((tool, bool(commands.find(tool))) for tool in TOOLS),
           "bls_entries": any(name.endswith(".conf") for name in host.listdir(BLS_DIR)),
           "defaults_exists": host.exists(GRUB_DEFAULTS), "grub": None, "grubby": None, "bootloader": None}
    try:
        out["bootloader"] = detect_bootloader(out, requested)
    except InputError as exc:
        if strict:
            raise
        out["bootloader_error"] = exc.msg
    mode = out["bootloader"] if strict else None
    out["files"] = dict((path, observe_file(host, path)) for path in (GRUB_DEFAULTS, dropin, KERNEL_CMDLINE_FILE))
    lines = _grub.grub_cfg_linux_lines(host.read_text(GRUB_CFG) or "")
    out["grub_cfg"] = lines[0]["args"] if lines else None
    if mode in (None, "grub_dropin", "grub_default") and (strict or out["defaults_exists"]):
        names = sorted(n for n in host.listdir(GRUB_DEFAULTS_DIR) if n.endswith(".cfg"))
        try:
            out["grub"] = evaluate_grub(commands, names, dropin, out["files"][GRUB_DEFAULTS].content, mode)
        except RdmaNodeError as exc:
            if strict:
                raise
            out["grub_error"] = exc.msg
            problems.append({"path": GRUB_DEFAULTS, "error": exc.msg})
    if mode == "grubby" or (not strict and out["tools"]["grubby"]):
        try:
            out["grubby"] = _grubby(commands)
        except RdmaNodeError as exc:
            if strict:
                raise
            out["grubby_error"] = exc.msg
            problems.append({"path": "grubby --info=ALL", "error": exc.msg})
    return out


def file_facts(state):
    """A FileState as plain data (content included), for the facts; :func:`file_state` reads it back."""
    return {"path": state.path, "exists": state.exists, "content": state.content, "mode": state.mode,
            "uid": state.uid, "gid": state.gid, "link": state.link}


def file_state(item):
    """The FileState of a :func:`file_facts` entry."""
    return FileState(item["path"], item["exists"], item["content"], item["mode"], item["uid"], item["gid"],
                     item.get("link"))


def planner_input(got):
    """:func:`collect`'s result as plain data (``layers.kernel.observed``)."""
    out = dict(got)
    out["files"] = dict((path, file_facts(state)) for path, state in got["files"].items())
    return out


def facts(host, commands=None, cmdline=READ, boot=READ, vendor=READ):
    """``rdma_facts``' ``layers.kernel``: ``live`` (the running kernel's arguments as ``kernel_cmdline.args`` has
    them), ``persisted`` (the default boot entry's, as ``persisted.kernel_cmdline``), ``cpu_vendor``, ``observed``
    (what kernel_cmdline's planner reads, :func:`collect` with the default drop-in; None when it could not be read,
    absent without ``commands``)
    and ``problems``.  ``cmdline``, ``boot`` and ``vendor`` are what rdma_facts already read (``kernel_cmdline``,
    ``persisted.kernel_cmdline``, ``cpu_vendor``); each is read here when not given."""
    problems = []
    if boot is READ:
        boot = _persisted.boot_cmdline(_persisted.Reader(host, problems), host.try_attr("/proc/sys/kernel/osrelease"))
    if cmdline is READ:
        raw = host.read_attr("/proc/cmdline")
        cmdline = _cmdline.parse(raw) if raw is not None else None
    vendor = cpu_vendor(host) if vendor is READ else vendor
    out = {"live": cmdline["args"] if cmdline else None, "persisted": boot, "cpu_vendor": vendor, "problems": problems}
    if commands is None:
        return out  # no tools: nothing of the planner's input (no kernel.config, as for older facts)
    out["observed"] = None
    try:
        got = collect(host, commands, live=cmdline["raw"] if cmdline else "", vendor=vendor, problems=problems)
    except RdmaNodeError as exc:
        problems.append({"path": "layers.kernel", "error": exc.msg})
        return out
    out["observed"] = planner_input(got)
    return out
