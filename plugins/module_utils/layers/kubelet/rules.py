# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet Topology Manager and the CPU/memory manager settings it needs: pure validation and planning.

Everything the kubelet would refuse at start (and then crash-loop on) is refused here, before anything is
written, with the reason: an unknown policy, an option the detected kubelet does not accept, ``static`` CPU
manager without reserved CPUs, ``Static`` memory manager whose ``reservedMemory`` does not add up to
kube + system reserved + the hard eviction threshold, reserved CPUs or NUMA nodes the node does not have.

What the kubelet reads and how it merges it (documents, flags, layers, CPU lists) is ``config.py``: the observer
imports only that; its names are imported here too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import (
    ApplyError, ConflictError, InputError, ParseError,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._systemd import (
    cut_value_words, env_assignments, parse_env_file, replace_env_value, split_words, word_spans,
)
# what the kubelet reads and how it merges it (the observer's part): here too for the planner, the judge and the tests
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet.config import (  # pylint: disable=unused-import
    DEFAULT_DROPIN_NAME, DEFAULTS, FLAG_FIELDS, MANAGED_KEYS, OWN_HEADER, RELEVANT_KEYS, STATE_FILES, VALUE_FLAGS,
    DependencyError, absolute, check_shapes, effective, flag_name, flag_settings, flags_layer, format_cpuset,
    is_own_dropin, load_document, merge, own_names, parse_command, parse_cpuset, parse_kubelet_version, relevant,
    relevant_flags, walk_key, yaml_module,
)

TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static")

#: Topology Manager policy options, from pkg/kubelet/cm/topologymanager/policy_options.go of each release: the first
#: kubelet that knows the option, the first where it is in ``betaOptions`` and in ``stableOptions`` (None: never yet);
#: before ``beta`` it is alpha.  prefer-closest-numa-nodes: beta 1.26 (KEP 3545), stable 1.32; max-allowable-numa-nodes:
#: beta 1.31, stable 1.35 (KEP 4622); numa-allocation-strategy and numa-score-weights: alpha 1.38.
TOPOLOGY_OPTIONS = {
    "prefer-closest-numa-nodes": {"since": (1, 26), "beta": (1, 26), "ga": (1, 32)},
    "max-allowable-numa-nodes": {"since": (1, 31), "beta": (1, 31), "ga": (1, 35)},
    "numa-allocation-strategy": {"since": (1, 38), "beta": None, "ga": None},
    "numa-score-weights": {"since": (1, 38), "beta": None, "ga": None},
}
#: feature gates CheckPolicyOptionAvailable (and the config validation) consult, with the first kubelet that turns
#: each on by default (pkg/features/kube_features.go: TopologyManagerPolicyOptions alpha 1.26, beta and on 1.28, GA
#: 1.32; TopologyManagerPolicyBetaOptions beta off 1.26, on 1.28; TopologyManagerPolicyAlphaOptions always off)
OPTIONS_GATE = "TopologyManagerPolicyOptions"
BETA_GATE = "TopologyManagerPolicyBetaOptions"
GATE_DEFAULT_ON = {OPTIONS_GATE: (1, 28), BETA_GATE: (1, 28), "TopologyManagerPolicyAlphaOptions": None}
ALPHA_GATE = "TopologyManagerPolicyAlphaOptions"
DROPIN_VERSION = (1, 30)            # --config-dir beta: no environment variable needed
MAP_KEYS = ("topologyManagerPolicyOptions", "kubeReserved", "systemReserved", "featureGates", "evictionHard")

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E|m)?\Z")
_FACTORS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
            "k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def parse_quantity(value, what):
    """Bytes of a Kubernetes memory quantity (``1124Mi``, ``1G``, ``512``)."""
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) == "m":
        raise InputError("%s: %r is not a memory quantity such as 512Mi or 1Gi" % (what, value))
    if len(match.group(1)) > 30:  # float() would give inf (int() of it: OverflowError); no memory is that large
        raise InputError("%s: %s... is larger than any memory quantity" % (what, str(value).strip()[:40]))
    return int(float(match.group(1)) * _FACTORS[match.group(2)])


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
        if name not in TOPOLOGY_OPTIONS:
            raise InputError("topology_manager_policy_options: unknown option %r (known: %s)" % (name, ", ".join(sorted(TOPOLOGY_OPTIONS))))
        refusal = option_refusal(name, version, gates)
        if refusal:
            raise InputError("topology_manager_policy_options: %s %s; this node runs kubelet %s" % (name, refusal, vtext))
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


def gate_enabled(name, version, gates):
    """Whether the kubelet ``version`` runs with feature gate ``name`` on: the configuration's ``featureGates`` when it
    sets it, else the gate's default in that release (:data:`GATE_DEFAULT_ON`)."""
    if name in (gates or {}):
        return gates[name] is True
    first = GATE_DEFAULT_ON.get(name)
    return first is not None and tuple(version[:2]) >= first


def option_maturity(name, version):
    """``alpha``, ``beta`` or ``stable``: the set ``name`` is in (policy_options.go) in kubelet ``version``, or None
    when that kubelet does not know the option."""
    spec = TOPOLOGY_OPTIONS[name]
    version = tuple(version[:2])
    if version < spec["since"]:
        return None
    if spec["ga"] is not None and version >= spec["ga"]:
        return "stable"
    if spec["beta"] is not None and version >= spec["beta"]:
        return "beta"
    return "alpha"


def _missing_gates(name, version, gates):
    """``(maturity, [gates that must be on but are not])`` of option ``name`` in kubelet ``version``."""
    maturity = option_maturity(name, version)
    if maturity is None:
        return None, []
    needed = [OPTIONS_GATE] + ([BETA_GATE] if maturity == "beta" else [ALPHA_GATE] if maturity == "alpha" else [])
    return maturity, [gate for gate in needed if not gate_enabled(gate, version, gates)]


def default_ok_version(name):
    """The first kubelet (``(major, minor)``) that accepts option ``name`` with its default feature gates, or None
    (an alpha option: never without a gate)."""
    for minor in range(TOPOLOGY_OPTIONS[name]["since"][1], 100):
        maturity, missing = _missing_gates(name, (1, minor), {})
        if maturity == "alpha":
            return None
        if not missing:
            return (1, minor)
    return None


def option_refusal(name, version, gates):
    """None when kubelet ``version`` with ``gates`` accepts the Topology Manager policy option ``name``, else why not
    (a phrase such as ``needs kubelet 1.28 or later ...``).  The kubelet's rules: an unknown option, an alpha option
    without TopologyManagerPolicyAlphaOptions, a beta one without TopologyManagerPolicyBetaOptions
    (CheckPolicyOptionAvailable in pkg/kubelet/cm/topologymanager/policy_options.go), and any option while
    TopologyManagerPolicyOptions is off (pkg/kubelet/apis/config/validation) stop the kubelet at start."""
    spec = TOPOLOGY_OPTIONS[name]
    maturity, missing = _missing_gates(name, version, gates)
    first = default_ok_version(name)
    plain = ("kubelet %d.%d or later" % first) if first else None
    if maturity is None:
        return "needs %s" % (plain or "kubelet %d.%d or later with featureGates.%s: true" % (spec["since"] + (ALPHA_GATE,)))
    if not missing:
        return None
    how = "featureGates %s: true" % " and ".join(missing)
    return "needs %s (a%s option in this kubelet)" % (
        ("%s or %s" % (plain, how)) if plain and tuple(version[:2]) < first else how,
        "n alpha" if maturity == "alpha" else " beta" if maturity == "beta" else " stable")


def default_options(defaults, want, others, version):
    """The options of ``defaults`` (the role's ``kubelet_topology_topology_manager_default_options``) to add to the
    wanted ``topologyManagerPolicyOptions``, and why each other one is left out.

    A default never beats an explicit setting: an option the module's ``topology_manager_policy_options`` sets, or
    one the node's own configuration (``others``: the effective settings of every source but the collection's own
    drop-in) already sets, is left as it is.  An option the kubelet would refuse (its version, its feature gates,
    :func:`option_refusal`) is left out, and so is prefer-closest-numa-nodes under a policy it does not affect (it is
    read by best-effort and restricted only: NewHintMerger in pkg/kubelet/cm/topologymanager/policy.go).
    Returns ``(options to add, {option: reason left out})``."""
    add, left_out = {}, {}
    explicit = want.get("topologyManagerPolicyOptions") or {}
    own = others.get("topologyManagerPolicyOptions") if isinstance(others.get("topologyManagerPolicyOptions"), dict) else {}
    policy = want.get("topologyManagerPolicy", others.get("topologyManagerPolicy", "none"))
    gates = merge(others.get("featureGates") or {}, want.get("featureGates") or {})
    vtext = ".".join(str(p) for p in version)
    for name, value in sorted((defaults or {}).items()):
        value = str(value).lower() if isinstance(value, bool) else str(value)
        if name in explicit:
            continue
        if name not in TOPOLOGY_OPTIONS:
            raise InputError("topology_manager_default_options: unknown option %r (known: %s)"
                             % (name, ", ".join(sorted(TOPOLOGY_OPTIONS))))
        _validate_option_value(name, value)
        if name in own:
            left_out[name] = "the node's configuration sets it (%s=%s): kept" % (name, own[name])
            continue
        refusal = option_refusal(name, version, gates)
        if refusal:
            left_out[name] = "%s %s; this node runs kubelet %s" % (name, refusal, vtext)
            continue
        if name == "prefer-closest-numa-nodes" and policy not in ("best-effort", "restricted"):
            left_out[name] = "%s only affects the best-effort and restricted policies, not %s" % (name, policy)
            continue
        add[name] = value
    return add, left_out


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
    if name == "max-allowable-numa-nodes" and (not (value.isascii() and value.isdigit()) or len(value) > 9 or int(value) <= 8):
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


def key_changes(current, want):
    """Per-key ``{key: {"before", "after"}}`` for the keys whose effective value would change."""
    out = {}
    after = merge(current, want)
    for key in MANAGED_KEYS:
        if key in want and current.get(key, DEFAULTS.get(key)) != after.get(key):
            out[key] = {"before": current.get(key, DEFAULTS.get(key)), "after": after.get(key)}
    return out


def reserved_memory_table(entries):
    """``{(numa node, resource): bytes}`` of a ``reservedMemory`` list as the memory manager holds it (convertReserved
    in pkg/kubelet/cm/memorymanager/memory_manager.go: per node, per resource, a later entry wins); zero amounts are
    left out (the machine state's ``systemReserved`` is 0 for them either way)."""
    table = {}
    for entry in entries or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("limits"), dict):
            continue
        for kind, amount in entry["limits"].items():
            try:
                table[(entry.get("numaNode"), str(kind))] = parse_quantity(amount, "reservedMemory")
            except InputError:
                table[(entry.get("numaNode"), str(kind))] = amount
    return dict((key, value) for key, value in table.items() if value != 0)


def stale_state_reasons(changes, after):
    """``{state file: reason}`` for every change the kubelet checks against its checkpoint at start (and refuses to
    start on, until the file is removed), from the changed keys (``changes``, as :func:`changes` gives them) and the
    settings after the change (``after``):

    * a CPU or memory manager policy change: the checkpoint names the policy it was written under
      (cpumanager/state/state_checkpoint.go and memorymanager/state/state_checkpoint.go restoreState: "configured
      policy %q differs from state checkpoint policy %q");
    * ``reservedSystemCPUs`` under the ``static`` CPU policy: staticPolicy.validateState (cpumanager/policy_static.go)
      requires every reserved CPU in the checkpoint's ``defaultCpuSet`` (with strict-cpu-reservation: none of them,
      and the CPUs it knows equal to the online ones minus the reserved), which a CPU newly reserved and held by a
      container, or any change with strict-cpu-reservation, breaks;
    * ``reservedMemory`` under the ``Static`` memory policy: staticPolicy.validateState (memorymanager/policy_static.go)
      rebuilds the machine state from the machine and the reservation (getDefaultMachineState) and refuses a
      checkpoint whose per-NUMA ``systemReserved``/``allocatable``/``free`` differ ("the expected machine state is
      different from the real one"): every change of the reserved bytes of a NUMA node and resource.

    Under the ``none``/``None`` policies the kubelet checks nothing but the policy name."""
    out = {}
    cpu_policy = after.get("cpuManagerPolicy", DEFAULTS["cpuManagerPolicy"])
    memory_policy = after.get("memoryManagerPolicy", DEFAULTS["memoryManagerPolicy"])
    cpu_state, memory_state = STATE_FILES["cpuManagerPolicy"], STATE_FILES["memoryManagerPolicy"]
    if "cpuManagerPolicy" in changes:
        out[cpu_state] = "cpuManagerPolicy changes (%s -> %s)" % (
            changes["cpuManagerPolicy"]["before"], changes["cpuManagerPolicy"]["after"])
    elif "reservedSystemCPUs" in changes and cpu_policy == "static":
        out[cpu_state] = "reservedSystemCPUs changes (%s -> %s) under the static CPU manager" % (
            changes["reservedSystemCPUs"]["before"], changes["reservedSystemCPUs"]["after"])
    if "memoryManagerPolicy" in changes:
        out[memory_state] = "memoryManagerPolicy changes (%s -> %s)" % (
            changes["memoryManagerPolicy"]["before"], changes["memoryManagerPolicy"]["after"])
    elif "reservedMemory" in changes and memory_policy == "Static" and \
            reserved_memory_table(changes["reservedMemory"]["before"]) != reserved_memory_table(changes["reservedMemory"]["after"]):
        out[memory_state] = "reservedMemory changes under the Static memory manager"
    return out


def state_files_to_remove(changes, after=None):
    """The manager state files the changes invalidate (the kubelet crash-loops on a stale one); see
    :func:`stale_state_reasons`.  Without ``after``, only policy changes count."""
    return sorted(stale_state_reasons(changes, after or {}), key=lambda p: list(STATE_FILES.values()).index(p))


def checkpoint_refusal(path, text, settings, cpus_online=None):
    """Why the kubelet would refuse the checkpoint ``text`` of state file ``path`` with the effective ``settings``,
    or None.  What it checks (see :func:`stale_state_reasons` for the sources): the policy name; under ``static``,
    every reserved CPU in ``defaultCpuSet`` (none with strict-cpu-reservation) and, when ``cpus_online`` is known,
    the CPUs of ``defaultCpuSet`` and ``entries`` together equal to the online ones (minus the reserved with
    strict-cpu-reservation); under ``Static``, every NUMA node's ``systemReserved`` per resource equal to the
    reservation.  An empty checkpoint (no ``defaultCpuSet``/``machineState``, no entries) is initialised, not
    refused.  Unreadable JSON is a refusal too (the checksum fails)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return "the checkpoint is not JSON"
    if not isinstance(data, dict):
        return "the checkpoint is not a JSON object"
    key = "cpuManagerPolicy" if path == STATE_FILES["cpuManagerPolicy"] else "memoryManagerPolicy"
    policy = settings.get(key, DEFAULTS[key])
    if data.get("policyName") != policy:
        return "it was written under policy %r, the configuration says %r" % (data.get("policyName"), policy)
    if key == "cpuManagerPolicy" and policy == "static":
        return _cpu_checkpoint_refusal(data, settings, cpus_online)
    if key == "memoryManagerPolicy" and policy == "Static":
        return _memory_checkpoint_refusal(data, settings)
    return None


def _cpu_checkpoint_refusal(data, settings, cpus_online):
    try:
        default = parse_cpuset(data.get("defaultCpuSet") or "", "defaultCpuSet")
        assigned = set()
        for containers in (data.get("entries") or {}).values():
            for cpus in (containers or {}).values():
                assigned |= parse_cpuset(cpus, "entries")
        reserved = parse_cpuset(settings.get("reservedSystemCPUs") or "", "reservedSystemCPUs")
    except (InputError, AttributeError, TypeError):
        return "the checkpoint's CPU sets cannot be read"
    if not default:
        return "default cpuset cannot be empty" if assigned else None
    strict = str((settings.get("cpuManagerPolicyOptions") or {}).get("strict-cpu-reservation", "")).lower() == "true"
    if strict and reserved & default:
        return "reserved CPUs %s are in its defaultCpuSet %s (strict-cpu-reservation)" % (
            format_cpuset(reserved & default), format_cpuset(default))
    if not strict and not reserved <= default:
        return "reserved CPUs %s are not all in its defaultCpuSet %s" % (format_cpuset(reserved), format_cpuset(default))
    if cpus_online:
        expected = set(cpus_online) - (reserved if strict else set())
        if default | assigned != expected:
            return "its CPUs %s are not the node's %s" % (format_cpuset(default | assigned), format_cpuset(expected))
    return None


def _memory_checkpoint_refusal(data, settings):
    machine = data.get("machineState")
    if not machine:
        return "machine state can not be empty when it has memory assignments" if data.get("entries") else None
    if not isinstance(machine, dict):
        return "its machineState cannot be read"
    want = reserved_memory_table(settings.get("reservedMemory"))
    have = {}
    for node, state in machine.items():
        for kind, table in ((state or {}).get("memoryMap") or {}).items() if isinstance(state, dict) else []:
            amount = (table or {}).get("systemReserved", 0) if isinstance(table, dict) else 0
            if amount:
                have[(int(node) if str(node).isdigit() else node, str(kind))] = amount
    if have != want:
        return "its per-NUMA systemReserved %s differs from the reservation %s" % (
            _table_text(have), _table_text(want))
    return None


def _table_text(table):
    return "{%s}" % ", ".join("%s:%s=%s" % (node, kind, amount) for (node, kind), amount in sorted(table.items(), key=repr))


def parse_flags(text):
    """``{flag: value}`` (last wins) of the ``--flag=value`` / ``--flag value`` words of a command line (quotes group
    words, as systemd splits a ``$VARIABLE``); an env file's quoted value is unquoted first."""
    text = (text or "").strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]  # an env file's quoted value: KUBELET_KUBEADM_ARGS="--a=1 --b=2"
    return dict((flag["name"], flag["value"]) for flag in parse_command([(w, None) for w in split_words(text)], 0))


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
    """``text`` with the top-level ``key:`` block replaced by ``rendered_block`` (or appended), nothing else touched.

    The block is the key's line and the lines after it that are indented or list items; blank lines and comments at
    the first column belong to it only when more of the block follows them."""
    lines = text.splitlines(True)
    pattern = re.compile(r"""^(?:%s|"%s"|'%s')[ \t]*:(?:[ \t]|\r?\n|$)""" % ((re.escape(key),) * 3))
    start = None
    for index, line in enumerate(lines):
        if pattern.match(line):
            start = index
            break
    if start is None:
        tail = len(lines)
        while tail and not lines[tail - 1].strip():
            tail -= 1
        if tail and lines[tail - 1].rstrip() == "...":  # a document end marker: the key goes before it
            return "".join(lines[:tail - 1]) + rendered_block + "".join(lines[tail - 1:])
        body = text if not text or text.endswith("\n") else text + "\n"
        return body + rendered_block

    def continues(line):
        return line.startswith((" ", "\t")) or (line.startswith("-") and not line.startswith("---"))

    def filler(line):
        return not line.strip() or line.startswith("#")

    end = start + 1
    while end < len(lines):
        if continues(lines[end]):
            end += 1
            continue
        if filler(lines[end]):
            probe = end
            while probe < len(lines) and filler(lines[probe]):
                probe += 1
            if probe < len(lines) and continues(lines[probe]):
                end = probe
                continue
        break
    return "".join(lines[:start]) + rendered_block + "".join(lines[end:])


# -- documents: a KubeletConfiguration in JSON or YAML ---------------------------------------------------------------
def dump_yaml(data):
    """YAML of ``data`` as the module has always written it (block style, keys in the given order)."""
    yaml = yaml_module()
    if yaml is None:
        raise DependencyError("writing YAML needs PyYAML (python3-yaml) on the node")
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


def render_own_dropin(content):
    """The collection's drop-in: YAML when PyYAML is there (as earlier releases wrote it), else the same mapping as
    JSON under the header comment (a YAML document the kubelet reads, and this module without PyYAML)."""
    if yaml_module() is not None:
        return OWN_HEADER + "\n" + dump_yaml(content)
    return OWN_HEADER + " (JSON: a YAML document without PyYAML on the node)\n" + json.dumps(content, indent=2) + "\n"


_JSON_WS = " \t\n\r"


def _skip(text, index):
    while index < len(text) and text[index] in _JSON_WS:
        index += 1
    return index


def json_members(text, path):
    """``(open index, [member], close index)`` of a JSON object text; a member is ``{"key", "start", "colon",
    "value_start", "value_end"}`` (indexes into ``text``), for editing one value without touching the rest."""
    decoder = json.JSONDecoder()
    index = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if index >= len(text) or text[index] != "{":
        raise ParseError("%s is not a JSON object" % path, {"path": path})
    opening, members = index, []
    index = _skip(text, index + 1)
    try:
        if text[index] == "}":
            return opening, members, index
        while True:
            if text[index] != '"':
                raise ValueError("a key must be a string at %d" % index)
            key, after_key = json.decoder.scanstring(text, index + 1)
            colon = _skip(text, after_key)
            if text[colon] != ":":
                raise ValueError("':' expected at %d" % colon)
            value_start = _skip(text, colon + 1)
            dummy_value, value_end = decoder.raw_decode(text, value_start)
            members.append({"key": key, "start": index, "colon": after_key, "value_start": value_start,
                            "value_end": value_end})
            index = _skip(text, value_end)
            if text[index] == ",":
                index = _skip(text, index + 1)
                continue
            if text[index] == "}":
                return opening, members, index
            raise ValueError("',' or '}' expected at %d" % index)
    except (IndexError, ValueError) as exc:
        raise ParseError("%s is not valid JSON: %s" % (path, exc), {"path": path}) from None


def json_set_top_level(text, updates, path):
    """``text`` (a JSON object) with the top-level keys of ``updates`` set: an existing key's value is rewritten in
    place, a new key is added after the last one, in the file's own indentation and separators; every other byte
    stays where it was."""
    opening, members, closing = json_members(text, path)
    by_key = dict((m["key"], m) for m in members)
    if members:
        first = members[0]
        gap = text[opening + 1:first["start"]]
        indent = gap.rsplit("\n", 1)[1] if "\n" in gap else None
        key_sep = text[first["colon"]:first["value_start"]]
        if "\n" in key_sep or "\r" in key_sep or "\t" in key_sep:
            key_sep = ": "
        item_sep = "," if key_sep == ":" else ", "
        if len(members) > 1:
            between = text[members[0]["value_end"]:members[1]["start"]]
            item_sep = "," + (" " if between.startswith(", ") else "")
    else:
        indent, key_sep, item_sep = "  ", ": ", ", "

    def render(value):
        if indent is None:
            return json.dumps(value, separators=(item_sep, key_sep), ensure_ascii=False)
        return json.dumps(value, indent=indent, separators=(",", key_sep), ensure_ascii=False).replace("\n", "\n" + indent)

    edits = []
    new_keys = [key for key in updates if key not in by_key]
    if new_keys:
        block = "".join((("," + "\n" + indent) if indent is not None else item_sep) + json.dumps(key) + key_sep +
                        render(updates[key]) for key in new_keys)
        if members:
            edits.append((members[-1]["value_end"], members[-1]["value_end"], block))
        else:
            edits.append((opening + 1, closing, block[1:] + "\n"))
    for key, value in updates.items():
        if key in by_key:
            member = by_key[key]
            edits.append((member["value_start"], member["value_end"], render(value)))
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text


def edit_document(text, fmt, updates, path):
    """``text`` with the top-level keys of ``updates`` set and nothing else changed: JSON stays JSON (key order and
    every value kept, the file's indentation), YAML stays YAML (comments and every other line kept).  The result is
    parsed again and compared with the original plus ``updates``; anything else is an :class:`ApplyError` and nothing
    is written."""
    before, dummy_fmt = load_document(text, path)
    if fmt == "json":
        new = json_set_top_level(text, updates, path)
    else:
        new = text
        for key, value in updates.items():
            if key not in before or before[key] != value:
                new = replace_top_level(new, key, dump_yaml({key: value}))
    expected = dict(before)
    expected.update(updates)
    try:
        after, dummy_fmt = load_document(new, path)
    except ParseError as exc:
        raise ApplyError("editing %s in place would leave it unreadable (%s); nothing was written" % (path, exc.msg),
                         {"path": path}) from None
    if after != expected or (fmt == "json" and list(after) != list(expected)):
        changed = sorted(str(k) for k in set(after) | set(expected) if after.get(k) != expected.get(k))
        raise ApplyError("editing %s in place would not give exactly the requested keys (differences in %s); nothing "
                         "was written" % (path, ", ".join(changed) or "key order"), {"path": path})
    return new


# -- command-line flags ----------------------------------------------------------------------------------------------
#: managed fields that are maps of options: the collection sets some options, the others stay the owner's
OPTION_KEYS = ("topologyManagerPolicyOptions",)


# -- layers: the kubelet's sources in the order it applies them -------------------------------------------------------
def decider(layers, key, option=None):
    """Index of the layer that decides ``key`` (or one ``option`` of a map key) in :func:`effective`, or None."""
    for index in range(len(layers) - 1, -1, -1):
        layer = layers[index]
        if key not in layer["settings"]:
            continue
        value = layer["settings"][key]
        if layer["kind"] == "flags" or option is None or not isinstance(value, dict) or option in value:
            return index
    return None


def _norm(key, value):
    """A value in the form two equal settings share (CPU lists as sets, memory quantities as bytes)."""
    if key == "reservedSystemCPUs" and isinstance(value, str):
        try:
            return ("cpus", frozenset(parse_cpuset(value, key)))
        except InputError:
            return value
    if key == "reservedMemory" and isinstance(value, list):
        out = []
        for entry in value:
            if not isinstance(entry, dict) or not isinstance(entry.get("limits") or {}, dict):
                return value
            limits = {}
            for kind, amount in (entry.get("limits") or {}).items():
                try:
                    limits[kind] = parse_quantity(amount, kind)
                except InputError:
                    limits[kind] = amount
            out.append((entry.get("numaNode"), sorted(limits.items(), key=repr)))
        return sorted(out, key=repr)
    return value


def describe_layer(layer, key=None):
    """``--cpu-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)`` or a file's path."""
    if layer["kind"] != "flags":
        return layer["path"]
    flags = [f for f in layer["flags"] if key is None or f["key"] == key]
    return ", ".join("%s (%s)" % (f["flag"], f["source"]) for f in flags) or layer["path"]


def find_conflicts(layers, want, ours):
    """The wanted values that do not reach the kubelet because a layer after ``ours`` (a later drop-in, a flag)
    overrides them: ``[{"key", "option", "want", "value", "kind", "path", "source", "flags"}]``."""
    eff = effective(layers)
    out = []
    for key in MANAGED_KEYS:
        if key not in want:
            continue
        wanted = want[key]
        checks = []
        if key in OPTION_KEYS and isinstance(wanted, dict):
            have = eff.get(key) if isinstance(eff.get(key), dict) else {}
            checks = [(opt, wanted[opt], have.get(opt)) for opt in sorted(wanted) if have.get(opt) != wanted[opt]]
        elif _norm(key, eff.get(key, DEFAULTS.get(key))) != _norm(key, wanted):
            checks = [(None, wanted, eff.get(key, DEFAULTS.get(key)))]
        for option, wanted_value, value in checks:
            index = decider(layers, key, option)
            if index is None or (ours is not None and index <= ours):
                continue
            layer = layers[index]
            out.append({"key": key, "option": option, "want": wanted_value, "value": value, "kind": layer["kind"],
                        "path": layer["path"], "source": describe_layer(layer, key),
                        "flags": [f for f in layer.get("flags") or [] if f["key"] == key]})
    return out


def conflict_text(conflict):
    """One sentence: what overrides what."""
    name = conflict["key"] + ("." + conflict["option"] if conflict["option"] else "")
    by = "the command-line flag %s" % conflict["source"] if conflict["kind"] == "flags" else \
        "the later drop-in %s" % conflict["source"] if conflict["kind"] == "dropin" else conflict["source"]
    return "%s=%s is overridden by %s (the kubelet gets %s)" % (
        name, json.dumps(conflict["want"]), by, json.dumps(conflict["value"]))


def _sets_other(layer, want):
    """True when a layer sets a wanted key (or option) to something else."""
    for key, wanted in want.items():
        if key not in layer["settings"]:
            continue
        value = layer["settings"][key]
        if key in OPTION_KEYS and isinstance(wanted, dict) and isinstance(value, dict):
            if any(opt in value and value[opt] != wanted[opt] for opt in wanted):
                return True
        elif _norm(key, value) != _norm(key, wanted):
            return True
    return False


def config_update(data, want):
    """The top-level keys to write into the config file: ``want``, with a map of options merged into the file's own
    (the options the collection does not set stay)."""
    out = {}
    for key, value in want.items():
        if key in OPTION_KEYS and isinstance(value, dict) and isinstance(data.get(key), dict):
            combined = dict(data[key])
            combined.update(value)
            out[key] = combined
        else:
            out[key] = value
    return out


def plan(layers, want, target, on_conflict="fail", own_content=None):
    """The pure planner: ``layers`` (the kubelet's sources in its order, the collection's own drop-ins marked
    ``ours``), the wanted fields, the ``target`` (``{"mode": "dropin", "dir", "name"}`` or ``{"mode": "config",
    "path"}``) and what to do when something overrides the collection -> ``{"layers", "ours", "name", "content",
    "delete", "conflicts", "overridden", "remove_flags", "before", "after"}``.

    ``conflicts`` are the overrides left in place (on_conflict=ignore); ``overridden`` the ones the plan beats
    (on_conflict=override: the drop-in renamed to sort last, the flags in ``remove_flags`` taken out of the
    environment files that hold them).  on_conflict=fail raises a :class:`ConflictError` naming every override.
    """
    before = effective(layers)
    others = [layer for layer in layers if not layer.get("ours")]
    content = dict(own_content or {})
    content.update(want)

    def place(name):
        """(layers with the collection's settings in place, index of its layer)."""
        if target["mode"] == "dropin":
            mine = {"kind": "dropin", "path": target["dir"].rstrip("/") + "/" + name, "name": name,
                    "settings": relevant(content), "ours": True}
            placed = [layer for layer in others if layer["kind"] != "flags"]
            position = len([layer for layer in placed if layer["kind"] == "config" or
                            (layer["kind"] == "dropin" and walk_key(layer["name"]) < walk_key(name))])
            placed.insert(position, mine)
            return placed + [layer for layer in others if layer["kind"] == "flags"], position
        placed, index = [], None
        for layer in layers:
            if layer["kind"] == "config" and layer["path"] == target["path"]:
                layer = dict(layer, settings=merge(layer["settings"], config_update(layer["settings"], want)), ours=True)
                index = len(placed)
            placed.append(layer)
        if index is None:
            raise ApplyError("%s does not exist: the kubelet is not configured by a config file (kubeadm writes one)"
                             % target["path"], {"path": target["path"]})
        return placed, index

    name = target.get("name")
    after, ours = place(name)
    conflicts = find_conflicts(after, want, ours)
    overridden, remove_flags = [], []
    if conflicts and on_conflict == "override":
        overridden = conflicts
        dropins = [c for c in conflicts if c["kind"] != "flags"]
        if dropins and target["mode"] == "dropin":
            rivals = [layer["name"] for layer in others if layer["kind"] == "dropin" and _sets_other(layer, want)]
            name = next((n for n in own_names(target["name"]) if all(walk_key(n) > walk_key(r)[:1] for r in rivals)),
                        None)
            if name is None:
                raise ConflictError("on_conflict=override: no name of the collection's drop-in sorts after %s"
                                    % ", ".join(rivals), {"conflicts": dropins})
            after, ours = place(name)
            conflicts = find_conflicts(after, want, ours)
        blocked = [c for c in conflicts if c["kind"] != "flags"]
        if blocked:
            raise ConflictError(
                "on_conflict=override cannot make %s win: %s; write a drop-in instead (mode=dropin, kubelet 1.30 or later "
                "with --config-dir) or remove the key from that file" % (
                    target.get("path") or name, "; ".join(conflict_text(c) for c in blocked)),
                {"conflicts": blocked})
        if conflicts:
            remove_flags = _flags_to_remove(conflicts, want)
            flags_index = [i for i, layer in enumerate(after) if layer["kind"] == "flags"][0]
            kept = [f for f in after[flags_index]["flags"] if f not in remove_flags]
            after[flags_index] = flags_layer(kept, after[flags_index]["path"])
            left = find_conflicts(after, want, ours)
            if left:
                raise ConflictError("on_conflict=override: %s still override the collection" % "; ".join(
                    conflict_text(c) for c in left), {"conflicts": left})
        conflicts = []
    elif conflicts and on_conflict == "fail":
        raise ConflictError("refusing to write: %s. Nothing was written. Remove the override, or set on_conflict=override "
                            "(the collection wins) or on_conflict=ignore (the other side keeps winning)"
                            % "; ".join(conflict_text(c) for c in conflicts), {"conflicts": conflicts})
    delete = [layer["path"] for layer in layers if layer.get("ours") and layer.get("name") != name] \
        if target["mode"] == "dropin" else []
    return {"layers": after, "ours": ours, "name": name, "content": content, "delete": delete,
            "conflicts": conflicts, "overridden": overridden, "remove_flags": remove_flags,
            "before": before, "after": effective(after)}


def _flags_to_remove(conflicts, want):
    """The flag occurrences on_conflict=override takes out; refuses those it cannot take out safely."""
    out = []
    for conflict in conflicts:
        for flag in conflict["flags"]:
            origin = flag.get("origin") or {}
            if origin.get("how") != "EnvironmentFile" or not origin.get("var"):
                where = "ExecStart= of %s" % origin.get("file") if origin.get("how") == "ExecStart" else \
                    "the kubelet-arg list of %s (k3s/rke2 config: remove it there, then restart the service)" \
                    % origin.get("file") if origin.get("how") == "kubelet-arg" else \
                    "Environment= in %s" % origin.get("file") if origin.get("how") == "Environment" else \
                    "the running kubelet's command line (no unit file or environment file sets it)"
                raise ConflictError(
                    "on_conflict=override does not edit systemd units or unknown command lines: %s is set in %s; remove it "
                    "there (then systemctl daemon-reload), or set on_conflict=ignore" % (flag["flag"], where),
                    {"flag": flag["flag"], "origin": origin})
            if origin.get("split"):
                raise ConflictError(
                    "on_conflict=override cannot take %s out: its value is a separate word that comes from another "
                    "variable or file than %s; edit the command line by hand, or set on_conflict=ignore"
                    % (flag["flag"], flag["source"]), {"flag": flag["flag"]})
            if flag["name"] == "topology-manager-policy-options":
                key, dummy_sep, value = flag["value"].partition("=")
                if key.strip() not in (want.get(conflict["key"]) or {}):
                    raise ConflictError(
                        "on_conflict=override would take %s (%s) out, and with it the option %s the collection does not "
                        "set; move that option into the configuration first" % (flag["flag"], flag["source"], key.strip()),
                        {"flag": flag["flag"]})
            if flag not in out:
                out.append(flag)
    return out


def changes(before, after, want):
    """Per managed key ``{"before", "after"}`` of the effective values that change."""
    out = {}
    for key in MANAGED_KEYS:
        if key in want:
            old, new = before.get(key, DEFAULTS.get(key)), after.get(key, DEFAULTS.get(key))
            if _norm(key, old) != _norm(key, new):
                out[key] = {"before": old, "after": new}
    return out


def flag_words(value, names):
    """``(indexes, flag texts)``: the words of ``value`` (split as systemd splits a ``$VAR``) that belong to the flags
    named ``names``, their separate value word included."""
    flags = parse_command([(word, None) for word, dummy_start, dummy_end in word_spans(value)], 0)
    drop, removed = set(), []
    for flag in flags:
        if flag["name"] in names:
            drop.update(flag["words"])
            removed.append(flag["text"])
    return drop, removed


def remove_flag_words(value, names):
    """``value`` without the flags named ``names`` (and their separate value word); the other words keep their exact
    text.  Returns ``(new value, removed flag texts)``."""
    spans = word_spans(value)
    drop, removed = flag_words(value, names)
    if not drop:
        return value, []
    lead = value[:spans[0][1]] if spans else ""
    return lead + " ".join(value[start:end] for index, (dummy, start, end) in enumerate(spans) if index not in drop), removed


def remove_flags_from_env(text, var, names, path):
    """An environment file's ``text`` without the flags ``names`` in the value of ``var`` (its last assignment, the one
    systemd uses): cut where they are written when that keeps every other assignment and word exactly (the file's
    line continuations stay), else the assignment rewritten on one line.  Raises ApplyError when ``var`` no longer
    holds them."""
    assignments = [a for a in parse_env_file(text) if a["name"] == var and a["value"] is not None]
    if not assignments:
        raise ApplyError("%s no longer sets %s; nothing was written" % (path, var), {"path": path})
    assignment = assignments[-1]
    drop, removed = flag_words(assignment["value"], names)
    if not drop:
        raise ApplyError("%s: %s no longer holds %s; nothing was written" % (path, var, ", ".join(sorted(names))),
                         {"path": path})
    want_value, dummy_removed = remove_flag_words(assignment["value"], names)
    expected = env_assignments(text)
    expected[var] = want_value
    cut = cut_value_words(text, assignment, drop)
    if cut is not None:
        got = env_assignments(cut)
        if set(got) == set(expected) and all(got[k] == expected[k] for k in got if k != var) and \
                split_words(got[var]) == split_words(want_value):
            return cut
    rewritten = replace_env_value(text, assignment, want_value)
    if env_assignments(rewritten) != expected:
        raise ApplyError("%s: rewriting %s would change other assignments; nothing was written" % (path, var),
                         {"path": path})
    return rewritten


def audit_target(kubelet_facts, mode="auto", dropin_name=DEFAULT_DROPIN_NAME):
    """Where the kubelet_topology role would write on this node, from its facts (as :func:`choose_target`)."""
    version = tuple(int(p) for p in str(kubelet_facts.get("version") or "").split(".")[:3] if p.isdigit()) or \
        DROPIN_VERSION
    config_dir = kubelet_facts.get("config_dir")
    if config_dir and mode in ("auto", "dropin") and (version >= DROPIN_VERSION or mode == "dropin"):
        return {"mode": "dropin", "dir": config_dir, "name": dropin_name}
    return {"mode": "config", "path": kubelet_facts.get("config_file")}
