#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: containerd_rdma
short_description: Give CRI containers the memlock limit RDMA needs (containerd unit limit, base runtime spec, CDI)
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - RDMA registers (pins) memory, and a pod's C(RLIMIT_MEMLOCK) bounds how much. Without a change, CRI containers
    inherit containerd's limit (8 MiB on most distributions) and C(ibv_reg_mr) fails with C(ENOMEM); NCCL then
    silently falls back to TCP. C(CAP_IPC_LOCK) does not help a non-root process.
  - "Owns a systemd drop-in for containerd.service with C(LimitMEMLOCK=) O(memlock), and runs C(systemctl daemon-reload)
    when it changes."
  - Gives every runc-type CRI runtime (C(runc), C(nvidia) when the NVIDIA runtime is configured), or the runtimes
    named in O(runtimes), a base runtime spec with C(RLIMIT_MEMLOCK) soft and hard set to O(memlock). A runtime
    without a base spec gets one generated from the installed containerd (C(ctr oci spec)) at O(base_runtime_spec),
    with C(RLIMIT_NOFILE) set too (the generated spec caps it at 1024).
  - "A runtime that already points at another tool's spec (EKS AL2023 nodeadm's C(/etc/containerd/base-runtime-spec.json),
    kubespray's C(/etc/containerd/cri-base.json), a hand-made one) keeps that spec: the module never writes the
    owner's file. It writes a derived copy next to it, C(rdma-k8s-node.<name>), that is the owner's file byte for
    byte except the C(RLIMIT_MEMLOCK) entry (and C(RLIMIT_NOFILE) when O(nofile) is set), and points the runtime at
    the copy; every later run derives the copy again from the owner's current file. When the owner's spec already
    has the wanted limits, nothing changes. The result's C(observed.base_specs) says, per runtime, whose file it is."
  - Sets C(enable_cdi) and C(cdi_spec_dirs) where the version needs it (containerd 1.7 has CDI off by default;
    2.x has it on; 1.6 has no CDI and only gets a warning).
  - Edits C(config.toml) in place with config version 2 (containerd 1.6/1.7) or 3 and 4 (2.x, 2.3) key paths,
    keeping every other setting, comment and the file's order.
  - "Files the config imports (NVIDIA Container Toolkit's C(conf.d/99-nvidia.toml), EKS's C(config.d)) are other
    tools' and are not edited. containerd merges them after the main file (2.x key by key, the last file wins;
    1.x replaces the whole CRI section with the one of the last file that names it), so when one of them would
    override a key the module sets, the module fails naming the file, the key and its value, unless
    O(edit_imports=true) lets it write the key into that file."
  - "A config that says it is regenerated is not edited. k3s and rke2 render their containerd C(config.toml) at
    every start; when it imports a drop-in directory (k3s/rke2 with containerd 2.x, C(config-v3.toml.d)), the
    module writes its keys into its own drop-in C(50-rdma-k8s-node.toml) there, else it fails saying what to do.
    Any other file whose header says it is generated is refused unless O(edit_generated=true)."
  - Before anything is restarted, C(containerd config dump) must show the new settings (containerd only warns
    about unknown keys, so a misplaced key would otherwise fail silently); if it does not, the files are restored.
  - Restarts containerd only with O(restart=true), then checks that it is active, answers on its socket and runs
    with the new memlock limit. If not, every file is restored, containerd is restarted again, and the module
    fails saying whether containerd is back.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is per key (C(LimitMEMLOCK), the spec's rlimits, each config key), not per line.
  idempotent:
    support: full
options:
  memlock:
    description:
      - The memlock limit for containerd and every CRI container, soft and hard.
      - V(unlimited) (also V(infinity)), or a byte count such as V(4194304) or V(64M) (K, M, G, T are powers of 1024).
    type: str
    default: unlimited
  nofile:
    description:
      - C(RLIMIT_NOFILE) (soft and hard) of containers created from the base runtime spec.
      - Unset, a generated spec gets 1048576 and another tool's spec keeps its own value; set, both get this value.
    type: int
  config:
    description: containerd's main configuration file. Files it imports are followed.
    type: path
    default: /etc/containerd/config.toml
  base_runtime_spec:
    description:
      - Where the spec generated for runtimes without a base spec is written; those runtimes point at this path.
      - This module owns the file and writes it again from C(ctr oci spec) whenever it differs, so it must be a path
        no other tool writes (not kubespray's C(/etc/containerd/cri-base.json)). It must not be named
        C(rdma-k8s-node.*), the names of derived copies.
    type: path
    default: /etc/containerd/rdma-k8s-node-base-spec.json
  runtimes:
    description:
      - CRI runtimes to point at the base runtime spec. Empty means every runtime of type C(io.containerd.runc.v2)
        in the effective configuration. A named runtime that is not configured is an error.
    type: list
    elements: str
    default: []
  cdi:
    description:
      - Enable the Container Device Interface (C(enable_cdi = true)) where containerd supports it (1.7 and later).
      - V(false) leaves the CDI settings as they are.
    type: bool
    default: true
  cdi_spec_dirs:
    description: Directories containerd reads CDI specs from (with O(cdi=true)).
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  edit_imports:
    description:
      - Write a key into the imported file that would override it (the last one that sets it on containerd 2.x, the
        last one that names the CRI plugin on 1.x) instead of failing. That file belongs to another tool, which may
        write it again (nvidia-ctk does whenever it runs), so run this module after it.
    type: bool
    default: false
  edit_generated:
    description:
      - Edit a main config whose header says it is generated. The edit is lost when its generator runs again.
      - Never applies to k3s's and rke2's config, which they render at every start (see the description).
    type: bool
    default: false
  unit_dropin:
    description:
      - The systemd drop-in this module owns; it must be a C(.conf) file in C(/etc/systemd/system/<service>.service.d).
      - Default C(/etc/systemd/system/<service>.service.d/50-rdma-k8s-node-memlock.conf).
    type: path
  service:
    description:
      - "The systemd service that runs containerd: letters, digits and C(_ . @ -) (and C(:)), not starting with
        C(-) or C(.)."
      - On k3s and rke2 containerd runs inside their own service (C(k3s), C(k3s-agent), C(rke2-server),
        C(rke2-agent)); the module refuses V(containerd) with their config.
    type: str
    default: containerd
  restart:
    description:
      - Restart containerd when a change (or a previous run's change) has not reached the running daemon.
      - "Running containers keep the limits they were created with: pods must be recreated to get the new limit."
    type: bool
    default: false
  restart_timeout:
    description: Seconds to wait for containerd to become active after a restart.
    type: int
    default: 60
  backup:
    description:
      - Keep a timestamped copy of each edited file next to it.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
notes:
  - TOML cannot hold 18446744073709551615 (RLIM_INFINITY), which is why the limit lives in the JSON base spec and
    the unit, never in C(config.toml).
  - C(base_runtime_spec) applies to containers created through CRI (kubelet, crictl), not to C(ctr run).
  - Commands C(containerd), C(ctr) run inside O(host_root) (through C(chroot) when it is not V(/)); C(systemctl)
    runs as found on C(PATH). With a k3s or rke2 config they are also looked for in C(<data-dir>/data/current/bin)
    (k3s) and C(<data-dir>/bin) (rke2).
  - See docs/containerd.md for whose files the module writes and why.
seealso:
  - module: rdma.k8s_node.rdma_facts
  - module: rdma.k8s_node.kubelet_topology
"""

EXAMPLES = r"""
- name: Unlimited memlock for RDMA pods, CDI on, restart containerd now
  rdma.k8s_node.containerd_rdma:
    restart: true
  register: containerd

- name: Only the runc runtime, keep CDI untouched, restart later
  rdma.k8s_node.containerd_rdma:
    runtimes: [runc]
    cdi: false

- name: Tell the operator
  ansible.builtin.debug:
    msg: "containerd must be restarted: {{ containerd.restart_required }}"
  when: containerd.restart_required | length > 0
"""

RETURN = r"""
changed:
  description: Whether a file changed, or containerd was restarted (or would be, in check mode).
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "update_file", "target": "/etc/containerd/config.toml", "mode": "0644"},
           {"action": "run", "target": "systemctl daemon-reload"}, {"action": "restart", "target": "containerd"}]
reboot_required:
  description: Always false.
  returned: always
  type: bool
restart_required:
  description: C([containerd]) when the running daemon does not have the configured settings and O(restart) is off.
  returned: always
  type: list
  elements: str
changes:
  description: Per key, the effective value before and the value after the change.
  returned: always
  type: dict
  sample: {"LimitMEMLOCK": {"before": "8388608", "after": "infinity"},
           "runtimes.runc.base_runtime_spec": {"before": "", "after": "/etc/containerd/rdma-k8s-node-base-spec.json"}}
observed:
  description: What the module read before changing anything.
  returned: always
  type: dict
  contains:
    containerd_version:
      description: The installed containerd's version.
      type: str
    config_version:
      description: The effective configuration's version (2, 3 or 4).
      type: int
    config_files:
      description: The main configuration file and the files it imports, in containerd's load order.
      type: list
      elements: str
    config_generated:
      description:
        - Null, or what regenerates the main config (C(tool) k3s, rke2 or null, the C(header) line saying so, C(path)).
      type: dict
    config_dropin:
      description: The collection's drop-in under a generated k3s/rke2 config (only then).
      type: str
    imported_overrides:
      description:
        - Imported files that would override a key the module sets (C(file), C(key), its C(value) there, the
          C(wanted) value, C(why)). Non-empty only with O(edit_imports=true); otherwise the module fails listing them.
      type: list
      elements: dict
    runtimes:
      description: Effective CRI runtimes with their type and base runtime spec.
      type: dict
    key_sources:
      description:
        - "Per key the collection sets (C(LimitMEMLOCK), C(runtimes.<name>.base_runtime_spec), C(enable_cdi),
          C(cdi_spec_dirs)), the file the value in effect comes from before the change: C(file), C(value), C(how)
          (V(set), V(section) when a containerd 1.x import replaced the CRI section without the key, or null)."
      type: dict
    base_specs:
      description:
        - "Per managed runtime, whose base spec it is and what is done: C(path) (its base spec now), C(owner)
          (V(rdma.k8s_node) or V(other)), C(written_by) (the tool known to write that path), C(action)
          (V(generate), V(derive) or V(keep)), C(spec) (the spec it points at afterwards), C(derived_from), C(note)."
      type: dict
    enable_cdi:
      description: Effective C(enable_cdi) (null on containerd 1.6).
      type: bool
    cdi_spec_dirs:
      description: Effective C(cdi_spec_dirs).
      type: list
      elements: str
    unit_memlock:
      description: C(LimitMEMLOCK) systemd applies to the service, from its unit files (C(infinity) or bytes).
      type: str
    running:
      description: The running daemon (C(pid), C(memlock) soft/hard) or null when it does not run.
      type: dict
  sample: {"containerd_version": "1.7.24", "config_version": 2, "config_files": ["/etc/containerd/config.toml"],
           "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2", "base_runtime_spec": ""}},
           "base_specs": {"runc": {"path": null, "owner": "rdma.k8s_node", "action": "generate",
                                   "spec": "/etc/containerd/rdma-k8s-node-base-spec.json"}},
           "enable_cdi": false, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "unit_memlock": "8388608",
           "running": {"pid": 812, "memlock": {"soft": "8388608", "hard": "8388608"}, "stale": false}}
diff:
  description: Per-key before and after of each edited file (with C(--diff)).
  returned: when diff mode is on and something changes
  type: raw
backup_files:
  description: Backup copies kept, by edited path (with O(backup=true)).
  returned: when a backup was made
  type: dict
"""

import os
import posixpath
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd_host as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils import _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, HostReadError, InputError, ParseError, VerifyError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import (
    FileTransaction,
    conf_name_pattern,
    observe_file,
    plan_file,
    revert,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action, exit_module

# a unit name as systemd accepts it (unit_name_is_valid(); no escapes needed for containerd's), never an option
UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9_@:][A-Za-z0-9_.@:-]*\Z")
# a drop-in systemd reads (*.conf, not hidden)
DROPIN_NAME_RE = conf_name_pattern(".conf")
# a CRI runtime name that is a bare TOML key (no quoting, no dots that would split it)
RUNTIME_NAME_RE = re.compile(r"^[A-Za-z0-9_+-]+\Z")

# systemd's unit search path, most important first (a drop-in name in an earlier directory masks a later one)
UNIT_DROPIN_NAME = ctdh.UNIT_DROPIN_NAME
RANCHER_UNITS = ctdh.RANCHER_UNITS


def validate(params):
    """Everything that can be checked before reading the node; raises InputError naming the option."""
    want = {
        "memlock": ctd.parse_limit(params["memlock"], "memlock"),
        "base_runtime_spec": params["base_runtime_spec"],
        "runtimes": list(params["runtimes"]),
        "cdi": params["cdi"],
        "cdi_spec_dirs": list(params["cdi_spec_dirs"]),
    }
    if params["nofile"] is not None and not 64 <= params["nofile"] <= 1 << 30:
        raise InputError("nofile must be between 64 and 1073741824 (the kernel's nr_open ceiling), got %d" % params["nofile"])
    want["nofile"] = params["nofile"]
    service = params["service"]
    if service.endswith(".service") or not UNIT_NAME_RE.match(service):
        raise InputError("service must be a systemd unit name without .service (letters, digits and : _ . @ -, not "
                         "starting with - or .), got %r" % (service,))
    dropin_dir = "/etc/systemd/system/%s.service.d" % service
    if params["unit_dropin"] is None:
        params["unit_dropin"] = "%s/%s" % (dropin_dir, UNIT_DROPIN_NAME)
    for option in ("config", "base_runtime_spec", "unit_dropin"):
        if not params[option].startswith("/"):
            raise InputError("%s must be an absolute path, got %s" % (option, params[option]))
    if not params["base_runtime_spec"].endswith(".json"):
        raise InputError("base_runtime_spec must be a .json file, got %s" % params["base_runtime_spec"])
    if posixpath.basename(params["base_runtime_spec"]).startswith(ctd.DERIVED_PREFIX):
        raise InputError("base_runtime_spec must not be named %s*: that name marks the derived copies of other "
                         "tools' specs, got %s" % (ctd.DERIVED_PREFIX, params["base_runtime_spec"]))
    for path in want["cdi_spec_dirs"]:
        if not path.startswith("/"):
            raise InputError("cdi_spec_dirs entries must be absolute paths, got %s" % path)
    if params["cdi"] and not want["cdi_spec_dirs"]:
        raise InputError("cdi_spec_dirs must not be empty with cdi=true")
    for name in want["runtimes"]:
        if not RUNTIME_NAME_RE.match(name or ""):
            raise InputError("runtimes: %r is not a valid runtime name (letters, digits, _ + -)" % (name,))
    if posixpath.dirname(params["unit_dropin"]) != dropin_dir or not DROPIN_NAME_RE.match(posixpath.basename(params["unit_dropin"])):
        raise InputError("unit_dropin must be a .conf file directly in %s, named with letters, digits and _ . @ + - and "
                         "not starting with a dot, got %r" % (dropin_dir, params["unit_dropin"]))
    if params["restart_timeout"] < 1:
        raise InputError("restart_timeout must be at least 1 second")
    return want


class Containerd:  # pylint: disable=too-many-instance-attributes
    """The node's containerd seen through host_root: version, config files, dump, unit and running daemon."""

    def __init__(self, module, host, commands):
        self.module = module
        self.host = host
        self.commands = commands
        self.params = module.params
        self.service = module.params["service"]
        self.version = None
        self.systemd = None

    def binary(self, name):
        """How to run ``name`` (see :func:`_containerd_host.binary`)."""
        return ctdh.binary(self.host, self.commands, name, self.params["config"])

    def run(self, argv, what):
        return ctdh.run(self.host, self.commands, argv, what, self.params["config"])

    def observe(self):
        """The node's containerd up to its config files (:func:`_containerd_host.observe`); the config containerd
        really reads replaces ``config`` when the caller left the default."""
        observed = ctdh.observe(self.host, self.commands, self.params["config"], self.service,
                                self.params["base_runtime_spec"], with_effective=False)
        self.version = observed["version"]
        if observed["config_path"] != self.params["config"]:
            if self.params["config"] != ctdh.DEFAULT_CONFIG:
                raise ConflictError("%s starts containerd with the config %s, not %s: set config to %s (or leave it "
                                    "unset)" % (observed["command"]["from"] or observed["unit"], observed["config_path"],
                                                self.params["config"], observed["config_path"]),
                                    {"config": observed["config_path"], "from": observed["config_from"]})
            self.module.warn("%s reads %s (%s), not %s: that file is configured"
                             % (self.service, observed["config_path"], observed["config_from"], self.params["config"]))
            self.params["config"] = observed["config_path"]
        return observed

    def oci_spec(self):
        return self.run(["ctr", "oci", "spec"], "generate the base runtime spec")

    def config_files(self, planned=()):
        """[(path, FileState, Document)] in containerd's load order (:func:`_containerd_host.config_files`)."""
        return ctdh.config_files(self.host, self.params["config"], planned)

    def dump(self, exists):
        """The effective configuration (:func:`_containerd_host.dump`)."""
        return ctdh.dump(self.host, self.commands, self.params["config"], exists)

    # -- systemd ---------------------------------------------------------------------------------
    def unit_files(self, replace=None):
        """[(path, text)] in systemd's order; ``replace`` = (path, text or None) stands in for one drop-in."""
        return ctdh.unit_files(self.host, self.service, replace)[2]

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
            for entry in self.host.listdir("/proc"):
                if entry.isdigit() and self.host.try_attr("/proc/%s/comm" % entry) == "containerd":
                    pid = int(entry)
                    break
        if not pid:
            return None
        limits = ctd.parse_proc_limits(self.host.try_attr("/proc/%d/limits" % pid, ""))
        return {"pid": pid, "memlock": limits, "started": self.start_time(pid)}

    def start_time(self, pid):
        stat = self.host.try_attr("/proc/%d/stat" % pid)
        boot = None
        for line in (self.host.try_attr("/proc/stat") or "").splitlines():
            if line.startswith("btime ") and line.split()[1:2] and line.split()[1].isdigit():
                boot = int(line.split()[1])
        if not stat or boot is None:
            return None
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 20 or not fields[19].isdigit():
            return None  # a malformed /proc/<pid>/stat line: the start time is unknown, not a traceback
        return boot + int(fields[19]) / float(os.sysconf("SC_CLK_TCK"))

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


def _mtime(host, path):
    try:
        info = host.stat(path)
    except HostReadError:
        return None
    return info.st_mtime if info is not None else None


def observe_specs(node, current, generated):
    """{path: text or None} of every base spec the runtimes use now, and of the source of each derived copy."""
    texts = {}
    for path in sorted(set(current.values())):
        if not path or path == generated:
            continue
        for candidate in (path, ctd.derived_source(path)):
            if candidate and candidate not in texts:
                state = observe_file(node.host, candidate)
                texts[candidate] = state.content if state.exists else None
    return texts


def choose_target(module, node, files, info, version, changes, result):
    """Which file the collection writes its keys into: ``(files, target index)``.  The main config, or under a
    generated one the collection's drop-in in the directory it imports (then ``files`` gets that drop-in at its
    place in the load order).  Refuses when neither can work (ConflictError saying what to do)."""
    main_path = files[0][0]
    if info is None or not changes:
        return files, 0
    if info.get("tool") not in ("k3s", "rke2"):
        if not module.params["edit_generated"]:
            raise ConflictError(ctd.generated_refusal(main_path, info, version, changes),
                                {"generated": dict(info, path=main_path)}, result.as_dict())
        module.warn("%s says it is regenerated (%s): edited because edit_generated=true; the edit is lost when its "
                    "generator runs again" % (main_path, info.get("header")))
        return files, 0
    # k3s/rke2 render config.toml again at every start: editing it is pointless even with edit_generated
    directory = ctd.dropin_dir(files[0][2], main_path) if version >= (2, 0) else None
    if directory is None:
        raise ConflictError(ctd.generated_refusal(main_path, info, version, changes),
                            {"generated": dict(info, path=main_path)}, result.as_dict())
    dropin = "%s/%s" % (directory, ctd.GENERATED_DROPIN)
    planned = node.config_files(planned=(dropin,))
    result.observed["config_dropin"] = dropin
    return planned, [p for p, dummy_s, dummy_d in planned].index(dropin)


def plan(module, node, want, result):  # pylint: disable=too-many-locals,too-many-statements,too-many-branches
    """Observe and plan.  Returns (file plans, restart needed, unit changed, effective before)."""
    params = module.params
    observed = node.observe()
    version, files = observed["version"], observed["files"]
    main_path, main_state = files[0][0], files[0][1]
    info = observed["generated_config"]
    if info is not None:
        info = dict((k, v) for k, v in info.items() if k != "path")
    if info is not None and info.get("tool") in ("k3s", "rke2") and params["service"] == "containerd":
        units = RANCHER_UNITS[info["tool"]]
        raise ConflictError("%s is %s's containerd config: containerd runs inside %s's own service here, not "
                            "containerd.service, so its memlock comes from that unit; set service to %s (server) or %s "
                            "(agent), whichever runs on this node"
                            % (main_path, info["tool"], info["tool"], units[0], units[1]),
                            {"generated": dict(info, path=main_path)})
    eff = node.dump(main_state.exists)
    ctdh.add_effective(observed, node.host, node.commands, eff=eff)
    targets = ctd.target_runtimes(eff, want["runtimes"])
    current = dict((name, eff["runtimes"][name]["base_runtime_spec"]) for name in targets)
    texts = observe_specs(node, current, want["base_runtime_spec"])
    oci = node.oci_spec() if ctd.needs_generated(current, want["base_runtime_spec"]) else None
    spec_files, dummy_pointers, spec_report, spec_warnings = ctd.plan_specs(current, texts, want, oci)
    want["spec_paths"] = dict((name, entry["spec"]) for name, entry in spec_report.items())
    changes, warnings = ctd.desired_keys(eff, want, version)
    for warning in spec_warnings + warnings:
        module.warn(warning)
    result.observed.update({
        "containerd_version": ".".join(str(p) for p in version),
        "config_version": eff["config_version"],
        "config_files": [p for p, dummy_s, dummy_d in files],
        "config_generated": dict(info, path=main_path) if info else None,
        "runtimes": eff["runtimes"],
        "base_specs": spec_report,
        "enable_cdi": eff["enable_cdi"],
        "cdi_spec_dirs": eff["cdi_spec_dirs"],
        "key_sources": observed["key_sources"],
    })
    files, target = choose_target(module, node, files, info, version, changes, result)
    main_version = ctd.file_versions([(files[0][0], files[0][2])], version)[0]
    edits, versions, overrides = ctd.choose_files([(p, d) for p, dummy_s, d in files], changes, version, eff, target,
                                                  params["edit_imports"], new_version=main_version)
    result.observed["imported_overrides"] = overrides
    if overrides and not params["edit_imports"]:
        raise ConflictError(ctd.override_message(overrides, files[target][0]), {"imported_overrides": overrides},
                            result.as_dict())
    for entry in overrides:
        module.warn("%s overrides %s (%s): the key is written there because edit_imports=true; the tool that owns "
                    "that file may write it again" % (entry["file"], entry["key"], entry["why"]))
    per_key = ctd.key_diff(changes, eff)
    plans = []

    dropin_state = observe_file(node.host, params["unit_dropin"])
    dropin_plan = plan_file(dropin_state, ctd.render_unit_dropin(want["memlock"]), 0o644)
    before_limit, dummy_source = ctd.unit_limit(node.unit_files())
    after_limit, after_source = ctd.unit_limit(node.unit_files(replace=(params["unit_dropin"], dropin_plan.content)))
    if after_limit != want["memlock"]:
        raise ConflictError("%s sets LimitMEMLOCK=%s and is read after %s, so containerd would not get %s; remove it "
                            "or name unit_dropin so that it sorts last"
                            % (after_source, ctd.render_limit(after_limit) if after_limit else "(empty)",
                               params["unit_dropin"], ctd.render_limit(want["memlock"])),
                            {"overriding_file": after_source})
    result.observed["unit_memlock"] = ctd.render_limit(before_limit) if before_limit is not None else None
    if dropin_plan.changed:
        plans.append(dropin_plan)
        per_key["LimitMEMLOCK"] = {"before": result.observed["unit_memlock"], "after": ctd.render_limit(want["memlock"])}
        if module._diff:
            result.diffs.append({"before": {"LimitMEMLOCK": result.observed["unit_memlock"]},
                                 "after": {"LimitMEMLOCK": ctd.render_limit(want["memlock"])},
                                 "before_header": params["unit_dropin"], "after_header": params["unit_dropin"]})

    for path in sorted(spec_files):
        planned = spec_files[path]
        state = observe_file(node.host, path)
        source_state = observe_file(node.host, planned["source"]) if planned["source"] else None
        mode = 0o644
        if state.exists:
            mode = state.mode
        elif source_state is not None and source_state.exists:
            mode = source_state.mode   # a derived copy is as readable as the owner's file
        spec_plan = plan_file(state, planned["content"], mode)
        if not spec_plan.changed:
            continue
        plans.append(spec_plan)
        kinds = ("RLIMIT_MEMLOCK", "RLIMIT_NOFILE")
        before = dict((kind, ctd.spec_rlimit(state.content if state.exists else texts.get(planned["source"]), kind))
                      for kind in kinds) if state.exists or planned["source"] else None
        after = dict((kind, ctd.spec_rlimit(planned["content"], kind)) for kind in kinds)
        per_key["%s.rlimits" % path] = {"before": before, "after": after}
        if module._diff:
            if planned["kind"] == "generated":
                note = {"generated_from": "ctr oci spec (containerd %s)" % result.observed["containerd_version"],
                        "owner": "rdma.k8s_node"}
            else:
                note = {"derived_from": planned["source"], "owner": "rdma.k8s_node (a copy)",
                        "source_owner": ctd.KNOWN_SPEC_WRITERS.get(planned["source"]) or "not this collection",
                        "source_written": False, "changed_in_copy": "process.rlimits %s only"
                        % "/".join(kind for kind, dummy in ctd._owned_rlimits(want["memlock"], want.get("nofile")))}
            header = path if planned["kind"] == "generated" else "%s (derived copy of %s, which is not written)" % (
                path, planned["source"])
            result.diffs.append({"before": {"rlimits": before} if before else {}, "after": dict(note, rlimits=after),
                                 "before_header": header, "after_header": header})

    for index in sorted(edits):
        path, state, doc = files[index]
        version_of_file = versions[index] or ctd.native_version(version)
        new_text = ctd.apply_edits(state.content if state.exists else "", version_of_file, edits[index], path)
        file_plan = plan_file(state, new_text, state.mode if state.exists else 0o644,
                              state.uid if state.exists else 0, state.gid if state.exists else 0)
        plans.append(file_plan)
        if module._diff:
            header = path
            if index == target and index > 0:
                header += " (the collection's drop-in: %s is regenerated by %s)" % (main_path, (info or {}).get("tool"))
            elif index > 0:
                header += " (an imported file, edited because edit_imports=true)"
            result.diffs.append({
                "before": dict((_toml.render_path(table + (key,)), _json_safe(doc.get(table + (key,))))
                               for table, key, dummy_value in edits[index]),
                "after": dict((_toml.render_path(table + (key,)), value) for table, key, value in edits[index]),
                "before_header": header, "after_header": header})
    result.extra["changes"] = per_key
    for file_plan in plans:
        result.add(file_plan.action())

    running = node.running()
    stale = False
    if running is not None:
        memlock = running["memlock"]
        started = running["started"]
        watched = [params["unit_dropin"]] + sorted(spec_files) + [p for p, dummy_s, dummy_d in files]
        mtimes = [_mtime(node.host, p) for p in watched]
        # the start time is exact to within a second (btime is whole seconds): only a file written more
        # than a second after the computed start is certainly newer than the daemon
        stale = bool(memlock and memlock["hard"] != want["memlock"] and after_limit == want["memlock"]) or \
            bool(started and any(m and m > started + 1.0 for m in mtimes))
        result.observed["running"] = {"pid": running["pid"], "stale": stale,
                                      "memlock": dict((k, ctd.render_limit(v)) for k, v in memlock.items()) if memlock else None}
    else:
        result.observed["running"] = None
    restart = bool(plans) or stale
    return plans, restart, dropin_plan.changed, eff


def _json_safe(value):
    return value if value is None or isinstance(value, (str, bool, int, list)) else str(value)


def restore(node, plans, unit_changed, restart):
    """Put the files back; reload and restart when they had reached systemd / containerd.  Returns details."""
    details = {}
    try:
        details["restored"] = revert(node.host, plans)
        details["files"] = "the files were restored"
    except ApplyError as exc:  # keep going: systemd and containerd must still get the files as they are now
        details["restored"] = []
        details["files"] = exc.msg
    if unit_changed and node.systemd:
        node.systemctl("daemon-reload")
    if restart:
        node.systemctl("restart", node.service)
        active, state = node.wait_active(node.params["restart_timeout"])
        details["active_after_rollback"] = active
        details["state_after_rollback"] = state
    return details


def run_module(module):
    """observe -> plan -> apply -> verify -> restart -> health check (rollback on failure)."""
    params = module.params
    want = validate(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    node = Containerd(module, host, commands)
    result = Result()
    plans, restart, unit_changed, eff_before = plan(module, node, want, result)
    if unit_changed and node.systemd:
        result.add(action("run", "systemctl daemon-reload"))
    if restart and params["restart"]:
        if not node.systemd:
            raise ApplyError("restart=true but systemd cannot be asked about %s (systemctl show failed)" % node.service)
        result.add(action("restart", node.service))
    elif restart:
        result.need_restart(node.service)
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)

    backups = FileTransaction(host, backup=params["backup"]).apply_all(plans)
    if backups:
        result.extra["backup_files"] = backups

    def rollback(problem, error=ApplyError, extra=None):
        details = restore(node, plans, unit_changed, False)
        details.update(extra or {})
        raise error("%s; %s and %s was not restarted" % (problem, details["files"], node.service), details,
                    result.as_dict())

    if unit_changed and node.systemd:
        rc, dummy_out, err = node.systemctl("daemon-reload")
        if rc != 0:
            rollback("systemctl daemon-reload failed: %s" % err.strip())
    try:
        eff = node.dump(True)
    except (ApplyError, ParseError) as exc:
        rollback("checking the edited configuration with `containerd config dump` failed: %s" % exc.msg)
    drift = ctd.runtime_drift(eff_before, eff)
    if drift:
        rollback("the edit would change more than base_runtime_spec: %s" % "; ".join(drift), VerifyError,
                 {"runtime_drift": drift})
    missing = ctd.verify_effective(eff, want, node.version)
    if missing:
        rollback("after editing, `containerd config dump` still does not show %s (another file overrides it, or a key "
                 "is misplaced)" % ", ".join(missing), VerifyError, {"not_effective": missing})
    if node.systemd:
        rc, out, dummy_err = node.systemctl("show", node.service, "-p", "LimitMEMLOCK")
        shown = out.strip().split("=", 1)[-1] if rc == 0 else ""
        if shown and ctd.parse_systemd_limit(shown) != want["memlock"]:
            rollback("systemd reports LimitMEMLOCK=%s for %s after the change, not %s"
                     % (shown, node.service, ctd.render_limit(want["memlock"])), VerifyError)
    if restart and params["restart"]:
        restart_and_check(node, want, plans, unit_changed, result)
    return result.as_dict(with_diff=module._diff)


def restart_and_check(node, want, plans, unit_changed, result):
    """Restart, then: active, answering, running with the wanted memlock.  Any failure rolls everything back."""
    rc, dummy_out, err = node.systemctl("restart", node.service)
    problem = None
    if rc != 0:
        problem = "systemctl restart %s failed: %s" % (node.service, err.strip())
    else:
        active, state = node.wait_active(node.params["restart_timeout"])
        if not active:
            problem = "%s is %s after the restart" % (node.service, state or "not active")
        else:
            running = node.running()
            memlock = running["memlock"] if running else None
            if not running:
                problem = "%s has no main process after the restart" % node.service
            elif memlock and memlock["hard"] != want["memlock"]:
                problem = "%s runs with memlock %s, not %s" % (node.service, ctd.render_limit(memlock["hard"]),
                                                               ctd.render_limit(want["memlock"]))
            else:
                result.observed["restarted"] = {"pid": running["pid"],
                                                "memlock": dict((k, ctd.render_limit(v)) for k, v in memlock.items())
                                                if memlock else None}
    if problem is None:
        return
    journal = node.journal()
    details = restore(node, plans, unit_changed, True)
    details["journal"] = journal
    raise ApplyError("%s; %s and %s restarted again (%s)"
                     % (problem, details["files"], node.service, "active" if details.get("active_after_rollback") else
                        "NOT active: %s" % details.get("state_after_rollback")), details, result.as_dict())


def main():
    module = AnsibleModule(
        argument_spec=dict(
            memlock=dict(type="str", default="unlimited"),
            nofile=dict(type="int"),
            config=dict(type="path", default="/etc/containerd/config.toml"),
            base_runtime_spec=dict(type="path", default="/etc/containerd/rdma-k8s-node-base-spec.json"),
            runtimes=dict(type="list", elements="str", default=[]),
            cdi=dict(type="bool", default=True),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            edit_imports=dict(type="bool", default=False),
            edit_generated=dict(type="bool", default=False),
            unit_dropin=dict(type="path"),
            service=dict(type="str", default="containerd"),
            restart=dict(type="bool", default=False),
            restart_timeout=dict(type="int", default=60),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
