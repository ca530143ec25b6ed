"""nvidia-smi-style PCIe distance computed from a sysfs tree, and a parser for real `nvidia-smi topo -m` output.

Used to prove that the matrix archetypes reproduce their real source matrix. The classification reads only the
rendered/mounted tree (sys/bus/pci/devices links, numa_node), never the spec, so it checks what a fact gatherer
would see:
  PIX  both devices below one bridge with at most one bridge level between each of them and that bridge
  PXB  a common bridge, but more levels on at least one side (multiple switches, no host bridge crossed)
  PHB  only the host bridge in common
  NODE different host bridges, same NUMA node
  SYS  different NUMA nodes
"""

from __future__ import annotations

import os
from pathlib import Path


def pci_chain(root: Path, bdf: str) -> list[str]:
    """[host bridge, bridges..., device] from the sys/bus/pci/devices/<bdf> link, as the kernel lays them out."""
    target = os.path.realpath(root / "sys" / "bus" / "pci" / "devices" / bdf)
    parts = Path(target).relative_to(os.path.realpath(root / "sys" / "devices")).parts
    return list(parts)


def numa_node(root: Path, bdf: str) -> int:
    """The device's numa_node attribute."""
    return int((root / "sys" / "bus" / "pci" / "devices" / bdf / "numa_node").read_text(encoding="utf-8"))


def classify(root: Path, bdf_a: str, bdf_b: str) -> str:
    """Distance class between two PCI devices."""
    if bdf_a == bdf_b:
        return "X"
    chain_a, chain_b = pci_chain(root, bdf_a), pci_chain(root, bdf_b)
    if chain_a[0] != chain_b[0]:
        node_a, node_b = numa_node(root, bdf_a), numa_node(root, bdf_b)
        return "NODE" if node_a == node_b and node_a >= 0 else "SYS"
    common = 0
    while common < min(len(chain_a), len(chain_b)) - 1 and chain_a[common] == chain_b[common]:
        common += 1
    if common == 1:
        return "PHB"
    below_a = len(chain_a) - common - 1
    below_b = len(chain_b) - common - 1
    return "PIX" if max(below_a, below_b) <= 1 else "PXB"


def rdma_bdf(root: Path, ibdev: str) -> str:
    """PCI address behind an RDMA device."""
    return os.path.basename(os.path.realpath(root / "sys" / "class" / "infiniband" / ibdev / "device"))


def gpus(root: Path) -> list[str]:
    """NVIDIA 3D controllers in bus order (nvidia-smi's GPU index order)."""
    out = []
    for link in sorted((root / "sys" / "bus" / "pci" / "devices").iterdir()):
        vendor = (link / "vendor").read_text(encoding="utf-8").strip()
        klass = (link / "class").read_text(encoding="utf-8").strip()
        if vendor == "0x10de" and klass.startswith("0x0302"):
            out.append(link.name)
    return out


def parse_matrix(text: str) -> tuple[list[str], dict[tuple[str, str], str], dict[str, str]]:
    """Parse `nvidia-smi topo -m` text: (labels, {(row, col): cell}, NIC legend {NICk: mlx5_k})."""
    lines = text.splitlines()
    header = [cell.strip() for cell in lines[0].split("\t")]
    labels = [cell for cell in header[1:] if cell.startswith(("GPU", "NIC", "mlx5")) and "NUMA" not in cell]
    cells: dict[tuple[str, str], str] = {}
    legend: dict[str, str] = {}
    for line in lines[1:]:
        fields = line.split("\t")
        row = fields[0].strip()
        if row in labels:
            for col, value in zip(labels, fields[1:1 + len(labels)]):
                cells[(row, col)] = value.strip()
        elif ":" in line and line.strip().startswith("NIC"):
            key, value = line.strip().split(":", 1)
            legend[key.strip()] = value.strip()
    return labels, cells, legend
