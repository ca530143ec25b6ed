"""rdma_perftest: the probe on a sysfs tree shaped like the VM's rxe (read there), and the process control of
server, client and stop with stand-in programs - a server that listens, one that never does, a client that
outlives its timeout - so that nothing is left running.  Real ib_write_bw runs in molecule/kernel_vm."""

import json
import os
import stat
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import rdma_perftest
from unit.plugins.modules.harness import ModuleFail, run_module


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def run(monkeypatch, check=False, expect=None, **args):
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, rdma_perftest.main, args, check=check, **kwargs)


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def sysfs(tmp_path):
    """rxeva over veth va as the VM showed it (port down once its peer is down); GID 2 is empty (EINVAL attrs)."""
    root = tmp_path / "root"
    port = root / "sys/class/infiniband/rxeva/ports/1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("3: Disabled\n")
    (port / "link_layer").write_text("Ethernet\n")
    (port / "rate").write_text("10 Gb/sec (1X FDR10)\n")
    gids = ["fe80:0000:0000:0000:94f7:03ff:fedd:6111", "0000:0000:0000:0000:0000:ffff:c0a8:4d01",
            "0000:0000:0000:0000:0000:0000:0000:0000"]
    for index, gid in enumerate(gids):
        (port / "gids" / str(index)).write_text(gid + "\n")
        if index < 2:
            (port / "gid_attrs/types" / str(index)).write_text("RoCE v2\n")
            (port / "gid_attrs/ndevs" / str(index)).write_text("va\n")
    net = root / "sys/class/net/va"
    net.mkdir(parents=True)
    (net / "operstate").write_text("lowerlayerdown\n")
    (net / "mtu").write_text("1500\n")
    return root


def test_probe_reads_the_port_and_chooses_the_ipv4_gid(monkeypatch, sysfs, tmp_path):
    result = run(monkeypatch, action="probe", host_root=str(sysfs), binary=str(tmp_path / "missing"),
                 devices=[{"device": "rxeva"}, {"device": "rxe9"}, {"device": "rxeva", "gid_index": 0}])
    first, missing, fixed = result["ports"]
    assert (first["state"], first["phys_state"], first["operstate"], first["mtu"]) == \
        ("DOWN", "Disabled", "lowerlayerdown", 1500)
    assert (first["gid_index"], first["ipv4"], first["netdev"], first["rate_gbps"]) == (1, "192.168.77.1", "va", 10.0)
    assert [g["index"] for g in first["gids"]] == [0, 1]
    assert missing["exists"] is False and "no port 1" in missing["gid_problem"]
    assert fixed["gid_index"] == 0 and "not the RoCE v2 IPv4 entry" in fixed["gid_problem"]
    assert result["perftest"]["path"] is None
    assert result["pod"] == {"status": "skipped", "reason": "no pod_image given"}
    assert result["changed"] is False


def test_probe_without_crictl_says_so(monkeypatch, sysfs):
    result = run(monkeypatch, action="probe", host_root=str(sysfs), pod_image="busybox", crictl="/nonexistent/crictl")
    assert result["pod"]["status"] == "skipped" and "no CRI client" in result["pod"]["reason"]


def test_server_listens_then_stop_ends_it_and_returns_its_output(monkeypatch, tmp_path):
    fake = script(tmp_path, "fake_bw", "echo '* Waiting for client to connect... *'\nexec sleep 60\n")
    run_dir = str(tmp_path / "run")
    job = {"id": "a--b--r0", "device": "rxe0", "tcp_port": 18515}
    started = run(monkeypatch, action="server", binary=fake, run_dir=run_dir, jobs=[job], start_timeout=10)
    entry = started["jobs"][0]
    assert entry["status"] == "listening" and started["changed"] is True
    assert alive(entry["pid"])
    stopped = run(monkeypatch, action="stop", run_dir=run_dir, jobs=[{"id": job["id"]}])
    assert stopped["jobs"][0]["was_running"] is True, stopped["jobs"][0]
    assert "Waiting for client" in stopped["jobs"][0]["output"]
    time.sleep(0.3)
    assert not alive(entry["pid"]) and os.listdir(run_dir) == []


def test_server_that_never_listens_is_killed(monkeypatch, tmp_path):
    hang = script(tmp_path, "hang_bw", "echo starting\nexec sleep 60\n")
    result = run(monkeypatch, action="server", binary=hang, run_dir=str(tmp_path / "run"), start_timeout=1,
                 jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18599}])
    entry = result["jobs"][0]
    assert entry["status"] == "not_started" and entry["output"] == "starting\n"
    assert not alive(entry["pid"])


def test_server_that_exits_reports_its_code(monkeypatch, tmp_path):
    bad = script(tmp_path, "bad_bw", "echo 'IB device rxe9 not found' >&2\nexit 1\n")
    entry = run(monkeypatch, action="server", binary=bad, run_dir=str(tmp_path / "run"),
                jobs=[{"id": "x", "device": "rxe9", "tcp_port": 18599}])["jobs"][0]
    assert entry["status"] == "exited" and entry["rc"] == 1 and "not found" in entry["output"]


def test_client_is_killed_at_its_timeout(monkeypatch, tmp_path):
    slow = script(tmp_path, "slow_bw", "echo connecting\nsleep 60\n")
    entry = run(monkeypatch, action="client", binary=slow, timeout=1,
                jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18515, "server_address": "192.0.2.1"}])["jobs"][0]
    assert entry["timed_out"] is True and entry["seconds"] < 10 and "connecting" in entry["output"]


def test_client_result_is_parsed(monkeypatch, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                   " 65536      1792             0.00               0.31   \t\t   0.000597\n")
    fake = script(tmp_path, "ok_bw", "cat %s\n" % out)
    entry = run(monkeypatch, action="client", binary=fake,
                jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18515, "server_address": "10.0.2.15"}])["jobs"][0]
    assert entry["rc"] == 0 and entry["timed_out"] is False and entry["result"]["avg_gbps"] == 0.31
    assert entry["argv"][-1] == "10.0.2.15" and "-R" in entry["argv"]


def test_missing_perftest_is_a_result(monkeypatch, tmp_path):
    entry = run(monkeypatch, action="client", binary=str(tmp_path / "none"),
                jobs=[{"id": "x", "device": "rxe0", "tcp_port": 1, "server_address": "h"}])["jobs"][0]
    assert entry["missing"] is True and entry["rc"] == 127


def test_nccl_absent(monkeypatch):
    result = run(monkeypatch, action="nccl", command=["/nonexistent/all_reduce_perf"])
    assert result["nccl"]["status"] == "absent"


def test_check_mode_runs_nothing(monkeypatch, tmp_path):
    result = run(monkeypatch, check=True, action="server", run_dir=str(tmp_path / "run"),
                 jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18515}])
    assert result["skipped"] is True and result["changed"] is False and not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, message", [
    ({"action": "server", "jobs": [{"id": "../x", "device": "d", "tcp_port": 1}]}, "job id"),
    ({"action": "client", "timeout": 0}, "timeout must be between 1 and 86400, got 0"),
    ({"action": "probe", "bogus": 1}, "Unsupported parameters"),
])
def test_bad_input(monkeypatch, args, message):
    failure = run(monkeypatch, expect=ModuleFail, **args)
    assert message in failure["msg"]


def test_one_bad_job_does_not_stop_the_others(monkeypatch, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                   " 65536      1792             0.00               0.31   \t\t   0.000597\n")
    fake = script(tmp_path, "ok_bw", "cat %s\n" % out)
    jobs = run(monkeypatch, action="client", binary=fake, jobs=[
        {"id": "noaddr", "device": "mlx5_0", "tcp_port": 18515},
        {"id": "badport", "device": "mlx5_0", "tcp_port": 70000, "server_address": "192.0.2.1"},
        {"id": "ok", "device": "mlx5_1", "tcp_port": 18516, "server_address": "192.0.2.1"}])["jobs"]
    assert [j["id"] for j in jobs] == ["noaddr", "badport", "ok"]
    assert jobs[0]["invalid"] and "needs server_address" in jobs[0]["output"]
    assert jobs[1]["invalid"] and "not a TCP port" in jobs[1]["output"]
    assert jobs[2]["result"]["avg_gbps"] == 0.31
    servers = run(monkeypatch, action="server", binary=fake, run_dir=str(tmp_path / "run"), start_timeout=1,
                  jobs=[{"id": "nodev", "tcp_port": 18515}])["jobs"]
    assert servers[0]["status"] == "not_started" and "needs device" in servers[0]["output"]


def test_bind_source_ip_reaches_the_command_line_with_rdma_cm(monkeypatch, tmp_path):
    fake = script(tmp_path, "bw", "echo \"$@\"\n")
    entry = run(monkeypatch, action="client", binary=fake, rdma_cm=True, jobs=[
        {"id": "x", "device": "mlx5_0", "tcp_port": 18515, "server_address": "192.0.2.2",
         "bind_source_ip": "192.0.2.1"}])["jobs"][0]
    assert entry["argv"][entry["argv"].index("--bind_source_ip") + 1] == "192.0.2.1"


def test_probe_finds_perftest_bind_support(monkeypatch, sysfs, tmp_path):
    new = script(tmp_path, "new_bw", "echo '      --bind_source_ip  Source IP of the interface'\nexit 1\n")
    old = script(tmp_path, "old_bw", "echo ' -R, --rdma_cm  Connect QPs with rdma_cm'\nexit 1\n")
    for binary, binds in ((new, True), (old, False)):
        result = run(monkeypatch, action="probe", host_root=str(sysfs), binary=binary, devices=[{"device": "rxeva"}])
        assert {k: result["perftest"][k] for k in ("binary", "path", "bind_source_ip")} == {"binary": binary, "path": binary, "bind_source_ip": binds}


@pytest.fixture
def ib_sysfs(tmp_path):
    """mlx5_0 port 1 InfiniBand: GID attributes answer EINVAL (absent here), IPoIB ib0 (dev_port 0) and its P_Key
    child ib0.8001 under the PCI function, plus an Ethernet netdev of the same function (type 1)."""
    root = tmp_path / "ibroot"
    port = root / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "gids").mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "rate").write_text("40 Gb/sec (4X QDR)\n")
    (port / "gids/0").write_text("fe80:0000:0000:0000:0c42:a103:0066:1a3c\n")
    pci = root / "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0"
    for name, kind, dev_port in (("ib0.8001", "32", "0"), ("ib0", "32", "0"), ("eth9", "1", "0"), ("ib1", "32", "1")):
        (pci / "net" / name).mkdir(parents=True)
        (pci / "net" / name / "type").write_text(kind + "\n")
        (pci / "net" / name / "dev_port").write_text(dev_port + "\n")
    (pci / "numa_node").write_text("1\n")
    (pci / "local_cpulist").write_text("28-55,84-111\n")
    link = root / "sys/class/infiniband/mlx5_0/device"
    link.symlink_to(os.path.relpath(pci, link.parent))  # relative, as sysfs makes it
    net = root / "sys/class/net/ib0"
    net.mkdir(parents=True)
    (net / "operstate").write_text("up\n")
    (net / "mtu").write_text("2044\n")
    return root


def test_probe_reads_the_ipoib_address_of_an_infiniband_port(monkeypatch, ib_sysfs, tmp_path):
    asked = []
    monkeypatch.setattr(rdma_perftest, "ipv4_of_netdev", lambda name: asked.append(name) or "192.0.2.30")
    result = run(monkeypatch, action="probe", host_root=str(ib_sysfs), binary=str(tmp_path / "missing"),
                 devices=[{"device": "mlx5_0"}])
    entry = result["ports"][0]
    assert (entry["link_layer"], entry["gid_index"], entry["gid_problem"]) == ("InfiniBand", None, None)
    assert (entry["netdev"], entry["ipv4"], entry["operstate"], entry["mtu"]) == ("ib0", "192.0.2.30", "up", 2044)
    assert entry["rate_gbps"] == 32.0 and asked == ["ib0"]
    assert (entry["numa_node"], entry["local_cpulist"]) == (1, "28-55,84-111")


def test_ipv4_of_netdev_reads_the_loopback():
    assert rdma_perftest.ipv4_of_netdev("lo") == "127.0.0.1"
    assert rdma_perftest.ipv4_of_netdev("no-such-if0") is None


def test_nccl_needs_a_command(monkeypatch):
    # no one-rank default (-g 1 opens no transport): the role computes the command from the node's GPUs
    assert "command must name" in run(monkeypatch, expect=ModuleFail, action="nccl")["msg"]


def test_server_port_already_in_use_is_not_started(monkeypatch, tmp_path):
    import socket  # pylint: disable=import-outside-toplevel
    fake = script(tmp_path, "fake_bw", "echo '* Waiting for client to connect... *'\nexec sleep 60\n")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        busy = other.getsockname()[1]
        entry = run(monkeypatch, action="server", binary=fake, run_dir=str(tmp_path / "run"), rdma_cm=False,
                    jobs=[{"id": "x", "device": "rxe0", "tcp_port": busy}])["jobs"][0]
    assert entry["status"] == "not_started" and entry["port_in_use"] is True and "pid" not in entry
    assert "already in use" in entry["output"]


# a perftest stand-in that prints the banner, then (after DELAY s, as a loaded node may) listens on its -p port
LATE_LISTENER = """echo '* Waiting for client to connect... *'
while [ $# -gt 0 ]; do [ "$1" = -p ] && port=$2; shift; done
exec python3 -c 'import socket, sys, time
time.sleep(float(sys.argv[2]))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1)
time.sleep(60)' "$port" DELAY
"""


def test_without_rdma_cm_a_server_is_listening_only_once_its_tcp_socket_is(monkeypatch, tmp_path):
    # perftest prints "Waiting for client to connect" before it creates its socket (src/write_bw.c): the banner
    # alone must not let the client start (kernel_vm's validate under load: "Couldn't connect to ...")
    import socket  # pylint: disable=import-outside-toplevel
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake = script(tmp_path, "late_bw", LATE_LISTENER.replace("DELAY", "1.5"))
    run_dir = str(tmp_path / "run")
    entry = run(monkeypatch, action="server", binary=fake, run_dir=run_dir, rdma_cm=False, start_timeout=20,
                jobs=[{"id": "late", "device": "rxe0", "tcp_port": port}])["jobs"][0]
    try:
        assert entry["status"] == "listening", entry
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # refused (ConnectionRefusedError) if the module had answered on the banner
    finally:
        run(monkeypatch, action="stop", run_dir=run_dir, jobs=[{"id": "late"}])


def test_without_rdma_cm_a_banner_without_a_socket_is_not_started(monkeypatch, tmp_path):
    fake = script(tmp_path, "banner_bw", "echo '* Waiting for client to connect... *'\nexec sleep 60\n")
    entry = run(monkeypatch, action="server", binary=fake, run_dir=str(tmp_path / "run"), rdma_cm=False,
                start_timeout=2, jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18596}])["jobs"][0]
    assert entry["status"] == "not_started" and entry["waited"] == 2
    assert "Waiting for client" in entry["output"]


def test_server_that_prints_its_banner_and_exits_is_not_listening(monkeypatch, tmp_path):
    # perftest prints the banner before it binds; a bind failure ends it within the grace
    fake = script(tmp_path, "fail_bw", "echo ' Waiting for client rdma_cm QP to connect'\nsleep 0.3\n"
                                       "echo ' Failed to bind RDMA CM address' >&2\nexit 1\n")
    entry = run(monkeypatch, action="server", binary=fake, run_dir=str(tmp_path / "run"), rdma_cm=True,
                jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18597}])["jobs"][0]
    assert entry["status"] == "exited" and entry["rc"] == 1 and "Failed to bind" in entry["output"]


def empty_root(tmp_path):
    """A host root whose /proc runs no kubelet."""
    (tmp_path / "root" / "proc" / "1").mkdir(parents=True, exist_ok=True)
    (tmp_path / "root" / "proc" / "1" / "comm").write_text("systemd\n")
    return tmp_path / "root"


def test_pod_check_is_skipped_where_a_kubelet_runs(monkeypatch, tmp_path):
    """The real kubelet stops CRI pods it did not create at its housekeeping (molecule/node_vm showed the probe's
    sandbox gone at runp, create or start, run by run): on such a node the check is skipped and crictl never runs."""
    calls = tmp_path / "calls"
    crictl = script(tmp_path, "crictl", 'echo "$*" >> %s; echo id1\n' % calls)
    root = empty_root(tmp_path)
    (root / "proc" / "4242").mkdir()
    (root / "proc" / "4242" / "comm").write_text("kubelet\n")
    pod = run(monkeypatch, action="probe", crictl=crictl, pod_image="localhost/cri-test:1",
              run_dir=str(tmp_path / "run"), host_root=str(root))["pod"]
    assert pod["status"] == "skipped"
    assert pod["reason"].startswith("a kubelet runs on this node (pid 4242): it stops within seconds every CRI pod")
    assert not calls.exists()


def test_pod_check_passes_no_device_and_judges_memlock(monkeypatch, tmp_path):
    """Through a stand-in crictl: the container config maps no host device (a pod gets its devices from the device
    plugin, not from this check) and the verdict is the memlock limit alone."""
    saved = tmp_path / "ctr.json"
    calls = tmp_path / "calls"
    # crictl v1.34 prints the ID on stdout and, for a pod config without cgroup_parent, this warning on stderr
    # after it (seen from the real crictl against containerd in molecule/node_vm): the ID is stdout's alone
    warning = ('time="2026-12-02T12:30:02Z" level=warning msg="cgroup_parent is not set. Use `runtime-config` to '
               'get the runtime cgroup driver"')
    crictl = script(tmp_path, "crictl", """echo "$*" >> %s
case "$1" in
  runp) echo pod1; echo '%s' >&2 ;;
  create) [ "$2" = pod1 ] || exit 3; cp "$3" %s; echo ctr1; echo '%s' >&2 ;;
  start) [ "$2" = ctr1 ] || exit 4; echo ctr1 ;;
  exec) echo "memlock=$MEMLOCK" ;;
esac
""" % (calls, warning, saved, warning))
    for memlock, status in (("unlimited", "pass"), ("8192", "fail")):
        monkeypatch.setenv("MEMLOCK", memlock)
        pod = run(monkeypatch, action="probe", crictl=crictl, pod_image="localhost/cri-test:1",
                  run_dir=str(tmp_path / "run"), host_root=str(empty_root(tmp_path)))["pod"]
        assert pod["status"] == status and pod["memlock"] == memlock and pod["devices_seen"] == []
        assert "devices" not in saved.read_text()
    assert pod["reason"] == "ulimit -l in the container is 8192, not unlimited"
    # the sandbox is always stopped and removed
    assert calls.read_text().splitlines()[-2:] == ["stopp pod1", "rmp -f pod1"]


def test_pod_check_names_the_crictl_step_that_failed_and_cleans_up(monkeypatch, tmp_path):
    calls = tmp_path / "calls"
    crictl = script(tmp_path, "crictl", """echo "$*" >> %s
case "$1" in
  runp) echo pod1 ;;
  create) echo 'level=fatal msg="pulling image: localhost/none:1 not found"' >&2; exit 1 ;;
esac
""" % calls)
    pod = run(monkeypatch, action="probe", crictl=crictl, pod_image="localhost/none:1",
              run_dir=str(tmp_path / "run"), host_root=str(empty_root(tmp_path)))["pod"]
    assert pod["status"] == "fail"
    assert pod["reason"] == 'crictl create failed: level=fatal msg="pulling image: localhost/none:1 not found"'
    assert calls.read_text().splitlines()[-2:] == ["stopp pod1", "rmp -f pod1"]
    assert not list((tmp_path / "run").iterdir())  # the configs written for crictl are gone


def test_pod_check_that_cannot_start_its_container_shows_the_containers_log(monkeypatch, tmp_path):
    crictl = script(tmp_path, "crictl", """case "$1" in
  runp) echo pod1 ;;
  create) echo ctr1 ;;
  start) echo 'level=fatal msg="OCI runtime start failed: cannot start a container that has stopped"' >&2; exit 1 ;;
  logs) [ "$4" = ctr1 ] && echo 'exec: "sleep": executable file not found in $PATH' >&2 ;;
esac
""")
    pod = run(monkeypatch, action="probe", crictl=crictl, pod_image="localhost/no-sleep:1",
              run_dir=str(tmp_path / "run"), host_root=str(empty_root(tmp_path)))["pod"]
    assert pod["status"] == "fail"
    assert pod["reason"] == ('crictl start failed: level=fatal msg="OCI runtime start failed: cannot start a '
                             'container that has stopped"; the container\'s log: exec: "sleep": executable file '
                             'not found in $PATH')


def test_client_and_server_run_under_taskset_on_the_nics_cpus(monkeypatch, tmp_path):
    fake = script(tmp_path, "bw", "echo '* Waiting for client to connect... *'\nexec sleep 60\n")
    cpus = "0"
    entry = run(monkeypatch, action="client", binary=fake, timeout=1, jobs=[
        {"id": "x", "device": "mlx5_0", "tcp_port": 18515, "server_address": "192.0.2.2", "cpus": cpus}])["jobs"][0]
    assert entry["argv"][1:4] == ["-c", cpus, fake] and entry["argv"][0].endswith("taskset")
    run_dir = str(tmp_path / "run")
    started = run(monkeypatch, action="server", binary=fake, run_dir=run_dir, start_timeout=10,
                  jobs=[{"id": "s", "device": "mlx5_0", "tcp_port": 18598, "cpus": cpus}])
    argv = started["actions"][0]["argv"]
    assert argv[argv.index("-eL") + 1].endswith("taskset") and argv[argv.index("-eL") + 2:argv.index("-eL") + 4] == [
        "-c", cpus]
    assert started["jobs"][0]["status"] == "listening"
    assert run(monkeypatch, action="stop", run_dir=run_dir, jobs=[{"id": "s"}])["jobs"][0]["was_running"] is True


def test_stop_never_signals_a_process_the_module_did_not_start(monkeypatch, tmp_path):
    """A pid file naming an unrelated process (pid reuse, or a file someone else wrote): stop reports the job gone
    and the process lives on.  Only a pid whose /proc start time and command line match the record is signalled."""
    import subprocess  # pylint: disable=import-outside-toplevel
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    bystander = subprocess.Popen(["sleep", "60"])  # pylint: disable=consider-using-with
    try:
        for content in ("%d\n" % bystander.pid,  # the old plain format: no identity to check
                        json.dumps({"pid": bystander.pid, "start": 1, "cmdline": "0" * 64}),  # reused pid
                        "not json at all"):
            (run_dir / "j1.pid").write_text(content)
            entry = run(monkeypatch, action="stop", run_dir=str(run_dir), jobs=[{"id": "j1"}])["jobs"][0]
            assert entry["was_running"] is False and entry["gone"], entry
            assert bystander.poll() is None, "stop signalled a process it did not start"
            assert not (run_dir / "j1.pid").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_server_refuses_a_run_dir_others_control(monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result = run(monkeypatch, expect=ModuleFail, action="server", binary="/bin/true", run_dir=str(shared),
                 jobs=[{"id": "x", "device": "rxe0", "tcp_port": 18599}])
    assert "run_dir" in result["msg"] and "private directory" in result["msg"]


@pytest.mark.parametrize("args, option", [
    ({"timeout": -1}, "timeout"), ({"timeout": 10 ** 9}, "timeout"), ({"start_timeout": 0}, "start_timeout"),
    ({"qps": 10 ** 7}, "qps"), ({"duration": -5}, "duration"), ({"run_dir": "relative/dir"}, "run_dir"),
    ({"run_dir": "/"}, "run_dir"), ({"run_dir": "/run/../etc"}, "run_dir"),
    ({"jobs": [{"id": "x", "server_address": "-oProxyCommand=x"}]}, "server_address"),
    ({"jobs": [{"id": "x", "device": "mlx5_0/../../x"}]}, "device"),
    ({"jobs": [{"id": "x", "netns": "../../proc/1/ns/net"}]}, "netns"),
    ({"jobs": [{"id": "x", "cpus": "0-3; reboot"}]}, "cpus"),
    ({"jobs": [{"id": "x", "port": 0}]}, "port"),
])
def test_every_option_is_checked_before_the_node_is_touched(monkeypatch, tmp_path, args, option):
    args = dict({"action": "client", "run_dir": str(tmp_path / "run")}, **args)
    result = run(monkeypatch, expect=ModuleFail, **args)
    assert option in result["msg"], result["msg"]
    assert not (tmp_path / "run").exists()


def test_counters_reads_the_ports_hw_counters_also_in_check_mode(monkeypatch, sysfs):
    hw = sysfs / "sys/class/infiniband/rxeva/ports/1/hw_counters"
    hw.mkdir()
    (hw / "packet_seq_err").write_text("12\n")
    (hw / "lifespan").write_text("10\n")
    for check in (False, True):
        result = run(monkeypatch, check=check, action="counters", host_root=str(sysfs),
                     devices=[{"device": "rxeva"}, {"device": "rxe9", "port": 2}])
        assert result["changed"] is False and result["skipped"] is False
        assert [(p["device"], p["port"], p["counters"]) for p in result["counters"]["ports"]] == [
            ("rxeva", 1, {"packet_seq_err": 12}), ("rxe9", 2, None)]
    bad = run(monkeypatch, action="counters", host_root=str(sysfs), devices=[{"device": "../x"}], expect=ModuleFail)
    assert "not a valid RDMA device name" in bad["msg"]
