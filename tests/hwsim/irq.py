"""Interrupts of the simulated node: the MSI-X vectors mlx5_core requests per PCI function, /proc/interrupts and
/proc/irq/<n>/.

Kernel rules (README "Interrupts"): kernel/irq/proc.c write_irq_affinity() -- a list parsed as bitmap_parselist()
(EINVAL for bad syntax, ERANGE for a CPU at or above nr_cpu_ids), a mask with no online CPU is EINVAL (x86 has no
CONFIG_AUTO_IRQ_AFFINITY, irq_select_affinity_usr() is -EINVAL), an IRQ whose affinity user space may not set
(irq_can_set_affinity_usr(): kernel-managed) is EPERM on 6.x (the file is then created 0444) and EIO on older
kernels; show_irq_affinity() prints ``%*pbl`` / ``%*pb``; show_interrupts() the table.  mlx5_core (pci_irq.c): one
control vector ``mlx5_async0`` (affinity: every CPU, the default) and one ``mlx5_comp<i>`` per online CPU up to the
function's MSI-X table, each affined to cpumask_local_spread(i, the device's NUMA node); vectors are freed when the
driver unbinds and allocated afresh (new numbers, the driver's affinities again) when it binds.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass, field

from . import fmt

#: the first number handed to MSI vectors (x86: after the IO-APIC's legacy range and the system vectors)
FIRST_MSI_IRQ = 24
#: MSI-X table size of a ConnectX function [inference: the Count= lspci prints for ConnectX-6 Dx/7 PFs is 64 or
#: more; a VF's is smaller]: vector 0 is the control vector, the rest completion vectors
MSIX_TABLE = {"pf": 64, "vf": 12}
#: legacy IO-APIC interrupts every x86 node lists (a subset: timer and acpi, as the real captures show)
LEGACY = ((0, "IR-IO-APIC", 2, "edge", "timer"), (9, "IR-IO-APIC", 9, "fasteoi", "acpi"))
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")


@dataclass
class Irq:
    """One interrupt descriptor with a handler."""

    number: int
    name: str
    bdf: str | None
    index: int
    chip: str
    hwirq: int
    kind: str
    affinity: list[int]
    hint: list[int] = field(default_factory=list)
    effective: int = 0
    managed: bool = False
    node: int = -1


def local_spread(index: int, numa: int, numa_cpus: dict[int, list[int]], online: list[int]) -> int:
    """cpumask_local_spread(i, node): the i-th CPU counting the node's CPUs first, then the others (wraps)."""
    local = numa_cpus.get(numa, []) if numa >= 0 else []
    order = list(local) + [cpu for cpu in online if cpu not in local]
    return order[index % len(order)]


def parse_cpulist(text: str, nr_cpu_ids: int) -> list[int]:
    """bitmap_parselist() as cpumask_parselist_user() calls it: ``a``, ``a-b``, ``a-b:used/group``, comma separated,
    surrounding whitespace and one trailing newline taken; EINVAL for bad syntax, ERANGE for a CPU >= nr_cpu_ids."""
    text = text.strip()
    cpus: set[int] = set()
    if not text:
        return []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise fmt.oserror(errno.EINVAL)
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if end < start:
            raise fmt.oserror(errno.EINVAL)
        used, group = (int(match.group(3)), int(match.group(4))) if match.group(3) is not None else (1, 1)
        if used == 0 or group == 0 or used > group:
            raise fmt.oserror(errno.EINVAL)
        if end >= nr_cpu_ids:
            raise fmt.oserror(errno.ERANGE)
        for cpu in range(start, end + 1):
            if (cpu - start) % group < used:
                cpus.add(cpu)
    return sorted(cpus)


def parse_cpumask(text: str, nr_cpu_ids: int) -> list[int]:
    """bitmap_parse() of ``smp_affinity``: 32-bit hex groups separated by commas, most significant first."""
    text = text.strip()
    if not text:
        return []
    value = 0
    for group in text.split(","):
        if not group or len(group) > 8 or not re.match(r"^[0-9a-fA-F]+$", group):
            raise fmt.oserror(errno.EINVAL)
        value = (value << 32) | int(group, 16)
    cpus = [bit for bit in range(value.bit_length()) if value >> bit & 1]
    if cpus and cpus[-1] >= nr_cpu_ids:
        raise fmt.oserror(errno.EOVERFLOW)
    return cpus


class IrqTable:
    """The node's interrupt descriptors; allocation, release, affinity writes and the proc texts."""

    def __init__(self, numa_cpus: dict[int, list[int]], kernel_release: str) -> None:
        self.numa_cpus = numa_cpus
        self.online = sorted(cpu for cpus in numa_cpus.values() for cpu in cpus)
        self.nr_cpu_ids = max(self.online) + 1
        self.kernel = tuple(int(x) for x in re.findall(r"\d+", kernel_release)[:2]) or (6, 1)
        self.irqs: dict[int, Irq] = {}
        self.default_affinity = list(self.online)
        self.reset()

    def reset(self) -> None:
        """Power-on: only the legacy interrupts, the default affinity every CPU."""
        self.irqs = {}
        self.default_affinity = list(self.online)
        for number, chip, hwirq, kind, name in LEGACY:
            self.irqs[number] = Irq(number, name, None, 0, chip, hwirq, kind, list(self.online))
            self._place(self.irqs[number])

    # ------------------------------------------------------------------ drivers
    def of_device(self, bdf: str) -> list[Irq]:
        return sorted((irq for irq in self.irqs.values() if irq.bdf == bdf), key=lambda irq: irq.index)

    def _free_numbers(self, count: int) -> list[int]:
        """irq_alloc_descs(): the lowest free range of ``count`` numbers from the first MSI number."""
        start = FIRST_MSI_IRQ
        while any(number in self.irqs for number in range(start, start + count)):
            start += 1
        return list(range(start, start + count))

    def request_mlx5(self, bdf: str, numa: int, is_vf: bool) -> list[Irq]:
        """mlx5_core probe: the control vector then the completion vectors, with mlx5's affinities."""
        table = MSIX_TABLE["vf" if is_vf else "pf"]
        ncomp = max(1, min(len(self.online), table - 1))
        numbers = self._free_numbers(ncomp + 1)
        irqs = []
        for index, number in enumerate(numbers):
            if index == 0:
                name, affinity, hint = f"mlx5_async0@pci:{bdf}", list(self.default_affinity), []
            else:
                cpu = local_spread(index - 1, numa, self.numa_cpus, self.online)
                name, affinity, hint = f"mlx5_comp{index - 1}@pci:{bdf}", [cpu], [cpu]
            if self.kernel >= (6, 2):
                chip, hwirq = f"IR-PCI-MSIX-{bdf}", index
            else:
                domain, rid = fmt.bdf_rid(bdf)
                chip, hwirq = "IR-PCI-MSI", index | (rid << 11) | ((domain & 0xFFFFFFFF) << 27)
            irq = Irq(number, name, bdf, index, chip, hwirq, "edge", affinity, hint, node=numa)
            self._place(irq)
            self.irqs[number] = irq
            irqs.append(irq)
        return irqs

    def free_device(self, bdf: str) -> None:
        for irq in self.of_device(bdf):
            del self.irqs[irq.number]

    def _place(self, irq: Irq) -> None:
        """x86 vector matrix: the effective CPU is the online CPU of the mask with the fewest vectors."""
        load: dict[int, int] = {}
        for other in self.irqs.values():
            if other is not irq:
                load[other.effective] = load.get(other.effective, 0) + 1
        candidates = [cpu for cpu in irq.affinity if cpu in self.online] or list(self.online)
        irq.effective = min(candidates, key=lambda cpu: (load.get(cpu, 0), cpu))

    # ------------------------------------------------------------------ /proc/irq/<n>/
    def can_set(self, irq: Irq) -> bool:
        """irq_can_set_affinity_usr(): not for kernel-managed interrupts."""
        return not irq.managed

    def write_affinity(self, number: int, text: str, as_list: bool) -> None:
        """write_irq_affinity(): EPERM (6.x) / EIO (older) when user space may not set it, the parse errors, EINVAL
        for a mask without an online CPU; else the new affinity and a new effective CPU within it."""
        irq = self.irqs.get(number)
        if irq is None:
            raise fmt.oserror(errno.ENOENT)
        if not self.can_set(irq):
            raise fmt.oserror(errno.EPERM if self.kernel >= (6, 0) else errno.EIO)
        cpus = parse_cpulist(text, self.nr_cpu_ids) if as_list else parse_cpumask(text, self.nr_cpu_ids)
        if not any(cpu in self.online for cpu in cpus):
            raise fmt.oserror(errno.EINVAL)
        irq.affinity = cpus
        self._place(irq)

    def write_default(self, text: str) -> None:
        """default_affinity_write(): a hex mask that must hold an online CPU."""
        cpus = parse_cpumask(text, self.nr_cpu_ids)
        if not any(cpu in self.online for cpu in cpus):
            raise fmt.oserror(errno.EINVAL)
        self.default_affinity = cpus

    # ------------------------------------------------------------------ texts
    def cpulist(self, cpus: list[int]) -> str:
        return fmt.format_cpulist(cpus) + "\n"

    def cpumask(self, cpus: list[int]) -> str:
        return fmt.format_cpumask(cpus, self.nr_cpu_ids) + "\n"

    def proc_interrupts(self) -> str:
        """show_interrupts(): header of online CPUs, one row per interrupt with a handler (counts stay 0: not
        modelled), then the x86 arch lines (arch_show_interrupts(), a subset)."""
        nr_irqs = max(4096, max(self.irqs) + 1)
        prec, limit = 3, 1000
        while prec < 10 and limit <= nr_irqs:
            prec += 1
            limit *= 10
        lines = [" " * (prec + 8) + "".join(f"CPU{cpu:<8}" for cpu in self.online)]
        for number in sorted(self.irqs):
            irq = self.irqs[number]
            counts = "".join(f" {0:>10}" for dummy in self.online)
            lines.append(f"{number:>{prec}}:{counts} {irq.chip:>8} {irq.hwirq:>{prec}}-{irq.kind:<8}  {irq.name}")
        for label, text in (("NMI", "Non-maskable interrupts"), ("LOC", "Local timer interrupts"),
                            ("RES", "Rescheduling interrupts")):
            lines.append(f"{label:>{prec}}:" + "".join(f" {0:>10}" for dummy in self.online) + f"   {text}")
        lines.append(f"{'ERR':>{prec}}: {0:>10}")
        return "\n".join(lines) + "\n"
