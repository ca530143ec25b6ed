# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet of a k3s or rke2 node, read as k3s builds its command line, into the layers ``rules.plan`` takes.

k3s (and rke2, which is k3s as a library with ``version.Program=rke2``) runs the kubelet itself: there is no
``kubelet.service``.  Rules followed, each read in k3s's source (k3s-io/k3s at 3acf8db8f209, 2026-03):

* The unit: ``k3s.service``/``k3s-agent.service`` (install.sh ``create_systemd_service_file``: ``ExecStart=k3s
  server|agent ...``, ``EnvironmentFile=-/etc/default/%N``, ``-/etc/sysconfig/%N``, ``-<unit>.env``),
  ``rke2-server.service``/``rke2-agent.service`` (rancher/rke2 ``bundle/lib/systemd/system``).  ``%N`` is the
  unit's name without ``.service``.
* The config file (pkg/configfilearg/parser.go, defaultparser.go): ``$K3S_CONFIG_FILE`` (``RKE2_CONFIG_FILE``), else
  ``--config``/``-c`` on the command line, else ``/etc/rancher/<tool>/config.yaml``; then every regular file of
  ``<config>.d`` whose name ends in ``.yaml``/``.yml`` (any case), by name (``os.ReadDir``).  Keys are merged file by
  file: a later file *replaces* a key's value (lists too), a key written ``name+`` *appends* to the value so far.
  Each value becomes ``--key=value`` (one per list item), inserted right after ``server``/``agent``: flags given on
  the command line come after them (a repeated flag such as ``--kubelet-arg`` adds to the list).
* The kubelet's command line (pkg/daemons/agent/agent.go ``startKubelet``, agent_linux.go ``kubeletArgsAndConfig``,
  pkg/util/args.go ``GetArgs``): k3s's own flags (``--config-dir=<data-dir>/agent/etc/kubelet.conf.d``, no
  ``--config``) and every ``kubelet-arg`` as ``--<name>=<value>`` (a leading ``--`` is dropped, a value without
  ``=`` is ``true``, a name's trailing ``+``/``-`` is not part of the flag), repeated flags in their order.
* k3s writes ``00-<tool>-defaults.conf`` into that directory at every start; ``kubelet-arg`` ``config=<file>`` is
  taken off the command line and copied to ``10-cli-config.conf`` there, ``config-dir=<dir>`` to
  ``20-cli-config-dir/`` (``extractConfigArgs``), unless they are already inside it.  Nothing else in the directory
  is touched; the k3s documentation recommends placing drop-ins there (k3s 1.32 and later).

Nothing here writes.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re
import stat

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ch
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import config as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._untrusted import load_yaml

TOOLS = ("k3s", "rke2")
#: the docs' version gate for drop-ins in kubelet.conf.d (k3s "Kubelet Configuration Files": v1.32 and above)
DROPIN_SINCE = (1, 32)
CLI_CONFIG = "10-cli-config.conf"
CLI_CONFIG_DIR = "20-cli-config-dir"


def detect(host):
    """``{"tool", "service", "unit", "files"}`` of the first k3s/rke2 unit found (the units the containerd room's
    observer, ``layers/containerd/observe.py``, knows: k3s, k3s-agent, rke2-server, rke2-agent), or None.  ``files``
    have ``%N`` replaced by the service name."""
    for tool in TOOLS:
        for service in ch.RANCHER_UNITS[tool]:
            files = kh.unit_files(host, service + ".service")
            if files:
                files = [(path, re.sub(r"(?<!%)%N", service, text)) for path, text in files]
                return {"tool": tool, "service": service, "unit": files[0][0], "files": files}
    return None


def to_string(value):
    """Go's ``convert.ToString`` (wrangler): nil is empty, booleans are ``true``/``false``, space trimmed."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _items(value, path):
    """``[(text, path)]`` one flag per list item, or one flag of a scalar."""
    if isinstance(value, list):
        return [(to_string(v), path) for v in value]
    return [(to_string(value), path)]


def _as_slice(value, entries):
    """``toSlice`` of parser.go: a string is one item, a list its items, anything else its text unless empty."""
    if isinstance(value, (list, str)):
        return list(entries)
    return [e for e in entries if e[0] != ""]


def config_files(host, config):
    """The files k3s merges, in its order: ``config`` (when it exists), then ``<config>.d/*.yaml|*.yml`` by name."""
    out = [config] if host.read_text(config) is not None else []
    directory = config + ".d"
    for name in host.listdir(directory):
        path = directory + "/" + name
        info = host.stat(path, follow=False)  # os.ReadDir's IsDir: a link is not followed
        if name.lower().endswith((".yaml", ".yml")) and info is not None and not stat.S_ISDIR(info.st_mode):
            out.append(path)
    return out


def merge_config(documents):
    """k3s's ``readConfigFile`` over ``[(path, mapping)]``: ``[(key, [(text, path)])]`` in first-seen key order;
    a later file replaces a key, ``key+`` appends."""
    values, order, raw = {}, [], {}
    for path, data in documents:
        for raw_key, value in (data or {}).items():
            key = to_string(raw_key)
            append = key.endswith("+")
            key = key[:-1] if append else key
            if key not in values:
                order.append(key)
            if append and key in values:
                values[key] = _as_slice(raw[key], values[key]) + _as_slice(value, _items(value, path))
                raw[key] = []
            else:
                values[key] = _items(value, path)
                raw[key] = value
    return [(key, values[key]) for key in order]


def read_config(host, config, problems):
    """``(merged, files)`` of :func:`merge_config` over the files of :func:`config_files`; a file that cannot be read
    or is not a mapping is a problem (k3s refuses to start with it)."""
    documents = []
    files = config_files(host, config)
    for path in files:
        try:
            data = load_yaml(host.read_text(path) or "", path)
        except ImportError:
            problems.append({"what": path, "error": "%s is YAML: reading it needs PyYAML (python3-yaml) on the node" % path})
            continue
        except RdmaNodeError as exc:
            problems.append({"what": path, "error": exc.msg})
            continue
        except Exception as exc:  # pylint: disable=broad-except  # yaml.YAMLError: the node's file is malformed
            problems.append({"what": path, "error": "%s is not valid YAML: %s" % (path, str(exc).splitlines()[0])})
            continue
        if data is not None and not isinstance(data, dict):
            problems.append({"what": path, "error": "%s is not a mapping of flags: k3s refuses to start" % path})
            continue
        documents.append((path, data))
    return merge_config(documents), files


def _cli_flag(words, names):
    """``[(value, index)]`` of every ``--name X``, ``--name=X`` (also one dash, as Go's flag package accepts)."""
    out = []
    index = 0
    while index < len(words):
        word = words[index]
        for name in names:
            if word in ("-" + name, "--" + name) and index + 1 < len(words):
                out.append((words[index + 1], index + 1))
                index += 1
                break
            if word.startswith(("-" + name + "=", "--" + name + "=")):
                out.append((word.split("=", 1)[1], index))
                break
        index += 1
    return out


def kubelet_flag(arg):
    """The kubelet flag a ``kubelet-arg`` value becomes (GetArgs): ``(name, value)``."""
    body = arg[2:] if arg.startswith("--") else arg
    name, sep, value = body.partition("=")
    return name.rstrip("-+"), value if sep else "true"


def describe(origin):
    """Where a kubelet-arg comes from, for people."""
    if origin.get("how") == "kubelet-arg":
        return "kubelet-arg in %s" % origin["file"]
    return "--kubelet-arg in ExecStart= of %s" % origin.get("file")


def command_line(host, found, pid=None):
    """How k3s/rke2 start the kubelet, in the shape of ``host.command_line`` (``source`` is the tool) plus
    ``rancher``: ``{"tool", "service", "binary", "data_dir", "config", "config_files", "kubelet_args",
    "dropin_dir", "defaults", "pending"}``."""
    problems = []
    env = {}
    words = kh.unit_command(host, found["files"], problems, env) or []
    problems = [dict(p, error=p["error"].replace("the kubelet", found["service"])) for p in problems]
    argv = [word for word, dummy_origin in words]
    tool = found["tool"]
    config_name = (tool.upper() + "_CONFIG_FILE")
    config = env.get(config_name) or ([v for v, i in _cli_flag(argv[1:], ("config", "c"))] or [None])[-1] or \
        "/etc/rancher/%s/config.yaml" % tool
    config = kub.absolute(config)
    merged, files = read_config(host, config, problems)
    by_key = dict(merged)
    cli_data = [v for v, i in _cli_flag(argv[1:], ("data-dir", "d"))]
    data_dir = kub.absolute(cli_data[-1] if cli_data else (by_key.get("data-dir") or [("", None)])[-1][0] or
                            ch.RANCHER_DATA_DIRS[tool])
    args = [(text, {"file": path, "how": "kubelet-arg"}) for text, path in by_key.get("kubelet-arg", [])]
    for value, index in _cli_flag(argv[1:], ("kubelet-arg",)):
        args.append((value, words[index + 1][1]))
    dropin_dir = data_dir + "/agent/etc/kubelet.conf.d"
    flag_words, pending = [], {}
    for text, origin in args:
        name, value = kubelet_flag(text)
        if name in ("config", "config-dir"):
            pending[name] = (value, origin)
            continue
        flag_words.append(("--%s=%s" % (name, value), origin))
    flags = kub.relevant_flags(kub.parse_command(flag_words, 0), describe)
    live = None
    running = kh.process_command(host, pid) if pid else None
    if running is not None:
        by_text = dict((f["flag"], f) for f in flags)
        live = []
        for flag in kub.relevant_flags(kub.parse_command(running), None):
            same = by_text.get(flag["flag"])
            live.append(dict(flag, origin=same["origin"], source=same["source"]) if same else flag)
    return {"running": running is not None, "pid": pid if running is not None else None, "unit": found["unit"],
            "source": tool, "problems": problems, "config": None, "config_dir": dropin_dir, "flags": flags,
            "flags_from": "kubelet-arg of %s (%s)" % (found["service"], ", ".join(files + [found["unit"]])),
            "live_flags": live,
            "rancher": {"tool": tool, "service": found["service"], "binary": argv[0] if argv else None,
                        "data_dir": data_dir, "config": config, "config_files": files,
                        "kubelet_args": [{"arg": text, "source": describe(origin)} for text, origin in args],
                        "dropin_dir": dropin_dir, "defaults": "%s/00-%s-defaults.conf" % (dropin_dir, tool),
                        "pending": dict((k, v[0]) for k, v in pending.items())}}


def dropin_entries(host, line, problems=None):
    """``[(name, path)]`` the kubelet will merge from k3s's drop-in directory at the next start, in its order: the
    directory as it is, with ``10-cli-config.conf`` and ``20-cli-config-dir/`` replaced by what k3s copies there from
    a ``config=``/``config-dir=`` kubelet-arg outside it."""
    info = line["rancher"]
    directory = info["dropin_dir"]
    try:
        entries = dict(kh.walk_dropins(host, directory))
    except HostReadError as exc:
        if problems is None:
            raise
        problems.append({"what": directory, "error": exc.msg})
        entries = {}
    config = info["pending"].get("config")
    if config and not config.startswith(directory):
        entries[CLI_CONFIG] = kub.absolute(config)
    config_dir = info["pending"].get("config-dir")
    if config_dir and not config_dir.startswith(directory):
        for name, path in kh.walk_dropins(host, kub.absolute(config_dir)):
            entries[CLI_CONFIG_DIR + "/" + name] = path
    return sorted(entries.items(), key=lambda item: kub.walk_key(item[0]))


def config_layers(host, line, dropin_name=None, problems=None):
    """``(layers, documents)`` as ``host.config_layers`` returns them, for k3s's drop-in directory (no
    config file: k3s passes none)."""
    layers, documents = [], {}
    own = kub.own_names(dropin_name) if dropin_name else ()
    for name, path in dropin_entries(host, line, problems):
        doc = kh.read_document(host, path, problems)
        if doc is None:
            continue
        documents[path] = doc
        layers.append({"kind": "dropin", "path": path, "name": name, "settings": kub.relevant(doc["data"]),
                       "ours": name in own and kub.is_own_dropin(doc["text"])})
    return layers, documents


def dropin_refusal(line, version):
    """None when the collection may write its drop-in into k3s's directory, else why not, with the way by hand."""
    info = line["rancher"]
    if version is None or tuple(version[:2]) >= DROPIN_SINCE:
        return None
    why = "%s %s does not read kubelet drop-ins (k3s and rke2 1.32 and later pass --config-dir=%s)" % (
        info["tool"], ".".join(str(p) for p in version), info["dropin_dir"])
    return ("%s; nothing was written. By hand: put the settings as kubelet flags into a file of %s.d, e.g. "
            "%s.d/50-rdma-k8s-node.yaml with `kubelet-arg+: [\"topology-manager-policy=restricted\", "
            "\"cpu-manager-policy=static\", \"reserved-cpus=0-1\"]`, remove %s/cpu_manager_state when the CPU manager "
            "policy changes, and restart %s (systemctl restart %s); or upgrade %s" % (
                why, info["config"], info["config"], "/var/lib/kubelet", info["service"], info["service"], info["tool"]))


def parse_version(text):
    """``(major, minor, patch)`` of ``k3s --version``/``rke2 --version`` (``k3s version v1.32.3+k3s1 (...)``)."""
    try:
        return kub.parse_kubelet_version(text)
    except ParseError:
        return None
