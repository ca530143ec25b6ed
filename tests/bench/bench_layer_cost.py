"""What the audit costs per host, in pieces, for two trees of the collection: in seconds, without the fleet.

    .venv/bin/python tests/bench/bench_layer_cost.py [--baseline def7b58] [--tree DIR] [--hosts 50] [--repeat 15]

``scripts/bench fleet`` at N = 300 takes minutes and two cores; this measures the same per-host work in pieces,
for the work tree (or ``--tree``, a directory holding ``ansible_collections/rdma/k8s_node``) and for a baseline
revision (``git archive``), interleaved, on the same rendered ``dgx-h100`` node the fleet benchmark uses:

* ``module``: the ``rdma_facts`` process as the node runs it -- the AnsiballZ file Ansible builds for it (made once
  with ``ANSIBLE_KEEP_REMOTE_FILES``), run by ``/usr/bin/python3`` without ``PYTHONUNBUFFERED`` (as
  ``bench_fleet.write_timed_interpreter``); user+sys CPU, median of ``--repeat`` runs.  Also its payload size.
* ``result``: what the controller does with one host's result, the way ansible-core handles every module result:
  the worker's JSON decode (the module decoder), the gather action's JSON text of the facts (a tree whose
  ``rdma_audit_gather`` returns ``rdma_facts_json``; since session 13 the module prints that text itself, so the
  decoder sees one string and the action only checks it) or ansible-core's two ``namespace_facts`` copies of
  ``ansible_facts`` (an older tree), the queue to the main process (pickle) and the registered variable's copy
  (``module_response_deepcopy``, ``strip_internal_keys``); then, separately, the callbacks' copy
  (the same two, and ``transform_to_native_types``, which the default callback triggers by reading
  ``result.result``).  Both grow with the size of ``ansible_facts.rdma``.
* ``audit``: the ``rdma.k8s_node.rdma_audit`` filter through Ansible's templar over ``--hosts`` hosts holding that
  result (lazy host variables, as in the play), per host; most of it is the templar finalizing the returned report
  (a walk of every value), so it grows with the checks per host;
  then set_fact's result on its way to the main process and the callbacks (the report once more);
* ``report``: ``rdma_audit_json``, ``_markdown``, ``_junit`` and ``_summary`` of that report through the templar,
  per host.

Absolute numbers depend on the machine; the ratios (tree / baseline, same command, interleaved) are what to read.
Asserts nothing.  The pieces leave out what does not change with the collection (forks, connection, callbacks'
fixed cost), so the per-host sum is less than the fleet benchmark's controller ms/host.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = pathlib.Path(__file__).resolve().parent
COLLECTIONS = REPO / ".cache" / "collections"
NODE_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def low(values: list[float]) -> float:
    """The mean of the fastest third: on a shared machine CPU times only ever grow with interference, so the fast
    runs are the better estimate of the work itself (the median is printed alongside for the module)."""
    ordered = sorted(values)
    keep = ordered[:max(1, len(ordered) // 3)]
    return sum(keep) / len(keep)


def export_tree(rev: str, directory: pathlib.Path) -> pathlib.Path:
    """``git archive rev`` as a collections directory (``directory/ansible_collections/rdma/k8s_node``)."""
    target = directory / "ansible_collections" / "rdma" / "k8s_node"
    if not target.is_dir():
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return directory


def build_ansiballz(tree: pathlib.Path, node: pathlib.Path, work: pathlib.Path) -> pathlib.Path:
    """The AnsiballZ file of ``rdma.k8s_node.rdma_facts`` (``host_root`` = ``node``) as ``tree`` builds it."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")  # no pipelining: the file stays in the remote tmp
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_KEEP_REMOTE_FILES="1",
               ANSIBLE_REMOTE_TMP=str(work / "remote"), ANSIBLE_LOCAL_TEMP=str(work / "local"),
               ANSIBLE_HOME=str(work / "home"), ANSIBLE_COLLECTIONS_PATH="%s:%s" % (tree, COLLECTIONS))
    done = subprocess.run([str(REPO / ".venv" / "bin" / "ansible"), "localhost", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % NODE_PYTHON, "-m", "rdma.k8s_node.rdma_facts",
                           "-a", "host_root=%s" % node], env=env, capture_output=True, text=True, check=False)
    found = sorted((work / "remote").rglob("AnsiballZ_rdma_facts.py"))
    if done.returncode != 0 or not found:
        raise RuntimeError("rdma_facts did not run from %s:\n%s" % (tree, done.stdout[-2000:] + done.stderr[-2000:]))
    out = work / "AnsiballZ_rdma_facts.py"
    shutil.copy(found[0], out)
    shutil.rmtree(work / "remote", ignore_errors=True)
    return out


def run_module(path: pathlib.Path) -> tuple[float, str]:
    """``(user+sys ms, stdout)`` of one run of an AnsiballZ file by the node's Python."""
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # what bench_fleet's timed interpreter drops (NODE_ENV_UNSET)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([NODE_PYTHON, str(path)], env=env, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000.0 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), out


def payload(path: pathlib.Path) -> dict:
    """Size of the AnsiballZ file and how many of the collection's module_utils it carries."""
    import base64  # pylint: disable=import-outside-toplevel
    import io  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel
    import zipfile  # pylint: disable=import-outside-toplevel

    text = path.read_text(encoding="utf-8")
    match = re.search(r"zip_data\s*=\s*['\"]{1,3}([A-Za-z0-9+/=\s]+)['\"]{1,3}", text)
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(match.group(1)))).infolist() if match else []
    ours = [i for i in names if "rdma/k8s_node/plugins/module_utils/" in i.filename and i.filename.endswith(".py")]
    return {"ansiballz_kb": round(len(text) / 1024.0), "module_utils": len(ours),
            "module_utils_kb": round(sum(i.file_size for i in ours) / 1024.0)}


# -- the controller side, in a child process per tree (so each imports its own collection) -------------------------
def controller(tree: str, result_file: str, hosts: int, repeat: int) -> dict:
    """Per-host controller costs of ``tree`` for the module output in ``result_file`` (runs in its own process)."""
    # pylint: disable=import-outside-toplevel
    from ansible.module_utils.common.json import Direction, get_module_decoder
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar, trust_as_template
    from ansible.utils.vars import transform_to_native_types
    from ansible.vars.clean import module_response_deepcopy, namespace_facts, strip_internal_keys

    init_plugin_loader([tree, str(COLLECTIONS)])
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # the tree's own

    text = pathlib.Path(result_file).read_text(encoding="utf-8")
    decoder = get_module_decoder("legacy", Direction.MODULE_TO_CONTROLLER)

    try:  # the tree's gather action: the facts as JSON text (rdma_facts_json) since session 11, else ansible_facts
        from ansible_collections.rdma.k8s_node.plugins.action import rdma_audit_gather as gather
        facts_key = getattr(gather, "FACTS_KEY", None)
    except ImportError:  # a tree from before the action
        facts_key = None

    module_text = getattr(gather, "invalid_utf8", None) is not None if facts_key else False
    zlib_key = getattr(gather, "ZLIB_KEY", None) if module_text else None
    if module_text:  # since session 13 rdma_facts prints the facts as that text itself (facts_json: true)
        shaped = json.loads(text)
        shaped[facts_key] = json.dumps(shaped.pop("ansible_facts")["rdma"], separators=(",", ":"))
        if zlib_key:  # since session 19 compressed on the node, as the role asks (compress: true)
            shaped[zlib_key] = gather._facts_text.deflate(shaped.pop(facts_key))  # pylint: disable=protected-access
        text = json.dumps(shaped)

    def one_result():
        data = json.loads(text, cls=decoder)  # the worker parses the module's stdout
        if zlib_key:  # the compressed text, inflated and checked as the action does
            gather.invalid_utf8(gather._facts_text.inflate(data[zlib_key])[0])  # pylint: disable=protected-access
        elif module_text:  # the module's text, checked for what ansible-core's decoder can no longer see in it
            gather.invalid_utf8(data[facts_key])
        elif facts_key:  # rdma_audit_gather: the facts leave ansible_facts as one string (as the action encodes them)
            facts = data.pop("ansible_facts", {}).get("rdma")
            data[facts_key] = gather._ENCODER.encode(facts)  # pylint: disable=protected-access
        else:  # ansible_facts: namespace_facts' copy in the worker (task_executor.py does it twice)
            namespace_facts(data["ansible_facts"])
            namespace_facts(data["ansible_facts"])
        data = pickle.loads(pickle.dumps(data, pickle.HIGHEST_PROTOCOL))  # worker -> main process
        return data, strip_internal_keys(module_response_deepcopy(data))  # the registered variable

    def callbacks(data):
        callback = dict(module_response_deepcopy(data))  # the callbacks' copy of the result (TaskResult)
        strip_internal_keys(callback)
        return transform_to_native_types(callback)  # what the default callback reads (result.result)

    data, registered = one_result()
    registered["rdma_audit_desired"] = dict((name, "__unset__") for name in _audit.DESIRED_VARS)
    names = ["node%04d" % i for i in range(hosts)]
    hostvars = dict((name, {"rdma_audit__facts": registered}) for name in names)
    templar = Templar(loader=DataLoader(), variables={"hosts": names, "hostvars": hostvars})
    audit_expr = trust_as_template("{{ hosts | rdma.k8s_node.rdma_audit(hostvars, 'desired', [], 'T') }}")
    report = templar.template(audit_expr)
    report_templar = Templar(loader=DataLoader(), variables={"rdma_audit_report": report})
    outputs = ("rdma_audit_json", "rdma_audit_markdown", "rdma_audit_junit", "rdma_audit_summary")
    report_exprs = [trust_as_template("{{ rdma_audit_report | rdma.k8s_node.%s }}" % name) for name in outputs]

    def write_reports():
        return [len(report_templar.template(expr)) for expr in report_exprs]

    sizes = write_reports()

    def timed(func, runs):
        func()
        out = []
        for _run in range(runs):
            start = time.process_time()
            func()
            out.append(1000.0 * (time.process_time() - start))
        return low(out)

    checks = sum(len(h["checks"]) for h in report["hosts"].values()) / float(hosts)
    return {
        "result_bytes": len(text), "checks_per_host": checks, "report_bytes_per_host": round(sum(sizes[:3]) / hosts),
        "result_ms": timed(one_result, repeat * 2),
        "callback_ms": timed(lambda: callbacks(data), repeat * 2),
        "audit_ms": timed(lambda: templar.template(audit_expr), max(3, repeat // 3)) / hosts,
        # set_fact's result ({"ansible_facts": {"rdma_audit_report": ...}}) goes to the main process and the callbacks
        "audit_result_ms": timed(lambda: callbacks(pickle.loads(pickle.dumps(
            {"ansible_facts": {"rdma_audit_report": report}, "changed": False}, pickle.HIGHEST_PROTOCOL))),
            max(3, repeat // 3)) / hosts,
        "report_ms": timed(write_reports, max(3, repeat // 3)) / hosts,
    }


def main(argv: list[str] | None = None) -> int:  # pylint: disable=too-many-locals
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--baseline", default="def7b58", help="revision to compare with (git archive)")
    parser.add_argument("--tree", help="collections directory of the tree to measure (default: this work tree)")
    parser.add_argument("--hosts", type=int, default=50, help="hosts in the audit and report pieces")
    parser.add_argument("--repeat", type=int, default=15, help="module runs per tree; timings per piece")
    parser.add_argument("--rounds", type=int, default=3, help="controller processes per tree (medians of them)")
    parser.add_argument("--workdir", help="keep the trees, the node and the AnsiballZ files here")
    parser.add_argument("--archetype", default="dgx-h100")
    parser.add_argument("--controller", nargs=2, metavar=("TREE", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.controller:
        print(json.dumps(controller(args.controller[0], args.controller[1], args.hosts, args.repeat)))
        return 0

    sys.path[:0] = [str(COLLECTIONS), str(REPO / "tests"), str(BENCH)]
    import bench_fleet  # pylint: disable=import-outside-toplevel

    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="bench-layer-cost-")).resolve()
    try:
        node = bench_fleet.render_template(args.archetype, work)
        trees = {"baseline": export_tree(args.baseline, work / ("tree-" + args.baseline)),
                 "tree": pathlib.Path(args.tree).resolve() if args.tree else COLLECTIONS}
        labels = {"baseline": args.baseline, "tree": args.tree or "work tree"}
        zips = dict((key, build_ansiballz(tree, node, work / ("az-" + key))) for key, tree in trees.items())
        cpu = dict((key, []) for key in trees)
        for _run in range(args.repeat + 1):  # interleaved; the first round warms the caches and is dropped
            for key, path in zips.items():
                ms, out = run_module(path)
                if _run:
                    cpu[key].append(ms)
                else:
                    (work / ("result-%s.json" % key)).write_text(out, encoding="utf-8")
        runs = dict((key, []) for key in trees)
        for _round in range(args.rounds):  # a child process per tree and round, interleaved
            for key, tree in trees.items():
                child = subprocess.run([sys.executable, __file__, "--controller", str(tree),
                                        str(work / ("result-%s.json" % key)), "--hosts", str(args.hosts),
                                        "--repeat", str(args.repeat)], capture_output=True, text=True, check=False)
                if child.returncode != 0:
                    raise RuntimeError("controller pieces of %s failed:\n%s" % (tree, child.stderr[-3000:]))
                runs[key].append(json.loads(child.stdout.strip().splitlines()[-1]))
        rows = {}
        for key in trees:
            rows[key] = dict((name, low([run[name] for run in runs[key]])) for name in runs[key][0])
            rows[key]["module_ms"] = low(cpu[key])
            rows[key]["module_median_ms"] = statistics.median(cpu[key])
            rows[key].update(payload(zips[key]))
        base, ours = rows["baseline"], rows["tree"]
        for row in (base, ours):
            row["controller_ms"] = (row["result_ms"] + row["callback_ms"] + row["audit_ms"] + row["audit_result_ms"]
                                    + row["report_ms"])
        print("node %s; %d hosts in the audit; module runs %d each; mean of the fastest third of the runs (module) and of "
              "the timings (controller pieces, %d processes each); nodes' Python %s"
              % (args.archetype, args.hosts, args.repeat, args.rounds, NODE_PYTHON))
        print("%-38s %14s %14s %8s" % ("", labels["baseline"][:14], labels["tree"][:14], "ratio"))
        for key, label, fmt in (
                ("module_ms", "module: rdma_facts process, CPU ms", "%.1f"),
                ("module_median_ms", "  (median of the runs)", "%.1f"),
                ("ansiballz_kb", "  AnsiballZ file, KB", "%d"),
                ("module_utils", "  collection module_utils shipped", "%d"),
                ("module_utils_kb", "  ... their source, KB", "%d"),
                ("result_bytes", "result: JSON bytes per host", "%d"),
                ("result_ms", "result: decode, queue, register, ms/host", "%.2f"),
                ("callback_ms", "result: callbacks' copy, ms/host", "%.2f"),
                ("checks_per_host", "audit: checks per host", "%.0f"),
                ("audit_ms", "audit: rdma_audit filter, ms/host", "%.2f"),
                ("audit_result_ms", "audit: set_fact's result, ms/host", "%.2f"),
                ("report_bytes_per_host", "report: json+md+junit bytes/host", "%d"),
                ("report_ms", "report: 4 report filters, ms/host", "%.2f"),
                ("controller_ms", "controller pieces, ms/host", "%.2f")):
            ratio = ours[key] / base[key] if base[key] else float("nan")
            print("%-38s %14s %14s %7.2fx" % (label, fmt % base[key], fmt % ours[key], ratio))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
