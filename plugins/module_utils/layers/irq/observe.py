# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``irq`` layer's observer: written once, used by the module and by ``rdma_facts`` (``layers.irq``).

Per RDMA NIC physical function: its NUMA node and local CPUs (sysfs ``numa_node``, ``local_cpulist``), its vectors
(``msi_irqs/<N>``, drivers/pci/msi: the MSI/MSI-X vectors the function has allocated, whatever its driver; this
directory alone says which vectors are the function's, as it does for the boot script and irqbalance; one with no
``/proc/irq/<N>/`` was never requested and is left out), and per vector its name (the handler's name in
``/proc/interrupts``: ``mlx5_comp3@pci:<address>``, ``eth0-TxRx-3`` ... only a label, since most drivers name no
address; a row that does name this function but is not in ``msi_irqs/``, or a vector whose row names another
function, is reported in ``mismatched``, never moved), ``smp_affinity_list``,
``smp_affinity_list``, ``effective_affinity_list`` and whether user space may set it: kernel/irq/proc.c creates
``smp_affinity(_list)`` without the owner's write bit for interrupts whose affinity the kernel manages
(irq_can_set_affinity_usr(), 6.x kernels); older kernels create it 0644 and refuse the write with EIO instead.
Then the files the layer owns (boot unit, boot script, irqbalance policy script) and irqbalance's environment file.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re
import stat

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import TOOL_DIRS
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import format_cpulist, parse_cpulist
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import compact, interrupts
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie.observe import rdma_pfs

PCI_DEVICES = "/sys/bus/pci/devices"
UNIT = "/etc/systemd/system/rdma-k8s-node-irq.service"
SCRIPT = "/etc/rdma-k8s-node/irq-affinity.sh"
POLICY = "/etc/rdma-k8s-node/irqbalance-policy.sh"
#: irqbalance's environment file: Debian/Ubuntu, then Fedora/RHEL/SUSE (the upstream unit's
#: ``EnvironmentFile=-@usrconfdir@/irqbalance``, usrconfdir chosen by the distribution)
ENV_FILES = ("/etc/default/irqbalance", "/etc/sysconfig/irqbalance")
_EXEC = re.compile(r"^ExecStart=\S+ \S+ (\d+)((?: \S+ \S+)*)$")


def cpus_online(host):
    """The online CPUs (``/sys/devices/system/cpu/online``), [] when unreadable."""
    try:
        return parse_cpulist(host.read_attr("/sys/devices/system/cpu/online", "")) or []
    except ValueError:
        return []


def numa_nodes(host):
    """``{node id (str): cpulist}`` of ``/sys/devices/system/node/node<N>/cpulist``."""
    found = {}
    for name in host.listdir("/sys/devices/system/node"):
        if re.match(r"^node\d+$", name):
            found[name[4:]] = host.read_attr("/sys/devices/system/node/%s/cpulist" % name, "")
    return dict((key, found[key]) for key in sorted(found, key=int))


def read_irq(host, number, rows):
    """One vector: ``{"name", "affinity", "effective", "settable"}`` or None when it has no handler."""
    base = "/proc/irq/%s" % number
    found = host.read_stat(base + "/smp_affinity_list")  # its mode and its value through one open (770 on a DGX)
    if found is None:
        return None
    info, affinity = found
    item = {"affinity": host.attr_text(affinity),
            "effective": host.read_attr(base + "/effective_affinity_list", None),
            "settable": bool(stat.S_IMODE(info.st_mode) & 0o200),
            "name": (rows.get(number) or {}).get("name")}
    return item


def read_device(host, bdf, rows):
    """``{"numa_node", "local_cpus", "irqs": {irq (str): {...}}}`` or ``{"error"}`` for one function."""
    base = PCI_DEVICES + "/" + bdf
    try:
        numa = host.read_int(base + "/numa_node", default=-1)
        local = host.read_attr(base + "/local_cpulist", None)
        numbers = set(int(n) for n in host.listdir(base + "/msi_irqs") if n.isdigit())
    except (HostReadError, ValueError) as exc:
        return {"error": getattr(exc, "msg", str(exc))}
    irqs, unrequested = {}, []
    for number in sorted(numbers):
        item = read_irq(host, number, rows)
        if item is None:
            unrequested.append(number)
            continue
        irqs[str(number)] = item
    out = {"numa_node": numa, "local_cpus": local, "irqs": irqs}
    if unrequested:
        out["unrequested"] = unrequested
    mismatched = crosscheck(bdf, numbers, rows)
    if mismatched:
        out["mismatched"] = mismatched
    if not numbers:
        out["note"] = "no MSI vectors: the driver is not bound (or uses legacy INTx)"
    return out


def crosscheck(bdf, numbers, rows):
    """``/proc/interrupts`` against ``msi_irqs/``: ``[{"irq", "name", "names"}]`` for a row that names ``bdf`` but is
    not one of its vectors (an INTx line, a vector freed between the two reads) and for a vector whose row names
    another function (``names``: the address the row names).  Both are reported and left alone."""
    out = []
    for number in interrupts.device_irqs(rows, bdf):
        if number not in numbers:
            out.append({"irq": number, "name": rows[number]["name"], "names": rows[number]["pci"]})
    short = bdf[5:] if bdf.startswith("0000:") else bdf
    for number in sorted(numbers):
        named = (rows.get(number) or {}).get("pci")
        if named and named not in (bdf, short):
            out.append({"irq": number, "name": rows[number]["name"], "names": named})
    return sorted(out, key=lambda entry: entry["irq"])


def unit_values(text):
    """``(wait seconds, {pci address: cpulist})`` from our unit's ExecStart (what the next boot sets)."""
    for line in (text or "").splitlines():
        match = _EXEC.match(line.strip())
        if match:
            words = match.group(2).split()
            return int(match.group(1)), dict(zip(words[0::2], words[1::2]))
    return None, {}


def _file(host, path):
    try:
        text = host.read_text(path)
    except HostReadError as exc:
        return {"path": path, "exists": None, "error": exc.msg}
    return {"path": path, "exists": text is not None, "text": text}


def find_irqbalance(host):
    """irqbalance's path on the node, or None."""
    for directory in TOOL_DIRS:
        if host.is_executable(directory + "/irqbalance"):
            return directory + "/irqbalance"
    return None


def observe_irqbalance(host, env_file=None):
    """``{"installed", "env_file": {path, exists, text}, "args": [...] | None}``: the file given, else the first of
    :data:`ENV_FILES` that exists (None when none does)."""
    path = env_file
    if path is None:
        for candidate in ENV_FILES:
            if host.exists(candidate):
                path = candidate
                break
    out = {"installed": find_irqbalance(host), "env_file": _file(host, path) if path else None, "args": None}
    if out["env_file"] and out["env_file"].get("text") is not None:
        try:
            out["args"] = interrupts.env_args(out["env_file"]["text"])
        except ParseError as exc:
            out["env_file"]["error"] = exc.msg
    return out


def observe(host, devices=None, unit=UNIT, script=SCRIPT, policy=POLICY, env_file=None):
    """The layer's observed state (see the module's RETURN ``observed``); ``devices`` limits it to those PCI
    addresses."""
    pfs = rdma_pfs(host)
    try:
        rows = interrupts.parse_proc_interrupts(host.read_text("/proc/interrupts", ""))
        rows_error = None
    except (HostReadError, ParseError) as exc:
        rows, rows_error = {}, exc.msg
    wanted = sorted(devices) if devices is not None else list(pfs)
    observed = {}
    for bdf in wanted:
        item = {"rdma_devices": pfs.get(bdf, [])}
        item.update(read_device(host, bdf, rows))
        observed[bdf] = item
    unit_file = _file(host, unit)
    wait, values = unit_values(unit_file.get("text"))
    unit_file.update(values=values, wait=wait)
    out = {"cpus_online": format_cpulist(cpus_online(host)), "numa_nodes": numa_nodes(host), "devices": observed,
           "unit": unit_file, "script": _file(host, script), "policy": _file(host, policy),
           "irqbalance": observe_irqbalance(host, env_file)}
    if rows_error:
        out["interrupts_error"] = rows_error
    return out


def facts(host):
    """``rdma_facts``' ``layers.irq``: every RDMA PF's vectors and the layer's files, as :func:`observe` sees them, each
    function's vectors as one compact table (:mod:`.compact`; the judge unpacks it)."""
    return compact.pack(observe(host))
