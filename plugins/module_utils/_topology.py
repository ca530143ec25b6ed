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
