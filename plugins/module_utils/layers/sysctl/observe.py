# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's observer: written once, used by the module (:func:`observe`) and by ``rdma_facts``
(:func:`facts`, ``layers.sysctl``; :func:`read_files` is also its ``persisted.sysctl`` table's source).

Reads the live values under ``/proc/sys``, our drop-in (content, mode, owner), and every file systemd-sysctl reads at
boot in its order plus ``/etc/sysctl.conf``, which ``sysctl --system`` reads last.  The facts hold the live ARP and
reverse-path values of ``all``, ``default`` and every RDMA netdev as the kernel prints them, and the content, mode and
owner of each file in ``/etc/sysctl.d`` that the module wrote (it starts with our header), so the audit can run the
module's planner on them.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import discover
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl.settings import rdma_netdevs

CONF_FILE = "/etc/sysctl.d/90-rdma-k8s-node.conf"
SYSCTL_DIR = rules.SYSCTL_DIRS[0]


def read_live(host, keys):
    """Live values of ``keys`` from /proc/sys (None for a key that does not exist)."""
    return {key: host.read_attr(rules.proc_path(key)) for key in keys}


def _text(host, path, problems):
    try:
        return host.read_text(path)
    except RdmaNodeError as exc:
        problems.append({"path": path, "error": exc.msg})
        return None


def _listdir(host, path, problems):
    try:
        return host.listdir(path)
    except RdmaNodeError as exc:
        problems.append({"path": path, "error": exc.msg})
        return []


def _file(host, path, problems, texts=None):
    link = host.readlink(path)
    text = "" if link == "/dev/null" else _text(host, path, problems)
    if texts is not None and text:
        texts[path] = text
    return {"path": path, "link": link, "entries": [list(entry) for entry in rules.parse_file(text or "")]}


def read_files(host, problems, texts=None):
    """What systemd-sysctl reads at boot and ``sysctl --system`` reads after it: ``{"files": [{path, link, entries}],
    "conf": {path, link, entries} or None}``.  ``files`` in systemd-sysctl's order; ``link`` is the raw target of a
    file that is a symlink (Debian's ``99-sysctl.conf -> ../sysctl.conf``); a link to /dev/null masks (no entries);
    ``entries`` are ``[key, value, line]`` as :func:`rules.parse_file` reads them.  /etc/sysctl.conf is ``conf``:
    read last by procps, by systemd-sysctl only through such a link.  Read errors go to ``problems``
    (``[{path, error}]``); ``texts``, when given, gets ``{path: text}`` of the files read."""
    out = {"files": [], "conf": None}
    listing = dict((d, _listdir(host, d, problems)) for d in rules.SYSCTL_DIRS)
    for path in rules.read_order(listing):
        out["files"].append(_file(host, path, problems, texts))
    if host.exists(rules.SYSCTL_CONF):
        out["conf"] = _file(host, rules.SYSCTL_CONF, problems, texts)
    return out


def needed_all(settings):
    """The max-rule params of ``all`` whose live value the effective values need (:func:`plan.effective_after`):
    when the settings hold a max-rule key of an interface, each param they do not set for ``all`` themselves."""
    scopes = {}
    for key in settings:
        parts = rules.components(key)
        if len(parts) == 5 and parts[:3] == ["net", "ipv4", "conf"] and parts[4] in rules.MAX_RULE:
            scopes.setdefault(parts[3], set()).add(parts[4])
    if not [name for name in scopes if name not in ("all", "default")]:
        return []
    return [param for param in rules.MAX_RULE if param not in scopes.get("all", ())]


def observe(host, path, settings):
    """What the module plans on, for validated ``settings`` and our file at ``path``: ``{"live" ({key: value as the
    kernel prints it, None when the key does not exist}), "all" ({max-rule param: the live value of ``all``} for
    :func:`needed_all`), "file" (our FileState), "files" (:func:`read_files`)}``.  A sysctl.d file that cannot be
    read is an error (it could hold an override): HostReadError."""
    live = read_live(host, settings)
    all_live = dict((param, host.read_attr("/proc/sys/net/ipv4/conf/all/" + param)) for param in needed_all(settings))
    state = observe_file(host, path)
    problems = []
    files = read_files(host, problems)
    if problems:
        raise HostReadError("cannot read %s: %s" % (problems[0]["path"], problems[0]["error"]), {"problems": problems})
    return {"live": live, "all": all_live, "file": state, "files": files}


def facts(host, discovery=None, files=None):
    """``rdma_facts``' ``layers.sysctl``: ``{"netdevs" (the RDMA physical functions' netdevs, the role's default
    interfaces), "live" ({interface: {param: value as the kernel prints it, or None}} for ``all``, ``default`` and
    every RDMA netdev, VFs included), "files" (:func:`read_files`), "ours" ({path: {content, mode, uid, gid[, link]}}
    of each file in /etc/sysctl.d that starts with our header), "problems"}``.

    ``discovery`` (rdma_facts' one discovery) gives the RDMA devices; ``files`` a :func:`read_files` result already
    made (rdma_facts reads the files once for this and for ``persisted.sysctl``)."""
    problems = []
    devices = (discovery if discovery is not None else discover(host)).found()["devices"]
    every = []
    for device in devices:
        every.extend(n for n in device.get("netdevs") or [] if n not in every)
    live = {}
    for name in ["all", "default"] + sorted(every):
        base = "/proc/sys/net/ipv4/conf/%s/" % name
        live[name] = dict((param, host.try_attr(base + param)) for param in rules.MAX_RULE)
    texts = {}
    if files is None:
        files = read_files(host, problems, texts)
    ours = {}
    for item in files["files"]:
        path = item["path"]
        if path.rpartition("/")[0] != SYSCTL_DIR or not item["entries"]:
            continue
        text = texts[path] if path in texts else _text(host, path, problems)
        if text and text.startswith(rules.HEADER):
            state = observe_file(host, path)
            ours[path] = {"content": state.content, "mode": state.mode, "uid": state.uid, "gid": state.gid}
            if state.link is not None:
                ours[path]["link"] = state.link
    return {"netdevs": rdma_netdevs({"devices": devices}), "live": live, "files": files, "ours": ours,
            "problems": problems}
