"""The fleet benchmark's own plumbing: inventory, host roots, the CPU logs it parses.  Fast; no timing asserted.

    .venv/bin/python -m pytest -q tests/bench
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_fleet as B  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # noqa: E402
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather  # noqa: E402


def test_fleet_roots_are_distinct_and_read_like_the_rendered_node(tmp_path):
    roots = B.build_fleet(tmp_path, "roce-cx6dx", 3)
    assert [r.name for r in roots] == ["node0000", "node0001", "node0002"]
    assert len(set(map(str, roots))) == 3
    # a second build reuses the hosts and adds only the missing ones
    again = B.build_fleet(tmp_path, "roce-cx6dx", 4)
    assert again[:3] == roots and (again[3] / "sys").is_dir()
    reference = gather(HostRoot(str(tmp_path / "tree-roce-cx6dx")))
    facts = gather(HostRoot(str(roots[1])))
    assert facts["problems"] == []
    assert [d["name"] for d in facts["devices"]] == [d["name"] for d in reference["devices"]] == ["mlx5_0", "mlx5_1"]
    assert facts["gpu_nic_affinity"] == reference["gpu_nic_affinity"]


def test_hardlink_roots(tmp_path):
    roots = B.build_fleet(tmp_path, "roce-cx6dx", 2, roots="hardlink")
    tree = tmp_path / "tree-roce-cx6dx"
    probe = "sys/class/net/ens1f0np0/mtu"
    assert os.stat(roots[0] / probe).st_ino == os.stat(tree / probe).st_ino  # same file, own directory entries
    assert not os.path.islink(roots[0] / "sys")
    with pytest.raises(ValueError):
        B.build_fleet(tmp_path, "roce-cx6dx", 3, roots="overlay")


def test_inventory_puts_connection_on_the_fleet_group_only(tmp_path):
    roots = [tmp_path / "a", tmp_path / "b"]
    path = B.write_inventory(tmp_path / "inv.yml", roots, tmp_path / "py", {"sriov_pfs": []})
    inventory = yaml.safe_load(path.read_text())
    assert "vars" not in inventory["all"]  # the implicit localhost (reports) keeps the controller's Python
    fleet = inventory["all"]["children"]["fleet"]
    assert fleet["hosts"] == {"node0000": {"rdma_audit_host_root": str(roots[0])},
                              "node0001": {"rdma_audit_host_root": str(roots[1])}}
    assert fleet["vars"] == {"ansible_connection": "local", "ansible_python_interpreter": str(tmp_path / "py"),
                             "sriov_pfs": []}


def test_timed_interpreter_logs_each_process(tmp_path):
    log = tmp_path / "cpu.log"
    log.touch()
    wrapper = B.write_timed_interpreter(tmp_path / "python-timed", log)
    for code in ("print(sum(range(10**6)))", "import sys; sys.exit(3)"):
        done = subprocess.run([str(wrapper), "-c", code], capture_output=True, text=True, check=False)
        assert done.returncode in (0, 3)
    assert done.returncode == 3  # the module's exit status comes through
    parsed = B.parse_module_cpu(log.read_text())
    assert parsed["calls"] == 2
    assert parsed["cpu"] >= 0.0 and parsed["elapsed"] > 0.0


def test_timed_interpreter_measures_to_the_millisecond(tmp_path):
    """What the process used, as its own rusage says, not centiseconds cut short (GNU time lost ~9 ms a call)."""
    log = tmp_path / "cpu.log"
    log.touch()
    wrapper = B.write_timed_interpreter(tmp_path / "python-timed", log)
    burn = ("import resource, sys\n"
            "def used():\n"
            "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    return r.ru_utime + r.ru_stime\n"
            "while used() < 0.047:\n"
            "    pass\n"
            "print('%.6f' % used())\n"
            "print('to stderr', file=sys.stderr)\n")
    own = []
    for _run in range(5):
        done = subprocess.run([str(wrapper), "-c", burn], capture_output=True, text=True, check=True)
        own.append(float(done.stdout))
        assert done.stderr == "to stderr\n"  # the process's stderr is its own, the timing goes to the log
    lines = log.read_text().splitlines()
    assert len(lines) == 5 and all(len(field.split(".")[1]) == 3 for line in lines for field in line.split())
    logged = B.parse_module_cpu("\n".join(lines))["cpu"]
    # the log counts the whole process, its start-up and exit too: never less than what it measured of itself, and
    # at most what a Python that imports nothing adds to that (under 60 ms a process even on a loaded machine)
    assert sum(own) <= logged + 0.005 * 5
    assert logged - sum(own) < 0.060 * 5


def test_timed_interpreter_reads_a_piped_module_buffered(tmp_path):
    """The node's Python does not inherit PYTHONUNBUFFERED, which would make it read stdin byte by byte."""
    log = tmp_path / "cpu.log"
    log.touch()
    wrapper = B.write_timed_interpreter(tmp_path / "python-timed", log)
    script = "import os, sys\nprint(repr(os.environ.get('PYTHONUNBUFFERED')), sys.stdout.write_through)\n"
    done = subprocess.run([str(wrapper), "-"], input=script, capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert done.stdout.split() == ["None", "False"]  # -u / PYTHONUNBUFFERED make stdout write_through


def test_parse_module_cpu_both_formats():
    text = ("0.31 0.04 0.52\nCommand exited with non-zero status 1\n0.20 0.01 0.30\n"
            "0m0.100s 0m0.020s\n garbage\n")
    parsed = B.parse_module_cpu(text)
    assert parsed == {"calls": 3, "user": 0.61, "sys": 0.07, "cpu": 0.68, "elapsed": 0.82}


def test_parse_recap_and_measurement():
    text = ("PLAY RECAP ****\n"
            "node0000                   : ok=3    changed=0    unreachable=0    failed=0    skipped=2    rescued=0    ignored=0\n"
            "node0001                   : ok=2    changed=1    unreachable=1    failed=0    skipped=0    rescued=0    ignored=4\n")
    recap = B.parse_recap(text)
    assert recap["node0001"] == {"ok": 2, "changed": 1, "unreachable": 1, "failed": 0, "skipped": 0, "rescued": 0,
                                 "ignored": 4}
    row = B.measurement("audit", 2, 10.0, 6.0, {"calls": 2, "cpu": 1.0, "elapsed": 1.5}, recap, 0)
    assert (row["cpu_controller_s"], row["controller_ms_per_host"], row["module_calls_per_host"]) == (5.0, 2500.0, 1.0)
    assert (row["changed"], row["failed"], row["module_ms_per_call"]) == (1, 1, 500.0)


def test_ratios_and_table():
    audit = B.measurement("audit", 10, 10.0, 6.0, {"calls": 10, "cpu": 4.0, "elapsed": 5.0}, {}, 0)
    base = B.measurement("baseline", 10, 40.0, 60.0, {"calls": 290, "cpu": 40.0, "elapsed": 50.0}, {}, 0)
    big = B.measurement("audit", 1000, 100.0, 600.0, {"calls": 1000, "cpu": 400.0, "elapsed": 500.0}, {}, 0)
    rows = [base, audit, big]
    B.ratios(rows)
    assert audit["vs_baseline"] == {"controller_cpu_x": 10.0, "total_cpu_x": 10.0, "wall_x": 4.0,
                                    "module_calls_x": 29.0}
    assert "vs_baseline" not in big
    text = B.table(rows, 100, [10, 1000])
    assert "| audit | 10 |" in text and "10.0×" in text
    assert "Baseline capped at 100 hosts (--baseline-max): not run for N = 1000." in text


def test_sriov_pfs_of_a_rendered_node(tmp_path):
    roots = B.build_fleet(tmp_path, "dgx-h100", 1)
    pfs = B.sriov_pfs(roots[0], 8)
    assert len(pfs) == 8 and all(pf["num_vfs"] == 8 for pf in pfs)  # the 8 InfiniBand rails, not the Ethernet cards
    assert B.sriov_pfs(roots[0], 0) == []


def test_run_playbook_measures_each_runs_own_peak_memory_and_cpu(tmp_path):
    """wait4 per run: a later, smaller run does not report an earlier run's peak (RUSAGE_CHILDREN would).

    A child's ru_maxrss also counts the memory it shared with this process between fork and exec (the kernel keeps
    the old mm's high-water mark at exec), so the big run allocates 200 MiB over this process's own size."""
    log = tmp_path / "cpu.log"
    with open("/proc/self/statm", encoding="ascii") as statm:
        own_mb = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    size = int(own_mb) + 200
    big = B.run_playbook("big", [sys.executable, "-c", "x = bytearray(%d * 2 ** 20); x[::4096] = b'1' * len(x[::4096])" % size],
                         dict(os.environ), tmp_path, log, 1)
    small = B.run_playbook("small", [sys.executable, "-c", "sum(range(10 ** 6))"], dict(os.environ), tmp_path, log, 1)
    assert big["peak_rss_mb"] >= size > small["peak_rss_mb"]
    assert big["rc"] == small["rc"] == 0 and small["cpu_total_s"] > 0


def test_versus_revision_lines():
    ours = dict(B.measurement("audit", 100, 10.0, 6.0, {"calls": 100, "cpu": 2.0, "elapsed": 5.0}, {}, 0), peak_rss_mb=200.0)
    theirs = dict(B.measurement("audit@abc", 100, 20.0, 10.0, {"calls": 100, "cpu": 2.0, "elapsed": 5.0}, {}, 0),
                  peak_rss_mb=400.0)
    (line,) = B.versus_revision([theirs, ours])
    assert line == ("N = 100, work tree / abc: controller CPU per host 40.0 / 80.0 ms = 0.50x, wall 0.50x, "
                    "peak RSS 200 / 400 MB = 0.50x")


def test_report_bench_synthetic_fleet_is_mixed():
    import bench_report  # pylint: disable=import-outside-toplevel
    facts = {"persisted": {}, "layers": {"health": {"nics": [{"name": "mlx5_0", "fw_ver": "28.39.1002"}]}}, "problems": []}
    hosts = bench_report.synthetic_hosts({"ansible_facts": {"rdma": facts}}, 1000, {"x": 1})
    assert len(hosts) == 1000
    kinds = [("down" if h["facts"] is None else "unreadable" if h["facts"]["problems"] else
              "old-fw" if h["facts"]["layers"]["health"]["nics"][0]["fw_ver"] != "28.39.1002" else
              "reboot" if h["facts"]["persisted"].get("kernel_cmdline") else "plain") for h in hosts.values()]
    counts = dict((k, kinds.count(k)) for k in set(kinds))
    assert counts == {"down": 20, "unreadable": 10, "old-fw": 20, "reboot": 79, "plain": 871}
    assert sum(1 for name in hosts if "<script>" in name or "\n" in name or "|" in name or "`" in name) == 10
    assert facts["layers"]["health"]["nics"][0]["fw_ver"] == "28.39.1002"  # the input is not changed


def test_strategy_env():
    assert B.strategy_env(None) == {}  # the config's strategy: the environment is not touched
    assert B.strategy_env("linear") == {"ANSIBLE_STRATEGY": "linear"}
    assert B.strategy_env("mitogen_linear", "/v/ansible_mitogen/plugins/strategy") == {
        "ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_STRATEGY_PLUGINS": "/v/ansible_mitogen/plugins/strategy"}
    with pytest.raises(ValueError, match="mitogen_free needs the ansible_mitogen/plugins/strategy directory"):
        B.strategy_env("mitogen_free")
    with pytest.raises(ValueError, match="got 'linear;rm'"):
        B.strategy_env("linear;rm")


def test_strategy_env_reaches_ansible_env(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_STRATEGY", raising=False)
    env = B.ansible_env(tmp_path, None, B.strategy_env("mitogen_linear", "/p"))
    assert (env["ANSIBLE_STRATEGY"], env["ANSIBLE_STRATEGY_PLUGINS"]) == ("mitogen_linear", "/p")
    assert "ANSIBLE_STRATEGY" not in B.ansible_env(tmp_path, None, B.strategy_env(None))


def test_mitogen_strategy_dir_of_an_interpreter_without_it():
    done = subprocess.run([sys.executable, "-c", "import ansible_mitogen"], capture_output=True, check=False)
    found = B.mitogen_strategy_dir(sys.executable)
    if done.returncode:
        assert found is None
    else:
        assert os.path.isfile(os.path.join(found, "mitogen_linear.py"))
    assert B.mitogen_strategy_dir("/bin/false") is None


def test_run_names_and_file_names():
    assert B.run_name("audit") == "audit"
    assert B.run_name("audit", "abc", "mitogen_linear") == "audit@abc/mitogen_linear"
    assert B.run_name("baseline", strategy="linear") == "baseline/linear"
    assert B.file_name("audit@abc/mitogen_linear") == "audit-abc-mitogen_linear"


def test_host_interpreters_give_each_host_a_path_of_its_own(tmp_path):
    log = tmp_path / "cpu.log"
    log.touch()
    wrapper = B.write_timed_interpreter(tmp_path / "python-timed", log)
    own = B.host_interpreters(wrapper, 3)
    assert [p.name for p in own] == ["node0000", "node0001", "node0002"] and len(set(own)) == 3
    assert B.host_interpreters(wrapper, 2) == own[:2]  # reused
    done = subprocess.run([str(own[1]), "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    assert done.stdout == "42\n" and B.parse_module_cpu(log.read_text())["calls"] == 1
    inventory = yaml.safe_load(B.write_inventory(tmp_path / "inv.yml", [tmp_path / "a", tmp_path / "b"], wrapper,
                                                 interpreters=own[:2]).read_text())
    fleet = inventory["all"]["children"]["fleet"]
    assert fleet["hosts"]["node0001"] == {"rdma_audit_host_root": str(tmp_path / "b"),
                                          "ansible_python_interpreter": str(own[1])}
    assert fleet["vars"]["ansible_python_interpreter"] == str(wrapper)


def test_report_digests_mask_the_time_stamps_only(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for directory, stamp in ((one, "2026-12-03T13:14:26Z"), (two, "2026-12-04T01:02:03Z")):
        directory.mkdir()
        (directory / "report.json").write_text('{"generated": "%s", "hosts": {"n": "ok"}}' % stamp)
        (directory / "junit.xml").write_text("<testsuites/>")
    first, second = B.report_digests(one), B.report_digests(two)
    assert first == second and first["report.md"] is None and first["report.json"]
    (two / "report.json").write_text('{"generated": "2026-12-04T01:02:03Z", "hosts": {"n": "drift"}}')
    assert B.report_digests(two)["report.json"] != first["report.json"]
    assert B.masked_report("at 2026-12-03T13:14:26Z, 2026-12-03") == "at GENERATED, 2026-12-03"


def test_versus_strategy_lines_and_ratios_per_strategy():
    def row(name, strategy, hosts, cpu, digests, modules=2.0):
        out = dict(B.measurement(name, hosts, cpu, cpu + modules, {"calls": hosts, "cpu": modules, "elapsed": 1.0},
                                 {}, 0), peak_rss_mb=100.0 * cpu, strategy=strategy)
        out["report_digests"] = digests
        return out
    same = {"report.json": "a", "report.md": "b", "report.html": None, "junit.xml": "c"}
    rows = [row("baseline/linear", "linear", 10, 40.0, {}, 40.0), row("audit/linear", "linear", 10, 4.0, same),
            row("audit/mitogen_linear", "mitogen_linear", 10, 2.0, same),
            row("audit/mitogen_free", "mitogen_free", 10, 8.0, dict(same, **{"report.md": "x"})),
            row("audit/linear", "linear", 100, 1.0, same)]
    lines = B.versus_strategy(rows)
    assert lines == [
        "N = 10, audit/mitogen_linear / audit/linear: controller CPU per host 200.0 / 400.0 ms = 0.50x, wall 0.50x, "
        "peak RSS 200 / 400 MB = 0.50x; report.json, report.md, junit.xml identical (time stamps masked)",
        "N = 10, audit/mitogen_free / audit/linear: controller CPU per host 800.0 / 400.0 ms = 2.00x, wall 2.00x, "
        "peak RSS 800 / 400 MB = 2.00x; report files differ: report.md"]
    assert B.versus_strategy(rows[-1:]) == [] and B.versus_strategy([dict(rows[1], strategy=None)]) == []
    B.ratios(rows)
    assert rows[1]["vs_baseline"]["controller_cpu_x"] == 10.0  # against the baseline of its own strategy
    assert "vs_baseline" not in rows[2] and "vs_baseline" not in rows[4]


def test_cpu_cgroup_counts_a_process_nobody_waited_for(tmp_path):
    """A grandchild whose parent exits unreaped is reparented out of the run's tree: wait4 misses its CPU."""
    reason = B.cgroup_cpu_unavailable()
    if reason:
        pytest.skip(reason)
    log = tmp_path / "cpu.log"
    burn = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    t = time.process_time()\n"
            "    while time.process_time() - t < 0.5:\n"
            "        pass\n"
            "    os._exit(0)\n")
    row = B.run_playbook("orphan", [sys.executable, "-c", burn], dict(os.environ), tmp_path, log, 1, cgroup=True)
    assert row["rc"] == 0 and row["cgroup_procs_left"] == 0
    assert row["cpu_total_cgroup_s"] >= row["cpu_total_s"] + 0.45
    assert "cgroup CPU" in B.cgroup_note(row) and B.cgroup_note({"hosts": 1}) == ""
    # with the nodes' commands in a group of their own, the run's group holds the controller alone
    both = {"hosts": 2, "cpu_total_cgroup_s": 0.5, "cpu_total_s": 3.0, "cpu_modules_s": 2.0, "cpu_node_side_s": 2.4}
    assert "controller 250.0 ms/host" in B.cgroup_note(both)
    assert "controller 0.0 ms/host" in B.cgroup_note(dict(both, cpu_node_side_s=None))  # 0.5 - 2.0: the old split
    assert not list(B.CPUACCT.glob("rdma-bench-%d-orphan" % os.getpid()))  # removed once empty


def test_node_shell_counts_the_nodes_commands_as_the_nodes(tmp_path):
    """ANSIBLE_EXECUTABLE reaches the real local connection of this ansible-core: a module's command (and its
    shell) lands in the nodes' cgroup, the controller keeps only its own processes' CPU."""
    reason = B.cgroup_cpu_unavailable()
    if reason:
        pytest.skip(reason)
    log = tmp_path / "cpu.log"
    nodes = B.CpuCgroup("nodes-test")
    try:
        env = B.ansible_env(tmp_path, None)
        env["ANSIBLE_EXECUTABLE"] = str(B.node_shell(tmp_path / "node-sh", nodes))
        burn = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node0": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}), encoding="utf-8")
        argv = [str(B.DEFAULT_VENV / "bin" / "ansible"), "-i", str(inventory), "node0", "-m", "ansible.builtin.command",
                "-a", json.dumps({"argv": [sys.executable, "-c", burn]})]
        row = B.run_playbook("adhoc", argv, env, tmp_path, log, 1)
    finally:
        node_cpu, left = nodes.finish()
    assert row["rc"] == 0, pathlib.Path(row["log"]).read_text(encoding="utf-8")
    assert left == 0
    before = dict(row)
    B.node_side(row, node_cpu)
    # the module's Python, the shell and the burning command are the node's: at least the 0.6 s burnt
    assert row["cpu_node_side_s"] >= 0.6
    assert row["cpu_controller_s"] == pytest.approx(row["cpu_total_s"] - node_cpu, abs=0.002)
    # the former split (no timed interpreter here) counted all of it as the controller's
    assert row["cpu_controller_with_shells_s"] == before["cpu_controller_s"] >= row["cpu_controller_s"] + 0.6
    assert "node commands" in B.node_note(row) and B.node_note(before) == ""
    assert "| adhoc | 1 |" in B.table([row], 100, [1]) and "(%s)" % before["controller_ms_per_host"] in B.table(
        [row], 100, [1])


def test_ssh_target_inventory_and_rows(tmp_path):
    """--ssh: every host at one sshd, each with a master connection of its own; the controller is the cgroup's."""
    target = B.ssh_target("root@127.0.0.1:2222", "/keys/id")
    assert target == {"user": "root", "host": "127.0.0.1", "port": 2222, "key": "/keys/id"}
    for bad in ("127.0.0.1:22", "root@host", "root@host:0", "root@host:99999", "a b@host:22", ""):
        with pytest.raises(ValueError, match="USER@HOST:PORT"):
            B.ssh_target(bad)
    roots = [tmp_path / "n0", tmp_path / "n1"]
    path = B.write_inventory(tmp_path / "inventory.yml", roots, tmp_path / "python-timed", ssh=target)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))["all"]["children"]["fleet"]
    assert data["vars"]["ansible_connection"] == "ssh" and data["vars"]["ansible_port"] == 2222
    assert data["vars"]["ansible_ssh_private_key_file"] == "/keys/id"
    paths = [host["ansible_control_path"] for host in data["hosts"].values()]
    assert len(set(paths)) == 2 and all(pathlib.Path(p).parent.is_dir() for p in paths)
    local = B.measurement("audit", 10, 10.0, 6.0, {"calls": 10, "cpu": 4.0, "elapsed": 5.0}, {}, 0)
    B.node_side(local, 4.5)  # controller 1.5 s: 150 ms a host
    over = B.measurement("audit-ssh", 10, 12.0, 1.0, {"calls": 10, "cpu": 4.0, "elapsed": 5.0}, {}, 0)
    over["cpu_total_cgroup_s"] = 2.0  # wait4 saw 1.0 s: the daemonised masters are the cgroup's only
    B.over_ssh(over)
    assert (over["cpu_controller_s"], over["controller_ms_per_host"], over["cpu_total_s"]) == (2.0, 200.0, 6.0)
    assert B.cgroup_note(over) == ""
    assert B.versus_ssh([local, over]) == [
        "N = 10, over SSH / local connection: controller CPU per host 200.0 / 150.0 ms = 1.33x (the SSH clients "
        "and master connections: 50.0 ms a host), wall 1.20x"]
    assert "| audit-ssh | 10 | 12.0 | 6.0 (2.0 + 4.0) | 200.0 |" in B.table([local, over], 100, [10])


def test_versus_floor_splits_the_audit_into_ansible_core_and_the_collection():
    def row(name, controller):
        return dict(B.measurement(name, 100, 10.0, controller + 2.0, {"calls": 100, "cpu": 2.0, "elapsed": 5.0}, {}, 0),
                    peak_rss_mb=100.0)
    rows = [row("floor", 4.0), row("floor-facts", 5.0), row("audit", 6.5), row("audit@abc", 7.0)]
    lines = B.versus_floor(rows)
    assert lines == [
        "N = 100, audit: controller CPU per host 65.0 ms = ansible-core's floor 40.0 (one ping task) + the facts module "
        "and its result 10.0 (one rdma_facts task: 50.0) + the collection's own 15.0 (the gather action, the "
        "comparison, the report); floor / audit = 0.77",
        "N = 100, audit@abc: controller CPU per host 70.0 ms = ansible-core's floor 40.0 (one ping task) + the facts "
        "module and its result 10.0 (one rdma_facts task: 50.0) + the collection's own 20.0 (the gather action, the "
        "comparison, the report); floor / audit@abc = 0.71"]
    # without both floors of the same N there is nothing to split
    assert B.versus_floor([row("floor", 4.0), row("audit", 6.5)]) == []


def test_floor_playbooks_run_one_module_task_per_host(tmp_path):
    """Both floors are real runs on the fleet's inventory and configuration: one module call a host, every host
    ok (floor-facts' call is rdma_facts with the gather's arguments)."""
    roots = B.build_fleet(tmp_path, "roce-cx6dx", 2, roots="hardlink")
    for kind in ("floor", "floor-facts"):
        row = B.fleet_run(kind, tmp_path, roots, B.DEFAULT_CONFIG, None, python=B.node_python())
        assert row["rc"] == 0, pathlib.Path(row["log"]).read_text(encoding="utf-8")[-3000:]
        assert (row["recap_hosts"], row["failed"], row["module_calls"]) == (2, 0, 2)
        assert row["findings_per_host"] is None  # no report: the floors compare nothing
