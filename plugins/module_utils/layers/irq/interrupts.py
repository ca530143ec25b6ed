# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsing for the ``irq`` layer: ``/proc/interrupts``, the irqbalance environment file and CPU lists.

``/proc/interrupts`` is kernel/irq/proc.c show_interrupts(): a header of ``CPU<n>`` columns (online CPUs), then per
interrupt ``<irq>:``, one count per online CPU, the chip (``IR-PCI-MSI``, ``IR-PCI-MSIX-0000:01:00.0`` ...), the
hardware IRQ and trigger (``1-edge``) and the handlers' names joined by ``", "``; then the architecture's lines
(``NMI:``, ``LOC:`` ...).  mlx5_core names its handlers ``mlx5_<kind><n>@pci:<pci address>`` (pci_irq.c), so a
vector is tied to its PCI function by name as well as by ``msi_irqs/``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re
import shlex

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

_ROW = re.compile(r"^\s*(\d+):(.*)$")
_PCI_NAME = re.compile(r"@pci:((?:[0-9a-fA-F]{4,5}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
#: the variable irqbalance's unit passes on its command line (misc/irqbalance.service: ExecStart=... $IRQBALANCE_ARGS)
ARGS_VAR = "IRQBALANCE_ARGS"
_ASSIGN = re.compile(r"^\s*(?:export\s+)?IRQBALANCE_ARGS=(.*)$")


def parse_proc_interrupts(text):
    """``{irq number: {"counts": [per CPU], "cpus": [CPU numbers], "chip": text, "name": handlers, "pci": bdf or None}}``
    of the numbered rows; architecture rows (``NMI:`` ...) are left out.  ParseError without a header."""
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
        counts = []
        while words and len(counts) < len(header) and words[0].isdigit():
            counts.append(int(words.pop(0)))
        rest = " ".join(words)
        # what follows the counts: chip, hwirq-trigger, then the handler names (the last field(s))
        parts = re.split(r"\s+", rest.strip(), maxsplit=2)
        name = parts[2] if len(parts) == 3 else (parts[-1] if parts else "")
        pci = _PCI_NAME.search(rest)
        rows[int(match.group(1))] = {"counts": counts, "cpus": header[:len(counts)], "chip": parts[0] if parts else "",
                                     "name": name, "pci": pci.group(1).lower() if pci else None}
    if header is None and (text or "").strip():
        raise ParseError("/proc/interrupts has no CPU header line")
    return rows


def device_irqs(rows, bdf):
    """The numbers of the rows whose handler names carry ``@pci:<bdf>`` (a domain-less name matches domain 0000)."""
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
