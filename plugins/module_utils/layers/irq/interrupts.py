# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsing for the ``irq`` layer: ``/proc/interrupts``, the irqbalance environment file and CPU lists.

``/proc/interrupts`` is kernel/irq/proc.c show_interrupts(): a header of ``CPU<n>`` columns (online CPUs), then per
interrupt ``<irq>:``, one count per online CPU, the chip (``IR-PCI-MSI``, ``IR-PCI-MSIX-0000:01:00.0`` ...), the
hardware IRQ and trigger (``1-edge``) and the handlers' names joined by ``", "``; then the architecture's lines
(``NMI:``, ``LOC:`` ...).  Older kernels print the chip and the flow handler as one word (``PCI-MSI-edge``) and no
hardware IRQ (the real captures in tests/fixtures/realworld/proc_interrupts).

Which PCI function a row belongs to is not part of the format: the handler names are the driver's choice.  mlx5_core
(and gve) write ``<name>@pci:<pci address>``, igb writes ``<ifname>`` and ``<ifname>-TxRx-<n>``, others again
something else; kernels with per-device MSI domains (6.2+) put the address in the chip (``PCI-MSIX-<address>``).  The
device's own ``msi_irqs/`` directory is what says which vectors are its own (the observer); a row's ``pci`` here is
only the address the row itself names, when it names one, for the cross-check.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re
import shlex

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

_ROW = re.compile(r"^\s*(\d+):(.*)$")
_BDF = r"((?:[0-9a-fA-F]{4,5}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
#: a handler name that carries its function's address (mlx5_core, gve: ``mlx5_comp0@pci:0000:01:00.0``)
_PCI_NAME = re.compile(r"@pci:" + _BDF)
#: a per-device MSI domain's chip (``IR-PCI-MSIX-0000:01:00.0``, ``PCI-MSI-0000:00:1f.2``)
_PCI_CHIP = re.compile(r"PCI-MSIX?-" + _BDF + r"$")
#: the hardware IRQ and flow word of newer kernels (``524288-edge``; ``-edge`` without an IRQ domain)
_HWIRQ = re.compile(r"^\d*-\S+$")
#: the variable irqbalance's unit passes on its command line (misc/irqbalance.service: ExecStart=... $IRQBALANCE_ARGS)
ARGS_VAR = "IRQBALANCE_ARGS"
_ASSIGN = re.compile(r"^\s*(?:export\s+)?IRQBALANCE_ARGS=(.*)$")


def parse_proc_interrupts(text):
    """``{irq number: {"columns": count columns, "chip": text, "name": handlers, "pci": bdf or None}}`` of the
    numbered rows (``columns``: how many per-CPU counts the row has, one per online CPU of the header); architecture
    rows (``NMI:`` ...) are left out.  ``pci`` is the address the row names in a handler name (``@pci:``) or its chip
    (``PCI-MSIX-<address>``), else None.  ParseError without a header."""
    lines = (text or "").splitlines()
    header = None
    rows = {}
    for line in lines:
        if header is None:
            if line.strip().startswith("CPU"):
                header = [int(word[3:]) for word in line.split() if word.startswith("CPU") and word[3:].isdigit()]
            continue
        match = _ROW.match(line)
        if not match:
            continue
        words = match.group(2).split()
        # the per-CPU counts (one column per online CPU; 224 on a DGX H100, 775 rows): skipped, not converted, since
        # nothing here reads them and converting them was most of the parse (about 25 ms a run on that node); a row
        # with a count in every column (the usual one) is told by one test of the columns joined, not one per CPU
        limit = min(len(header), len(words))
        if "".join(words[:limit]).isdigit():
            width = limit
        else:
            width = 0
            while width < limit and words[width].isdigit():
                width += 1
        words = words[width:]
        # what follows the counts: the chip, the hwirq-flow word (newer kernels; older ones join the flow to the
        # chip: PCI-MSI-edge), then the handler names, if any
        chip = words[0] if words else ""
        names = words[2:] if len(words) > 1 and _HWIRQ.match(words[1]) else words[1:]
        name = " ".join(names)
        pci = _PCI_NAME.search(name) or _PCI_CHIP.search(chip)
        rows[int(match.group(1))] = {"columns": width, "chip": chip, "name": name,
                                     "pci": pci.group(1).lower() if pci else None}
    if header is None and (text or "").strip():
        raise ParseError("/proc/interrupts has no CPU header line")
    return rows


def device_irqs(rows, bdf):
    """The numbers of the rows that name ``bdf`` (handler name or chip; a domain-less name matches domain 0000):
    a cross-check only, since most drivers name no address (igb: ``eth0-TxRx-0``)."""
    names = set([bdf, bdf[5:]] if bdf.startswith("0000:") else [bdf])
    return sorted(irq for irq, row in rows.items() if row["pci"] in names)


def env_args(text):
    """The words of the last ``IRQBALANCE_ARGS=`` assignment of an environment file (None when it has none).

    systemd reads the file (EnvironmentFile=): one assignment per line, ``#`` comments, values in single or double
    quotes; the unit expands ``$IRQBALANCE_ARGS`` split at whitespace.  ParseError for a value shlex cannot split.
    """
    found = None
    for line in (text or "").splitlines():
        match = _ASSIGN.match(line)
        if match:
            try:
                found = shlex.split(match.group(1), comments=False)
            except ValueError as exc:
                raise ParseError("cannot read %s=%s: %s" % (ARGS_VAR, match.group(1), exc)) from exc
            found = " ".join(found).split()
    return found


def with_args(text, words, comment):
    """``text`` with its ``IRQBALANCE_ARGS=`` set to ``words`` (the last assignment replaced in place, else one
    appended after ``comment``); every other line kept."""
    value = '%s="%s"' % (ARGS_VAR, " ".join(words))
    lines = (text or "").splitlines(True)
    last = None
    for index, line in enumerate(lines):
        if _ASSIGN.match(line):
            last = index
    if last is not None:
        lines[last] = value + "\n"
        return "".join(lines)
    body = "".join(lines)
    if body and not body.endswith("\n"):
        body += "\n"
    return body + comment + value + "\n"
