"""Node trees built at test time from tests/fixtures/realworld (files are read there, never copied into the repo).

``build(root, files, links=None)``: ``files`` maps node paths to a corpus path (``corpus:<rel>``) or to text;
``links`` maps node paths to symlink targets (Debian's ``/etc/sysctl.d/99-sysctl.conf -> ../sysctl.conf``).
"""

import os
import pathlib

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"


def corpus(rel):
    """The text of a corpus file."""
    return (CORPUS / rel).read_text()


def build(root, files, links=None):
    """Write ``files`` and ``links`` under ``root``; return ``root`` as a string."""
    root = str(root)
    for node_path, source in files.items():
        text = corpus(source[len("corpus:"):]) if source.startswith("corpus:") else source
        full = os.path.join(root, node_path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)
    for node_path, target in (links or {}).items():
        full = os.path.join(root, node_path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)
    return root


#: a Debian 12 node: systemd's and procps' packaged sysctl.d files, the stock /etc/sysctl.conf and procps' link to it
DEBIAN12_SYSCTL = {
    "/usr/lib/sysctl.d/50-default.conf": "corpus:systemd/upstream/usr/lib/sysctl.d/50-default.conf",
    "/usr/lib/sysctl.d/50-pid-max.conf": "corpus:systemd/debian12/usr/lib/sysctl.d/50-pid-max.conf",
    "/usr/lib/sysctl.d/99-protect-links.conf": "corpus:debian12/usr/lib/sysctl.d/99-protect-links.conf",
    "/etc/sysctl.conf": "corpus:debian12/etc/sysctl.conf",
}
DEBIAN12_LINKS = {"/etc/sysctl.d/99-sysctl.conf": "../sysctl.conf"}
#: an EKS AL2023 node: the AMI's own files
EKS_AL2023_SYSCTL = {
    "/etc/sysctl.conf": "corpus:eks-al2023/etc/sysctl.conf",
    "/etc/sysctl.d/67-eks-reserved-ports.conf": "corpus:eks-al2023/etc/sysctl.d/67-eks-reserved-ports.conf",
    "/etc/sysctl.d/99-amazon.conf": "corpus:eks-al2023/etc/sysctl.d/99-amazon.conf",
    "/etc/sysctl.d/99-kubernetes-cri.conf": "corpus:eks-al2023/etc/sysctl.d/99-kubernetes-cri.conf",
    "/usr/lib/sysctl.d/50-default.conf": "corpus:systemd/upstream/usr/lib/sysctl.d/50-default.conf",
}
#: an Ubuntu cloud image
UBUNTU_CLOUDIMG_SYSCTL = {
    "/etc/sysctl.d/99-cloudimg-ipv6.conf": "corpus:ubuntu-cloudimg/etc/sysctl.d/99-cloudimg-ipv6.conf",
    "/usr/lib/sysctl.d/50-default.conf": "corpus:systemd/upstream/usr/lib/sysctl.d/50-default.conf",
}

#: a DOCA-OFED / MLNX_OFED node with rdma-core, systemd and Azure HPC's NVIDIA lines in modprobe.d
DOCA_MODPROBE = {
    "/etc/modprobe.d/mlnx.conf": "corpus:mlnx-ofed/etc/modprobe.d/mlnx.conf",
    "/etc/modprobe.d/ib_ipoib.conf": "corpus:mlnx-ofed/etc/modprobe.d/ib_ipoib.conf",
    "/etc/modprobe.d/mlnx-bf.conf": "corpus:mlnx-ofed/etc/modprobe.d/mlnx-bf.conf",
    "/etc/modprobe.d/mlx4.conf": "corpus:rdma-core/debian12/etc/modprobe.d/mlx4.conf",
    "/etc/modprobe.d/truescale.conf": "corpus:rdma-core/debian12/etc/modprobe.d/truescale.conf",
    "/etc/modprobe.d/nvidia.conf": "corpus:azhpc-images/etc/modprobe.d/nvidia.conf",
    "/lib/modprobe.d/systemd.conf": "corpus:systemd/debian12/lib/modprobe.d/systemd.conf",
}
#: what sriov-network-operator writes for SriovNetworkPoolConfig rdmaMode (pkg/host/internal/network/network.go
#: SetRDMASubsystem; the exact text its network_test.go expects), for shared (1) and exclusive (0)
OPERATOR_MODPROBE = "/etc/modprobe.d/sriov_network_operator_modules_config.conf"


def operator_modprobe(value):
    return "# This file is managed by sriov-network-operator do not edit.\noptions ib_core netns_mode=%s\n" % value
