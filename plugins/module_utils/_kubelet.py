# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet Topology Manager and the CPU/memory manager settings it needs: pure validation and planning.

Everything the kubelet would refuse at start (and then crash-loop on) is refused here, before anything is
written, with the reason: an unknown policy, an option the detected kubelet does not accept, ``static`` CPU
manager without reserved CPUs, ``Static`` memory manager whose ``reservedMemory`` does not add up to
kube + system reserved + the hard eviction threshold, reserved CPUs or NUMA nodes the node does not have.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError

TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static")

# option -> (first version that accepts it with default feature gates, gate needed before that, first alpha version)
TOPOLOGY_OPTIONS = {
    "prefer-closest-numa-nodes": {"default_on": (1, 28), "alpha": (1, 26), "ga": (1, 32)},
    "max-allowable-numa-nodes": {"default_on": (1, 31), "alpha": None, "ga": (1, 35)},
    "numa-allocation-strategy": {"default_on": None, "alpha": (1, 38), "ga": None},
    "numa-score-weights": {"default_on": None, "alpha": (1, 38), "ga": None},
}
ALPHA_GATE = "TopologyManagerPolicyAlphaOptions"
DROPIN_VERSION = (1, 30)            # --config-dir beta: no environment variable needed
STATE_FILES = {"cpuManagerPolicy": "/var/lib/kubelet/cpu_manager_state",
               "memoryManagerPolicy": "/var/lib/kubelet/memory_manager_state"}
MANAGED_KEYS = ("topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions", "cpuManagerPolicy",
                "reservedSystemCPUs", "memoryManagerPolicy", "reservedMemory")
MAP_KEYS = ("topologyManagerPolicyOptions", "kubeReserved", "systemReserved", "featureGates", "evictionHard")
DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container", "cpuManagerPolicy": "none",
            "memoryManagerPolicy": "None"}

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E|m)?\Z")
_FACTORS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
            "k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def parse_kubelet_version(text):
    """``(major, minor, patch)`` from ``kubelet --version`` (``Kubernetes v1.30.2``)."""
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text or "")
    if not match:
        raise ParseError("cannot read a kubelet version from %r" % (text or "").strip()[:200])
    return tuple(int(part) for part in match.groups())


def parse_quantity(value, what):
    """Bytes of a Kubernetes memory quantity (``1124Mi``, ``1G``, ``512``)."""
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) == "m":
        raise InputError("%s: %r is not a memory quantity such as 512Mi or 1Gi" % (what, value))
    return int(float(match.group(1)) * _FACTORS[match.group(2)])


def parse_cpuset(text, what):
    """The CPU numbers of a Linux cpuset list (``0-3,8``)."""
    cpus = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        match = re.match(r"^(\d+)(?:-(\d+))?\Z", part)
        if not match:
            raise InputError("%s: %r is not a CPU list such as 0-1,32-33" % (what, text))
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise InputError("%s: range %s is backwards" % (what, part))
        cpus.update(range(low, high + 1))
    return cpus


def merge(base, overlay):
    """The kubelet's drop-in merge: maps merge per key, everything else (lists too) is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if key in MAP_KEYS and isinstance(value, dict) and isinstance(out.get(key), dict):
            combined = dict(out[key])
            combined.update(value)
            out[key] = combined
        else:
            out[key] = value
    return out


def desired_settings(params):
    """The KubeletConfiguration keys the module parameters ask for (None = leave alone)."""
    want = {}
    for option, key in (("topology_manager_policy", "topologyManagerPolicy"), ("topology_manager_scope", "topologyManagerScope"),
                        ("cpu_manager_policy", "cpuManagerPolicy"), ("reserved_system_cpus", "reservedSystemCPUs"),
                        ("memory_manager_policy", "memoryManagerPolicy")):
        if params.get(option) is not None:
            want[key] = params[option]
    if params.get("topology_manager_policy_options") is not None:
        want["topologyManagerPolicyOptions"] = dict((str(k), str(v).lower() if isinstance(v, bool) else str(v))
                                                    for k, v in params["topology_manager_policy_options"].items())
    if params.get("reserved_memory") is not None:
        want["reservedMemory"] = [{"numaNode": int(entry["numa_node"]), "limits": dict(
            (str(k), str(v)) for k, v in entry["limits"].items())} for entry in params["reserved_memory"]]
    return want


def validate(want, current, version, cpus_online, numa_nodes):  # pylint: disable=too-many-branches
    """Refuse anything the kubelet would refuse at start.  ``current`` is the persisted effective config
    (config.yaml + drop-ins); ``want`` is applied over it.  Returns warnings."""
    warnings = []
    after = merge(current, want)
    vtext = ".".join(str(p) for p in version)
    policy = after.get("topologyManagerPolicy", "none")
    if policy not in TOPOLOGY_POLICIES:
        raise InputError("topology_manager_policy: %r is not one of %s" % (policy, ", ".join(TOPOLOGY_POLICIES)))
    if after.get("topologyManagerScope", "container") not in TOPOLOGY_SCOPES:
        raise InputError("topology_manager_scope: %r is not one of %s" % (after["topologyManagerScope"], ", ".join(TOPOLOGY_SCOPES)))
    if "topologyManagerPolicy" in want and version < (1, 18):
        raise InputError("topology_manager_policy needs kubelet 1.18 or later; this node runs %s" % vtext)
    gates = after.get("featureGates") or {}
    for name, value in sorted((want.get("topologyManagerPolicyOptions") or {}).items()):
        spec = TOPOLOGY_OPTIONS.get(name)
        if spec is None:
            raise InputError("topology_manager_policy_options: unknown option %r (known: %s)" % (name, ", ".join(sorted(TOPOLOGY_OPTIONS))))
        on_by_default = spec["default_on"] is not None and version >= spec["default_on"]
        alpha_ok = spec["alpha"] is not None and version >= spec["alpha"] and gates.get(ALPHA_GATE) is True
        if not (on_by_default or alpha_ok):
            need = ("kubelet %d.%d or later" % spec["default_on"]) if spec["default_on"] else ""
            if spec["alpha"]:
                need += (" or " if need else "") + "kubelet %d.%d+ with featureGates.%s: true" % (spec["alpha"] + (ALPHA_GATE,))
            raise InputError("topology_manager_policy_options: %s needs %s; this node runs kubelet %s" % (name, need, vtext))
        _validate_option_value(name, value)
        if name == "prefer-closest-numa-nodes" and policy not in ("best-effort", "restricted"):
            warnings.append("prefer-closest-numa-nodes only affects the best-effort and restricted policies, not %s" % policy)
    if policy != "none" and len(numa_nodes) > 8 and "max-allowable-numa-nodes" not in (after.get("topologyManagerPolicyOptions") or {}):
        raise InputError("this node has %d NUMA nodes: the kubelet refuses to start a Topology Manager policy on more than 8 "
                         "unless topology_manager_policy_options sets max-allowable-numa-nodes" % len(numa_nodes))
    if after.get("cpuManagerPolicy", "none") not in CPU_POLICIES:
        raise InputError("cpu_manager_policy: %r is not one of %s" % (after["cpuManagerPolicy"], ", ".join(CPU_POLICIES)))
    reserved = after.get("reservedSystemCPUs")
    if reserved:
        cpus = parse_cpuset(reserved, "reserved_system_cpus")
        outside = sorted(cpus - set(cpus_online)) if cpus_online else []
        if outside:
            raise InputError("reserved_system_cpus: CPUs %s are not online on this node (online: %s)"
                             % (",".join(str(c) for c in outside), format_cpuset(cpus_online)))
    if after.get("cpuManagerPolicy") == "static":
        reserved_cpu = any(_nonzero_cpu((after.get(k) or {}).get("cpu")) for k in ("kubeReserved", "systemReserved"))
        if not reserved and not reserved_cpu:
            raise InputError("cpu_manager_policy: static needs reserved CPUs: set reserved_system_cpus (or kubeReserved.cpu/"
                             "systemReserved.cpu in the kubelet config); the kubelet refuses to start without them")
    if after.get("memoryManagerPolicy", "None") not in MEMORY_POLICIES:
        raise InputError("memory_manager_policy: %r is not one of %s (case matters)" % (after["memoryManagerPolicy"], ", ".join(MEMORY_POLICIES)))
    if after.get("memoryManagerPolicy") == "Static":
        _validate_reserved_memory(after, numa_nodes)
    return warnings


def _nonzero_cpu(value):
    if value in (None, ""):
        return False
    text = str(value)
    try:
        return float(text[:-1]) / 1000 > 0 if text.endswith("m") else float(text) > 0
    except ValueError:
        raise InputError("kubeReserved/systemReserved cpu %r is not a CPU quantity" % value) from None


def _validate_option_value(name, value):
    if name == "prefer-closest-numa-nodes" and value not in ("true", "false"):
        raise InputError("topology_manager_policy_options: prefer-closest-numa-nodes must be true or false, got %r" % value)
    if name == "max-allowable-numa-nodes" and (not value.isdigit() or int(value) <= 8):
        raise InputError("topology_manager_policy_options: max-allowable-numa-nodes must be an integer above 8, got %r" % value)
    if name == "numa-allocation-strategy" and value not in ("none", "most-allocated", "least-allocated"):
        raise InputError("topology_manager_policy_options: numa-allocation-strategy must be none, most-allocated or "
                         "least-allocated, got %r" % value)


def _validate_reserved_memory(after, numa_nodes):
    entries = after.get("reservedMemory") or []
    if not entries:
        raise InputError("memory_manager_policy: Static needs reserved_memory (per NUMA node); the kubelet refuses to start "
                         "without it ('you should specify the system reserved memory')")
    total = 0
    for entry in entries:
        node = entry.get("numaNode")
        if numa_nodes and node not in numa_nodes:
            raise InputError("reserved_memory: NUMA node %s does not exist on this node (nodes: %s)"
                             % (node, ",".join(str(n) for n in sorted(numa_nodes))))
        total += parse_quantity((entry.get("limits") or {}).get("memory", "0"), "reserved_memory limits.memory")
    kube = parse_quantity((after.get("kubeReserved") or {}).get("memory", "0"), "kubeReserved.memory")
    system = parse_quantity((after.get("systemReserved") or {}).get("memory", "0"), "systemReserved.memory")
    eviction = parse_quantity((after.get("evictionHard") or {}).get("memory.available", "100Mi"), "evictionHard memory.available")
    if total != kube + system + eviction:
        raise InputError("reserved_memory: the memory reserved over NUMA nodes (%d bytes) must equal kubeReserved.memory + "
                         "systemReserved.memory + evictionHard memory.available = %d + %d + %d = %d bytes; the kubelet "
                         "refuses to start otherwise" % (total, kube, system, eviction, kube + system + eviction))


def format_cpuset(cpus):
    """``0-3,8`` from a set of CPU numbers."""
    cpus = sorted(cpus)
    out, start = [], None
    for index, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if index + 1 == len(cpus) or cpus[index + 1] != cpu + 1:
            out.append(str(start) if start == cpu else "%d-%d" % (start, cpu))
            start = None
    return ",".join(out)


def key_changes(current, want):
    """Per-key ``{key: {"before", "after"}}`` for the keys whose effective value would change."""
    out = {}
    after = merge(current, want)
    for key in MANAGED_KEYS:
        if key in want and current.get(key, DEFAULTS.get(key)) != after.get(key):
            out[key] = {"before": current.get(key, DEFAULTS.get(key)), "after": after.get(key)}
    return out


def state_files_to_remove(changes):
    """The manager state files a policy change invalidates (the kubelet crash-loops on a stale one)."""
    return [STATE_FILES[key] for key in ("cpuManagerPolicy", "memoryManagerPolicy") if key in changes]


def parse_flags(text):
    """``{flag: value}`` of ``--flag=value`` / ``--flag value`` words in a command line or an env file line."""
    text = (text or "").strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]  # an env file's quoted value: KUBELET_KUBEADM_ARGS="--a=1 --b=2"
    words = re.findall(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""", text)
    flags = {}
    index = 0
    while index < len(words):
        word = words[index].strip("\"'")
        if word.startswith("--"):
            if "=" in word:
                name, value = word[2:].split("=", 1)
            elif index + 1 < len(words) and not words[index + 1].startswith("--"):
                name, value = word[2:], words[index + 1].strip("\"'")
                index += 1
            else:
                name, value = word[2:], "true"
            flags[name] = value
        index += 1
    return flags


def choose_target(mode, version, flags, config_path):
    """``("dropin", directory)`` or ``("config", path)`` -- where the settings are persisted."""
    config_dir = flags.get("config-dir")
    if mode == "dropin":
        if not config_dir:
            raise InputError("mode=dropin but the kubelet does not run with --config-dir (add it, e.g. to KUBELET_EXTRA_ARGS)")
        if version < DROPIN_VERSION:
            raise InputError("mode=dropin needs kubelet %d.%d or later (--config-dir is alpha before, behind an environment "
                             "variable); this node runs %s" % (DROPIN_VERSION + (".".join(str(p) for p in version),)))
        return "dropin", config_dir
    if mode == "auto" and config_dir and version >= DROPIN_VERSION:
        return "dropin", config_dir
    return "config", flags.get("config", config_path)


def replace_top_level(text, key, rendered_block):
    """``text`` with the top-level ``key:`` block replaced by ``rendered_block`` (or appended), nothing else touched."""
    lines = text.splitlines(True)
    start = None
    for index, line in enumerate(lines):
        if re.match(r"^%s\s*:" % re.escape(key), line):
            start = index
            break
    if start is None:
        body = text if not text or text.endswith("\n") else text + "\n"
        return body + rendered_block
    end = start + 1
    while end < len(lines) and (lines[end].startswith((" ", "\t", "-")) or not lines[end].strip()):
        if not lines[end].strip():
            probe = end
            while probe < len(lines) and not lines[probe].strip():
                probe += 1
            if probe >= len(lines) or not lines[probe].startswith((" ", "\t", "-")):
                break
        end += 1
    return "".join(lines[:start]) + rendered_block + "".join(lines[end:])
