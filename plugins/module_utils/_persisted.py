# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the node is configured to do at its next boot, read from files only: the `persisted` part of rdma_facts.

The audit compares three values per item: desired (inventory), live (the kernel now) and persisted (this module).
Everything here reads files under the host root and never runs a command, so it is safe on a live fleet and in a
pod that mounts the host.  The pure parsers take text and return plain data; :func:`persisted_facts` does the I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch
import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import mode as _netns
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import observe as _sriov_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import observe as _sysctl_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as _sysctl

GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
BLS_DIR = "/boot/loader/entries"
GRUBENVS = ("/boot/grub2/grubenv", "/boot/grub/grubenv")
# systemd-sysctl's directories, most important first; a file name in an earlier one hides the same name later
SYSCTL_DIRS = _sysctl.SYSCTL_DIRS
SYSCTL_CONF = _sysctl.SYSCTL_CONF
MODULES_LOAD_DIRS = ("/etc/modules-load.d", "/run/modules-load.d", "/usr/local/lib/modules-load.d",
                     "/usr/lib/modules-load.d", "/lib/modules-load.d")
MODULES_FILE = "/etc/modules"
SRIOV_STATE = "/etc/rdma-k8s-node/sriov.json"

# the value is right-stripped in code: "(.*?)\s*$" backtracked quadratically on a long run of blanks inside a line
_BLS_KEY_RE = re.compile(r"^\s*(\w+)\s+(.*)$")


# -- pure parsers ---------------------------------------------------------------------------------------------------
def parse_bls_entry(text):
    """A Boot Loader Specification entry as ``{key: value}`` (``options`` lines joined, as systemd-boot does)."""
    out = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _BLS_KEY_RE.match(line)
        if not match:
            continue
        key, value = match.group(1), match.group(2).rstrip()
        if key == "options" and "options" in out:
            out[key] = out[key] + " " + value
        else:
            out[key] = value
    return out


def parse_grubenv(text):
    """``key=value`` lines of a GRUB environment block (the ``#`` padding is ignored)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, dummy, value = line.partition("=")
        out[key] = value
    return out


def expand_grub_vars(args, env):
    """Replace ``$name`` / ``${name}`` words of BLS options with their GRUB environment value (EL's kernelopts)."""
    out = []
    for arg in args:
        match = re.match(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$", arg)
        if match:
            out.extend(_cmdline.split_raw(env.get(match.group(1), "")))
        else:
            out.append(arg)
    return out


def sysctl_assignments(text):
    """``(key, value, ignore_failure)`` of every assignment in a sysctl.d file, in order."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, dummy, value = line.partition("=")
        key = key.strip()
        ignore = key.startswith("-")
        out.append((key.lstrip("-").strip(), value.strip(), ignore))
    return out


def sysctl_key_parts(key):
    """A sysctl.d key as path components: ``/``-separated keys keep dots (interface names such as ``eth0.100``)."""
    key = key.strip()
    return key.strip("/").split("/") if "/" in key else key.split(".")


def persisted_sysctl(files, interfaces):
    """``{interface: {param: {"value": int|str, "file": path}}}`` for ``all``, ``default`` and ``interfaces``
    from ``files`` = ``[(path, text)]`` in systemd-sysctl's order, as systemd-sysctl applies them at boot: the last
    assignment of a key wins, an explicit key is never touched by a glob (``net.ipv4.conf.*.rp_filter``) whatever the
    order, a glob sets every other matching interface, and a ``-key`` line keeps globs (and so this report) off it."""
    return _sysctl.boot_table([(path, _sysctl.parse_file(text)) for path, text in files], interfaces)


def modules_load_names(text):
    """Module names listed in a modules-load.d file or /etc/modules (comments with ``#`` or ``;``)."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith(";"):
            out.append(_modprobe.module_name(line.split()[0]))
    return out


#: the PFs and VF counts of the sriov role's boot-unit state file: the sriov room's reader of it
sriov_state_summary = _sriov_observe.state_file_pfs


def ordered_files(listing, dirs):
    """systemd's conf.d ordering: names deduplicated (earlier directory wins), ``*.conf`` only, sorted by name."""
    chosen = {}
    for directory in dirs:
        for name in listing.get(directory, []):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = directory
    return [chosen[name] + "/" + name for name in sorted(chosen)]


# -- node I/O -------------------------------------------------------------------------------------------------------
class _Reader(object):
    def __init__(self, host, problems):
        self.host = host
        self.problems = problems

    def text(self, path):
        try:
            return self.host.read_text(path)
        except RdmaNodeError as exc:
            self.problems.append({"path": path, "error": exc.msg})
            return None

    def listdir(self, path):
        try:
            return self.host.listdir(path)
        except RdmaNodeError as exc:
            self.problems.append({"path": path, "error": exc.msg})
            return []

    def listing(self, dirs):
        return dict((d, self.listdir(d)) for d in dirs)


#: the reader the modules use: read errors collected in ``problems`` (``[{path, error}]``)
Reader = _Reader


def boot_cmdline(reader, release):
    """The arguments the next boot gets by default: BLS entry of the running kernel (or the newest) when GRUB reads
    BLS entries, else the first ``linux`` line of grub.cfg.  ``None`` when no GRUB configuration is found."""
    for cfg in GRUB_CFGS:
        text = reader.text(cfg)
        if text is None:
            continue
        if "blscfg" in text and reader.host.isdir(BLS_DIR):
            entries = sorted(n for n in reader.listdir(BLS_DIR) if n.endswith(".conf"))
            parsed = []
            for name in entries:
                body = reader.text(BLS_DIR + "/" + name)
                if body is not None:
                    parsed.append((name, parse_bls_entry(body)))
            chosen = [p for p in parsed if release and release in (p[1].get("version", ""), p[1].get("linux", ""))
                      or release and p[1].get("linux", "").endswith("-" + release)]
            chosen = chosen or sorted(parsed, reverse=True)
            if chosen:
                name, entry = chosen[0]
                env = {}
                for grubenv in GRUBENVS:
                    env_text = reader.text(grubenv)
                    if env_text is not None:
                        env = parse_grubenv(env_text)
                        break
                args = expand_grub_vars(_cmdline.split_raw(entry.get("options", "")), env)
                return {"source": BLS_DIR + "/" + name, "kernel": entry.get("linux"), "args": args}
        lines = _grub.grub_cfg_linux_lines(text)
        if lines:
            return {"source": cfg, "kernel": lines[0]["kernel"], "args": lines[0]["args"]}
    return None


#: modules whose modprobe.d lines rdma_facts keeps for the audit (ib_core's netns_mode; what stops nvidia_peermem)
MODPROBE_MODULES = ("ib_core", "nvidia_peermem")


def modprobe_layers(reader):
    """``[(path, directives)]`` of modprobe.d in kmod's reading order (:func:`_modprobe.directives`)."""
    layers = []
    for directory, name in _modprobe.config_files(reader.listing(_modprobe.CONFIG_DIRS)):
        path = directory + "/" + name
        layers.append((path, _modprobe.directives(reader.text(path) or "")))
    return layers


def modprobe_facts(layers, modules=MODPROBE_MODULES):
    """The directives of ``layers`` that concern ``modules`` (options, blacklist, a matching install pattern), as
    ``[{"path", "directives": [[line, command, module, rest]]}]`` for every file in reading order (files without such
    a line keep their place with an empty list, so a file of ours can be put among them)."""
    out = []
    for path, entries in layers:
        kept = [list(entry) for entry in entries
                if entry[1] in ("options", "blacklist", "install") and any(
                    entry[2] == module if entry[1] != "install" else fnmatch.fnmatchcase(module, entry[2])
                    for module in modules)]
        out.append({"path": path, "directives": kept})
    return out


def netns_persisted(reader, boot, layers=None):
    """The netns mode the next boot gets: ``ib_core.netns_mode=`` on the boot command line wins over modprobe.d
    (kmod appends command-line options after the configured ones)."""
    layers = modprobe_layers(reader) if layers is None else layers
    settings = _modprobe.settings_of(layers, "ib_core", "netns_mode")
    value, path = (settings[-1][0], settings[-1][1]) if settings else (None, None)
    out = {"modprobe": None, "modprobe_file": path, "cmdline": None, "effective": None}
    try:
        # a bare bool parameter sets it (param_set_bool with no value)
        out["modprobe"] = _netns.mode_of(value or "1") if value is not None else None
    except RdmaNodeError as exc:
        reader.problems.append({"path": path, "error": exc.msg})
    if boot is not None:
        arg = _cmdline.last_value(" ".join(boot["args"]), "ib_core.netns_mode")
        if arg is not None:
            try:
                out["cmdline"] = _netns.mode_of(arg)
            except RdmaNodeError as exc:
                reader.problems.append({"path": boot["source"], "error": exc.msg})
    out["effective"] = out["cmdline"] or out["modprobe"]
    return out


def persisted_facts(host, interfaces):
    """``{kernel_cmdline, netns_mode, sysctl, modules_load, sriov, problems}`` of the node behind ``host``."""
    problems = []
    reader = _Reader(host, problems)
    release = host.try_attr("/proc/sys/kernel/osrelease")
    boot = boot_cmdline(reader, release)
    modprobe = modprobe_layers(reader)
    # what systemd-sysctl reads at boot and `sysctl --system` after it (the sysctl room's observer)
    sysctl = _sysctl_observe.read_files(reader.host, reader.problems)
    modules = []
    for path in ordered_files(reader.listing(MODULES_LOAD_DIRS), MODULES_LOAD_DIRS) + [MODULES_FILE]:
        for name in modules_load_names(reader.text(path) or ""):
            if name not in modules:
                modules.append(name)
    sriov = None
    state = reader.text(SRIOV_STATE)
    if state is not None:
        try:
            sriov = dict(sriov_state_summary(json.loads(state)), state_file=SRIOV_STATE)
        except (ValueError, RecursionError, TypeError, AttributeError, KeyError) as exc:
            problems.append({"path": SRIOV_STATE, "error": str(exc)})
    return {
        "kernel_cmdline": boot,
        "netns_mode": netns_persisted(reader, boot, modprobe),
        "modprobe": modprobe_facts(modprobe),
        "sysctl": _sysctl.boot_table(_sysctl.layers_of(sysctl)[0], interfaces),
        "sysctl_files": sysctl,
        "modules_load": sorted(modules),
        "sriov": sriov,
        "problems": problems,
    }
