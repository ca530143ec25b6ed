"""A kubelet stand-in for the runtime scenario: Debian ships no kubelet, and CI reaches no other package source.

It does what the real kubelet does with the files kubelet_topology touches, at start, and nothing else (no pods,
no API server).  Each rule below is the kubelet's, with the source it comes from:

* ``--version`` prints ``Kubernetes vX.Y.Z`` (here from /etc/kubelet-standin/version).
* ``--config FILE``: a KubeletConfiguration, ``kubelet.config.k8s.io/v1beta1`` (pkg/kubelet/kubeletconfig/
  configfiles: any other kind/apiVersion is a load error).
* ``--config-dir DIR`` (1.28 alpha behind KUBELET_CONFIG_DROPIN_DIR_ALPHA, beta and on from 1.30;
  cmd/kubelet/app/server.go mergeKubeletConfigurations): the ``*.conf`` files of DIR in lexical order, each a
  KubeletConfiguration, merged over the config file -- maps key by key, lists and scalars replaced.
* Validation (pkg/kubelet/apis/config/validation): topologyManagerPolicy one of none, best-effort, restricted,
  single-numa-node; topologyManagerScope container or pod.
* CPU manager (pkg/kubelet/cm/cpumanager): policy none or static; static needs reserved CPUs
  ("unable to determine reserved CPU resources for static policy" / "... to be greater than zero"), within the
  online CPUs; the checkpoint ``cpu_manager_state`` must name the configured policy, else the start fails with
  ``could not restore state from checkpoint: configured policy "X" differs from state checkpoint policy "Y"``;
  a missing checkpoint is written with the configured policy (static: ``defaultCpuSet`` = the online CPUs).  An
  existing static checkpoint must hold every reserved CPU in ``defaultCpuSet`` and, with its assignments, exactly
  the online CPUs (policy_static.go validateState: "not all reserved cpus ... are present in defaultCpuSet").
* Memory manager (pkg/kubelet/cm/memorymanager): None or Static; Static needs reservedMemory whose total equals
  kubeReserved + systemReserved + evictionHard memory.available (default 100Mi); same checkpoint rule with
  ``memory_manager_state``.  Static writes the machine state (per NUMA node: total from the node's meminfo, the
  node's reservation as ``systemReserved``) and refuses an existing one that differs ("[memorymanager] the expected
  machine state is different from the real one": policy_static.go validateState / getDefaultMachineState), so a
  ``reservedMemory`` change with the old checkpoint left in place fails the start, as on a real node.
* It serves ``/healthz`` ("ok") on healthzBindAddress:healthzPort (default 127.0.0.1:10248) BEFORE the managers
  restore their checkpoints (cmd/kubelet/app/server.go starts healthz with RunKubelet; the container manager
  starts later in initializeRuntimeDependentModules and exits the process when a checkpoint is refused), so a
  kubelet can answer "ok" and die seconds later.  KUBELET_STANDIN_MODULES_DELAY (default 3 s) is that gap.

Not modelled: the checkpoint checksum, pods, the API server, feature gates other than the drop-in directory.
Exit status 1 with the kubelet's message on stderr (journald) for every start failure.
"""

import http.server
import json
import os
import re
import sys
import threading
import time

import yaml

ROOT = os.environ.get("KUBELET_STANDIN_ROOT", "/")
STATE_DIR = os.path.join(ROOT, "var/lib/kubelet")
UNITS = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "": 1}


def die(msg):
    sys.stderr.write("E kubelet: %s\n" % msg)
    sys.exit(1)


def version():
    with open(os.path.join(ROOT, "etc/kubelet-standin/version"), encoding="utf-8") as handle:
        text = handle.read().strip()
    match = re.match(r"^v(\d+)\.(\d+)\.(\d+)$", text)
    return text, (int(match.group(1)), int(match.group(2)))


def load(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as exc:
        die("failed to load Kubelet config file %s, error: %s" % (path, exc))
    if not isinstance(data, dict) or data.get("kind") != "KubeletConfiguration" or \
            data.get("apiVersion") != "kubelet.config.k8s.io/v1beta1":
        die("failed to load Kubelet config file %s, error: no kind %r is registered for version %r"
            % (path, data.get("kind") if isinstance(data, dict) else None,
               data.get("apiVersion") if isinstance(data, dict) else None))
    return data


def merge(base, over):
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def quantity(text):
    match = re.match(r"^(\d+)(Ki|Mi|Gi|K|M|G|)$", str(text))
    if not match:
        die("invalid quantity %r" % text)
    return int(match.group(1)) * UNITS[match.group(2)]


def cpus(text):
    out = set()
    for part in str(text).split(","):
        part = part.strip()
        if part:
            low, dummy, high = part.partition("-")
            out.update(range(int(low), int(high or low) + 1))
    return out


def fmt_cpus(values):
    out, values = [], sorted(values)
    start = prev = None
    for cpu in values + [None]:
        if start is not None and (cpu is None or cpu != prev + 1):
            out.append(str(start) if start == prev else "%s-%s" % (start, prev))
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(out)


def reservation(config):
    """{numa node: {resource: bytes}} of reservedMemory (memorymanager/memory_manager.go convertReserved: per node,
    per resource, a later entry wins)."""
    out = {}
    for entry in config.get("reservedMemory") or []:
        for kind, amount in (entry.get("limits") or {}).items():
            out.setdefault(int(entry["numaNode"]), {})[kind] = quantity(amount)
    return out


def numa_memory():
    """{numa node: MemTotal bytes} from /sys/devices/system/node/node*/meminfo (0 when absent)."""
    base = os.path.join(ROOT, "sys/devices/system/node")
    out = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if re.match(r"^node\d+$", name):
            total = 0
            try:
                with open(os.path.join(base, name, "meminfo"), encoding="utf-8") as handle:
                    match = re.search(r"MemTotal:\s+(\d+) kB", handle.read())
                    total = int(match.group(1)) * 1024 if match else 0
            except OSError:
                pass
            out[int(name[4:])] = total
    return out or {0: 0}


def machine_state(config):
    """The Static policy's default machine state (memorymanager/policy_static.go getDefaultMachineState): per NUMA
    node, regular memory with its total, the reservation of that node (systemReserved), allocatable = free = total -
    reserved."""
    reserved = reservation(config)
    state = {}
    for node, total in numa_memory().items():
        amount = reserved.get(node, {}).get("memory", 0)
        state[str(node)] = {"numberOfAssignments": 0, "cells": [node], "memoryMap": {"memory": {
            "total": total, "systemReserved": amount, "allocatable": total - amount, "reserved": 0,
            "free": total - amount}}}
    return state


def validate_cpu_state(saved, reserved, online):
    """cpumanager/policy_static.go staticPolicy.validateState (without strict-cpu-reservation): an empty checkpoint
    is initialised; otherwise every reserved CPU must be in defaultCpuSet, and defaultCpuSet with the assignments
    must be the online CPUs."""
    default = cpus(saved.get("defaultCpuSet") or "")
    assigned = set()
    for containers in (saved.get("entries") or {}).values():
        for value in containers.values():
            assigned |= cpus(value)
    if not default:
        if assigned:
            die("failed to initialize cpu manager: default cpuset cannot be empty")
        return
    if not reserved <= default:
        die('failed to initialize cpu manager: not all reserved cpus: "%s" are present in defaultCpuSet: "%s"'
            % (fmt_cpus(reserved), fmt_cpus(default)))
    if default | assigned != online:
        die('failed to initialize cpu manager: current set of available CPUs "%s" doesn\'t match with CPUs in state "%s"'
            % (fmt_cpus(online), fmt_cpus(default | assigned)))


def validate_memory_state(saved, config):
    """memorymanager/policy_static.go staticPolicy.validateState: an empty machine state is initialised; otherwise
    it must equal the one rebuilt from the machine and reservedMemory (areMachineStatesEqual compares total,
    systemReserved and allocatable per node and resource)."""
    machine = saved.get("machineState") or {}
    if not machine:
        if saved.get("entries"):
            die("failed to start memory manager: [memorymanager] machine state can not be empty when it has memory "
                "assignments")
        return
    expected = machine_state(config)

    def tables(state):
        return dict((str(node), dict((kind, (t.get("total"), t.get("systemReserved"), t.get("allocatable")))
                                     for kind, t in (value.get("memoryMap") or {}).items()))
                    for node, value in state.items())
    if tables(machine) != tables(expected):
        die("failed to start memory manager: [memorymanager] the expected machine state is different from the real one")


def checkpoint(name, policy, config, online):
    """restoreState (cpumanager and memorymanager state/state_checkpoint.go): the checkpoint must name the
    configured policy; then the policy's Start validates it (validateState above); a missing one is written."""
    path = os.path.join(STATE_DIR, name)
    manager = "CPU" if name == "cpu_manager_state" else "memory"
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            try:
                saved = json.load(handle)
            except ValueError:
                die("could not restore state from checkpoint: checkpoint is corrupted")
        if saved.get("policyName") != policy:
            die('could not restore state from checkpoint: configured policy "%s" differs from state checkpoint '
                'policy "%s", please drain this node and delete the %s manager checkpoint file "%s" before '
                "restarting Kubelet" % (policy, saved.get("policyName"), manager, "/var/lib/kubelet/" + name))
        if policy == "static":
            validate_cpu_state(saved, cpus(config.get("reservedSystemCPUs", "")), online)
        if policy == "Static":
            validate_memory_state(saved, config)
        return
    if name == "cpu_manager_state":
        data = {"policyName": policy, "defaultCpuSet": fmt_cpus(online) if policy == "static" else "", "checksum": 0}
    else:
        data = {"policyName": policy, "machineState": machine_state(config) if policy == "Static" else {}, "checksum": 0}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def start(argv):
    flags = dict(re.match(r"^--([^=]+)=?(.*)$", arg).groups() for arg in argv if arg.startswith("--"))
    text, ver = version()
    config = load(os.path.join(ROOT, flags["config"].lstrip("/"))) if flags.get("config") else {}
    if flags.get("config-dir"):
        if ver < (1, 28) or (ver < (1, 30) and not os.environ.get("KUBELET_CONFIG_DROPIN_DIR_ALPHA")):
            die("unknown flag: --config-dir" if ver < (1, 28) else
                "flag --config-dir needs the KUBELET_CONFIG_DROPIN_DIR_ALPHA environment variable")
        directory = os.path.join(ROOT, flags["config-dir"].lstrip("/"))
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
            if name.endswith(".conf"):
                config = merge(config, load(os.path.join(directory, name)))
    policy = config.get("topologyManagerPolicy", "none")
    if policy not in ("none", "best-effort", "restricted", "single-numa-node"):
        die('invalid configuration: topologyManagerPolicy (--topology-manager-policy) "%s" must be one of: '
            '["none" "best-effort" "restricted" "single-numa-node"]' % policy)
    if config.get("topologyManagerScope", "container") not in ("container", "pod"):
        die('invalid configuration: topologyManagerScope (--topology-manager-scope) "%s" must be one of: '
            '"container", or "pod"' % config.get("topologyManagerScope"))
    cpu_policy = config.get("cpuManagerPolicy", "none")
    if cpu_policy not in ("none", "static"):
        die('failed to initialize cpu manager: unknown policy: "%s"' % cpu_policy)
    if cpu_policy == "static":
        reserved = cpus(config.get("reservedSystemCPUs", ""))
        with open(os.path.join(ROOT, "sys/devices/system/cpu/online"), encoding="utf-8") as handle:
            online = cpus(handle.read().strip())
        if not reserved:
            total = sum(quantity(str(section.get("cpu", "0")).replace("m", "")) for section in
                        (config.get("kubeReserved") or {}, config.get("systemReserved") or {}))
            if not total:
                die("failed to initialize cpu manager: [cpumanager] the static policy requires systemreserved.cpu + "
                    "kubereserved.cpu to be greater than zero")
        elif not reserved <= online:
            die("failed to initialize cpu manager: reserved CPUs %s are not all online (%s)"
                % (sorted(reserved), sorted(online)))
    memory_policy = config.get("memoryManagerPolicy", "None")
    if memory_policy not in ("None", "Static"):
        die('failed to initialize memory manager: unknown policy: "%s"' % memory_policy)
    if memory_policy == "Static":
        entries = config.get("reservedMemory") or []
        if not entries:
            die("failed to initialize memory manager: [memorymanager] you should specify the memory reservation "
                "for the static policy")
        total = sum(quantity(entry.get("limits", {}).get("memory", "0")) for entry in entries)
        wanted = sum(quantity((config.get(key) or {}).get("memory", "0")) for key in ("kubeReserved", "systemReserved"))
        wanted += quantity((config.get("evictionHard") or {}).get("memory.available", "100Mi"))
        if total != wanted:
            die('failed to initialize memory manager: [memorymanager] the total amount "%d" of type "memory" is not '
                'equal to the value "%d" determined by Node Allocatable feature' % (total, wanted))
    address = config.get("healthzBindAddress", "127.0.0.1")
    port = int(config.get("healthzPort", 10248))

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            body = b"ok" if self.path == "/healthz" else b"404 page not found"
            self.send_response(200 if self.path == "/healthz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    # healthz answers first (RunKubelet starts it); the container manager starts later, once the runtime is up
    # (initializeRuntimeDependentModules), and that is where the managers restore their checkpoints and exit on error
    server = http.server.HTTPServer((address, port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(float(os.environ.get("KUBELET_STANDIN_MODULES_DELAY", "3")))
    with open(os.path.join(ROOT, "sys/devices/system/cpu/online"), encoding="utf-8") as handle:
        online_cpus = cpus(handle.read().strip())
    checkpoint("cpu_manager_state", cpu_policy, config, online_cpus)
    checkpoint("memory_manager_state", memory_policy, config, online_cpus)
    sys.stderr.write("I kubelet %s started: topologyManagerPolicy=%s cpuManagerPolicy=%s memoryManagerPolicy=%s\n"
                     % (text, policy, cpu_policy, memory_policy))
    threading.Event().wait()


def main():
    if "--version" in sys.argv[1:]:
        print("Kubernetes %s" % version()[0])
        return
    start(sys.argv[1:])


if __name__ == "__main__":
    main()
