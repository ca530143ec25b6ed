"""Parse the text of ``nvidia-smi topo -m`` / ``-mp`` (the real files in realdata/topo/full-matrices) for comparisons.

Facts about the format this relies on (realdata/topo/full-matrices/SOURCE.md and derived-from-issue-excerpts):
cells are TAB separated; the header starts with an empty cell; device columns (``GPU0``.., ``NIC0``.. or RDMA
device names on old drivers; only ``NIC`` columns in rdma_topo_matrix's output) come first, then ``CPU Affinity``, ``NUMA Affinity`` and maybe ``GPU NUMA ID``;
GPU rows can carry one more empty cell than the header; the diagonal is `` X `` (or ``X `` when trimmed);
newer drivers end with a ``NIC Legend:`` block of ``  NICk: mlx5_k`` lines.
"""

import re

_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
_OTHER_LEGEND_RE = re.compile(r"^\s*GPU\d+:\s*\S+\s*$")  # our filter's GPU legend; nvidia-smi has none
_FIRST_COLUMN_RE = re.compile(r"^(GPU|NIC)\d+$")


def _split(line):
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t")]
    return [cell.strip() for cell in re.split(r"\s{2,}", line)]


def parse_topo(text):
    """``{gpus, nics, legend, cells, cpu_affinity, numa_affinity}``.

    ``gpus``/``nics``: column labels in order; ``legend``: ``{"NIC0": "mlx5_0"}`` (empty on old drivers, where the
    labels already are the device names); ``cells``: ``{(row, column): value}`` for every device pair, the diagonal
    as ``"X"``; ``cpu_affinity``/``numa_affinity``: per GPU row.
    """
    lines = text.splitlines()
    header = None
    columns = []
    out = {"gpus": [], "nics": [], "legend": {}, "cells": {}, "cpu_affinity": {}, "numa_affinity": {}}
    for line in lines:
        legend = _LEGEND_RE.match(line)
        if legend:
            out["legend"][legend.group(1)] = legend.group(2)
            continue
        if not line.strip() or _OTHER_LEGEND_RE.match(line):
            continue
        fields = _split(line)
        if header is None:
            if len(fields) > 1 and fields[0] == "" and _FIRST_COLUMN_RE.match(fields[1]):
                header = fields
                for name in fields[1:]:
                    if name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"):
                        break
                    columns.append(name)
                out["gpus"] = [c for c in columns if c.startswith("GPU")]
                out["nics"] = [c for c in columns if not c.startswith("GPU")]
            continue
        label = fields[0]
        if label not in columns and not re.match(r"^GPU\d+$", label):
            continue  # legend prose
        if label.startswith("GPU") and label not in out["gpus"]:
            out["gpus"].append(label)  # GPU rows without GPU columns (rdma_topo_matrix)
        values = fields[1:1 + len(columns)]
        for column, value in zip(columns, values):
            out["cells"][(label, column)] = value.strip()
        if label.startswith("GPU"):
            tail = fields[1 + len(columns):]
            out["cpu_affinity"][label] = tail[0] if tail else None
            out["numa_affinity"][label] = tail[1] if len(tail) > 1 else None
    return out


def gpu_nic_cells(parsed):
    """``{("GPU0", "mlx5_0"): "PIX", ...}``: every GPU x NIC cell, NIC columns named through the legend."""
    out = {}
    for gpu in parsed["gpus"]:
        for nic in parsed["nics"]:
            out[(gpu, parsed["legend"].get(nic, nic))] = parsed["cells"][(gpu, nic)]
    return out
