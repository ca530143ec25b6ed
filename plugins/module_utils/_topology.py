# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI topology, pure: BDF parsing, ancestry from sysfs device paths, and GPU<->NIC distance classes.

Nothing here touches a filesystem.  The inputs are the *node paths* a sysfs device resolves to,
for example ``/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0``, and
NUMA node numbers (``None`` when unknown).

Distance classes have the meaning ``nvidia-smi topo -m`` gives them:

``PIX``  at most a single PCIe switch (or a single root port) between the two devices
``PXB``  several PCIe switches, without crossing the host bridge
``PHB``  the devices share a PCIe host bridge (root complex) and nothing below it
``NODE`` different host bridges on the same NUMA node
``SYS``  different NUMA nodes (the path crosses the SMP interconnect)

How a sysfs chain maps onto switches: below a host bridge ``pciDDDD:BB`` the kernel nests one
directory per PCI function: the root port, then for every PCIe switch its upstream port and one of
its downstream ports, then the endpoint.  As NCCL does when it reads the same tree, the chain is
grouped into *units*: the root port, then every switch (its upstream port plus the downstream port
below it).  The number of units the path between two devices passes through decides PIX (one) versus
PXB (more than one).

Unknown NUMA (``numa_node`` = -1, missing or unreadable) is never replaced by node 0:

* sharing a host bridge does not need NUMA at all (PIX/PXB/PHB come from the PCI tree);
* two *known* and different NUMA nodes give SYS even when a PCI position is unknown;
* different host bridges with a NUMA node unknown on either side give ``None`` (unknown), unless
  the caller says the machine has a single NUMA node (``single_numa=True``), where nothing can cross
  an SMP interconnect and the answer is NODE.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import posixpath
import re

PIX = "PIX"
PXB = "PXB"
PHB = "PHB"
NODE = "NODE"
SYS = "SYS"

#: distance classes, closest first
LEVELS = (PIX, PXB, PHB, NODE, SYS)

# PCI domains are 16 bits on most machines but 32 bits behind Intel VMD and in Hyper-V guests: 4 to 8 hex digits.
_BDF_RE = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_HOST_BRIDGE_RE = re.compile(r"^pci([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2})$")
_CPULIST_ITEM_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: CPU numbers above this are refused: Linux supports at most 8192 CPUs (NR_CPUS), and a list such as 0-4294967295
#: (or a mask of that many bits) would fill the memory
MAX_CPU = 65535


def parse_bdf(text):
    """Split ``DDDD:BB:DD.F`` into ``{domain, bus, device, function}`` integers, or None when it is not a BDF."""
    if not isinstance(text, str):
        return None
    match = _BDF_RE.match(text.strip())
    if not match:
        return None
    domain, bus, dev, func = match.groups()
    return {"domain": int(domain, 16), "bus": int(bus, 16), "device": int(dev, 16), "function": int(func)}


def is_bdf(text):
    """True when ``text`` is a PCI address (4- to 8-hex-digit domain)."""
    return parse_bdf(text) is not None


def normalize_bdf(text):
    """A BDF in the kernel's spelling (lower case, domain at least 4 digits), or None when ``text`` is not one."""
    parts = parse_bdf(text)
    if parts is None:
        return None
    return "%04x:%02x:%02x.%x" % (parts["domain"], parts["bus"], parts["device"], parts["function"])


def pci_path(node_path):
    """The PCI position of a sysfs device path, or None when the path is not below a PCI host bridge.

    Returns ``{"host_bridge": "pci0000:17", "bdf": "0000:1a:00.0", "bridges": [...ancestor BDFs, root first]}``.
    Trailing non-PCI components (``/infiniband/mlx5_0``, ``/net/ib0``, ``/virtio0``) are ignored.  The host bridge
    may sit below non-PCI parents (Hyper-V: ``/sys/devices/LNXSYSTM:00/.../pci0001:00/0001:00:00.0``).  A nested
    host bridge (Intel VMD: ``.../0000:00:0e.0/pci10000:00/10000:01:00.0``) keeps the outer one; the VMD
    function counts as a bridge of the chain.
    """
    if not isinstance(node_path, str) or not node_path:
        return None
    host_bridge = None
    chain = []
    for part in posixpath.normpath(node_path).split("/"):
        if not part:
            continue
        if host_bridge is None:
            if _HOST_BRIDGE_RE.match(part):
                host_bridge = part.lower()
            continue
        if _BDF_RE.match(part):
            chain.append(part.lower())
        elif _HOST_BRIDGE_RE.match(part) and chain:
            continue  # nested host bridge (VMD): stay in the outer tree
        else:
            break
    if host_bridge is None or not chain:
        return None
    return {"host_bridge": host_bridge, "bdf": chain[-1], "bridges": chain[:-1]}


def switch_units(bridges):
    """Group a bridge chain into units: the root port, then one unit per PCIe switch (its upstream port's BDF)."""
    if not bridges:
        return []
    return [bridges[0]] + list(bridges[1::2])


def _known_numa(value):
    """NUMA node as int, or None for unknown (None, negative, bool or non-int)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def classify(pos_a, pos_b, numa_a=None, numa_b=None, single_numa=False):
    """The distance class between two PCI devices, or None when it cannot be known.

    ``pos_a``/``pos_b`` are :func:`pci_path` results (or None when the PCI position is unknown), ``numa_a``/``numa_b``
    the devices' NUMA nodes (None or -1 for unknown).  ``single_numa`` says the machine has exactly one NUMA node.
    See the module docstring for the rules.
    """
    numa_a = _known_numa(numa_a)
    numa_b = _known_numa(numa_b)
    if pos_a is not None and pos_b is not None and pos_a["host_bridge"] == pos_b["host_bridge"]:
        units_a = switch_units(pos_a["bridges"])
        units_b = switch_units(pos_b["bridges"])
        common = 0
        for unit_a, unit_b in zip(units_a, units_b):
            if unit_a != unit_b:
                break
            common += 1
        if common == 0:
            return PHB
        crossed = (len(units_a) - common) + (len(units_b) - common) + 1
        return PIX if crossed == 1 else PXB
    if numa_a is not None and numa_b is not None:
        if numa_a != numa_b:
            return SYS
        if pos_a is None or pos_b is None:
            return None  # same node, but PIX..NODE cannot be told apart without the PCI position
        return NODE
    if pos_a is None or pos_b is None:
        return None
    return NODE if single_numa else None


def parse_cpulist(text):
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``; None for None, ``[]`` for an empty list; ValueError if malformed."""
    if text is None:
        return None
    cpus = []
    for item in text.strip(" \t\n\x00").split(","):
        item = item.strip()
        if not item:
            continue
        match = _CPULIST_ITEM_RE.match(item)
        if not match:
            raise ValueError("not a CPU list item: %r" % item)
        if any(len(number.lstrip("0")) > 5 or int(number) > MAX_CPU for number in match.groups() if number):
            raise ValueError("CPU number above %d in %r" % (MAX_CPU, item[:40]))
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError("descending CPU range: %r" % item)
        cpus.extend(range(low, high + 1))
    return cpus


def cpumask_to_list(text):
    """A sysfs CPU mask (``"0000,000000ff,ffffffff"``, 32-bit words, most significant first) as a sorted CPU list."""
    if text is None:
        return None
    words = [word.strip() for word in text.strip(" \t\n\x00").split(",")]
    if not words or any(not re.match(r"^[0-9a-fA-F]+$", word) for word in words):
        raise ValueError("not a CPU mask: %r" % text)
    value = 0
    for word in words:
        value = (value << 32) | int(word, 16)
        if value.bit_length() > MAX_CPU + 1:
            raise ValueError("CPU mask with a CPU above %d: %r" % (MAX_CPU, text[:40]))
    return [bit for bit, digit in enumerate(reversed(bin(value)[2:])) if digit == "1"]


def format_cpulist(cpus):
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"`` (the kernel's ``local_cpulist`` spelling); ``""`` for no CPUs."""
    if not cpus:
        return ""
    ordered = sorted(set(cpus))
    ranges = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        ranges.append((start, prev))
        start = prev = cpu
    ranges.append((start, prev))
    return ",".join(str(low) if low == high else "%d-%d" % (low, high) for low, high in ranges)


def bdf_key(text):
    """Sort key for PCI addresses in numeric (domain, bus, device, function) order; non-BDFs sort last."""
    parts = parse_bdf(text)
    if parts is None:
        return (1, 0, 0, 0, 0, str(text))
    return (0, parts["domain"], parts["bus"], parts["device"], parts["function"], "")


def natural_key(text):
    """Sort key that orders ``mlx5_2`` before ``mlx5_10``: each run of digits compares by its value, as (number of
    digits, digits) without leading zeros (no int(): it refuses '²' and 5,000 digits, and an int next to a str
    would not compare)."""
    return [(len(chunk.lstrip("0")), chunk.lstrip("0")) if index % 2 else chunk
            for index, chunk in enumerate(re.split(r"([0-9]+)", text or ""))]


# -- Topology Manager admission of a whole-node pod -------------------------------------------------------------------
#: the kubelet's Topology Manager policies and scopes (pkg/kubelet/cm/topologymanager)
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")


def device_hints(device_numa, numa_nodes):
    """The hints the device manager gives for a request of *every* device of a resource, as
    ``generateDeviceTopologyHints`` (pkg/kubelet/cm/devicemanager/topology_hints.go) builds them: one per set of NUMA
    nodes holding enough devices, preferred when the set is as small as the smallest that could hold the request.
    ``device_numa`` is the NUMA node of each device (None: the device reports no topology).  None means "no
    preference" (no device of the resource has a topology: GetTopologyHints gives nil); ``[]`` means no set fits
    (some devices have no topology, so no set of nodes holds them all)."""
    known = [_known_numa(v) for v in device_numa]
    if not any(n is not None for n in known):
        return None
    request = len(known)
    nodes = sorted(set(numa_nodes) | set(n for n in known if n is not None))
    masks = [frozenset(c) for size in range(1, len(nodes) + 1) for c in _combinations(nodes, size)]
    fitting = [m for m in masks if sum(1 for n in known if n in m) >= request]
    if not fitting:
        return []
    smallest = min(len(m) for m in fitting)
    return [(m, len(m) == smallest) for m in fitting]


def _combinations(items, size):
    if size == 0:
        yield ()
        return
    for index, item in enumerate(items):
        for rest in _combinations(items[index + 1:], size - 1):
            yield (item,) + rest


def merge_hints(policy, hints, numa_nodes):
    """``(best hint, admitted)`` of the Topology Manager ``policy`` over per-resource ``hints`` (each None for "no
    preference", or a list of ``(frozenset of NUMA nodes, preferred)``), as the kubelet merges them:

    * filterProvidersHints (policy.go): no preference -> one preferred "any node" hint; an empty list -> one
      non-preferred "any node" hint;
    * single-numa-node keeps only preferred hints on one node and "any node" preferred ones (filterSingleNumaHints,
      policy_single_numa_node.go);
    * every permutation is merged by mergePermutation: the AND of the affinities, preferred only when every hint is
      preferred *and* all affinities are equal; an empty AND is never chosen;
    * a preferred merged hint always beats a non-preferred one, then the narrower wins (HintMerger.compare; the
      choice among equally preferred hints -- prefer-closest-numa-nodes -- does not change admission);
    * best-effort and none admit everything, restricted and single-numa-node only a preferred best hint
      (canAdmitPodResult in policy_restricted.go, policy_single_numa_node.go)."""
    every = frozenset(numa_nodes)
    lists = []
    for resource_hints in hints:
        if resource_hints is None:
            lists.append([(None, True)])
        elif not resource_hints:
            lists.append([(None, False)])
        else:
            lists.append(list(resource_hints))
    if policy == "single-numa-node":
        lists = [[h for h in hl if h[1] and (h[0] is None or len(h[0]) == 1)] for hl in lists]
    best = None
    for permutation in _product(lists):
        affinities = [mask for mask, dummy in permutation if mask is not None]
        preferred = all(p for dummy, p in permutation) and all(a == affinities[0] for a in affinities)
        merged = every.intersection(*affinities) if affinities else every
        if not merged:
            continue
        if best is None or (preferred and not best[1]) or \
                (preferred == best[1] and (len(merged), sorted(merged)) < (len(best[0]), sorted(best[0]))):
            best = (merged, preferred)
    if best is None:
        best = (every, False)
    return best, policy in ("none", "best-effort") or best[1]


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest


def whole_node_admission(policy, policy_options, scope, devices, numa_nodes=None, cpu_manager_policy="none",
                         memory_manager_policy="None"):
    """None when the kubelet would admit a pod that asks for every device in ``devices``, else why not (a sentence).

    ``devices`` maps a resource (``gpu``, ``rdma``: any names) to the NUMA node of each of its devices (None or a
    negative number: unknown), for example from ``rdma_facts``: ``{"gpu": [g["numa_node"] for g in rdma.gpus],
    "rdma": [d["numa_node"] for d in rdma.devices if d["pci_address"]]}``.  ``numa_nodes`` are the node's NUMA
    nodes (``rdma.numa_nodes.online``; default: those the devices name).  The pod is one container asking for all of
    them, or a pod under ``scope: pod`` (hints of all its containers merged); a pod that splits the devices over
    containers under ``scope: container`` is merged per container.  ``policy_options`` do not change admission
    (prefer-closest-numa-nodes only orders hints of the same preference; max-allowable-numa-nodes only lets the
    kubelet start on more than 8 nodes) and are accepted for the caller's convenience.

    With the static CPU manager or the Static memory manager, a Guaranteed pod also gets CPU and memory hints; when
    the devices span several NUMA nodes, the pod is admitted by ``restricted`` only if its exclusive CPUs (and
    memory) need those nodes too, which this function cannot know: it says so."""
    if policy not in TOPOLOGY_POLICIES:
        return "topologyManagerPolicy %r is not one of %s" % (policy, ", ".join(TOPOLOGY_POLICIES))
    if scope not in TOPOLOGY_SCOPES:
        return "topologyManagerScope %r is not one of %s" % (scope, ", ".join(TOPOLOGY_SCOPES))
    if not isinstance(policy_options, (dict, type(None))):
        return "topologyManagerPolicyOptions must be a mapping"
    if policy in ("none", "best-effort"):
        return None
    names = sorted(devices)
    nodes = set(_known_numa(n) for n in (numa_nodes or []) if _known_numa(n) is not None)
    nodes |= set(_known_numa(n) for name in names for n in devices[name] if _known_numa(n) is not None)
    hints = [device_hints(devices[name], nodes) for name in names]
    best, admitted = merge_hints(policy, hints, nodes)
    spans = dict((name, sorted(set(_known_numa(n) for n in devices[name] if _known_numa(n) is not None)))
                 for name in names if any(_known_numa(n) is not None for n in devices[name]))
    if not admitted:
        partial = [name for name, hint in zip(names, hints) if hint == []]
        if partial:
            return ("%s refuses a pod asking for every %s: some of those devices report no NUMA node, so no set of "
                    "NUMA nodes holds them all and the device manager gives no fitting hint (Topology Affinity Error)"
                    % (policy, " and ".join(partial)))
        text = "; ".join("%s on NUMA %s" % (name, ",".join(str(n) for n in span)) for name, span in sorted(spans.items()))
        if policy == "single-numa-node":
            return ("single-numa-node refuses a pod asking for every GPU and NIC of this node (%s): it keeps only "
                    "hints on one NUMA node (Topology Affinity Error); use restricted" % text)
        return ("restricted refuses a pod asking for every GPU and NIC of this node (%s): their smallest NUMA sets "
                "differ, so no merged hint is preferred (Topology Affinity Error); use best-effort, or give that pod "
                "devices that share their NUMA nodes" % text)
    wide = len(best[0]) > 1 and spans
    managers = [m for m, on in (("the static CPU manager", cpu_manager_policy == "static"),
                                ("the Static memory manager", memory_manager_policy == "Static")) if on]
    if wide and managers:
        return ("%s admits a pod asking for every GPU and NIC (NUMA %s) only if, with %s, its exclusive CPUs and "
                "memory (a Guaranteed pod) also need all of NUMA %s: a smaller request gets a narrower preferred "
                "CPU/memory hint, the merged hint is not preferred, and the pod is refused"
                % (policy, ",".join(str(n) for n in sorted(best[0])), " and ".join(managers),
                   ",".join(str(n) for n in sorted(best[0]))))
    return None
