#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kubelet_topology
short_description: Set the kubelet's Topology Manager and the CPU/memory manager settings it needs
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - Sets C(topologyManagerPolicy), C(topologyManagerScope), C(topologyManagerPolicyOptions), C(cpuManagerPolicy)
    with C(reservedSystemCPUs), and C(memoryManagerPolicy) with C(reservedMemory) in the KubeletConfiguration.
  - Refuses, before writing anything and with the reason, what the kubelet would refuse at start (and crash-loop on)
    an unknown policy, an option the installed kubelet does not accept, C(static) CPU manager without reserved CPUs,
    C(Static) memory manager whose reserved memory does not equal kube + system reserved + the hard eviction
    threshold, reserved CPUs that are not online, NUMA nodes that do not exist.
  - Reads the kubelet as it starts. The command line is the running kubelet's C(/proc/<pid>/cmdline) (what runs now)
    and the one systemd builds for the next start from C(kubelet.service), its drop-ins (an empty C(ExecStart=)
    resets), C(Environment=) and C(EnvironmentFile=) (C(-) prefix optional), with C($VAR) and C(${VAR}) expanded as
    systemd does (kubeadm's C(kubeadm-flags.env), C(/etc/default/kubelet), C(/etc/sysconfig/kubelet), EKS's and
    kubespray's files). Without a unit and without a running kubelet those three files are read as they are.
  - Writes a drop-in in the kubelet's C(--config-dir) when the kubelet runs with one and is 1.30 or later (it survives
    C(kubeadm upgrade), which rewrites C(config.yaml)); otherwise edits only the managed top-level keys of the
    kubelet's C(--config) file, keeping the rest of the file as it is. A JSON file (EKS
    C(/etc/kubernetes/kubelet/kubelet-config.json), nodeadm C(config.json)) stays JSON with its key order, values and
    indentation; a YAML file stays YAML with its comments. The result is parsed back and must differ from the
    original only in the collection's keys, or nothing is written.
  - Merges the config file, every C(*.conf) under C(--config-dir) in the kubelet's order (its directory walk, by name,
    later wins; JSON content in a C(.conf) file is read too) and the command-line flags that override configuration
    fields (C(--topology-manager-policy), C(--topology-manager-scope), C(--topology-manager-policy-options),
    C(--cpu-manager-policy), C(--reserved-cpus), C(--memory-manager-policy), C(--reserved-memory), and for the checks
    C(--kube-reserved), C(--system-reserved), C(--eviction-hard), C(--feature-gates)). A later drop-in or a flag that
    overrides a value this module sets is a conflict, handled as O(on_conflict) says.
  - Every change the kubelet checks against its checkpoint at start needs the kubelet stopped, the state file
    removed, and a start, so it requires O(restart=true) (drain the node first; the C(kubelet_topology) role can)
    C(cpu_manager_state) for a CPU manager policy change and for a C(reservedSystemCPUs) change under C(static);
    C(memory_manager_state) for a memory manager policy change and for a change of the bytes C(reservedMemory)
    reserves on a NUMA node under C(Static). A checkpoint the kubelet would already refuse (another policy, a
    C(static) checkpoint whose C(defaultCpuSet) lacks a reserved CPU, a C(Static) one whose per-NUMA
    C(systemReserved) differs from the reservation) is removed the same way. Other changes restart only with
    O(restart=true).
  - After a restart the kubelet must be active and answer C(healthz); otherwise files and state files are restored,
    the kubelet is started again, and the module fails saying whether it is back.
  - On k3s and rke2 nodes (a C(k3s), C(k3s-agent), C(rke2-server) or C(rke2-agent) unit) the kubelet runs inside
    k3s/rke2 with C(--config-dir=<data-dir>/agent/etc/kubelet.conf.d) and the C(kubelet-arg) values of
    C(/etc/rancher/<tool>/config.yaml), its C(config.yaml.d/*.yaml) (k3s's merge order, C(kubelet-arg+) appends) and
    the unit's C(ExecStart=). The drop-in is written into that directory (k3s and rke2 1.32 and later; older ones are
    refused with the way to do it by hand), a C(kubelet-arg) that overrides it is a conflict (never edited), and the
    restart is of the k3s/rke2 unit. See C(docs/kubelet.md), "k3s and rke2".
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is per KubeletConfiguration key.
  idempotent:
    support: full
options:
  topology_manager_policy:
    description: C(topologyManagerPolicy). Unset leaves it as it is.
    type: str
    choices: [none, best-effort, restricted, single-numa-node]
  topology_manager_scope:
    description: C(topologyManagerScope).
    type: str
    choices: [container, pod]
  topology_manager_policy_options:
    description:
      - "C(topologyManagerPolicyOptions), for example C({prefer-closest-numa-nodes: \"true\"})."
      - C(prefer-closest-numa-nodes) needs kubelet 1.28 (1.26 and 1.27 with C(featureGates.TopologyManagerPolicyOptions)
        and C(featureGates.TopologyManagerPolicyBetaOptions)), C(max-allowable-numa-nodes) 1.31,
        C(numa-allocation-strategy) and C(numa-score-weights) 1.38 with C(featureGates.TopologyManagerPolicyAlphaOptions).
      - An option the kubelet would refuse fails the module before anything is written.
    type: dict
  topology_manager_default_options:
    description:
      - Policy options applied only where they fit, for example C(prefer-closest-numa-nodes) set to V(true) (the
        role's default).
      - Each is added to C(topologyManagerPolicyOptions) unless O(topology_manager_policy_options) sets it, the node's
        own configuration (config file, other drop-ins, flags) already sets it, the installed kubelet would refuse it
        with its version and feature gates, or (C(prefer-closest-numa-nodes)) the policy is not V(best-effort) or
        V(restricted). Each one left out is a warning and is listed in RV(default_options).
    type: dict
  cpu_manager_policy:
    description: C(cpuManagerPolicy). V(static) needs O(reserved_system_cpus) or a CPU reservation in the config.
    type: str
    choices: [none, static]
  reserved_system_cpus:
    description: C(reservedSystemCPUs), a CPU list such as V(0-1,32-33); every CPU must be online.
    type: str
  memory_manager_policy:
    description: C(memoryManagerPolicy) (capitalised). V(Static) needs O(reserved_memory).
    type: str
    choices: [None, Static]
  reserved_memory:
    description: C(reservedMemory) per NUMA node.
    type: list
    elements: dict
    suboptions:
      numa_node:
        description: NUMA node number.
        type: int
        required: true
      limits:
        description: "Reserved amounts, for example C({memory: 1124Mi})."
        type: dict
        required: true
  mode:
    description:
      - V(auto) writes a drop-in when the kubelet runs with C(--config-dir) and is 1.30 or later, else edits the config file.
      - V(dropin) and V(config) force one; V(dropin) fails when the kubelet has no C(--config-dir).
    type: str
    choices: [auto, dropin, config]
    default: auto
  dropin_name:
    description:
      - File name of the drop-in this module owns in the C(--config-dir) directory, C(*.conf) with letters, digits and
        C(_ . @ + -), not starting with a dot.
    type: str
    default: 50-rdma-k8s-node-topology.conf
  config:
    description:
      - The kubelet config file when nothing says how the kubelet starts (no running kubelet, no C(kubelet.service),
        no flag file). When its command line is known, its C(--config) is used, and a kubelet without C(--config) has
        no config file to edit (O(mode=config) then fails).
    type: path
    default: /var/lib/kubelet/config.yaml
  restart:
    description: Restart the kubelet when the change has not reached it (required for a CPU/memory manager policy change).
    type: bool
    default: false
  restart_timeout:
    description:
      - Seconds (at least 1) to wait for the kubelet to be active and healthy after a restart.
      - The wait ends early, as a failure, when systemd gives up on the unit (C(failed)) or its C(Restart=) has started
        it twice since the module's restart (C(NRestarts)). A kubelet refusing its configuration or checkpoint exits at
        every start, and the rollback should not wait for the timeout.
    type: int
    default: 60
  settle_time:
    description:
      - Seconds the kubelet must stay healthy after it first answers O(healthz_url), with the same main process.
      - The kubelet serves healthz before it starts its container manager; a CPU or memory manager that refuses its
        checkpoint or configuration stops it only then, so a single V(ok) does not prove the change is accepted.
      - V(0) accepts the first V(ok).
    type: int
    default: 15
  healthz_url:
    description: The kubelet's health endpoint, an C(http://) or C(https://) URL.
    type: str
    default: http://127.0.0.1:10248/healthz
  on_conflict:
    description:
      - What to do when a later drop-in in C(--config-dir) or a command-line flag overrides a value this module sets
        (the kubelet would never see the module's value).
      - V(fail) refuses, names every overriding file or flag and writes nothing.
      - V(override) makes the module's value win. Against a drop-in, the module's own drop-in is renamed to sort after
        every drop-in that sets another value (V(99-<name>), then V(zz-<name>) ...; the old one is removed); the other
        tool's file is not touched, so its own regeneration (nodeadm writes its drop-in at every boot) cannot undo it.
        Against a flag set in an environment file (C(kubeadm-flags.env), C(/etc/default/kubelet), an
        C(EnvironmentFile=)), the flag is taken out of that variable (the diff shows the file); the config files then
        decide. A flag written in a systemd unit (C(ExecStart=), C(Environment=)) or an override of the config file by
        a drop-in (O(mode=config)) is refused with the reason.
      - V(ignore) writes the module's file as usual, warns, and returns the overrides in RV(conflicts); the other side
        keeps winning until it is removed.
    type: str
    choices: [fail, override, ignore]
    default: fail
  backup:
    description:
      - Keep a timestamped copy of each edited file next to it.
      - Backups are created mode C(0600), owned by root (they may hold credentials); a restore puts the original mode and owner back.
    type: bool
    default: false
requirements:
  - PyYAML on the node (C(python3-yaml)) for YAML configuration files; JSON ones (EKS) need nothing but Python.
notes:
  - The kubelet's version comes from C(kubelet --version).
  - A flag only the running kubelet still has (its unit no longer sets it) is reported and needs a restart.
  - See C(docs/kubelet.md) for the order the kubelet reads its sources in and what each tool (kubeadm, EKS, kubespray)
    writes.
seealso:
  - module: rdma.k8s_node.containerd_rdma
"""

EXAMPLES = r"""
- name: Topology-aligned pods, whole-node pods included (restricted admits a pod whose devices span both sockets)
  rdma.k8s_node.kubelet_topology:
    topology_manager_policy: restricted
    topology_manager_default_options: {prefer-closest-numa-nodes: "true"}
    topology_manager_scope: pod
    cpu_manager_policy: static
    reserved_system_cpus: "0-1"
    restart: true

- name: The same on a node whose kubeadm-flags.env passes --cpu-manager-policy=none (the flag is taken out)
  rdma.k8s_node.kubelet_topology:
    cpu_manager_policy: static
    reserved_system_cpus: "0-1"
    on_conflict: override
    restart: true
"""

RETURN = r"""
changed:
  description: Whether a file changed or the kubelet was restarted (or would be, in check mode).
  returned: always
  type: bool
actions:
  description: The steps taken, or that would be taken in check mode, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create_file", "target": "/etc/kubernetes/kubelet.conf.d/50-rdma-k8s-node-topology.conf", "mode": "0644"}]
reboot_required:
  description: Always false.
  returned: always
  type: bool
restart_required:
  description: C([kubelet]) (on k3s/rke2 their unit, C([k3s]), C([rke2-agent]) ...) when the change needs a restart that O(restart) did not allow.
  returned: always
  type: list
  elements: str
changes:
  description: Per key, the persisted effective value before and the value after.
  returned: always
  type: dict
  sample: {"topologyManagerPolicy": {"before": "none", "after": "single-numa-node"}}
target:
  description: Where the settings are persisted (C(mode) dropin or config, and the path).
  returned: always
  type: dict
  sample: {"mode": "dropin", "path": "/etc/kubernetes/kubelet.conf.d/50-rdma-k8s-node-topology.conf"}
observed:
  description: What the module read.
  returned: always
  type: dict
  contains:
    kubelet_version:
      description: The installed kubelet's version.
      type: str
    persisted:
      description: The managed keys as the kubelet gets them before the change (config file, drop-ins, then flags).
      type: dict
    state_files:
      description: C(policyName) of each manager state file (null when absent).
      type: dict
    command_line:
      description:
        - How the kubelet starts, C(source) V(process), V(unit) or V(env files) (where C(config) and C(config_dir)
          come from), the unit, the pid, and the flags that override configuration fields with where each is set.
      type: dict
    config_format:
      description: V(json) or V(yaml), the format of the config file.
      type: str
    dropins:
      description: The drop-ins the kubelet merges, in its order.
      type: list
      elements: str
  sample: {"kubelet_version": "1.31.4", "persisted": {"topologyManagerPolicy": "none"},
           "state_files": {"/var/lib/kubelet/cpu_manager_state": "none"}}
conflicts:
  description:
    - With O(on_conflict=ignore), the overrides left in place; each names the key (and option), the wanted and the
      effective value, and the overriding drop-in or flag with the file that sets it.
  returned: always
  type: list
  elements: dict
  sample: [{"key": "cpuManagerPolicy", "option": null, "want": "static", "value": "none", "kind": "flags",
            "path": "/usr/lib/systemd/system/kubelet.service",
            "source": "--cpu-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)", "flags": []}]
overridden:
  description: With O(on_conflict=override), the overrides the module beat (same shape as RV(conflicts)).
  returned: always
  type: list
  elements: dict
default_options:
  description: The O(topology_manager_default_options) applied (C(applied)) and those left out with the reason (C(left_out)).
  returned: always
  type: dict
  sample: {"applied": {}, "left_out": {"prefer-closest-numa-nodes": "prefer-closest-numa-nodes needs kubelet 1.28 or later ..."}}
stale_state_files:
  description: Per state file, why the kubelet would refuse it after the change (it is removed with O(restart=true)).
  returned: always
  type: dict
  sample: {"/var/lib/kubelet/memory_manager_state": "reservedMemory changes under the Static memory manager"}
removed_state_files:
  description: State files removed because the kubelet would refuse them after the change (see RV(stale_state_files)).
  returned: always
  type: list
  elements: str
diff:
  description: Per-key before and after (with C(--diff)).
  returned: when diff mode is on and something changes
  type: dict
backup_files:
  description:
    - Backup copies kept, by edited path (with O(backup=true)), of the configuration files replaced or removed (the
      kubelet config file, the module's drop-in or an older one of its own, an environment file a flag was taken out
      of); each copy holds the file as it was before this run.
    - Empty when nothing was backed up (O(backup=false), check mode, no change, or only new files were written).
    - Stale state files are not in it; see RV(removed_state_files).
  returned: always
  type: dict
  sample: {"/var/lib/kubelet/config.yaml": "/var/lib/kubelet/config.yaml.12345.2026-01-01@10:00:00~"}
"""

import json
import time
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rancher as kr
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, InputError, RdmaNodeError,
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

# a drop-in the kubelet reads from --config-dir: *.conf, not hidden
DROPIN_NAME_RE = conf_name_pattern(".conf")
ON_CONFLICT = ("fail", "override", "ignore")


class Kubelet:
    """The node's kubelet: version, flags, config file and drop-ins, state files, service."""

    def __init__(self, module, host, commands):
        self.module = module
        self.host = host
        self.commands = commands
        self.service = "kubelet"   # k3s/rke2: their unit, which runs the kubelet
        self.binary = "kubelet"    # k3s/rke2: their binary (``k3s --version`` names the kubelet's version)

    def use_rancher(self, found, binary):
        """The kubelet runs inside k3s/rke2: ``found`` from ``rancher.detect``, ``binary`` from its unit."""
        self.service, self.binary = found["service"], binary

    def version(self):
        if self.binary != "kubelet":
            if not self.binary or not self.host.is_executable(self.binary):
                raise ApplyError("%s: the program its unit runs (%s) is not on the node" % (self.service, self.binary))
        elif not self.commands.find("kubelet"):
            raise ApplyError("kubelet is not installed on the node")
        rc, out, err = self.commands.run([self.binary, "--version"])
        if rc != 0:
            raise ApplyError("%s --version failed: %s" % (self.binary, (err or out).strip()))
        return kub.parse_kubelet_version(out)

    def main_pid(self):
        rc, out, dummy_err = self.commands.run_kernel(["systemctl", "show", self.service, "-p", "MainPID", "--value"])
        if rc == 0 and out.strip().isdigit() and int(out.strip()):
            return int(out.strip())
        return None

    def running_pid(self):
        """The kubelet's main process: systemd's MainPID, else the first process named kubelet."""
        return self.main_pid() or kh.find_pid(self.host)

    def cpus_online(self):
        text = self.host.read_attr("/sys/devices/system/cpu/online")
        return kub.parse_cpuset(text, "/sys/devices/system/cpu/online") if text else set()

    def numa_nodes(self):
        return set(int(n[4:]) for n in self.host.listdir("/sys/devices/system/node") if n.startswith("node") and n[4:].isdigit())

    def state_policy(self, path):
        text = self.host.read_text(path)
        if text is None:
            return None
        try:
            return json.loads(text).get("policyName")
        except (ValueError, AttributeError, RecursionError):
            return "unreadable"

    def systemctl(self, *args):
        return self.commands.run_kernel(["systemctl"] + list(args))

    def answers(self, url):
        """(True, "ok") when the unit is active and healthz says ok, else (False, why)."""
        rc, out, dummy_err = self.systemctl("is-active", self.service)
        if rc != 0:
            return False, out.strip() or "not active"
        try:
            body = open_url(url, timeout=5, validate_certs=False).read()
        except Exception as exc:  # pylint: disable=broad-except
            return False, str(exc)
        if body.strip() == b"ok":
            return True, "ok"
        return False, body.decode("utf-8", "replace")[:200]

    def restarts(self):
        """systemd's NRestarts of the unit (its Restart= retries since the last explicit start), or None."""
        rc, out, dummy_err = self.systemctl("show", self.service, "-p", "NRestarts", "--value")
        value = out.strip()
        return int(value) if rc == 0 and value.isdigit() else None

    def gave_up(self, why, restarts_before):
        """Why waiting longer is pointless, or None: systemd has given up on the unit (``failed``, or ``inactive``
        after the start), or it is crash-looping (Restart= started it again ``CRASH_LOOP`` times since ours)."""
        if why in ("failed", "inactive"):
            return "%s: systemd is not restarting it" % why
        now = self.restarts()
        if restarts_before is not None and now is not None and now - restarts_before >= CRASH_LOOP:
            return "%s: it exited and systemd restarted it %d times" % (why, now - restarts_before)
        return None

    def healthy(self, timeout, url, settle=0):
        """Healthy within ``timeout`` s, then still healthy with the same main process for ``settle`` s.  A unit
        systemd gave up on, or one that keeps exiting (``CRASH_LOOP`` restarts by its Restart=), fails at once."""
        deadline = time.time() + timeout
        first, pid = None, None
        restarts_before = self.restarts()
        while True:
            ok, why = self.answers(url)
            now = time.time()
            if not ok and first is None:
                stuck = self.gave_up(why, restarts_before)
                if stuck:
                    return False, stuck
            if ok:
                current = self.main_pid() if settle else None  # nothing to compare without a settle time
                if first is None:
                    first, pid = now, current
                elif current != pid:
                    return False, ("it answered healthz, then its main process changed (PID %s -> %s) within %d s: the "
                                   "kubelet restarted" % (pid, current, settle))
                if now - first >= settle:
                    return True, "ok"
            elif first is not None:
                return False, "it answered healthz, then stopped (%s) within %d s" % (why, settle)
            elif now >= deadline:
                return False, why
            time.sleep(1)


# a kubelet whose unit's Restart= brought it back this many times since our restart will not come up: a bad config or
# checkpoint fails every start (kubeadm's unit: Restart=always, RestartSec=10, so about 20 s instead of restart_timeout)
CRASH_LOOP = 2


def check_params(params):
    """Strict checks of the options the argument spec cannot express; each message names the option and value."""
    if params["reserved_system_cpus"] is not None:
        kub.parse_cpuset(params["reserved_system_cpus"], "reserved_system_cpus")
    name = params["dropin_name"]
    if not DROPIN_NAME_RE.match(name):
        raise InputError("dropin_name must be a file name ending in .conf, of letters, digits and _ . @ + - and not "
                         "starting with a dot (the kubelet reads nothing else), got %r" % (name,))
    if params["restart_timeout"] < 1:
        raise InputError("restart_timeout must be at least 1 second, got %d" % params["restart_timeout"])
    if params["settle_time"] < 0:
        raise InputError("settle_time must be 0 or more seconds, got %d" % params["settle_time"])
    scheme = urlsplit(params["healthz_url"]).scheme
    if scheme not in ("http", "https"):
        # open_url also opens file:// and ftp:// URLs, and the body ends up in the failure message
        raise InputError("healthz_url must be an http:// or https:// URL (the kubelet's healthz endpoint), got %r"
                         % (params["healthz_url"],))
    want = kub.desired_settings(params)
    if not want:
        raise InputError("nothing to do: set at least one of topology_manager_policy, topology_manager_scope, "
                         "topology_manager_policy_options, cpu_manager_policy, reserved_system_cpus, memory_manager_policy, "
                         "reserved_memory")
    return want


def resolve_target(params, version, line):
    """``(target dict for kub.plan, config path)`` from the mode and the kubelet's command line."""
    config = line["config"]
    if config is None and line["source"] in (None, "env files"):
        config = params["config"]  # nothing says how the kubelet starts: the documented default
    flags = dict((k, v) for k, v in (("config", config), ("config-dir", line["config_dir"])) if v)
    mode, where = kub.choose_target(params["mode"], version, flags, params["config"])
    if mode == "dropin":
        return {"mode": "dropin", "dir": where, "name": params["dropin_name"]}, config
    if config is None:
        raise ApplyError("the kubelet runs without --config (its command line from %s): it reads no config file to edit; "
                         "use mode=dropin with --config-dir (kubelet 1.30 or later), or start it with --config"
                         % (line["unit"] or "its process"))
    return {"mode": "config", "path": where}, config


def rancher_target(params, version, line):
    """The drop-in target in k3s's/rke2's ``kubelet.conf.d`` (the directory k3s passes as ``--config-dir`` and its
    documentation tells users to put drop-ins in), or a refusal that says how to do it by hand."""
    info = line["rancher"]
    if params["mode"] == "config":
        raise InputError("mode=config: %s passes the kubelet no config file (--config), only --config-dir=%s; use "
                         "mode=auto or mode=dropin" % (info["tool"], info["dropin_dir"]))
    refusal = kr.dropin_refusal(line, version)
    if refusal:
        raise ApplyError(refusal, {"tool": info["tool"], "version": ".".join(str(p) for p in version)})
    return {"mode": "dropin", "dir": info["dropin_dir"], "name": params["dropin_name"]}


def flag_edits(host, remove_flags):
    """FilePlans that take the ``remove_flags`` (from kub.plan) out of the environment files that set them."""
    by_file = {}
    for flag in remove_flags:
        origin = flag["origin"]
        by_file.setdefault(origin["file"], {}).setdefault(origin["var"], set()).add(flag["name"])
    plans = []
    for path in sorted(by_file):
        state = observe_file(host, path)
        text = state.content or ""
        for var, names in sorted(by_file[path].items()):
            text = kub.remove_flags_from_env(text, var, names, path)
        plans.append(plan_file(state, text, state.mode, state.uid, state.gid))
    return plans


def run_module(module):  # pylint: disable=too-many-locals,too-many-branches,too-many-statements
    params = module.params
    want = check_params(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    node = Kubelet(module, host, commands)
    rancher = kr.detect(host)
    if rancher:
        line = kr.command_line(host, rancher, kh.find_pid(host))
        node.use_rancher(rancher, line["rancher"]["binary"])
        version = node.version()
        target, config_path = rancher_target(params, version, line), None
        layers, documents = kr.config_layers(host, line, params["dropin_name"])
    else:
        version = node.version()
        line = kh.command_line(host, node.running_pid())
        target, config_path = resolve_target(params, version, line)
        layers, documents = kh.config_layers(host, config_path, line["config_dir"], params["dropin_name"])
    for problem in line["problems"]:
        module.warn("%s: %s" % (problem["what"], problem["error"]))
    layers.append(kub.flags_layer(line["flags"], line["flags_from"] or "the kubelet's command line"))
    own = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    for layer in layers:
        if layer.get("ours"):
            own.update(documents[layer["path"]]["data"])
    others = kub.effective([layer for layer in layers if not layer.get("ours")])
    added, left_out = kub.default_options(params["topology_manager_default_options"], want, others, version)
    if added:
        want["topologyManagerPolicyOptions"] = dict(want.get("topologyManagerPolicyOptions") or {}, **added)
    for reason in left_out.values():
        module.warn("topology_manager_default_options: left out: %s" % reason)
    planned = kub.plan(layers, want, target, params["on_conflict"], own)
    after = planned["after"]
    for warning in kub.validate(want, after, version, node.cpus_online(), node.numa_nodes()):
        module.warn(warning)
    for conflict in planned["conflicts"]:
        module.warn("on_conflict=ignore: " + kub.conflict_text(conflict))
    # a flag only the running kubelet still has (its unit no longer sets it): a restart clears it
    stale_flags = []
    if line["live_flags"] is not None and line["flags_from"] != "/proc/%s/cmdline" % line["pid"]:
        live_layers = planned["layers"][:-1] + [kub.flags_layer(line["live_flags"], "/proc/%d/cmdline" % line["pid"])]
        persistent = set(f["flag"] for f in line["flags"])
        for conflict in kub.find_conflicts(live_layers, want, planned["ours"]):
            if any(f["flag"] not in persistent for f in conflict["flags"]):
                stale_flags.append(conflict)
                module.warn("the running kubelet: %s; its unit no longer sets that flag, a restart clears it"
                            % kub.conflict_text(conflict))
    changes = kub.changes(planned["before"], after, want)
    result = Result()
    path = planned["layers"][planned["ours"]]["path"]
    result.observed = {
        "kubelet_version": ".".join(str(p) for p in version),
        "persisted": dict((k, planned["before"][k]) for k in kub.MANAGED_KEYS if k in planned["before"]),
        "state_files": dict((p, node.state_policy(p)) for p in kub.STATE_FILES.values()),
        "command_line": {"source": line["source"], "unit": line["unit"], "pid": line["pid"], "config": config_path,
                         "config_dir": line["config_dir"], "flags": ["%s (%s)" % (f["flag"], f["source"])
                                                                     for f in line["flags"]]},
        "config_format": documents[config_path]["fmt"] if config_path in documents else None,
        "dropins": [layer["path"] for layer in layers if layer["kind"] == "dropin"],
    }
    result.extra.update({"changes": changes, "target": {"mode": target["mode"], "path": path},
                         "conflicts": planned["conflicts"], "overridden": planned["overridden"],
                         "removed_state_files": [], "backup_files": {},
                         "default_options": {"applied": added, "left_out": left_out}})
    if target["mode"] == "dropin":
        state = observe_file(host, path)
        plans = [plan_file(state, kub.render_own_dropin(planned["content"]), 0o644)]
        plans += [plan_file(observe_file(host, gone), None, 0o644) for gone in planned["delete"]]
    else:
        doc = documents[config_path]
        updates = dict((k, v) for k, v in kub.config_update(doc["data"], want).items()
                       if k not in doc["data"] or doc["data"][k] != v)
        text = kub.edit_document(doc["text"], doc["fmt"], updates, config_path) if updates else doc["text"]
        state = observe_file(host, config_path)
        plans = [plan_file(state, text, state.mode, state.uid, state.gid)]
    env_plans = flag_edits(host, planned["remove_flags"])
    plans = [p for p in plans + env_plans if p.changed]
    if module._diff and changes:
        result.diffs.append({"before": dict((k, v["before"]) for k, v in changes.items()),
                             "after": dict((k, v["after"]) for k, v in changes.items()),
                             "before_header": "KubeletConfiguration (%s)" % path,
                             "after_header": "KubeletConfiguration (%s)" % path})
    for plan in env_plans:
        if plan.changed and module._diff:
            result.diffs.append(plan.diff())  # another tool's file: the diff shows every line that changes
    for plan in plans:
        result.add(plan.action())
    reasons = kub.stale_state_reasons(changes, after)
    # a checkpoint the kubelet would refuse as it is (written under another policy or reservation: by hand, or by a
    # kubelet that ran with other settings)
    for state_path in kub.STATE_FILES.values():
        text = host.read_text(state_path) if state_path not in reasons else None
        refusal = kub.checkpoint_refusal(state_path, text, after, node.cpus_online()) if text is not None else None
        if refusal:
            reasons[state_path] = "the kubelet would refuse %s: %s" % (state_path, refusal)
    stale_states = [p for p in kub.STATE_FILES.values() if p in reasons]
    result.extra["stale_state_files"] = dict((p, reasons[p]) for p in stale_states)
    if stale_states and not params["restart"]:
        raise InputError("%s: the kubelet checks this against its checkpoint at start; it needs restart=true (drain "
                         "the node first): the kubelet must be stopped while %s is removed, or it crash-loops on the "
                         "next start" % ("; ".join(reasons[p] for p in stale_states), ", ".join(stale_states)))
    needs_restart = bool(plans) or bool(stale_states) or bool(stale_flags)
    if needs_restart and params["restart"]:
        for state_path in stale_states:
            if host.exists(state_path):
                result.add(action("delete_file", state_path))
        result.add(action("restart", node.service))
    elif needs_restart:
        result.need_restart(node.service)
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    return apply(module, node, host, params, plans, stale_states, needs_restart, result)


def apply(module, node, host, params, plans, stale_states, needs_restart, result):  # pylint: disable=too-many-arguments
    """Stop the kubelet and move stale state files aside (when restarting), write the files, restart and watch it;
    any failure puts files and state files back and starts the kubelet again."""
    restarting = needs_restart and params["restart"]
    saved_states = []
    if restarting:
        rc, dummy_out, err = node.systemctl("stop", node.service)
        if rc != 0:
            raise ApplyError("systemctl stop " + node.service + " failed (rc=%s): %s; nothing was changed" % (rc, err.strip()),
                             {"rc": rc, "stderr": err}, result.as_dict())
        try:
            for path in stale_states:
                if host.stat(path, follow=False) is not None:
                    host.rename(path, path + ROLLBACK_SUFFIX)
                    saved_states.append(path)
                    result.extra["removed_state_files"].append(path)
        except (IOError, OSError, RdmaNodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise ApplyError("moving %s aside failed (%s); %s" % (
                path, why, _undo_states(node, host, saved_states, "nothing was changed")),  # pylint: disable=undefined-loop-variable
                {"errno": getattr(exc, "errno", None)}, result.as_dict()) from exc
    try:
        backups = FileTransaction(host, backup=params["backup"]).apply_all(plans)
    except ApplyError as exc:
        outcome = _undo_states(node, host, saved_states, "no state file had been moved") if restarting else \
            "the kubelet was not touched"
        raise ApplyError("%s; %s" % (exc.msg, outcome), exc.details, result.as_dict()) from exc
    result.extra["backup_files"] = backups
    if restarting:
        node.systemctl("restart", node.service)
        ok, why = node.healthy(params["restart_timeout"], params["healthz_url"], params["settle_time"])
        if not ok:
            problem = "the kubelet did not become healthy after the change (%s)" % why
            try:
                restored = revert(host, plans)
                files = "the files were restored"
            except ApplyError as exc:
                restored, files = [], exc.msg
            state_failures = _restore_states(host, saved_states)
            node.systemctl("restart", node.service)
            back, dummy_why = node.healthy(params["restart_timeout"], params["healthz_url"], params["settle_time"])
            raise ApplyError("%s; %s%s and the kubelet restarted again (%s)" % (
                problem, files, "; state files NOT restored: %s" % ", ".join(state_failures) if state_failures
                else (", the state files put back" if saved_states else ""), "healthy" if back else "STILL NOT healthy"),
                {"restored": restored + [p for p in saved_states if p not in state_failures],
                 "healthy_after_rollback": back}, result.as_dict())
        for path in saved_states:
            try:
                host.unlink(path + ROLLBACK_SUFFIX)
            except (OSError, RdmaNodeError) as exc:
                module.warn("could not remove the saved copy %s%s: %s" % (path, ROLLBACK_SUFFIX, getattr(exc, "strerror", None) or exc))
    return result.as_dict(with_diff=module._diff)


ROLLBACK_SUFFIX = ".rdma-k8s-node-rollback"


def _restore_states(host, saved):
    """Put moved-aside state files back; returns the ones that could not be."""
    failed = []
    for path in saved:
        try:
            host.rename(path + ROLLBACK_SUFFIX, path)
        except (OSError, RdmaNodeError):
            failed.append(path)
    return failed


def _undo_states(node, host, saved, nothing):
    """After a failure with the kubelet stopped: state files back, kubelet started; a sentence saying so."""
    failed = _restore_states(host, saved)
    rc, dummy_out, err = node.systemctl("start", node.service)
    started = "the kubelet was started again" if rc == 0 else "starting the kubelet again FAILED: %s" % err.strip()
    if failed:
        return "state files NOT restored: %s (they are at <path>%s); %s" % (", ".join(failed), ROLLBACK_SUFFIX, started)
    return "%s; %s" % ("the state files were put back" if saved else nothing, started)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology_manager_policy=dict(type="str", choices=list(kub.TOPOLOGY_POLICIES)),
            topology_manager_scope=dict(type="str", choices=list(kub.TOPOLOGY_SCOPES)),
            topology_manager_policy_options=dict(type="dict"),
            topology_manager_default_options=dict(type="dict"),
            cpu_manager_policy=dict(type="str", choices=list(kub.CPU_POLICIES)),
            reserved_system_cpus=dict(type="str"),
            memory_manager_policy=dict(type="str", choices=list(kub.MEMORY_POLICIES)),
            reserved_memory=dict(type="list", elements="dict", options=dict(
                numa_node=dict(type="int", required=True),
                limits=dict(type="dict", required=True),
            )),
            mode=dict(type="str", default="auto", choices=["auto", "dropin", "config"]),
            dropin_name=dict(type="str", default="50-rdma-k8s-node-topology.conf"),
            config=dict(type="path", default="/var/lib/kubelet/config.yaml"),
            restart=dict(type="bool", default=False),
            restart_timeout=dict(type="int", default=60),
            settle_time=dict(type="int", default=15),
            healthz_url=dict(type="str", default="http://127.0.0.1:10248/healthz"),
            on_conflict=dict(type="str", default="fail", choices=list(ON_CONFLICT)),
            backup=dict(type="bool", default=False),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
