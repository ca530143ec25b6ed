# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd and kubelet settings for rdma_facts and the audit: running vs persisted, read-only.

``runtime_facts(host, commands=None)`` never writes and never fails on a missing piece: what cannot be read is
None, and ``problems`` lists why.  Without ``commands`` (a HostCommands), only files and /proc are read.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd_host as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils import _kubelet as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils import _kubelet_host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils import _kubelet_rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError


def _pids_of(host, comms):
    """``{comm: pid}`` of the first process of each name in ``comms``, in one pass over /proc."""
    found = {}
    for entry in host.listdir("/proc"):
        if len(found) == len(comms):
            break
        if entry.isdigit() and entry.isascii():  # ('²'.isdigit() is true, int('²') a ValueError)
            comm = host.try_attr("/proc/%s/comm" % entry)
            if comm in comms:
                found.setdefault(comm, int(entry))
    return found


def _limit(value):
    return None if value is None else ctd.render_limit(value)


def containerd_facts(host, commands=None, config=ctdh.DEFAULT_CONFIG, pids=None, service=None):
    """containerd as :func:`_containerd_host.observe` (the module's own observer) sees it: the service that runs it
    (``containerd``, else k3s's/rke2's when only theirs exists), its unit and LimitMEMLOCK, the config file it reads
    with its imports and the file each key the collection owns comes from, version, runtimes' base specs with their
    memlock and whose they are, CDI, and the running process's memlock (``pids``: a :func:`_pids_of` result already
    made, else /proc is scanned)."""
    problems = []
    obs = ctdh.observe(host, commands, config, service, problems=problems)
    generated = obs["generated_config"]
    out = {"installed": obs["installed"], "version": None, "service": obs["service"], "unit": obs["unit"],
           "unit_files": ctdh.unit_order(obs), "config_file": obs["config_path"], "config_path": obs["config_path"],
           "config_from": obs["config_from"], "config_files": [p for p, dummy_s, dummy_d in obs["files"] or []],
           "imports": obs["imports"], "generated_config": generated, "template": obs["template"],
           "config_target": None, "config_version": obs["config_version"], "runtimes": {},
           "enable_cdi": None, "cdi_spec_dirs": None, "key_sources": obs["key_sources"],
           "derived_from": obs["derived_from"], "unit_memlock": _limit(obs["unit_memlock"]),
           "unit_memlock_source": obs["unit_memlock_source"], "running": None, "problems": problems}
    if obs["version"] is not None:
        out["version"] = ".".join(str(p) for p in obs["version"])
    if generated and generated.get("tool") in ("k3s", "rke2") and obs["files"] and (obs["version"] or (0,)) >= (2, 0):
        directory = ctd.dropin_dir(obs["files"][0][2], obs["config_path"])
        out["config_target"] = "%s/%s" % (directory, ctd.GENERATED_DROPIN) if directory else None
    pid = (_pids_of(host, ("containerd",)) if pids is None else pids).get("containerd")
    if pid:
        try:
            memlock = ctd.parse_proc_limits(host.try_attr("/proc/%d/limits" % pid, "", problems))
        except RdmaNodeError as exc:
            problems.append({"what": "/proc/%d/limits" % pid, "error": exc.msg})
            memlock = None
        out["running"] = {"pid": pid, "memlock": dict((k, _limit(v)) for k, v in memlock.items()) if memlock else None}
    eff = obs["effective"]
    if eff is not None:
        out.update({"enable_cdi": eff["enable_cdi"], "cdi_spec_dirs": eff["cdi_spec_dirs"]})
        for name, runtime in obs["runtimes"].items():
            spec = runtime["base_runtime_spec"]
            try:
                memlock = ctd.spec_rlimit(host.read_text(spec) or "", "RLIMIT_MEMLOCK") if spec else None
            except RdmaNodeError as exc:
                problems.append({"what": spec, "error": exc.msg})
                memlock = None
            out["runtimes"][name] = {"runtime_type": runtime["runtime_type"], "base_runtime_spec": spec or None,
                                     "base_spec_memlock": dict((k, _limit(v)) for k, v in memlock.items())
                                     if memlock else None, "owner": runtime["owner"],
                                     "derived_from": runtime["derived_from"]}
    return out


def kubelet_facts(host, commands=None, config=kh.DEFAULT_CONFIG, pids=None, dropin_name=kub.DEFAULT_DROPIN_NAME):
    """kubelet: how it starts (command line, unit, flags), its config file and drop-ins as layers in the kubelet's
    order, the effective topology/CPU/memory manager settings (files, then flags) and state-file policies (``pids``
    as for :func:`containerd_facts`).  ``layers`` feed the same planner the module uses (``_kubelet.plan``)."""
    problems = []
    pid = (_pids_of(host, ("kubelet",)) if pids is None else pids).get("kubelet")
    try:
        rancher = kr.detect(host)  # k3s/rke2: the kubelet's flags come from their config files and unit
        line = kr.command_line(host, rancher, pid) if rancher else kh.command_line(host, pid)
    except RdmaNodeError as exc:
        problems.append({"what": "kubelet command line", "error": exc.msg})
        line = {"running": bool(pid), "pid": pid, "unit": None, "source": None, "config": None, "config_dir": None,
                "flags": [], "flags_from": None, "live_flags": None, "problems": []}
    problems.extend(line["problems"])
    config_file = line["config"] or (config if line["source"] in (None, "env files") else None)
    out = {"running": bool(pid), "version": None, "config_file": config_file, "config_dir": line["config_dir"],
           "command_line": {"source": line["source"], "unit": line["unit"], "flags_from": line["flags_from"]},
           "settings": {}, "layers": [], "live_flags": line["live_flags"], "state_files": {}, "problems": problems}
    if line.get("rancher"):
        out["rancher"] = line["rancher"]
    binary = (line.get("rancher") or {}).get("binary")
    if commands is not None and (host.is_executable(binary) if binary else commands.find("kubelet")):
        rc, text, dummy_err = commands.run([binary or "kubelet", "--version"])
        try:
            out["version"] = ".".join(str(p) for p in kub.parse_kubelet_version(text)) if rc == 0 else None
        except RdmaNodeError as exc:
            problems.append({"what": "kubelet --version", "error": exc.msg})
    read_problems = []
    try:
        if line.get("rancher"):
            layers, dummy_docs = kr.config_layers(host, line, dropin_name, read_problems)
        else:
            layers, dummy_docs = kh.config_layers(host, config_file, line["config_dir"], dropin_name, read_problems)
    except RdmaNodeError as exc:  # an unreadable config is a problem of this section, not of rdma_facts
        read_problems.append({"what": "kubelet config", "error": exc.msg})
        layers = None
    for problem in read_problems:
        if problem["error"].startswith(problem["what"] + " is YAML: reading it needs PyYAML"):
            problem = {"what": "kubelet config", "error": "PyYAML is not installed: settings not read"}
        if problem not in problems:
            problems.append(problem)
    if layers is not None and not read_problems:
        try:
            layers.append(kub.flags_layer(line["flags"], line["flags_from"] or "the kubelet's command line"))
            merged = kub.effective(layers)
            out["layers"] = layers
            out["settings"] = dict((key, merged.get(key, kub.DEFAULTS.get(key))) for key in kub.MANAGED_KEYS)
        except RdmaNodeError as exc:  # a flag value the kubelet would refuse
            problems.append({"what": "kubelet flags", "error": exc.msg})
    for key, path in kub.STATE_FILES.items():
        text = host.read_text(path)
        policy = None
        if text is not None:
            try:
                policy = json.loads(text).get("policyName")
            except (ValueError, AttributeError, RecursionError):
                policy = "unreadable"
        out["state_files"][key] = {"path": path, "policy": policy}
    return out


def runtime_facts(host, commands=None):
    """``{"containerd": {...}, "kubelet": {...}}`` -- see containerd_facts and kubelet_facts."""
    pids = _pids_of(host, ("containerd", "kubelet"))  # one pass over /proc for both
    return {"containerd": containerd_facts(host, commands, pids=pids), "kubelet": kubelet_facts(host, commands, pids=pids)}
