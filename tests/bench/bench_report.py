"""The audit's controller-side report at N synthetic hosts, for the work tree and a baseline revision, in seconds.

    .venv/bin/python tests/bench/bench_report.py [--hosts 10000] [--baseline REV] [--tree DIR]

``scripts/bench fleet`` cannot reach 10,000 hosts on one machine; the report's cost does not need the nodes. This
runs ``rdma_facts`` once on the fleet's ``dgx-h100`` node (the AnsiballZ file, as bench_layer_cost does), then, in a
child process per tree (each imports its own collection), builds N hosts' registered results from that one result
and times, in plain Python (what the ``rdma_audit_report`` action runs; the filters add Ansible's templar):

* ``audit``: ``_audit.audit`` (the comparison) over the N hosts, their facts decoded once and shared;
* ``decode_audit``: the same with each host's facts as the action is given them, ``rdma_audit_gather``'s compressed
  JSON text, decoded by the audit host by host (``decoded_same``: the two reports are the same);
* one row per report file the tree writes: report.json, report.md, report.html (work tree), junit.xml, and the
  summary lines;
* ``write_reports`` of the tree's ``rdma_audit_report`` action, as the playbook writes the four files into a
  directory next to the module result: wall time (the disk's share included) and CPU time (with any child process);
* what ansible-core does with the action's result before ``rdma_audit_report`` can be read, with its own functions:
  the pickle from the worker to the main process and back, and ``register``'s deep copy and key stripping
  (``register_s``; ``register_no_checks_s`` with the action's ``checks: false``); ``task_s`` adds decoding +
  comparison, the files' CPU and that: the report task's CPU;
* the child's peak RSS (``ru_maxrss``) after the inputs were built and at the end;
* the sha256 of each text and of each file written: whether the trees write the same bytes.

Every tree's writers write one report: the first tree's comparison of the N hosts, made once in a child of its own
and pickled (each tree's ``audit`` row is still its own comparison), so that a change of the comparison between the
trees (other checks, other statuses) does not count as the writers' and the digests compare the writers alone.

The hosts are mixed as an inventory in the middle of a rollout is: every 10th waits for a reboot (the kernel
arguments in the boot configuration, not live), every 25th on older NIC firmware (``health.firmware`` fails on
every host of the model: the inventory-wide check), every 50th unreachable, every 97th with an unreadable file,
one in 100 with a hostile name (``<script>``, ``|``, backticks, a newline).  Unchanged parts of the facts are
shared between hosts (the audit only reads them), so the memory is the report's, not N copies of the input.

Prints a table with the ratios tree / baseline (same command, interleaved) and the digests.  Asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import os
import pathlib
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = pathlib.Path(__file__).resolve().parent
COLLECTIONS = REPO / ".cache" / "collections"
HOSTILE = ["<script>alert(1)</script>", "a|b", "`tick`", "new\nline"]


def synthetic_hosts(result: dict, count: int, desired: dict) -> dict:
    """``{host: spec}`` of ``_audit.audit`` for ``count`` hosts derived from one rdma_facts result (see module doc)."""
    facts = result["ansible_facts"]["rdma"]
    rebooting = dict(facts)
    rebooting["persisted"] = dict(facts["persisted"] or {})
    rebooting["persisted"]["kernel_cmdline"] = {"source": "/boot/grub/grub.cfg", "kernel": "/boot/vmlinuz",
                                                "args": ["ro", "iommu=pt"]}
    old_fw = dict(facts)
    old_fw["layers"] = dict(facts["layers"])
    health = old_fw["layers"]["health"] = copy.deepcopy(facts["layers"]["health"])
    for nic in health.get("nics") or []:
        nic["fw_ver"] = "28.36.1010"
    unreadable = dict(facts)
    unreadable["problems"] = [{"path": "/sys/class/net/ibp24s0/mtu", "error": "Permission denied"}]
    hosts = {}
    for index in range(count):
        name = "gpu-node-%05d" % index
        if index % 100 == 99:
            name += " " + HOSTILE[(index // 100) % len(HOSTILE)]
        spec = {"facts": facts, "desired": desired, "layers": None, "error": None}
        if index % 50 == 49:
            spec = dict(spec, facts=None, error="unreachable: ssh: connect to host %s port 22: No route to host" % name)
        elif index % 97 == 96:
            spec["facts"] = unreadable
        elif index % 25 == 24:
            spec["facts"] = old_fw
        elif index % 10 == 9:
            spec["facts"] = rebooting
        hosts[name] = spec
    return hosts


def child(tree: str, result_file: str, count: int, report_file: str) -> dict:
    """Time the tree's audit over ``count`` synthetic hosts and its report writers over the report pickled in
    ``report_file`` (runs in its own process)."""
    sys.path[:0] = [tree, str(COLLECTIONS)]
    # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit, _audit_report

    hosts = _tree_hosts(result_file, count)
    rss_inputs = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out = {"tree": tree, "hosts": count, "rss_inputs_mb": round(rss_inputs), "sha256": {}}

    def timed(name, func):
        start = time.process_time()
        value = func()
        out[name + "_s"] = round(time.process_time() - start, 3)
        if isinstance(value, str) or name == "summary":  # a text, or the summary lines
            encoded = (value if isinstance(value, str) else "\n".join(value)).encode("utf-8")
            out[name + "_mb"] = round(len(encoded) / 1e6, 1)
            out["sha256"][name] = hashlib.sha256(encoded).hexdigest()
        return value

    report = timed("audit", lambda: _audit.audit(hosts, generated="2026-12-02T00:00:00Z"))
    out["checks_per_host"] = round(sum(len(h["checks"]) for h in report["hosts"].values()) / float(count), 1)
    out["sha256"]["audit"] = _digest(report)
    del report
    # what the rdma_audit_report action is given: each host's facts as rdma_audit_gather's compressed JSON text,
    # decoded by the audit one host at a time (the row above shares one decoded copy between the hosts)
    hosts = as_registered(hosts)
    if hosts is not None:
        report = timed("decode_audit", lambda: _audit.audit(hosts, generated="2026-12-02T00:00:00Z"))
        out["sha256"]["decode_audit"] = _digest(report)
        out["decoded_same"] = out["sha256"]["decode_audit"] == out["sha256"]["audit"]
        del report
    del hosts
    with open(report_file, "rb") as handle:
        report = pickle.load(handle)
    writers = [("json", lambda: _audit_report.json_document(report)), ("md", lambda: _audit_report.markdown(report))]
    # as the rdma_audit_report action writes them (write_reports): the structures' text shared by report.md,
    # report.html and junit.xml when the tree has it
    shared = {} if "shared" in inspect.signature(_audit_report.junit).parameters else None
    if hasattr(_audit_report, "report_blocks"):  # one document model for report.md and report.html
        blocks = timed("blocks", lambda: _audit_report.report_blocks(report, *([shared] if shared is not None else [])))
        writers = [writers[0], ("md", lambda: _audit_report.to_markdown(blocks)),
                   ("html", lambda: _audit_report.to_html(blocks, _audit_report.html_title(report)))]
    writers += [("junit", lambda: _audit_report.junit(report, **({"shared": shared} if shared is not None else {}))),
                ("summary", lambda: _audit_report.short_summary(report))]
    for name, func in writers:
        timed(name, func)
    out["report_s"] = round(sum(out.get(name + "_s", 0) for name in ("blocks", "json", "md", "html", "junit", "summary")), 3)
    # the action's write_reports as the playbook runs it (all four files into a directory): wall time, and CPU time
    # of this process and of any child it forks (the work tree writes report.json in a forked child)
    action = _action_module()
    if action is not None and hasattr(action, "write_reports"):
        directory = tempfile.mkdtemp(prefix="bench-report-files-", dir=os.path.dirname(result_file))
        try:
            wall, cpu, children = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
            files = action.write_reports(report, directory)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out["write_wall_s"] = round(time.perf_counter() - wall, 3)
            out["write_cpu_s"] = round(time.process_time() - cpu + after.ru_utime + after.ru_stime
                                       - children.ru_utime - children.ru_stime, 3)
            for path in files.values():
                out["sha256"][os.path.basename(path)] = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    register = registered_cost(report)
    if register is not None:
        out.update(register)
    out["task_s"] = round(sum(out.get(name, 0) for name in ("decode_audit_s", "write_cpu_s", "register_s")), 3)
    out["rss_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    return out


def _digest(report: dict) -> str:
    """The sha256 of a report's canonical JSON (the same report whether its strings are shared or not)."""
    return hashlib.sha256(json.dumps(report, sort_keys=True).encode("utf-8")).hexdigest()


def as_registered(hosts: dict) -> dict | None:
    """The synthetic hosts with their facts as ``rdma_audit_gather`` returns them (``compress: true``): the compressed
    JSON text the audit decodes per host.  One text per distinct facts object (the hosts of a variant share the
    string, as they shared the decoded facts); None for a tree whose audit cannot decode such a text."""
    # pylint: disable=import-outside-toplevel
    try:
        from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
    except ImportError:
        return None
    texts = {}
    out = {}
    for name, spec in hosts.items():
        spec = dict(spec)
        facts = spec.pop("facts")
        if facts is not None:
            if id(facts) not in texts:
                texts[id(facts)] = _facts_text.deflate(json.dumps(facts, separators=(",", ":")))
            spec["facts"], spec["facts_json_zlib"] = None, texts[id(facts)]
        else:
            spec["facts"] = None
        out[name] = spec
    return out


def registered_cost(report: dict) -> dict | None:
    """What ansible-core does with the action's result (the report, its hosts as the tree's action returns them)
    before a later task can read ``rdma_audit_report``, with its own functions: the worker's pickle of the result
    to the main process (the results queue), the main process's unpickling, and ``register``'s
    ``strip_internal_keys(module_response_deepcopy(result))`` (``StrategyBase._process_pending_results``).  CPU
    seconds."""
    # pylint: disable=import-outside-toplevel
    try:
        from ansible.vars.clean import module_response_deepcopy, strip_internal_keys
    except ImportError:
        return None
    action = _action_module()
    hosts = report["hosts"]
    if action is not None and hasattr(action, "frozen_checks"):  # the hosts as the tree's action returns them
        hosts = action.frozen_checks(hosts)
    result = dict(report, hosts=hosts, changed=False, files={}, summary_lines=[], _ansible_no_log=True)
    start = time.process_time()
    data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    pickled = time.process_time()
    copy_ = pickle.loads(data)
    unpickled = time.process_time()
    strip_internal_keys(module_response_deepcopy(copy_))
    done = time.process_time()
    out = {"pickle_s": round(pickled - start, 3), "unpickle_s": round(unpickled - pickled, 3),
           "deepcopy_s": round(done - unpickled, 3), "register_s": round(done - start, 3),
           "pickle_mb": round(len(data) / 1e6, 1)}
    if action is not None and hasattr(action, "without_checks"):  # the same with checks: false
        del data, copy_
        start = time.process_time()
        result = dict(result, hosts=action.without_checks(report["hosts"]))
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        strip_internal_keys(module_response_deepcopy(pickle.loads(data)))
        out["register_no_checks_s"] = round(time.process_time() - start, 3)
        out["pickle_no_checks_mb"] = round(len(data) / 1e6, 1)
    return out


def _tree_hosts(result_file: str, count: int) -> dict:
    """The synthetic hosts with the desired state of the tree imported (its role defaults)."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit, _defaults

    defaults = _defaults.role_defaults()
    desired = dict((var, defaults.get(var)) for var in _audit.DESIRED_VARS)
    result = json.loads(pathlib.Path(result_file).read_text(encoding="utf-8"))
    return synthetic_hosts(result, count, desired)


def save_report(tree: str, result_file: str, count: int, report_file: str) -> dict:
    """Pickle the tree's comparison of ``count`` synthetic hosts into ``report_file``: the report every tree's
    writers write (runs in its own process)."""
    sys.path[:0] = [tree, str(COLLECTIONS)]
    # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit

    report = _audit.audit(_tree_hosts(result_file, count), generated="2026-12-02T00:00:00Z")
    with open(report_file, "wb") as handle:
        pickle.dump(report, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return {"tree": tree, "hosts": count, "checks": sum(len(h["checks"]) for h in report["hosts"].values())}


def _action_module():
    """The tree's rdma_audit_report action module (its ``write_reports``), or None when it has none."""
    try:
        # pylint: disable=import-outside-toplevel
        from ansible_collections.rdma.k8s_node.plugins.action import rdma_audit_report
    except ImportError:
        return None
    return rdma_audit_report


def module_result(work: pathlib.Path, archetype: str) -> pathlib.Path:
    """One rdma_facts result of the fleet's node (kept in ``work``)."""
    path = work / "result.json"
    if not path.exists():
        sys.path[:0] = [str(COLLECTIONS), str(REPO / "tests"), str(BENCH)]
        import bench_fleet  # pylint: disable=import-outside-toplevel
        import bench_layer_cost  # pylint: disable=import-outside-toplevel

        node = bench_fleet.render_template(archetype, work)
        ansiballz = bench_layer_cost.build_ansiballz(COLLECTIONS, node, work / "az")
        path.write_text(bench_layer_cost.run_module(ansiballz)[1], encoding="utf-8")
    return path


ROWS = [("audit_s", "comparison (_audit.audit), s"),
        ("decode_audit_s", "decoding + comparison (as the action), s"),
        ("decoded_same", "the same report decoded per host"), ("checks_per_host", "checks per host (its comparison)"),
        ("json_s", "report.json, s"), ("blocks_s", "document model (.md, .html), s"), ("md_s", "report.md, s"),
        ("html_s", "report.html, s"), ("junit_s", "junit.xml, s"), ("summary_s", "summary lines, s"),
        ("report_s", "report files together, s"), ("write_cpu_s", "write_reports (4 files), CPU s"),
        ("write_wall_s", "write_reports (4 files), wall s"), ("pickle_s", "result pickled (worker), s"),
        ("unpickle_s", "result unpickled (main), s"), ("deepcopy_s", "register: deepcopy + strip (main), s"),
        ("register_s", "ansible-core's result handling, s"), ("task_s", "report task (decode .. register), CPU s"),
        ("pickle_mb", "result pickled, MB"), ("register_no_checks_s", "the same with checks: false, s"),
        ("pickle_no_checks_mb", "result pickled with checks: false, MB"), ("json_mb", "report.json, MB"), ("md_mb", "report.md, MB"),
        ("html_mb", "report.html, MB"), ("junit_mb", "junit.xml, MB"), ("rss_inputs_mb", "peak RSS, inputs built, MB"),
        ("rss_peak_mb", "peak RSS, end, MB")]


def _run_child(arguments: list[str]) -> dict:
    """This script in a child process; the last line it prints, as JSON."""
    done = subprocess.run([sys.executable, __file__] + arguments, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError("report bench %s failed:\n%s" % (" ".join(arguments[:2]), done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_digests(measured: dict) -> None:
    """The sha256 of each tree's texts and files, and whether the trees wrote the same bytes."""
    labels = list(measured)
    names = sorted(set(n for k in labels for n in measured[k].get("sha256", {}) if n not in ("audit", "decode_audit")))
    print("%-34s %s" % ("sha256 (the same report)", " ".join("%12s" % k for k in labels)))
    for name in names:
        values = [measured[k]["sha256"].get(name) for k in labels]
        verdict = ("identical" if len(set(values)) == 1 else "DIFFERENT") if len(labels) > 1 else ""
        print("%-34s %s %s" % (name, " ".join("%12s" % (v or "-")[:12] for v in values), verdict))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", default="10000", help="comma-separated host counts")
    parser.add_argument("--baseline", help="revision to compare with (git archive); none (or no option): the work tree "
                                           "alone")
    parser.add_argument("--tree", help="collections directory of the tree to measure (default: this work tree)")
    parser.add_argument("--archetype", default="dgx-h100")
    parser.add_argument("--workdir", help="keep the node, the module result and the baseline tree here")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--child", nargs=4, metavar=("TREE", "RESULT", "HOSTS", "REPORT"), help=argparse.SUPPRESS)
    parser.add_argument("--save-report", nargs=4, metavar=("TREE", "RESULT", "HOSTS", "REPORT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for option, func in ((args.child, child), (args.save_report, save_report)):
        if option:
            print(json.dumps(func(option[0], option[1], int(option[2]), option[3])))
            return 0
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="bench-report-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = module_result(work, args.archetype)
        trees = {"tree": str(pathlib.Path(args.tree).resolve()) if args.tree else str(COLLECTIONS)}
        if args.baseline and args.baseline != "none":
            sys.path[:0] = [str(BENCH)]
            import bench_layer_cost  # pylint: disable=import-outside-toplevel
            trees = {"baseline": str(bench_layer_cost.export_tree(args.baseline, work / ("tree-" + args.baseline))),
                     **trees}
        rows = []
        for count in (int(n) for n in args.hosts.split(",")):
            report_file = str(work / ("report-%d.pickle" % count))
            _run_child(["--save-report", next(iter(trees.values())), str(result), str(count), report_file])
            measured = {}
            for key, tree in trees.items():
                measured[key] = _run_child(["--child", tree, str(result), str(count), report_file])
                print("%-8s N=%-6d %s" % (key, count, json.dumps(measured[key])), flush=True)
            rows.append(measured)
            labels = list(trees)
            print("\nN = %d (%s; the report files: %s's comparison)" % (count, ", ".join(
                "%s: %s" % (k, args.baseline if k == "baseline" else args.tree or "work tree") for k in labels), labels[0]))
            print("%-34s %s %s" % ("", " ".join("%12s" % k for k in labels), "   ratio" if len(labels) == 2 else ""))
            for key, label in ROWS:
                values = [measured[k].get(key) for k in labels]
                ratio = ("%7.2fx" % (values[1] / values[0]) if len(values) == 2 and values[0] and values[1] is not None
                         else "")
                print("%-34s %s %s" % (label, " ".join("%12s" % ("-" if v is None else v) for v in values), ratio))
            print_digests(measured)
            os.unlink(report_file)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
