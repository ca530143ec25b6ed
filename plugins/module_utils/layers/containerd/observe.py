# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd as its node runs it, read through :class:`HostRoot` into plain data: the one observer of the containerd
layer, used by the module ``containerd_rdma`` (which then plans) and by ``rdma_facts`` (which reports).

* The systemd unit of the service that runs containerd (``containerd``, or k3s's/rke2's own) and its drop-ins in
  systemd's order (:func:`_systemd.dropin_order`: every unit directory, ``/dev/null`` masks, ``foo-.service.d``
  prefixes, ``service.d``), its ``LimitMEMLOCK`` and the file that sets it, its ``ExecStart`` command line.
* The config file containerd really reads: ``--config``/``-c`` of that command line, else k3s's/rke2's generated
  ``<data-dir>/agent/etc/containerd/config.toml`` (with the template that feeds it), else the caller's path; the
  files it imports in containerd's load order, which of them sets each key the collection owns, and whether the main
  file says it is regenerated.
* The ``containerd --version`` of the binary (k3s's and rke2's are in their data directory, not on PATH), the
  effective configuration (``containerd config dump``), the base runtime spec of every runtime and whose it is.

Nothing here writes.  Every function that can fail takes ``problems``: with a list, what cannot be read is appended
there (``{"what", "error"}``) and the piece is None; without (None), the typed error is raised (the module's way).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import os
import posixpath
import time

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import config as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils import _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, HostReadError, ParseError, RdmaNodeError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import FileState, observe_file

DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SERVICE = "containerd"
DEFAULT_BASE_SPEC = "/etc/containerd/rdma-k8s-node-base-spec.json"
UNIT_DROPIN_NAME = "50-rdma-k8s-node-memlock.conf"
#: the units that run k3s's and rke2's own containerd, and their default data directories
RANCHER_UNITS = {"k3s": ("k3s", "k3s-agent"), "rke2": ("rke2-server", "rke2-agent")}
RANCHER_DATA_DIRS = {"k3s": "/var/lib/rancher/k3s", "rke2": "/var/lib/rancher/rke2"}
#: the templates k3s/rke2 render config.toml from, in the order they look for them (k3s pkg/agent/containerd)
RANCHER_TEMPLATES = ("config-v3.toml.tmpl", "config.toml.tmpl")


def _fail(problems, what, exc):
    if problems is None:
        raise exc
    problems.append({"what": what, "error": exc.msg})


def unit_dropin_path(service):
    """The drop-in the collection owns for ``service``."""
    return "/etc/systemd/system/%s.service.d/%s" % (service, UNIT_DROPIN_NAME)


# -- systemd ---------------------------------------------------------------------------------------------------------
def unit_layout(host, service):
    """``{"unit" (path or None), "masked", "listing" ({drop-in directory: [names]}), "texts" ({path: text, None for a
    drop-in linked to /dev/null})}``: what systemd reads for ``<service>.service``, read once; :func:`order_units`
    puts it in systemd's order (pure, so the planner can stand the collection's drop-in in for the one on disk)."""
    unit = "%s.service" % service
    unit_path, masked = None, False
    for directory in _systemd.UNIT_DIRS:
        path = "%s/%s" % (directory, unit)
        if host.stat(path, follow=False) is not None:
            unit_path, masked = path, host.readlink(path) == "/dev/null"
            break
    listing = {}
    for directory in _systemd.dropin_dirs(unit):
        names = host.listdir(directory)
        if names:
            listing[directory] = list(names)
    texts = {}
    if unit_path:
        texts[unit_path] = "" if masked else host.read_text(unit_path, default="")
    for path in _systemd.dropin_order(listing, unit):
        texts[path] = None if host.readlink(path) == "/dev/null" else host.read_text(path, default="")
    return {"service": service, "unit": unit_path, "masked": masked, "listing": listing, "texts": texts}


def order_units(layout, replace=None):
    """``[(path, text)]`` of a :func:`unit_layout`: the unit file and its drop-ins in systemd's order
    (:func:`_systemd.dropin_order`; a drop-in linked to /dev/null hides its name and adds nothing).  ``replace`` =
    ``(path, text or None)`` stands in for one drop-in (the collection's, as it will be).  Pure."""
    unit = "%s.service" % layout["service"]
    listing = dict((d, list(names)) for d, names in layout["listing"].items())
    texts = dict(layout["texts"])
    if replace is not None:
        directory, name = replace[0].rsplit("/", 1)
        names = [n for n in listing.get(directory, []) if n != name]
        if replace[1] is not None:
            names.append(name)
        texts[replace[0]] = replace[1]
        listing[directory] = names
    files = [(layout["unit"], texts[layout["unit"]])] if layout["unit"] else []
    for path in _systemd.dropin_order(listing, unit):
        if texts.get(path) is not None:
            files.append((path, texts[path]))
    return files


def unit_files(host, service, replace=None):
    """``(unit path or None, masked, [(path, text)])``: ``<service>.service`` and its drop-ins in systemd's order
    (:func:`unit_layout`, :func:`order_units`).  Drop-ins are listed even without a unit file."""
    layout = unit_layout(host, service)
    return layout["unit"], layout["masked"], order_units(layout, replace)


def _flag(words, long_name, short_name):
    """The value of ``--long X``/``--long=X``/``-s X``/``-s=X`` (also ``-long``, as Go's flag packages accept) in
    ``words``; the last one wins."""
    value = None
    names = ("--" + long_name, "-" + long_name) + (("-" + short_name, "--" + short_name) if short_name else ())
    for index, word in enumerate(words):
        for name in names:
            if word == name and index + 1 < len(words):
                value = words[index + 1]
            elif word.startswith(name + "="):
                value = word[len(name) + 1:]
    return value


def command_line(host, files, service, problems):
    """``{"argv": [words] or None, "config": --config of containerd or None, "tool": "k3s"|"rke2"|None,
    "data_dir": k3s/rke2 --data-dir or None, "from": the unit file of ExecStart=}`` of the unit ``files``."""
    found = []
    words = kh.unit_command(host, files, found) if files else None
    for problem in found:  # (the helper is the kubelet's: its messages name the kubelet)
        problems.append(dict(problem, error=problem["error"].replace("the kubelet", service)))
    out = {"argv": None, "config": None, "tool": None, "data_dir": None, "from": None}
    if not words:
        return out
    argv = [word for word, dummy_origin in words]
    out["argv"], out["from"] = argv, words[0][1].get("file")
    program = posixpath.basename(argv[0])
    if program in ("k3s", "rke2"):
        out["tool"] = program
        data_dir = _flag(argv[1:], "data-dir", "d")
        out["data_dir"] = posixpath.normpath(posixpath.join("/", data_dir)) if data_dir else None
    else:
        config = _flag(argv[1:], "config", "c")
        out["config"] = posixpath.normpath(posixpath.join("/", config)) if config else None
    return out


def rancher_tool(service, line):
    """k3s or rke2 when ``service`` (or the command it runs) is theirs, else None."""
    for tool, units in RANCHER_UNITS.items():
        if service in units:
            return tool
    return line.get("tool")


def find_service(host, service=None):
    """``service``, or without one the first of containerd, k3s, k3s-agent, rke2-server, rke2-agent that has a unit
    file (``containerd`` when none has)."""
    if service:
        return service
    for candidate in (DEFAULT_SERVICE,) + RANCHER_UNITS["k3s"] + RANCHER_UNITS["rke2"]:
        if any(host.stat("%s/%s.service" % (d, candidate), follow=False) is not None for d in _systemd.UNIT_DIRS):
            return candidate
    return DEFAULT_SERVICE


# -- config files -----------------------------------------------------------------------------------------------------
def rancher_config(tool, data_dir):
    """k3s's/rke2's containerd config under ``data_dir`` (their default when None)."""
    return "%s/agent/etc/containerd/config.toml" % (data_dir or RANCHER_DATA_DIRS[tool])


def template_path(host, config, version=None):
    """The template k3s/rke2 render ``config`` from: the existing ``config-v3.toml.tmpl`` or ``config.toml.tmpl``
    beside it, else the one to write for this containerd (``config-v3.toml.tmpl`` on 2.x, ``config.toml.tmpl`` on
    1.x or an unknown version)."""
    base = config.rsplit("/", 1)[0]
    for name in RANCHER_TEMPLATES:
        if host.exists("%s/%s" % (base, name)):
            return {"path": "%s/%s" % (base, name), "exists": True}
    name = RANCHER_TEMPLATES[0] if version is not None and version >= (2, 0) else RANCHER_TEMPLATES[1]
    return {"path": "%s/%s" % (base, name), "exists": False}


def choose_config(requested, service, line):
    """``(path, how)``: the config containerd reads -- ``--config`` of its command line (``unit``), else k3s's/rke2's
    generated config (``k3s``/``rke2``), else ``requested`` (``caller``)."""
    if line.get("config"):
        return line["config"], "unit"
    tool = rancher_tool(service, line)
    if tool is not None and (requested == DEFAULT_CONFIG or requested is None):
        return rancher_config(tool, line.get("data_dir")), tool
    return requested or DEFAULT_CONFIG, "caller"


def config_files(host, config, planned=()):
    """``[(path, FileState, Document)]`` in containerd's load order: the main file, then its imports, breadth first as
    containerd's LoadConfig reads them (a file once; an entry with ``*`` is globbed, sorted; a relative entry is
    relative to its file's directory).  ``planned`` are files a run is about to create: they take their place among
    the glob's matches.  Raises ParseError for an ``imports`` that is not a list of paths."""
    out, seen, pending = [], set(), [config]
    while pending:
        path, pending = pending[0], pending[1:]
        if path in seen:
            continue
        seen.add(path)
        state = observe_file(host, path)
        doc = _toml.parse(state.content if state.exists else "", path)
        out.append((path, state, doc))
        imports = doc.data.get("imports") or []
        if not isinstance(imports, list) or not all(isinstance(entry, str) for entry in imports):
            raise ParseError("%s: imports must be a list of paths" % path)
        for entry in imports:
            entry = entry if entry.startswith("/") else posixpath.join(posixpath.dirname(path), entry)
            entry = posixpath.normpath(entry)
            if "*" in entry:  # containerd's resolveImports globs only entries with a '*'
                matches = set(host.glob(entry))
                matches.update(p for p in planned if fnmatch.fnmatchcase(p, entry))
                pending.extend(sorted(matches))
            elif host.exists(entry) or entry in planned:
                pending.append(entry)
    return out


# -- commands ---------------------------------------------------------------------------------------------------------
def binary(host, commands, name, config):
    """How to run ``name``: its plain name when it is on PATH, else its path in k3s's or rke2's own bin directory when
    ``config`` is theirs, else None."""
    if commands.find(name):
        return name
    for directory in ctd.rancher_bin_dirs(config):
        candidate = "%s/%s" % (directory, name)
        if host.is_executable(candidate):
            return candidate
    return None


def run(host, commands, argv, what, config):
    """stdout of ``argv`` (its binary found by :func:`binary`); ApplyError when missing or failing."""
    path = binary(host, commands, argv[0], config)
    if not path:
        raise ApplyError("%s is not installed on the node (needed to %s)" % (argv[0], what), {"command": argv[0]})
    rc, out, err = commands.run([path] + list(argv[1:]))
    if rc != 0:
        raise ApplyError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out).strip()[-2000:]),
                         {"rc": rc, "stdout": out, "stderr": err})
    return out


def read_version(host, commands, config):
    """``(major, minor, patch)`` of ``containerd --version``."""
    out = run(host, commands, ["containerd", "--version"], "read its version", config)
    try:
        return ctd.parse_version(out)
    except ParseError as exc:
        raise ParseError("containerd --version: %s" % exc.msg, exc.details) from exc


def dump(host, commands, config, exists):
    """:func:`config.effective` of ``containerd config dump`` of the node's files (``config default`` when there
    is no config file: containerd 1.7 refuses to dump without one)."""
    if exists:
        text = run(host, commands, ["containerd", "--config", config, "config", "dump"], "check its configuration", config)
    else:
        text = run(host, commands, ["containerd", "config", "default"], "read its default configuration", config)
    return ctd.effective(_toml.parse(text, "containerd config dump"))


# -- what the collection owns ----------------------------------------------------------------------------------------
def spec_owner(path, generated=DEFAULT_BASE_SPEC):
    """``(owner, derived_from)`` of a base spec path: the collection's generated spec or derived copy, another
    tool's (``other``), or none."""
    if not path:
        return None, None
    source = ctd.derived_source(path)
    if source is not None:
        return "rdma.k8s_node", source
    return ("rdma.k8s_node" if path == generated else "other"), None


# -- the observer ------------------------------------------------------------------------------------------------------
def observe(host, commands=None, config=DEFAULT_CONFIG, service=DEFAULT_SERVICE, base_runtime_spec=DEFAULT_BASE_SPEC,
            problems=None, with_effective=True):
    """What the node's containerd is made of; see the module docstring.  Returns a dict:

    ``service``, ``unit`` (path or None), ``unit_masked``, ``unit_files`` ([(path, text)] in systemd's order),
    ``command`` (:func:`command_line`), ``unit_memlock`` (bytes or None) and ``unit_memlock_source``,
    ``config_requested``, ``config_path`` (the file containerd reads) and ``config_from`` (``unit``, ``k3s``, ``rke2``
    or ``caller``), ``template`` (k3s/rke2: ``{"path", "exists"}``, else None), ``files`` ([(path, FileState,
    Document)] in load order, None when unreadable), ``imports`` (the imported paths), ``generated_config`` (None or
    ``{"tool", "header", "path"}``), ``installed`` (None without ``commands``), ``version`` (tuple or None),
    ``effective`` (:func:`config.effective` of ``config dump``, or None), ``config_version``, ``key_sources``
    ({label: origin}, :func:`config.key_origins` plus ``LimitMEMLOCK``), ``runtimes`` ({name: {"runtime_type",
    "base_runtime_spec", "owner", "derived_from"}}), ``derived_from`` ({runc-type runtime: source or None}).

    With ``problems`` None the first failure raises (``containerd`` missing is an ApplyError); with a list, pieces that
    cannot be read are None and the reasons are appended.  ``with_effective=False`` stops before ``config dump``
    (the caller checks the files first, then calls :func:`add_effective`).
    """
    service = find_service(host, service)
    out = {"service": service, "unit": None, "unit_masked": False, "unit_files": [], "command": None,
           "unit_memlock": None, "unit_memlock_source": None, "config_requested": config, "config_path": config,
           "config_from": "caller", "template": None, "files": None, "imports": [], "generated_config": None,
           "installed": None, "version": None, "effective": None, "config_version": None,
           "key_sources": {"LimitMEMLOCK": {"file": None, "value": None, "how": None}}, "runtimes": {},
           "derived_from": {}, "base_runtime_spec": base_runtime_spec}
    local = [] if problems is None else problems
    try:
        out["unit"], out["unit_masked"], out["unit_files"] = unit_files(host, service)
        out["command"] = command_line(host, out["unit_files"], service, local)
        limit, source = ctd.unit_limit(out["unit_files"])
        out["unit_memlock"], out["unit_memlock_source"] = limit, source
        out["key_sources"]["LimitMEMLOCK"] = {"file": source, "how": "set" if source else None,
                                              "value": ctd.render_limit(limit) if limit is not None else None}
    except RdmaNodeError as exc:
        _fail(problems, "%s unit" % service, exc)
    out["config_path"], out["config_from"] = choose_config(config, service, out["command"] or {})
    if commands is not None:
        out["installed"] = bool(binary(host, commands, "containerd", out["config_path"]))
        if out["installed"] or problems is None:
            try:
                out["version"] = read_version(host, commands, out["config_path"])
            except RdmaNodeError as exc:
                _fail(problems, "containerd --version", exc)
    try:
        out["files"] = config_files(host, out["config_path"])
        main_path, main_state = out["files"][0][0], out["files"][0][1]
        out["imports"] = [path for path, dummy_state, dummy_doc in out["files"][1:]]
        info = ctd.generated_config(main_path, main_state.content if main_state.exists else "")
        out["generated_config"] = dict(info, path=main_path) if info else None
    except RdmaNodeError as exc:
        _fail(problems, out["config_path"], exc)
    tool = (out["generated_config"] or {}).get("tool") or rancher_tool(service, out["command"] or {})
    if tool in ("k3s", "rke2"):
        version = out["version"]
        if version is None and out["files"]:  # containerd not found: the rendered file's version says which line
            file_version = out["files"][0][2].data.get("version")
            version = (2, 0) if isinstance(file_version, int) and file_version >= 3 else None
        out["template"] = template_path(host, out["config_path"], version)
    if with_effective:
        add_effective(out, host, commands, problems)
    return out


def add_effective(out, host, commands, problems=None, eff=None):
    """Fill ``effective``, ``config_version``, ``runtimes``, ``derived_from`` and the config keys of ``key_sources`` of
    an :func:`observe` result from ``containerd config dump`` (or from ``eff`` when the caller has it already)."""
    if eff is None and commands is not None and out["installed"] and out["files"] is not None:
        try:
            eff = dump(host, commands, out["config_path"], out["files"][0][1].exists)
        except RdmaNodeError as exc:
            _fail(problems, "containerd config dump", exc)
    out["effective"] = eff
    if eff is None:
        return out
    out["config_version"] = eff["config_version"]
    for name, runtime in eff["runtimes"].items():
        owner, source = spec_owner(runtime["base_runtime_spec"], out["base_runtime_spec"])
        out["runtimes"][name] = dict(runtime, owner=owner, derived_from=source)
        if runtime["runtime_type"] == ctd.RUNC_TYPE:
            out["derived_from"][name] = source
    if out["version"] is not None and out["files"] is not None:
        try:
            out["key_sources"].update(ctd.key_origins([(p, d) for p, dummy_s, d in out["files"]], out["version"], eff))
        except RdmaNodeError as exc:
            _fail(problems, out["config_path"], exc)
    return out


def unit_order(observed):
    """The unit files of an observation, in systemd's order (paths)."""
    return [path for path, dummy_text in observed["unit_files"]]


# -- the module's view: one node, one run ---------------------------------------------------------------------------
def pid_of(host, comm="containerd"):
    """The pid of the first process named ``comm`` in /proc, or None."""
    for entry in host.listdir("/proc"):
        if entry.isdigit() and entry.isascii() and host.try_attr("/proc/%s/comm" % entry) == comm:
            return int(entry)
    return None


def start_time(host, pid):
    """When ``pid`` started (seconds since the epoch, exact to a second), or None when it cannot be read."""
    stat = host.try_attr("/proc/%d/stat" % pid)
    boot = None
    for line in (host.try_attr("/proc/stat") or "").splitlines():
        if line.startswith("btime ") and line.split()[1:2] and line.split()[1].isdigit():
            boot = int(line.split()[1])
    if not stat or boot is None:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return None  # a malformed /proc/<pid>/stat line: the start time is unknown, not a traceback
    return boot + int(fields[19]) / float(os.sysconf("SC_CLK_TCK"))


def mtime(host, path):
    """The modification time of ``path``, or None."""
    try:
        info = host.stat(path)
    except HostReadError:
        return None
    return info.st_mtime if info is not None else None


def check_config(observed, requested):
    """containerd_rdma's decision on its ``config`` option ``requested`` when containerd reads
    ``observed["config_path"]`` (:func:`observe` of the same service): None when they are the same file, the warning
    when ``requested`` is the default (the module then configures the file containerd reads), else ConflictError (the
    unit starts containerd with another config than the one asked for).  The audit's judge decides the same way."""
    path = observed["config_path"]
    if path == requested:
        return None
    if requested != DEFAULT_CONFIG:
        raise ConflictError("%s starts containerd with the config %s, not %s: set config to %s (or leave it unset)"
                            % ((observed["command"] or {}).get("from") or observed["unit"], path, requested, path),
                            {"config": path, "from": observed["config_from"]})
    return "%s reads %s (%s), not %s: that file is configured" % (
        observed["service"], path, observed["config_from"], requested)


class Node:  # pylint: disable=too-many-instance-attributes
    """The node's containerd seen through host_root for one module run: version, config files, dump, unit and the
    running daemon.  ``params`` are the module's (``config`` is replaced by the file containerd really reads)."""

    def __init__(self, host, commands, params, warn=None):
        self.host = host
        self.commands = commands
        self.params = params
        self.service = params["service"]
        self.warn = warn or (lambda message: None)
        self.version = None
        self.systemd = None

    def run(self, argv, what):
        return run(self.host, self.commands, argv, what, self.params["config"])

    def observe(self):
        """The node's containerd up to its config files (:func:`observe`); the config containerd really reads
        replaces ``config`` when the caller left the default."""
        observed = observe(self.host, self.commands, self.params["config"], self.service,
                           self.params["base_runtime_spec"], with_effective=False)
        self.version = observed["version"]
        warning = check_config(observed, self.params["config"])
        if warning is not None:
            self.warn(warning)
            self.params["config"] = observed["config_path"]
        return observed

    def oci_spec(self):
        return self.run(["ctr", "oci", "spec"], "generate the base runtime spec")

    def config_files(self, planned=()):
        """[(path, FileState, Document)] in containerd's load order (:func:`config_files`)."""
        return config_files(self.host, self.params["config"], planned)

    def dump(self, exists):
        """The effective configuration (:func:`dump`)."""
        return dump(self.host, self.commands, self.params["config"], exists)

    # -- systemd ---------------------------------------------------------------------------------
    def unit_layout(self):
        return unit_layout(self.host, self.service)

    def systemctl(self, *args):
        return self.commands.run_kernel(["systemctl"] + list(args))

    def show(self):
        """``{"ActiveState", "MainPID", "LimitMEMLOCK"}`` from systemd, or None when systemd cannot be asked."""
        rc, out, dummy_err = self.systemctl("show", self.service, "-p", "ActiveState", "-p", "MainPID", "-p", "LimitMEMLOCK")
        if rc != 0:
            self.systemd = False
            return None
        self.systemd = True
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def running(self):
        """The daemon's pid, memlock and start time (seconds since the epoch), or None when it is not running."""
        shown = self.show()
        pid = None
        if shown is not None:
            if shown.get("ActiveState") != "active":
                return None
            pid = int(shown.get("MainPID") or 0) or None
        else:
            pid = pid_of(self.host)
        if not pid:
            return None
        limits = ctd.parse_proc_limits(self.host.try_attr("/proc/%d/limits" % pid, ""))
        return {"pid": pid, "memlock": limits, "started": start_time(self.host, pid)}

    def wait_active(self, timeout):
        deadline = time.time() + timeout
        state = None
        while True:
            rc, out, dummy_err = self.systemctl("is-active", self.service)
            state = out.strip()
            if rc == 0 and state == "active":
                return True, state
            if state == "failed" or time.time() >= deadline:
                return False, state
            time.sleep(0.5)

    def journal(self):
        rc, out, dummy_err = self.commands.run_kernel(["journalctl", "-u", self.service, "-n", "15", "--no-pager", "-o", "cat"])
        return out.strip() if rc == 0 else None


def spec_paths(current, generated):
    """Every base spec path a plan can read or write for the runtimes' ``current`` specs ({runtime: path}): the
    generated one, each current one, the source of a derived copy and the derived copy of another tool's spec."""
    paths = {generated}
    for path in current.values():
        if path and path.startswith("/"):  # (a relative one is refused by the planner)
            paths.add(path)
            source = ctd.derived_source(path)
            paths.add(source if source is not None else ctd.derived_path(path))
    return sorted(paths)


def spec_candidates(current):
    """Where the generated spec may be when the caller's ``base_runtime_spec`` is not known (the facts: it is an
    inventory value): the default path and every spec a runtime already names that the module would accept as its
    ``base_runtime_spec`` (absolute, ``.json``, not a derived copy): on a node the module converged with another path,
    the runtimes name that path."""
    out = [DEFAULT_BASE_SPEC]
    for path in sorted(set(current.values())):
        if path and path.startswith("/") and path.endswith(".json") and ctd.derived_source(path) is None \
                and path not in out:
            out.append(path)
    return out


def collect(host, commands, base, eff, dropin, runtimes=(), generated=None, problems=None):
    """What :func:`plan.plan` reads besides ``base`` (:func:`observe`) and ``eff`` (its effective configuration): the
    one collector of the module (:func:`observe_node`) and of the facts (:func:`_planner_input`).  Returns
    ``{"current" ({runtime: its base_runtime_spec} of the runtimes planned for), "specs" ({path: FileState} of
    :func:`spec_paths`), "texts" ({path: content or None} of the same), "oci_spec" (``ctr oci spec`` when a runtime
    gets the generated spec, else None), "planned_files" (the config files with the collection's drop-in under a
    generated k3s/rke2 2.x config, else None), "unit" (:func:`unit_layout`), "dropin" (FileState of ``dropin``)}``.

    ``runtimes``: the module's option (none: every runc-type runtime).  ``generated``: the module's
    ``base_runtime_spec``; None (the facts) reads for every :func:`spec_candidates` path, so that the plan can be made
    for the role's path when the node's config names it.  With ``problems`` None every failure raises; with a list,
    a failing ``ctr oci spec`` is ``oci_spec_error`` (a plan that needs it is unknown) and the rest still raises."""
    current = dict((name, eff["runtimes"][name]["base_runtime_spec"]) for name in ctd.target_runtimes(eff, runtimes))
    candidates = [generated] if generated is not None else spec_candidates(current)
    paths = set()
    for candidate in candidates:
        paths.update(spec_paths(current, candidate))
    specs = dict((path, observe_file(host, path)) for path in sorted(paths))
    out = {"current": current, "specs": specs, "oci_spec": None, "planned_files": None,
           "texts": dict((path, state.content if state.exists else None) for path, state in specs.items())}
    if any(ctd.needs_generated(current, candidate) for candidate in candidates):
        try:
            out["oci_spec"] = run(host, commands, ["ctr", "oci", "spec"], "generate the base runtime spec",
                                  base["config_path"])
        except RdmaNodeError as exc:
            if problems is None:
                raise
            out["oci_spec_error"] = exc.msg
    files = base["files"]
    target = ctd.rancher_dropin(base["generated_config"], files[0][2], files[0][0], base["version"])
    if target is not None:
        out["planned_files"] = config_files(host, base["config_path"], planned=(target,))
    out["unit"] = unit_layout(host, base["service"])
    out["dropin"] = observe_file(host, dropin)
    return out


def observe_node(node, want, refuse=None):
    """Everything :func:`plan.plan` reads, for the module: ``{"base" (:meth:`Node.observe`), "effective", "texts",
    "oci_spec", "planned_files", "unit", "dropin", "specs"`` (:func:`collect` for the module's options),
    ``"running" (:meth:`Node.running`), "systemd", "mtimes"}``.

    ``refuse(base)`` raises the plan's refusals that need no more reading (before ``containerd config dump``)."""
    params = node.params
    base = node.observe()
    if refuse is not None:
        refuse(base)
    files = base["files"]
    eff = node.dump(files[0][1].exists)
    add_effective(base, node.host, node.commands, eff=eff)
    got = collect(node.host, node.commands, base, eff, params["unit_dropin"], want["runtimes"],
                  want["base_runtime_spec"])
    running = node.running()
    watched = set([params["unit_dropin"]] + list(got["specs"])
                  + [p for p, dummy_s, dummy_d in files + (got["planned_files"] or [])])
    mtimes = dict((path, mtime(node.host, path)) for path in sorted(watched)) if running is not None else {}
    return {"base": base, "effective": eff, "texts": got["texts"], "oci_spec": got["oci_spec"],
            "planned_files": got["planned_files"], "unit": got["unit"], "dropin": got["dropin"], "specs": got["specs"],
            "running": running, "systemd": node.systemd, "mtimes": mtimes}


# -- rdma_facts ----------------------------------------------------------------------------------------------------
def _limit(value):
    return None if value is None else ctd.render_limit(value)


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


def _planner_input(host, commands, obs):
    """What containerd_rdma's planner reads besides :func:`observe`'s report, as plain data (:func:`collect` for
    every runc-type runtime and every :func:`spec_candidates` path), with the unit's command line (the judge decides
    the module's config from it, :func:`check_config`) and whether systemd answers.  None when the config or the
    effective configuration could not be read (``problems`` says why); ``{"error"}`` when a piece of it could not."""
    eff = obs["effective"]
    if eff is None or obs["files"] is None or obs["version"] is None:
        return None
    try:
        got = collect(host, commands, obs, eff, unit_dropin_path(obs["service"]), problems=[])
    except RdmaNodeError as exc:  # (the report above is still right: the audit says the plan is unknown, and why)
        return {"error": exc.msg}
    rc = commands.run_kernel(["systemctl", "show", obs["service"], "-p", "ActiveState"])[0]
    planned = got["planned_files"]
    out = {"version": list(obs["version"]), "service": obs["service"], "command": obs["command"],
           "config_files": [file_facts(state) for dummy_p, state, dummy_d in obs["files"]],
           "planned_files": [file_facts(state) for dummy_p, state, dummy_d in planned] if planned is not None else None,
           "effective": eff, "texts": got["texts"],
           "specs": dict((path, file_facts(state)) for path, state in got["specs"].items()), "oci_spec": got["oci_spec"],
           "unit": dict((k, v) for k, v in got["unit"].items() if k != "service"), "dropin": file_facts(got["dropin"]),
           "systemd": rc == 0}
    if "oci_spec_error" in got:
        out["oci_spec_error"] = got["oci_spec_error"]
    return out


def facts(host, commands=None, config=DEFAULT_CONFIG, pids=None, service=None):
    """``rdma_facts``' ``layers.containerd`` (and, without ``observed``, ``runtime.containerd``): containerd as
    :func:`observe` (the module's own observer) sees it: the service that runs it (``containerd``, else k3s's/rke2's
    when only theirs exists), its unit and LimitMEMLOCK, the config file it reads with its imports and the file each
    key the collection owns comes from, version, runtimes' base specs with their memlock and whose they are, CDI, the
    running process's memlock (``pids``: ``{comm: pid}`` already read, else /proc is scanned), and ``observed``: what
    containerd_rdma's planner reads (:func:`_planner_input`, with ``commands`` only), so the audit runs it."""
    problems = []
    obs = observe(host, commands, config, service, problems=problems)
    generated = obs["generated_config"]
    out = {"installed": obs["installed"], "version": None, "service": obs["service"], "unit": obs["unit"],
           "unit_files": unit_order(obs), "config_file": obs["config_path"], "config_path": obs["config_path"],
           "config_from": obs["config_from"], "config_files": [p for p, dummy_s, dummy_d in obs["files"] or []],
           "imports": obs["imports"], "generated_config": generated, "template": obs["template"],
           "config_target": None, "config_version": obs["config_version"], "runtimes": {},
           "enable_cdi": None, "cdi_spec_dirs": None, "key_sources": obs["key_sources"],
           "derived_from": obs["derived_from"], "unit_memlock": _limit(obs["unit_memlock"]),
           "unit_memlock_source": obs["unit_memlock_source"], "running": None, "problems": problems}
    if obs["version"] is not None:
        out["version"] = ".".join(str(p) for p in obs["version"])
    if obs["files"]:
        out["config_target"] = ctd.rancher_dropin(generated, obs["files"][0][2], obs["config_path"], obs["version"])
    pid = pid_of(host) if pids is None else pids.get("containerd")
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
    if commands is not None:
        out["observed"] = _planner_input(host, commands, obs)
    return out


def report_of(section):
    """``runtime.containerd``: the room's facts without the planner's input."""
    return dict((key, value) for key, value in section.items() if key != "observed")
