# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet as its node starts it, read through :class:`HostRoot` into plain data.

* The command line: the running kubelet's ``/proc/<pid>/cmdline`` (what runs now), and the one systemd builds for
  the next start from ``kubelet.service``, its drop-ins (``ExecStart=`` after resets), ``Environment=`` and
  ``EnvironmentFile=`` (kubeadm's ``kubeadm-flags.env``, ``/etc/default/kubelet``, ``/etc/sysconfig/kubelet``,
  EKS's and kubespray's files), with ``$VAR``/``${VAR}`` expanded as systemd does.  Without a unit and without a
  process, the three well-known environment files are read as they are.
* The configuration: ``--config`` (JSON or YAML) and every ``*.conf`` under ``--config-dir`` in the kubelet's walk
  order, as layers for :func:`rules.plan`.

Nothing here writes.  ``problems`` collects what cannot be read when the caller reports instead of failing (facts).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import stat

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import config as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils import _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, RdmaNodeError

UNIT = "kubelet.service"
#: read as they are when neither a unit nor a running kubelet says how the kubelet starts
FLAG_FILES = ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet")
DEFAULT_CONFIG = "/var/lib/kubelet/config.yaml"


def find_pid(host):
    """The pid of the first process named ``kubelet`` in /proc, or None."""
    for entry in host.listdir("/proc"):
        if entry.isdigit() and host.try_attr("/proc/%s/comm" % entry) == "kubelet":
            return int(entry)
    return None


def _masked(host, path):
    return host.readlink(path) == "/dev/null"


def unit_files(host, unit=UNIT):
    """``[(path, text)]`` of the unit and its drop-ins in systemd's order; ``[]`` without a unit or when masked."""
    unit_path = None
    for directory in _systemd.UNIT_DIRS:
        path = "%s/%s" % (directory, unit)
        if host.stat(path, follow=False) is not None:
            if _masked(host, path):
                return []
            unit_path = path
            break
    if unit_path is None:
        return []
    entries = []
    kind = unit.rsplit(".", 1)[1]
    for offset, dirname in ((0, unit + ".d"), (len(_systemd.UNIT_DIRS), kind + ".d")):
        for rank, directory in enumerate(_systemd.UNIT_DIRS):
            base = "%s/%s" % (directory, dirname)
            for name in host.listdir(base):
                if name.endswith(".conf"):
                    entries.append((offset + rank, name, base + "/" + name))
    files = [(unit_path, host.read_text(unit_path, default=""))]
    for path in _systemd.order_dropins(entries):
        if not _masked(host, path):
            files.append((path, host.read_text(path, default="")))
    return files


def _env_file_paths(host, pattern):
    if any(char in pattern for char in "*?["):
        return host.glob(pattern)
    return [pattern]


def unit_command(host, files, problems, env_out=None):
    """``[(word, origin)]`` of the command systemd runs for the unit ``files``, or None without ``ExecStart=``.
    ``env_out`` (a dict), when given, receives the unit's environment: name -> value (k3s reads its config path
    from ``K3S_CONFIG_FILE`` there)."""
    settings = _systemd.service_settings(files)
    problems.extend(settings["problems"])
    if not settings["exec_start"]:
        return None
    env = {}
    for assignment, path in settings["environment"]:
        name, value = assignment.split("=", 1)
        env[name] = (value, {"file": path, "how": "Environment"})
    for pattern, optional, unit_path in settings["environment_files"]:
        if not pattern.startswith("/"):
            problems.append({"what": unit_path, "error": "EnvironmentFile=%s is not an absolute path: systemd ignores it"
                             % pattern})
            continue
        found = False
        for path in _env_file_paths(host, pattern):
            text = host.read_text(path)
            if text is None:
                continue
            found = True
            for name, value in _systemd.env_assignments(text).items():
                env[name] = (value, {"file": path, "how": "EnvironmentFile"})
        if not found and not optional:
            problems.append({"what": pattern, "error": "EnvironmentFile=%s (in %s) does not exist: systemd refuses to "
                             "start the kubelet" % (pattern, unit_path)})
    if env_out is not None:
        env_out.update((name, value) for name, (value, dummy_origin) in env.items())
    return _systemd.expand_exec(settings["exec_start"], env)


def process_command(host, pid):
    """``[(word, origin)]`` of a running process's command line, or None when it is gone."""
    path = "/proc/%d/cmdline" % pid
    try:
        data = host.read_bytes(path)
    except HostReadError:  # the process went away (or is going) while it was read
        return None
    if not data:
        return None
    origin = {"file": path, "how": "process"}
    return [(part.decode("utf-8", "replace"), origin) for part in data.split(b"\0")[:-1 if data.endswith(b"\0") else None]]


def env_files_command(host):
    """``[(word, origin)]`` of every assignment in :data:`FLAG_FILES`, in order (no unit, no process: a best guess)."""
    words = []
    for path in FLAG_FILES:
        text = host.read_text(path)
        if text is None:
            continue
        for assignment in _systemd.parse_env_file(text):
            if assignment["value"] is not None and _systemd.env_name_ok(assignment["name"]):
                origin = {"file": path, "how": "EnvironmentFile", "var": assignment["name"]}
                words.extend((word, origin) for word in _systemd.split_words(assignment["value"]))
    return words


def _flag_value(flags, name):
    found = None
    for flag in flags:
        if flag["name"] == name:
            found = flag["value"]
    return found


def command_line(host, pid=None, unit=UNIT):
    """How the kubelet starts and runs: ``{"running": bool, "pid", "unit", "source", "config", "config_dir",
    "flags", "flags_from", "live_flags", "problems"}``.

    ``config``/``config_dir`` are what the running kubelet uses (the truth), else what its unit starts it with.
    ``flags`` (the relevant ones, see ``config.FLAG_FIELDS``) come from the command line of the next start: the
    unit's, else the running process's, else the environment files; ``live_flags`` from the running process, each
    naming the file that set it when the unit's command line has the same flag.
    """
    problems = []
    files = unit_files(host, unit)
    unit_words = unit_command(host, files, problems) if files else None
    running = process_command(host, pid) if pid else None
    lines = []
    if running is not None:
        lines.append(("process", 1, running))
    if unit_words is not None:
        lines.append(("unit", 1, unit_words))
    if running is None and unit_words is None:
        fallback = env_files_command(host)
        if fallback:
            lines.append(("env files", 0, fallback))
    parsed = dict((name, kub.parse_command(words, start)) for name, start, words in lines)
    source = lines[0][0] if lines else None
    primary = parsed[source] if source else []
    out = {"running": running is not None, "pid": pid if running is not None else None,
           "unit": files[0][0] if files else None, "source": source, "problems": problems,
           "config": kub.absolute(_flag_value(primary, "config")), "config_dir": kub.absolute(_flag_value(primary, "config-dir")),
           "flags": [], "flags_from": None, "live_flags": None}
    persistent = "unit" if "unit" in parsed else source
    if persistent:
        out["flags"] = kub.relevant_flags(parsed[persistent], _systemd.describe_origin)
        out["flags_from"] = out["unit"] if persistent == "unit" else \
            "/proc/%d/cmdline" % pid if persistent == "process" else "environment files"
    if "process" in parsed:
        by_text = dict((f["flag"], f) for f in out["flags"]) if persistent == "unit" else {}
        live = []
        for flag in kub.relevant_flags(parsed["process"], _systemd.describe_origin):
            same = by_text.get(flag["flag"])
            live.append(dict(flag, origin=same["origin"], source=same["source"]) if same else flag)
        out["live_flags"] = live
        if "unit" in parsed:
            for name in ("config", "config-dir"):
                now, nxt = _flag_value(parsed["process"], name), _flag_value(parsed["unit"], name)
                if now != nxt:
                    problems.append({"what": out["unit"], "error": "the running kubelet has --%s=%s but its unit now starts "
                                     "it with --%s=%s: a restart changes which file it reads" % (name, now, name, nxt)})
    return out


def walk_dropins(host, directory):
    """``[(name relative to directory, path)]`` of the files the kubelet merges from --config-dir, in its order:
    filepath.WalkDir (each directory's entries by name, subdirectories entered, links not followed into) keeping
    the names whose extension is ``.conf``."""
    out = []
    stack = [(directory.rstrip("/") or "/", "", iter(host.listdir(directory)))]
    while stack:
        base, prefix, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            continue
        path = (base if base != "/" else "") + "/" + name
        info = host.stat(path, follow=False)
        if info is None:
            continue
        if stat.S_ISDIR(info.st_mode):
            stack.append((path, prefix + name + "/", iter(host.listdir(path))))
        elif "." in name and name[name.rindex("."):] == ".conf":
            out.append((prefix + name, path))
    return out


def read_document(host, path, problems=None):
    """``{"path", "text", "fmt", "data"}`` of a KubeletConfiguration file, or None when absent.  With ``problems`` (a
    list) an unreadable or malformed file is appended there and None returned; without, the typed error is raised."""
    try:
        text = host.read_text(path)
        if text is None:
            return None
        data, fmt = kub.load_document(text, path)
        kub.check_shapes(data, path)
    except RdmaNodeError as exc:
        if problems is None:
            raise
        # a read error's message names the file already; a parse error is a problem of that file
        problems.append({"what": "kubelet config" if isinstance(exc, HostReadError) else path, "error": exc.msg})
        return None
    return {"path": path, "text": text, "fmt": fmt, "data": data}


def config_layers(host, config, config_dir, dropin_name=None, problems=None):
    """``(layers, documents)``: the config file and the drop-ins as layers for ``rules.plan`` (drop-ins of the
    collection, the names ``config.own_names(dropin_name)`` with its header, marked ``ours``) and the documents read
    (path -> :func:`read_document` result).  Errors as in :func:`read_document`."""
    layers, documents = [], {}
    if config:
        doc = read_document(host, config, problems)
        if doc is not None:
            documents[config] = doc
            layers.append({"kind": "config", "path": config, "settings": kub.relevant(doc["data"])})
    if config_dir:
        own = kub.own_names(dropin_name) if dropin_name else ()
        try:
            entries = walk_dropins(host, config_dir)
        except HostReadError as exc:
            if problems is None:
                raise
            problems.append({"what": config_dir, "error": exc.msg})
            entries = []
        for name, path in entries:
            doc = read_document(host, path, problems)
            if doc is None:
                continue
            documents[path] = doc
            layers.append({"kind": "dropin", "path": path, "name": name, "settings": kub.relevant(doc["data"]),
                           "ours": name in own and kub.is_own_dropin(doc["text"])})
    return layers, documents
