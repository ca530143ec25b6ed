"""Is ``rdma_facts``' output byte-identical between the work tree and a revision, on every simulator archetype?

    .venv/bin/python tests/bench/facts_identical.py [--baseline HEAD] [--workdir DIR]

A check for changes that must not change what the module returns (speed-ups): each archetype of ``tests/hwsim/specs``
is rendered at power-on (``hwsim.render``, as ``scripts/bench`` does) and with 2 VFs on every SR-IOV PF, and ``rdma_facts`` runs in-process on it
(``facts_json: true``: the compact JSON text the audit reads) once with the work tree's collection and once with the
revision's (``git archive``), each in a process of its own so that each imports its own collection.  The node's tools
(``ip``, ``devlink``, ``dcb`` ...) are this machine's, for both trees alike.  Prints one line per archetype and exits
1 when any output differs (the first differing offset is printed).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / ".cache" / "collections"
SPECS = REPO / "tests" / "hwsim" / "specs"


def run_facts(tree: str, root: str) -> str:
    """The module's ``rdma_facts_json`` for ``root``, with the collection under ``tree`` (runs in a child process)."""
    sys.path[:0] = [tree, str(COLLECTIONS)]
    # pylint: disable=import-outside-toplevel
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts

    class Done(Exception):
        pass

    def leave(self, **kwargs):  # pylint: disable=unused-argument
        raise Done(kwargs)

    basic.AnsibleModule.exit_json = leave
    basic.AnsibleModule.fail_json = leave
    result = {"error": "rdma_facts returned without exit_json or fail_json"}
    with patch_module_args({"host_root": root, "facts_json": True}):
        try:
            rdma_facts.main()
        except Done as done:
            result = done.args[0]
    return result.get("rdma_facts_json") or json.dumps(result, sort_keys=True)


def render(hwsim, name: str, root: pathlib.Path, vfs: int) -> None:
    """``name`` at power-on, or with ``vfs`` VFs on every SR-IOV PF (as tests/unit's shared-discovery test makes them:
    VF RDMA devices and netdevs, GUIDs, the PFs' VF lists)."""
    node = hwsim.Node(hwsim.load(name))
    if vfs:
        for bdf in node.readdir("/sys/bus/pci/devices"):
            base = "/sys/bus/pci/devices/%s" % bdf
            if "sriov_totalvfs" in node.readdir(base) and int(node.read(base + "/sriov_totalvfs")):
                node.write(base + "/sriov_numvfs", str(vfs))
        node.advance()
    hwsim.render(name, str(root), node=node)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--baseline", default="HEAD", help="revision to compare with (git archive)")
    parser.add_argument("--workdir", help="keep the rendered nodes and the revision's tree here")
    parser.add_argument("--run", nargs=2, metavar=("TREE", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        sys.stdout.write(run_facts(args.run[0], args.run[1]))
        return 0

    sys.path[:0] = [str(REPO / "tests"), str(pathlib.Path(__file__).resolve().parent)]
    import bench_layer_cost  # pylint: disable=import-outside-toplevel
    import hwsim  # pylint: disable=import-outside-toplevel

    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="facts-identical-")).resolve()
    baseline = bench_layer_cost.export_tree(args.baseline, work / ("tree-" + args.baseline))
    trees = {args.baseline: str(baseline), "work tree": str(COLLECTIONS)}
    failed = 0
    for spec, vfs in [(spec, vfs) for spec in sorted(SPECS.glob("*.yaml")) for vfs in (0, 2)]:
        label = spec.stem + (" +%d VFs" % vfs if vfs else "")
        root = work / ("node-%s-%d" % (spec.stem, vfs))
        if not (root / "sys").is_dir():
            render(hwsim, spec.stem, root, vfs)
        outputs = {}
        for key, tree in trees.items():
            done = subprocess.run([sys.executable, __file__, "--run", tree, str(root)], capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise RuntimeError("rdma_facts with %s on %s failed:\n%s" % (tree, label, done.stderr[-3000:]))
            outputs[key] = done.stdout
        before, after = outputs[args.baseline], outputs["work tree"]
        if before == after:
            print("%-30s identical (%d bytes)" % (label, len(after)))
            continue
        failed += 1
        offset = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
        start = max(0, offset - 80)
        print("%-30s DIFFERS at offset %d: %r / %r" % (label, offset, before[start:offset + 80], after[start:offset + 80]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
