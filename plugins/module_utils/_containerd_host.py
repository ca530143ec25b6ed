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
import posixpath

from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils import _kubelet_host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils import _systemd
from ansible_collections.rdma.k8s_node.plugins.module_utils import _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ParseError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import observe_file

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
def unit_files(host, service, replace=None):
    """``(unit path or None, masked, [(path, text)])``: ``<service>.service`` and its drop-ins in systemd's order
    (:func:`_systemd.dropin_order`; a drop-in linked to /dev/null hides its name and adds nothing).  Drop-ins are
    listed even without a unit file.  ``replace`` = ``(path, text or None)`` stands in for one drop-in (the
    collection's, as it will be)."""
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
    if replace is not None:
        directory, name = replace[0].rsplit("/", 1)
        names = [n for n in listing.get(directory, []) if n != name]
        if replace[1] is not None:
            names.append(name)
            texts[replace[0]] = replace[1]
        listing[directory] = names
    files = [(unit_path, "" if masked else host.read_text(unit_path, default=""))] if unit_path else []
    for path in _systemd.dropin_order(listing, unit):
        if path in texts:
            files.append((path, texts[path]))
        elif host.readlink(path) != "/dev/null":
            files.append((path, host.read_text(path, default="")))
    return unit_path, masked, files


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
    """:func:`_containerd.effective` of ``containerd config dump`` of the node's files (``config default`` when there
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
    ``effective`` (:func:`_containerd.effective` of ``config dump``, or None), ``config_version``, ``key_sources``
    ({label: origin}, :func:`_containerd.key_origins` plus ``LimitMEMLOCK``), ``runtimes`` ({name: {"runtime_type",
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
