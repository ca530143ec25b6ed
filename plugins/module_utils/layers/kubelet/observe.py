# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``kubelet`` layer's observer: everything kubelet_topology's planner reads, read once by :func:`collect` for the
module and for ``rdma_facts`` (:func:`facts`, ``layers.kubelet``; ``runtime.kubelet`` is :func:`report_of` it).

What is read: the kubelet's version (``kubelet --version``, k3s's/rke2's binary), how it starts (:mod:`.host`, or
:mod:`.rancher` on k3s/rke2), its config file and drop-ins as layers with their texts, the CPU and memory manager
checkpoints, the CPUs online and the NUMA nodes, and the files the plan may write (the collection's drop-in under
each name it can take, the config file, the environment files that set the kubelet's flags).  Nothing here writes.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import FileState, observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import config as kub

DEFAULT_CONFIG = kh.DEFAULT_CONFIG
DEFAULT_SERVICE = "kubelet"
#: :func:`collect`'s ``pid`` when the caller has not looked: systemd's MainPID of the unit, else the first ``kubelet``
FIND = object()


def main_pid(commands, service=DEFAULT_SERVICE):
    """systemd's MainPID of ``service``, or None."""
    rc, out, dummy_err = commands.run_kernel(["systemctl", "show", service, "-p", "MainPID", "--value"])
    if rc == 0 and out.strip().isdigit() and int(out.strip()):
        return int(out.strip())
    return None


def read_version(host, commands, binary=None, service=DEFAULT_SERVICE, rancher=False):
    """The kubelet's version ``(major, minor, patch)`` from ``<binary> --version`` (``rancher``: k3s's/rke2's binary
    its unit runs, which names the kubelet's version).  ApplyError when the kubelet is not there or does not answer
    (the module's refusal), ParseError when its answer is not a version."""
    if rancher:
        if not binary or not host.is_executable(binary):
            raise ApplyError("%s: the program its unit runs (%s) is not on the node" % (service, binary))
    elif not commands.find("kubelet"):
        raise ApplyError("kubelet is not installed on the node")
    rc, out, err = commands.run([binary or "kubelet", "--version"])
    if rc != 0:
        raise ApplyError("%s --version failed: %s" % (binary or "kubelet", (err or out).strip()))
    return kub.parse_kubelet_version(out)


def state_policy(text):
    """The ``policyName`` of a manager checkpoint's text (None without one, ``unreadable`` when it is not JSON)."""
    if text is None:
        return None
    try:
        return json.loads(text).get("policyName")
    except (ValueError, AttributeError, RecursionError):
        return "unreadable"


def numa_nodes(host):
    return set(int(n[4:]) for n in host.listdir("/sys/devices/system/node") if n.startswith("node") and n[4:].isdigit())


def cpus_online(host):
    text = host.read_attr("/sys/devices/system/cpu/online")
    return kub.parse_cpuset(text, "/sys/devices/system/cpu/online") if text else set()


def file_paths(line, config_file, layers, dropin_name):
    """The files the plan may write or delete: the collection's drop-in under every name it can take
    (``config.own_names``) in the drop-in directory, its drop-ins found there, the config file, and the environment
    files that set the kubelet's flags (on_conflict=override edits them)."""
    paths = set()
    if line.get("config_dir"):
        paths.update("%s/%s" % (line["config_dir"].rstrip("/"), name) for name in kub.own_names(dropin_name))
    paths.update(layer["path"] for layer in layers or [] if layer.get("ours"))
    if config_file:
        paths.add(config_file)
    for flag in line["flags"]:
        origin = flag.get("origin") or {}
        if origin.get("how") == "EnvironmentFile" and origin.get("file"):
            paths.add(origin["file"])
    return sorted(paths)


def collect(host, commands, pid=FIND, config=DEFAULT_CONFIG, dropin_name=kub.DEFAULT_DROPIN_NAME,
            problems=None):  # pylint: disable=too-many-arguments,too-many-locals,too-many-branches
    """Everything kubelet_topology's planner (:func:`plan.plan`) reads: ``{"version" (a tuple or None), "service",
    "line" (:func:`host.command_line` or :func:`rancher.command_line`), "config_file", "layers" (the config file
    and drop-ins, without the flags; None when they could not be read), "documents" ({path: read_document}),
    "layers_error", "cpus_online", "numa_nodes", "state_files" ({path: text or None}), "files" ({path: FileState}
    of :func:`file_paths`)}``.

    ``pid``: the kubelet's process (None: none runs); by default systemd's MainPID of kubelet.service, else the first
    process named ``kubelet`` (k3s/rke2: that process).  ``config``: the config file when nothing says how the kubelet
    starts (the module's option).  With ``problems`` None (the module) a kubelet that is not installed raises, and an
    unreadable config or drop-in is ``layers_error`` (the exception: the plan raises it once it knows the target);
    with a list (the facts), what cannot be read is None and the list says why."""
    strict = problems is None
    out = {"version": None, "service": DEFAULT_SERVICE, "layers": None, "documents": {}, "layers_error": None}

    def read_line(found):
        if found:
            return kr.command_line(host, found, kh.find_pid(host) if pid is FIND else pid)
        return kh.command_line(host, (main_pid(commands) or kh.find_pid(host)) if pid is FIND else pid)

    if strict:
        rancher = kr.detect(host)
        if not rancher:  # the module asks for the version first: a node without a kubelet fails saying so
            out["version"] = read_version(host, commands)
        line = read_line(rancher)
        if rancher:
            out["version"] = read_version(host, commands, line["rancher"]["binary"], rancher["service"], True)
    else:
        try:
            rancher = kr.detect(host)  # k3s/rke2: the kubelet's flags come from their config files and unit
            line = read_line(rancher)
        except RdmaNodeError as exc:
            problems.append({"what": "kubelet command line", "error": exc.msg})
            rancher = None
            line = {"running": bool(pid), "pid": pid, "unit": None, "source": None, "config": None,
                    "config_dir": None, "flags": [], "flags_from": None, "live_flags": None, "problems": []}
        problems.extend(line["problems"])
        if commands is not None:
            try:
                out["version"] = read_version(host, commands, (line.get("rancher") or {}).get("binary"),
                                              out["service"] if not rancher else rancher["service"], rancher=bool(rancher))
            except ApplyError as exc:  # no kubelet, or it does not answer: the module refuses the node so
                out["version_error"] = exc.msg
            except RdmaNodeError as exc:
                problems.append({"what": "kubelet --version", "error": exc.msg})
    if rancher:
        out["service"] = rancher["service"]
    out["pid"] = line["pid"] if pid is FIND else pid
    out["line"] = line
    config_file = line["config"] or (config if line["source"] in (None, "env files") else None)
    out["config_file"] = config_file
    read_problems = None if strict else []
    try:
        if line.get("rancher"):
            layers, documents = kr.config_layers(host, line, dropin_name, read_problems)
        else:
            layers, documents = kh.config_layers(host, config_file, line["config_dir"], dropin_name, read_problems)
        out["layers"], out["documents"] = layers, documents
    except RdmaNodeError as exc:
        if strict:
            out["layers_error"] = exc
        else:  # an unreadable config is a problem of this section, not of rdma_facts
            read_problems.append({"what": "kubelet config", "error": exc.msg})
    if read_problems:
        out["layers"] = None
        out["read_problems"] = read_problems
    out["state_files"] = dict((path, host.read_text(path)) for path in kub.STATE_FILES.values())
    out["state_exists"] = dict((path, host.exists(path)) for path in kub.STATE_FILES.values())
    out["cpus_online"], out["numa_nodes"], out["files"] = set(), set(), {}
    if not strict and out["layers"] is None:
        return out  # the facts: no plan without the configuration, so nothing more is read for it
    try:
        out["cpus_online"] = cpus_online(host)
        out["numa_nodes"] = numa_nodes(host)
        out["files"] = dict((path, observe_file(host, path))
                            for path in file_paths(line, config_file, out["layers"], dropin_name))
    except RdmaNodeError as exc:
        if strict:
            raise
        out["planner_error"] = exc.msg  # the report is still right: the audit says the plan is unknown, and why
    return out


# -- rdma_facts ----------------------------------------------------------------------------------------------------
def file_facts(state):
    """A FileState as plain data (content included), for the facts; :func:`file_state` reads it back."""
    out = {"path": state.path, "exists": state.exists, "content": state.content, "mode": state.mode,
           "uid": state.uid, "gid": state.gid}
    if state.link is not None:
        out["link"] = state.link
    return out


def file_state(item):
    """The FileState of a :func:`file_facts` entry."""
    return FileState(item["path"], item["exists"], item["content"], item["mode"], item["uid"], item["gid"],
                     item.get("link"))


def report(got, problems):
    """``runtime.kubelet`` (its shape since the facts had one) from :func:`collect`'s result: how the kubelet starts
    (command line, unit, flags), its config file and drop-ins as layers in the kubelet's order with the flags last,
    the effective topology/CPU/memory manager settings (files, then flags) and the state files' policies."""
    line = got["line"]
    out = {"running": bool(got["pid"]), "version": None, "config_file": got["config_file"],
           "config_dir": line["config_dir"],
           "command_line": {"source": line["source"], "unit": line["unit"], "flags_from": line["flags_from"]},
           "settings": {}, "layers": [], "live_flags": line["live_flags"], "state_files": {}, "problems": problems}
    if line.get("rancher"):
        out["rancher"] = line["rancher"]
    if got["version"] is not None:
        out["version"] = ".".join(str(p) for p in got["version"])
    for problem in got.get("read_problems") or []:
        if problem["error"].startswith(problem["what"] + " is YAML: reading it needs PyYAML"):
            problem = {"what": "kubelet config", "error": "PyYAML is not installed: settings not read"}
        if problem not in problems:
            problems.append(problem)
    if got["layers"] is not None:
        try:
            layers = got["layers"] + [kub.flags_layer(line["flags"], line["flags_from"] or "the kubelet's command line")]
            merged = kub.effective(layers)
            out["layers"] = layers
            out["settings"] = dict((key, merged.get(key, kub.DEFAULTS.get(key))) for key in kub.MANAGED_KEYS)
        except RdmaNodeError as exc:  # a flag value the kubelet would refuse
            problems.append({"what": "kubelet flags", "error": exc.msg})
    for key, path in kub.STATE_FILES.items():
        out["state_files"][key] = {"path": path, "policy": state_policy(got["state_files"].get(path))}
    return out


def planner_input(got):
    """What kubelet_topology's planner reads besides the report, as plain data (``layers.kubelet.observed``); None
    when the kubelet's configuration could not be read (the report's ``problems`` say why), ``{"error"}`` when a
    piece of the rest could not."""
    if got["layers"] is None:
        return None
    if got.get("planner_error"):
        return {"error": got["planner_error"]}
    return {"version": list(got["version"]) if got["version"] is not None else None,
            "version_error": got.get("version_error"), "service": got["service"],
            "line": got["line"], "config_file": got["config_file"], "layers": got["layers"],
            "documents": dict((path, doc["text"]) for path, doc in got["documents"].items()),
            "cpus_online": kub.format_cpuset(got["cpus_online"]), "numa_nodes": sorted(got["numa_nodes"]),
            "state_files": got["state_files"], "state_exists": got["state_exists"],
            "files": dict((path, file_facts(state)) for path, state in got["files"].items())}


def facts(host, commands=None, config=DEFAULT_CONFIG, pids=None, dropin_name=kub.DEFAULT_DROPIN_NAME, numa=None):
    """``rdma_facts``' ``layers.kubelet``: :func:`report` (what ``runtime.kubelet`` holds) with ``observed``, what
    kubelet_topology's planner reads (:func:`planner_input`), and ``numa``, the NUMA nodes of the node's GPUs and
    RDMA NICs (:func:`numa_of` of rdma_facts' discovery; the audit's ``kubelet.whole_node`` judges them).  ``pids``:
    ``{comm: pid}`` already read, else /proc is scanned for the kubelet."""
    problems = []
    pid = kh.find_pid(host) if pids is None else pids.get("kubelet")
    got = collect(host, commands, pid, config, dropin_name, problems)
    out = report(got, problems)
    out["observed"] = planner_input(got) if got["layers"] is not None and not got.get("read_problems") else None
    if out["observed"] is not None and not out["layers"]:
        out["observed"] = None  # the flags did not parse: the kubelet would refuse them, the plan is unknown
    out["numa"] = numa
    return out


def numa_of(facts_in):
    """The NUMA nodes ``kubelet.whole_node`` judges, from rdma_facts' ``gpus``, ``devices`` and ``numa_nodes``:
    ``{"gpus": [numa node per GPU], "rdma": [per RDMA NIC (physical functions)], "online": [NUMA nodes] or None}``."""
    gpus = facts_in.get("gpus") or []
    nics = [d for d in facts_in.get("devices") or [] if d.get("pci_address") and not d.get("is_vf")]
    numa = facts_in.get("numa_nodes")
    return {"gpus": [g.get("numa_node") for g in gpus], "rdma": [d.get("numa_node") for d in nics],
            "online": numa.get("online") if isinstance(numa, dict) else None}


def report_of(section):
    """``runtime.kubelet``: the room's facts without the planner's input and the NUMA nodes of the node's devices."""
    return dict((key, value) for key, value in section.items() if key not in ("observed", "numa"))
