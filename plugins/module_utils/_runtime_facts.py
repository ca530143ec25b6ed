# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd and kubelet settings for rdma_facts and the audit: running vs persisted, read-only (containerd's are the
containerd room's observer, ``layers/containerd/observe.py``).

``runtime_facts(host, commands=None, pids=None, layers=None)`` never writes and never fails on a missing piece: what
cannot be read is None, and ``problems`` lists why.  Without ``commands`` (a HostCommands), only files and /proc are
read.  With ``layers`` (rdma_facts' rooms), containerd is not read again.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh


def pids_of(host, comms):
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


def kubelet_facts(host, commands=None, config=kh.DEFAULT_CONFIG, pids=None, dropin_name=kub.DEFAULT_DROPIN_NAME):
    """kubelet: how it starts (command line, unit, flags), its config file and drop-ins as layers in the kubelet's
    order, the effective topology/CPU/memory manager settings (files, then flags) and state-file policies (``pids``
    as for the containerd room's :func:`facts`).  ``layers`` feed the same planner the module uses (``layers/kubelet/rules.plan``)."""
    problems = []
    pid = (pids_of(host, ("kubelet",)) if pids is None else pids).get("kubelet")
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


def runtime_facts(host, commands=None, pids=None, layers=None):
    """``{"containerd": {...}, "kubelet": {...}}``: the containerd room's facts without the planner's input, and
    :func:`kubelet_facts`.  ``layers``: rdma_facts' ``layers``, whose ``containerd`` is used as it is; when the
    room's observer failed there (None, and rdma_facts' ``problems`` says why), containerd is not observed a second
    time: ``containerd`` is absent, as the facts of a room whose observer failed are.  Without ``layers`` containerd
    is observed here."""
    if pids is None:
        pids = pids_of(host, ("containerd", "kubelet"))  # one pass over /proc for both
    out = {"kubelet": kubelet_facts(host, commands, pids=pids)}
    containerd = ctdh.facts(host, commands, pids=pids) if layers is None else layers.get("containerd")
    if containerd is not None:
        out["containerd"] = ctdh.report_of(containerd)
    return out
