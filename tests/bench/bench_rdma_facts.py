"""Benchmark rdma_facts' gather() on the largest simulated node, against reading the same tree naively.

    .venv/bin/python tests/bench/bench_rdma_facts.py [--archetype dgx-h100] [--vfs 16] [--repeat 20] [--dir DIR]

The node is rendered by the simulator (tests/hwsim) with ``--vfs`` VFs created on every SR-IOV PF through the
simulated ``sriov_numvfs`` (DGX H100: 8 IB PFs x 16 VFs = 128 VF RDMA devices, 140 RDMA devices in all).
The baseline, measured in the same run on the same tree, is ``os.walk`` plus reading every regular file (what a
naive "read all of sysfs we might need" gatherer costs); ``find -type f -exec cat {} +`` is timed once for
reference when ``find`` is available.  Prints absolute milliseconds and the ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / ".cache" / "collections"), str(REPO / "tests")]

# pylint: disable=wrong-import-position
import hwsim  # noqa: E402

from ansible_collections.rdma.k8s_node.plugins.module_utils._gpudirect import drivers_facts  # noqa: E402
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # noqa: E402
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts  # noqa: E402
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather  # noqa: E402
from ansible_collections.rdma.k8s_node.plugins.module_utils._runtime_facts import runtime_facts  # noqa: E402


def render_with_vfs(archetype: str, vfs: int, directory: str) -> dict:
    """Render `archetype` after writing `vfs` to every SR-IOV PF's sriov_numvfs (capped at sriov_totalvfs)."""
    spec = hwsim.load(archetype)
    node = hwsim.Node(spec)
    made = 0
    if vfs:
        for bdf in node.readdir("/sys/bus/pci/devices"):
            base = "/sys/bus/pci/devices/%s" % bdf
            if "sriov_totalvfs" not in node.readdir(base):
                continue
            total = int(node.read(base + "/sriov_totalvfs"))
            count = min(vfs, total)
            if count:
                node.write(base + "/sriov_numvfs", str(count))
                made += count
        node.advance()
    hwsim.render(spec, directory, node=node)
    return {"vfs": made}


def module_facts(root: str) -> dict:
    """Everything the rdma_facts module collects (plugins/modules/rdma_facts.py main(), without AnsibleModule):
    gather() plus the runtime, persisted and drivers sections.  No command is run (``commands=None``)."""
    host = HostRoot(root)
    facts = gather(host)
    facts["runtime"] = runtime_facts(host, None)
    facts["persisted"] = persisted_facts(host, [name for name in facts["sysctl"] if name not in ("all", "default")])
    facts["drivers"] = drivers_facts(host)
    return facts


class UnconfinedRoot(HostRoot):
    """The pre-session-5 resolution, as a baseline: the root prefixed to the path and the kernel left to follow
    every link (absolute ones out of the root).  Not safe; measured only to show what confinement costs."""

    def open_fd(self, node_path, flags=os.O_RDONLY | os.O_NONBLOCK, mode=0o644):
        return os.open(self.lexical(node_path), flags | os.O_CLOEXEC, mode)


def walk_and_read(root: str) -> int:
    """The baseline: every regular file of the tree opened and read once."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            try:
                with open(path, "rb") as handle:
                    total += len(handle.read())
            except OSError:
                pass
    return total


def timed(func, repeat: int) -> list[float]:
    func()  # warm-up (page cache, imports)
    out = []
    for _run in range(repeat):
        start = time.perf_counter()
        func()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def count_reads(root: str) -> dict:
    reads = collections.Counter()
    real = HostRoot.read_text

    def counting(self, path, default=None):
        reads[path] += 1
        return real(self, path, default)

    HostRoot.read_text = counting
    try:
        facts = gather(HostRoot(root))
    finally:
        HostRoot.read_text = real
    return {"files_read": len(reads), "max_reads_per_file": max(reads.values()) if reads else 0,
            "devices": len(facts["devices"]), "gpus": len(facts["gpus"]), "problems": len(facts["problems"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--archetype", default="dgx-h100")
    parser.add_argument("--vfs", type=int, default=16, help="VFs per SR-IOV PF (0 = power-on tree)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dir", help="render here (kept); default a temporary directory (removed)")
    args = parser.parse_args()

    directory = args.dir or tempfile.mkdtemp(prefix="bench-rdma-facts-")
    try:
        made = render_with_vfs(args.archetype, args.vfs, directory)
        tree_files = sum(len(entry[2]) for entry in os.walk(directory))
        info = count_reads(directory)
        facts_ms = timed(lambda: gather(HostRoot(directory)), args.repeat)
        walk_ms = timed(lambda: gather(HostRoot(directory, use_openat2=False)), args.repeat)
        loose_ms = timed(lambda: gather(UnconfinedRoot(directory)), args.repeat)
        base_ms = timed(lambda: walk_and_read(directory), args.repeat)
        find_ms = None
        if shutil.which("find"):
            start = time.perf_counter()
            subprocess.run(["find", directory, "-type", "f", "-exec", "cat", "{}", "+"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
            find_ms = (time.perf_counter() - start) * 1000.0

        fmed, bmed = statistics.median(facts_ms), statistics.median(base_ms)
        print("node: %s, %d VFs created, %d files in the tree, python %s" % (
            args.archetype, made["vfs"], tree_files, ".".join(map(str, sys.version_info[:3]))))
        print("rdma_facts gather: %d RDMA devices, %d GPUs, %d problems, %d files read (max %d read per file)" % (
            info["devices"], info["gpus"], info["problems"], info["files_read"], info["max_reads_per_file"]))
        print("gather()            median %8.2f ms  min %8.2f ms  (%d runs)" % (fmed, min(facts_ms), args.repeat))
        print("os.walk + read all  median %8.2f ms  min %8.2f ms  (%d runs)" % (bmed, min(base_ms), args.repeat))
        lmed = statistics.median(loose_ms)
        print("host_root resolution (same gather, same tree): openat2 RESOLVE_IN_ROOT %.2f ms, python chroot walk "
              "%.2f ms, unconfined open (pre-session-5 baseline) %.2f ms: %.2fx and %.2fx the baseline" % (
                  fmed, statistics.median(walk_ms), lmed, fmed / lmed, statistics.median(walk_ms) / lmed))
        if find_ms is not None:
            print("find -exec cat      once   %8.2f ms" % find_ms)
        print("ratio gather / walk-and-read: %.3f  (%.1fx faster)" % (fmed / bmed, bmed / fmed if fmed else 0.0))
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
