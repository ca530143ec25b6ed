"""Fabric acceptance on the controller: pairing, rails, the plan, and the verdict with its likely cause."""

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _validate as v


def port(device="mlx5_0", **over):
    base = {"device": device, "port": 1, "exists": True, "state": "ACTIVE", "phys_state": "LinkUp",
            "link_layer": "Ethernet", "rate_gbps": 200.0, "netdev": "eth-" + device, "operstate": "up", "mtu": 4200,
            "gid_index": 3, "gid_problem": None, "ipv4": "192.0.2.10", "numa_node": 0, "local_cpulist": "0-27,56-83"}
    base.update(over)
    return base


def probe(*ports, path="/usr/bin/ib_write_bw"):
    return {"perftest": {"binary": "ib_write_bw", "path": path}, "ports": list(ports), "pod": {"status": "skipped"}}


def one_job(cprobe, sprobe, rails=("mlx5_0",)):
    the_plan = v.plan([("a", "b")], {"a": v.parse_rails(rails), "b": v.parse_rails(rails)}, {"a": cprobe, "b": sprobe})
    return the_plan, the_plan["jobs"][0]


def ran(gbps, rc=0, timed_out=False, output=""):
    return {"rc": rc, "timed_out": timed_out, "seconds": 5.1, "output": output,
            "result": {"avg_gbps": gbps, "iterations": 100, "errors": []}}


SETTINGS = {"min_pct": 90, "min_gbps": None, "timeout": 60, "start_timeout": 20}


def test_ring_pairs():
    assert v.ring_pairs(["a"]) == []
    assert v.ring_pairs(["a", "b"]) == [("a", "b")]
    assert v.ring_pairs(["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("c", "a")]


def test_explicit_pairs_are_checked():
    assert v.explicit_pairs(["a", "b"], [["a", "b"], {"client": "b", "server": "a"}]) == [("a", "b"), ("b", "a")]
    with pytest.raises(v.ValidateInputError, match="not in the play"):
        v.explicit_pairs(["a", "b"], [["a", "z"]])
    with pytest.raises(v.ValidateInputError, match="itself"):
        v.explicit_pairs(["a"], [["a", "a"]])
    with pytest.raises(v.ValidateInputError):
        v.explicit_pairs(["a", "b"], ["a"])


def test_rails_parse_and_default():
    assert v.parse_rails(["mlx5_0", "mlx5_1:2", {"device": "rxe0", "netns": "ns1"}]) == [
        {"device": "mlx5_0", "port": 1, "netns": None}, {"device": "mlx5_1", "port": 2, "netns": None},
        {"device": "rxe0", "port": 1, "netns": "ns1"}]
    with pytest.raises(v.ValidateInputError):
        v.parse_rails(["bad name"])
    facts = {"devices": [{"name": "mlx5_10", "ports": [{"port": 1}]}, {"name": "mlx5_2", "ports": [{"port": 1}]},
                         {"name": "mlx5_3", "is_vf": True, "ports": [{"port": 1}]}, {"name": "nop", "ports": []}]}
    assert [r["device"] for r in v.default_rails(facts)] == ["mlx5_2", "mlx5_10"]


def test_plan_gives_each_server_job_its_own_port_and_the_client_the_address():
    both = probe(port("mlx5_0"), port("mlx5_1", ipv4="192.0.2.11"))
    the_plan = v.plan([("a", "b"), ("c", "b")], {h: v.parse_rails(["mlx5_0", "mlx5_1"]) for h in "abc"},
                      {h: both for h in "abc"}, base_port=20000)
    assert [j["tcp_port"] for j in the_plan["servers"]["b"]] == [20000, 20001, 20002, 20003]
    assert [j["server_address"] for j in the_plan["clients"]["a"]] == ["192.0.2.10", "192.0.2.11"]
    assert the_plan["clients"]["a"][0]["gid_index"] == 3


def test_blocked_jobs_do_not_run_and_carry_their_cause():
    cases = {
        "unreachable": (None, probe(port())),
        "no_facts": (dict(probe(port()), facts_failed=True, facts_msg="Permission denied"), probe(port())),
        "no_rail": (probe(port()), probe()),
        "link_down": (probe(port(state="DOWN", operstate="down")), probe(port())),
        "perftest_missing": (probe(port(), path=None), probe(port())),
        "gid_index": (probe(port(gid_index=None, gid_problem="no RoCE v2 GID")), probe(port())),
    }
    for kind, (cprobe, sprobe) in cases.items():
        the_plan, job = one_job(cprobe, sprobe)
        assert not the_plan["servers"] and not the_plan["clients"], kind
        row = v.judge(job, None, None, {}, SETTINGS)
        assert row["status"] == "fail" and row["causes"][0]["kind"] == kind, (kind, row)


def test_missing_rail_on_one_side():
    the_plan = v.plan([("a", "b")], {"a": v.parse_rails(["mlx5_0", "mlx5_1"]), "b": v.parse_rails(["mlx5_0"])},
                      {"a": probe(port("mlx5_0"), port("mlx5_1")), "b": probe(port("mlx5_0"))})
    assert len(the_plan["jobs"]) == 2 and len(the_plan["clients"]["a"]) == 1
    row = v.judge(the_plan["jobs"][1], None, None, {}, SETTINGS)
    assert row["cause"] == "b has no rail 1 (its rails: mlx5_0)"


def test_pass_at_ninety_percent_of_the_lower_line_rate():
    dummy, job = one_job(probe(port(rate_gbps=200.0)), probe(port(rate_gbps=100.0)))
    row = v.judge(job, {"status": "listening"}, ran(91.0), {}, SETTINGS)
    assert row["status"] == "pass" and row["line_rate_gbps"] == 100.0 and row["pct_of_line_rate"] == 91.0
    assert row["notes"] == ["port rates differ: a 200.0 Gb/s, b 100.0 Gb/s"]
    slow = v.judge(job, {"status": "listening"}, ran(89.0), {}, SETTINGS)
    assert slow["status"] == "fail" and slow["causes"][0]["kind"] == "below_line_rate"


def test_absolute_line_replaces_the_percentage():
    dummy, job = one_job(probe(port(rate_gbps=10.0)), probe(port(rate_gbps=10.0)))
    row = v.judge(job, {"status": "listening"}, ran(0.3), {}, dict(SETTINGS, min_gbps=0.01))
    assert row["status"] == "pass" and row["threshold_gbps"] == 0.01 and row["pct_of_line_rate"] == 3.0


def test_slow_link_names_mtu_mismatch_and_cross_numa():
    # the client's NIC is on node 1 but sysfs gives no CPU list: it could not be pinned
    dummy, job = one_job(probe(port(mtu=1500, numa_node=1, local_cpulist=None)), probe(port(mtu=9000)))
    row = v.judge(job, {"status": "listening"}, ran(20.0), {}, SETTINGS)
    kinds = [c["kind"] for c in row["causes"]]
    assert kinds == ["mtu_mismatch", "below_line_rate", "cross_numa"]
    assert row["cause"].startswith("MTU mismatch: a eth-mlx5_0 1500, b eth-mlx5_0 9000")
    assert "a mlx5_0: NUMA node 1 without local_cpulist, the test ran unpinned" in row["causes"][2]["text"]


def test_both_ends_run_on_their_nics_local_cpus():
    the_plan, job = one_job(probe(port(numa_node=1, local_cpulist="28-55,84-111")), probe(port(numa_node=-1)))
    assert the_plan["clients"]["a"][0]["cpus"] == "28-55,84-111"
    assert the_plan["servers"]["b"][0]["cpus"] is None  # -1: one NUMA node, nothing to pin
    row = v.judge(job, {"status": "listening"}, ran(20.0), {}, SETTINGS)
    # pinned and slow: not a NUMA problem; the GPU distance says nothing about a host-memory test
    assert [c["kind"] for c in row["causes"]] == ["below_line_rate"] and row["notes"] == []


def test_wrong_fixed_gid_index_fails_even_when_traffic_passes():
    problem = "GID index 0 is RoCE v2 fe80::, not the RoCE v2 IPv4 entry"
    dummy, job = one_job(probe(port(gid_index=0, gid_problem=problem)), probe(port()))
    row = v.judge(job, {"status": "listening"}, ran(199.0), {}, SETTINGS)
    assert row["status"] == "fail" and row["causes"][0]["kind"] == "gid_index" and row["gbps"] == 199.0


@pytest.mark.parametrize("server, client, kind", [
    ({"status": "not_started", "waited": 20, "output": ""}, ran(None, rc=1), "server"),
    ({"status": "exited", "rc": 1, "output": "IB device mlx5_9 not found"}, None, "server"),
    ({"status": "listening"}, ran(None, rc=-9, timed_out=True), "client_timeout"),
    ({"status": "listening"}, ran(None, rc=1, output="Couldn't connect to 192.0.2.10:18515"), "client"),
    ({"status": "listening"}, None, "client"),
    ({"status": "listening"}, ran(0.0), "no_traffic"),
])
def test_run_failures(server, client, kind):
    dummy, job = one_job(probe(port()), probe(port()))
    row = v.judge(job, server, client, {}, SETTINGS)
    assert row["status"] == "fail" and row["causes"][0]["kind"] == kind, row


def test_unknown_line_rate_asks_for_an_absolute_line():
    dummy, job = one_job(probe(port(rate_gbps=None)), probe(port(rate_gbps=None)))
    assert v.judge(job, {"status": "listening"}, ran(5.0), {}, SETTINGS)["causes"][0]["kind"] == "line_rate_unknown"


def test_check_mode_rows_are_skipped():
    dummy, job = one_job(probe(port()), probe(port()))
    assert v.judge(job, None, None, {}, dict(SETTINGS, check_mode=True))["status"] == "skipped"


def test_node_rows():
    rows = v.node_rows("a", probe(port()), {"status": "absent", "reason": "nccl-tests not installed"}, True)
    assert [(r["step"], r["status"]) for r in rows] == [("1-pod", "skipped"), ("4-nccl", "skipped")]
    ran_nccl = {"status": "ran", "rc": 0, "result": {"cause": "no GDRDMA: 2 of 2", "transports": {}}}
    assert v.node_rows("a", None, ran_nccl, True)[1]["status"] == "fail"
    assert v.node_rows("a", None, None, False)[0]["status"] == "fail"


def test_report_markdown_and_junit():
    dummy, job = one_job(probe(port()), probe(port()))
    good = v.judge(job, {"status": "listening"}, ran(190.0), {}, SETTINGS)
    bad = v.judge(job, {"status": "listening"}, ran(10.0), {}, SETTINGS)
    rep = v.report([good, bad], v.node_rows("a", probe(port()), None, False), SETTINGS, "2026-01-01T00:00:00Z")
    assert rep["summary"]["status"] == "fail" and rep["summary"]["by_status"] == {"pass": 1, "fail": 1, "skipped": 1}
    text = v.markdown(rep)
    assert "| a -> b | 0 | mlx5_0 -> mlx5_0 | 10.00 | 5.0 | 200.00 | **FAIL** |" in text
    root = ET.fromstring(v.junit(rep))
    assert root.get("failures") == "1" and root.get("skipped") == "1"
    assert [s.get("name") for s in root] == ["pairs", "nodes"]
    assert len(root.findall(".//failure")) == 1 and len(root.findall(".//skipped")) == 1
    assert v.short_summary(rep)[0] == "validate: status fail, pass 1, fail 1, skipped 1"


def test_per_host_first_port():
    both = probe(port())
    the_plan = v.plan([("a", "b"), ("b", "a")], {h: v.parse_rails(["mlx5_0"]) for h in "ab"}, {"a": both, "b": both},
                      base_port={"a": 20000, "b": 21000})
    assert the_plan["servers"]["b"][0]["tcp_port"] == 21000 and the_plan["servers"]["a"][0]["tcp_port"] == 20000


def test_cpu_clock_calibration_failure_is_its_own_cause():
    dummy, job = one_job(probe(port()), probe(port()))
    client = ran(0.0)
    client["result"]["r_squared"] = 0.44
    row = v.judge(job, {"status": "listening"}, client, {}, SETTINGS)
    assert row["causes"][0] == {"kind": "cpu_clock", "text": "perftest could not calibrate the CPU clock (r^2 0.44 "
                                "< 0.9); rerun on a quiet CPU"}


def ib_port(device="mlx5_0", **over):
    """An InfiniBand port as the probe reads it: no GID index, the address from its IPoIB interface."""
    return port(device, link_layer="InfiniBand", gid_index=None, netdev="ib0", **over)


def test_infiniband_plan_uses_the_ipoib_address():
    the_plan, job = one_job(probe(ib_port(ipv4="192.0.2.20")), probe(ib_port(ipv4="192.0.2.21")))
    assert not job["blocked"]
    client = the_plan["clients"]["a"][0]
    assert client["server_address"] == "192.0.2.21" and client["gid_index"] is None


def test_infiniband_without_ipoib_address_falls_back_to_ansible_host_without_rdma_cm():
    probes = {"a": probe(ib_port(ipv4=None)), "b": probe(ib_port(ipv4=None))}
    rails = {h: v.parse_rails(["mlx5_0"]) for h in "ab"}
    the_plan = v.plan([("a", "b")], rails, probes, addresses={"b": "node-b.example"})
    assert the_plan["clients"]["a"][0]["server_address"] == "node-b.example"
    # rdma_cm routes by the address: the rail's own is needed
    blocked = v.plan([("a", "b")], rails, probes, addresses={"b": "node-b.example"}, rdma_cm=True)
    assert not blocked["clients"] and blocked["jobs"][0]["blocked"][0][0] == "no_address"
    row = v.judge(blocked["jobs"][0], None, None, {}, SETTINGS)
    assert row["causes"][0]["kind"] == "no_address" and "b mlx5_0/1: no IPv4 address" in row["cause"]
    assert v.plan([("a", "b")], rails, probes)["jobs"][0]["blocked"][0][0] == "no_address"


def test_rdma_cm_binds_each_end_to_its_rail_address():
    binds = dict(probe(port(ipv4="192.0.2.10")), perftest={"path": "/usr/bin/ib_write_bw", "bind_source_ip": True})
    bindb = dict(probe(port(ipv4="192.0.2.11")), perftest={"path": "/usr/bin/ib_write_bw", "bind_source_ip": True})
    rails = {h: v.parse_rails(["mlx5_0", "mlx5_1"]) for h in "ab"}
    the_plan = v.plan([("a", "b")], rails, {"a": binds, "b": bindb}, rdma_cm=True)
    assert the_plan["clients"]["a"][0]["bind_source_ip"] == "192.0.2.10"
    assert the_plan["servers"]["b"][0]["bind_source_ip"] == "192.0.2.11"
    assert v.plan([("a", "b")], rails, {"a": binds, "b": bindb})["servers"]["b"][0]["bind_source_ip"] is None


def test_rdma_cm_without_bind_support_blocks_a_node_of_several_rails():
    old = probe(port(), port("mlx5_1"))  # perftest without --bind_source_ip
    several = v.plan([("a", "b")], {h: v.parse_rails(["mlx5_0", "mlx5_1"]) for h in "ab"}, {"a": old, "b": old},
                     rdma_cm=True)
    assert not several["clients"] and [j["blocked"][0][0] for j in several["jobs"]] == ["rail_unpinned"] * 2
    single = v.plan([("a", "b")], {h: v.parse_rails(["mlx5_0"]) for h in "ab"}, {"a": old, "b": old}, rdma_cm=True)
    assert single["clients"]["a"][0]["bind_source_ip"] is None
    row = v.judge(single["jobs"][0], {"status": "listening"}, ran(190.0), {}, SETTINGS)
    assert row["status"] == "pass" and "no --bind_source_ip" in row["notes"][0]


def test_server_lifetime_covers_every_client_job_of_the_plan():
    both = probe(port())
    hosts = ["n%02d" % i for i in range(12)]
    the_plan = v.plan(v.ring_pairs(hosts), {h: v.parse_rails(["mlx5_0"]) for h in hosts}, {h: both for h in hosts})
    # twelve client nodes of one job each, possibly one after another
    assert v.server_lifetime(the_plan, 60, 20) == 20 + v.SERVER_GRACE + (60 + v.JOB_GRACE) * 12
    assert v.server_lifetime({"clients": {}}, 60, 20) == 20 + 300 + 120


def test_long_job_ids_are_cut_with_a_hash():
    long_a, long_b = "gpu-node-%s.rack12.example.com" % ("x" * 40), "gpu-node-%s.rack13.example.com" % ("x" * 40)
    first, second = v.job_id(long_a, long_b, 3), v.job_id(long_b, long_a, 3)
    assert len(first) == 100 and first != second and first.startswith("gpu-node-") and "--r3-" in first
    assert v.job_id("a", "b", 0) == "a--b--r0"


def test_nccl_default_command_runs_over_every_gpu_and_is_skipped_below_two():
    gpu = {"pci_address": "0000:1b:00.0", "driver": "nvidia"}
    eight = {"gpus": [dict(gpu)] * 8 + [dict(gpu, driver="vfio-pci")]}
    assert v.nccl_command(None, eight) == {"command": v.NCCL_DEFAULT + ["-g", "8"], "gpus": 8, "skip": None}
    one = v.nccl_command(None, {"gpus": [gpu]})
    assert one["command"] is None and one["skip"].startswith("1 GPU bound to nvidia: one rank opens no")
    assert v.nccl_command(None, None)["skip"].startswith("0 GPUs")
    # the operator's command is run as given (a multi-node launcher knows its ranks)
    assert v.nccl_command(["mpirun", "-np", 16, "all_reduce_perf"], {"gpus": []})["command"][2] == "16"
    rows = v.node_rows("a", probe(port()), {"status": "skipped", "reason": one["skip"]}, True)
    assert rows[1]["status"] == "skipped" and rows[1]["cause"] == one["skip"]


def test_mtu_mismatch_is_a_note_on_a_passing_row_and_a_cause_on_a_failing_one():
    dummy, job = one_job(probe(port(mtu=1500)), probe(port(mtu=9000)))
    good = v.judge(job, {"status": "listening"}, ran(190.0), {}, SETTINGS)
    assert good["status"] == "pass" and good["notes"] == ["MTU mismatch: a eth-mlx5_0 1500, b eth-mlx5_0 9000"]
    failed = v.judge(job, {"status": "listening"}, ran(None, rc=1, output="Failed to modify QP to RTR"), {}, SETTINGS)
    assert [c["kind"] for c in failed["causes"]] == ["mtu_mismatch", "client"]


def test_server_port_in_use_names_the_port():
    the_plan, job = one_job(probe(port()), probe(port()))
    row = v.judge(job, {"status": "not_started", "port_in_use": True, "output": "TCP port 18515 is already in use"},
                  None, {}, SETTINGS)
    assert row["causes"][0]["kind"] == "server" and "TCP port 18515 is already in use" in row["cause"]


def test_clients_sharing_a_server_rail_run_in_separate_waves():
    both = probe(port("mlx5_0"), port("mlx5_1", ipv4="192.0.2.11"))
    rails = {h: v.parse_rails(["mlx5_0", "mlx5_1"]) for h in "abcd"}
    shared = v.plan([("a", "c"), ("b", "c"), ("d", "a")], rails, {h: both for h in "abcd"})
    ids = [dict((h, [j["id"] for j in jobs]) for h, jobs in wave.items()) for wave in shared["waves"]]
    assert ids == [{"a": ["a--c--r0", "a--c--r1"], "d": ["d--a--r0", "d--a--r1"]},
                   {"b": ["b--c--r0", "b--c--r1"]}]
    ring = v.plan(v.ring_pairs("abcd"), rails, {h: both for h in "abcd"})
    assert len(ring["waves"]) == 1 and ring["waves"][0] == ring["clients"]


@pytest.mark.parametrize("rail", [{"device": "mlx5_0", "port": "x"}, {"device": "mlx5_0", "port": [1]},
                                  {"device": "mlx5_0", "port": float("inf")}, "mlx5_0:" + "1" * 5000])
def test_rail_port_int_refuses_is_a_validate_input_error(rail):
    """Found by the fuzz suite: int() raised a plain ValueError/TypeError/OverflowError, which the filter does not
    turn into its message."""
    with pytest.raises(v.ValidateInputError, match="port must be a number"):
        v.parse_rails([rail])


# -- GPU memory (issue 19) ----------------------------------------------------------------------------------------
GPU_PROBE = {"perftest": {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "cuda": True, "cuda_bus_id": True,
                          "cuda_dmabuf": True}, "pod": {"status": "skipped"}}


def gpu_facts(path="peermem"):
    # mlx5_0 sits next to GPU 1b (PIX), mlx5_1 next to GPU 3d; GPU 9c is on the other socket
    return {"gpus": [{"pci_address": a, "driver": "nvidia"} for a in ("0000:9c:00.0", "0000:3d:00.0", "0000:1b:00.0")],
            "gpu_nic_affinity": {"0000:1b:00.0": {"mlx5_0": "PIX", "mlx5_1": "NODE"},
                                 "0000:3d:00.0": {"mlx5_0": "NODE", "mlx5_1": "PXB"},
                                 "0000:9c:00.0": {"mlx5_0": "SYS", "mlx5_1": "SYS"}},
            "drivers": {"gpudirect": {"active": path}}}


def gpu_plan(paths=("peermem", "peermem"), perftest=None, facts=None):
    probes = {h: dict(GPU_PROBE, ports=[port("mlx5_0"), port("mlx5_1", ipv4="192.0.2.11")]) for h in "ab"}
    if perftest:
        probes["b"]["perftest"] = perftest
    gpus = {h: v.gpu_info(facts[h] if facts else gpu_facts(p)) for h, p in zip("ab", paths)}
    return v.plan([("a", "b")], {h: v.parse_rails(["mlx5_0", "mlx5_1"]) for h in "ab"}, probes, gpus=gpus)


def test_gpu_pairs_get_a_cuda_run_per_rail_on_the_nearest_gpu():
    the_plan = gpu_plan()
    assert [(j["id"], j["memory"]) for j in the_plan["jobs"]] == [
        ("a--b--r0", "host"), ("a--b--r1", "host"), ("a--b--g0", "cuda"), ("a--b--g1", "cuda")]
    client = dict((j["id"], j) for j in the_plan["clients"]["a"])
    assert client["a--b--g0"]["cuda_bus_id"] == "0000:1b:00.0" and client["a--b--g1"]["cuda_bus_id"] == "0000:3d:00.0"
    assert client["a--b--g0"]["cuda_dmabuf"] is False and "cuda_bus_id" not in client["a--b--r0"]
    # the GPU run shares its server rail with the host run: a later wave
    waves = [sorted(j["id"] for j in w["a"]) for w in the_plan["waves"]]
    assert waves == [["a--b--r0", "a--b--r1"], ["a--b--g0", "a--b--g1"]]


def test_dmabuf_path_adds_use_cuda_dmabuf_and_old_perftest_gets_an_index_in_pci_order():
    old = {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "cuda": True, "cuda_bus_id": False,
           "cuda_dmabuf": True}
    the_plan = gpu_plan(("peermem", "dmabuf"), perftest=old)
    server = dict((j["id"], j) for j in the_plan["servers"]["b"])
    assert server["a--b--g0"]["cuda_dmabuf"] is True and server["a--b--g0"]["cuda_index"] == 0  # 1b is first by PCI
    assert server["a--b--g1"]["cuda_index"] == 1 and "cuda_bus_id" not in server["a--b--g1"]


def test_nodes_without_gpus_get_no_cuda_run():
    facts = {"a": gpu_facts(), "b": {"gpus": [{"pci_address": "0000:1b:00.0", "driver": "vfio-pci"}]}}
    assert [j["memory"] for j in gpu_plan(facts=facts)["jobs"]] == ["host", "host"]
    assert [j["memory"] for j in gpu_plan(facts={"a": {}, "b": {}})["jobs"]] == ["host", "host"]


@pytest.mark.parametrize("paths, perftest, kind", [
    (("peermem", "none"), None, "no_gpudirect"),
    (("peermem", "peermem"), {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "cuda": False}, "perftest_no_cuda"),
    (("peermem", "dmabuf"), {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "cuda": True, "cuda_bus_id": True,
                             "cuda_dmabuf": False}, "perftest_no_cuda")])
def test_cuda_runs_that_cannot_run_say_why(paths, perftest, kind):
    the_plan = gpu_plan(paths, perftest=perftest)
    cuda = [j for j in the_plan["jobs"] if j["memory"] == "cuda"]
    assert cuda and all(j["blocked"][0][0] == kind for j in cuda)
    row = v.judge(cuda[0], None, None, {}, SETTINGS)
    assert row["status"] == "fail" and row["causes"][0]["kind"] == kind and row["memory"] == "cuda"


def cuda_ran(gbps, picked="1B:00"):
    out = ran(gbps)
    out["result"]["cuda"] = {"picked_pci": picked, "devices": {0: picked}, "picked": 0}
    return out


def test_cuda_run_judged_against_line_rate_and_the_gpu_it_used():
    job = [j for j in gpu_plan()["jobs"] if j["id"] == "a--b--g0"][0]
    good = v.judge(job, {"status": "listening"}, cuda_ran(190.0), {}, SETTINGS)
    assert good["status"] == "pass" and good["gpu"] == ["0000:1b:00.0", "0000:1b:00.0"]
    slow = v.judge(job, {"status": "listening"}, cuda_ran(120.0), {}, SETTINGS)
    assert slow["cause"] == "120.00 Gb/s is below 180.00 Gb/s (90 % of 200.0 Gb/s)"
    wrong = v.judge(job, {"status": "listening"}, cuda_ran(190.0, picked="9C:00"), {}, SETTINGS)
    assert wrong["causes"][0]["kind"] == "cuda" and "used the GPU at 9C:00, not 0000:1b:00.0" in wrong["cause"]
    host = v.judge(job, {"status": "listening"}, ran(190.0), {}, SETTINGS)
    assert "did not initialise CUDA" in host["cause"]
    rep = v.report([good, slow], [], SETTINGS)
    assert "0 (GPU 0000:1b:00.0 -> 0000:1b:00.0)" in v.markdown(rep) and "a-&gt;b.rail0.cuda" in v.junit(rep)


def nccl_ran(busbw, cause=None):
    result = {"transports": {"NET/IB/0/GDRDMA": 4}, "avg_busbw_gbytes": busbw, "cause": cause, "notes": []}
    return {"status": "ran", "rc": 0, "result": result}


def test_nccl_bus_bandwidth_is_judged_per_link_type():
    ib = probe(port("mlx5_0", link_layer="InfiniBand", rate_gbps=400.0),
               port("mlx5_1", link_layer="InfiniBand", rate_gbps=400.0))
    # 2 rails x 400 Gb/s shared by 2 GPUs: 50 GB/s per rank, 80 % on InfiniBand
    assert v.nccl_threshold(ib, 2, {})[0] == 40.0
    rows = v.node_rows("a", ib, nccl_ran(31.2), True, 2, {})
    assert rows[1]["status"] == "fail" and "31.2 GB/s is below 40.0 GB/s (80 % (InfiniBand)" in rows[1]["cause"]
    assert v.node_rows("a", ib, nccl_ran(45.0), True, 2, {})[1]["status"] == "pass"
    roce = probe(port("mlx5_0", rate_gbps=200.0))
    assert v.nccl_threshold(roce, 4, {})[0] == 4.375  # 200 / 4 GPUs / 8 x 70 %
    assert v.nccl_threshold(roce, 4, {"nccl_min_busbw": 3})[0] == 3.0
    unjudged = v.node_rows("a", roce, nccl_ran(None), True, 4, {})[1]
    assert unjudged["status"] == "pass" and "not judged" in unjudged["detail"]["notes"][0]


# -- the rails' counters around a wave (issue 22.5) ------------------------------------------------------------------
def reading(**ports):
    """rdma_perftest's counters result: ``reading(mlx5_0={...})``."""
    return {"time": 1.0, "ports": [{"device": dev, "port": 1, "counters": values, "problems": []}
                                   for dev, values in ports.items()]}


def quiet():
    return {"packet_seq_err": 5, "local_ack_timeout_err": 1, "out_of_sequence": 7, "duplicate_request": 0,
            "np_cnp_sent": 0, "rp_cnp_handled": 0, "req_transport_retries_exceeded": 0, "rx_write_requests": 10}


def readings(client_after=None, server_after=None, wave=0):
    client_after = dict(quiet(), **(client_after or {}))
    server_after = dict(quiet(), **(server_after or {}))
    return {"a": v.counter_readings([{"wave": wave, "before": reading(mlx5_0=quiet()),
                                      "after": reading(mlx5_0=client_after), "msg": None}]),
            "b": v.counter_readings([{"wave": wave, "before": reading(mlx5_0=quiet()),
                                      "after": reading(mlx5_0=server_after), "msg": None}])}


def test_counter_readings_and_job_counters():
    the_plan, job = one_job(probe(port()), probe(port()))
    taken = readings({"packet_seq_err": 905}, {"out_of_sequence": 907})
    assert taken["a"][0]["before"][("mlx5_0", 1)]["packet_seq_err"] == 5
    found = v.job_counters(job, taken, the_plan["jobs"])
    assert found["client"] == {"role": "client", "host": "a", "device": "mlx5_0", "port": 1, "read": True,
                               "deltas": {"packet_seq_err": 900}, "reset": []}
    assert found["server"]["deltas"] == {"out_of_sequence": 900} and found["shared"] == []
    # no reading of the wave, a port without hw_counters, a failed read
    assert v.job_counters(job, {}, the_plan["jobs"])["client"] == {
        "role": "client", "host": "a", "device": "mlx5_0", "port": 1, "read": False, "why": "no reading around the test"}
    bare = {"a": v.counter_readings([{"wave": 0, "before": reading(mlx5_0=None), "after": reading(mlx5_0=None)}])}
    assert v.job_counters(job, bare)["client"]["why"] == "the port has no hw_counters"
    failed = {"a": v.counter_readings([{"wave": 0, "before": None, "after": None, "msg": "MODULE FAILURE"}])}
    assert v.job_counters(job, failed)["client"]["why"] == "MODULE FAILURE"
    # a job that did not run has none
    blocked = one_job(probe(port(state="DOWN")), probe(port()))[1]
    assert v.job_counters(blocked, taken) is None


def test_a_ring_shares_each_rail_between_two_jobs_of_a_wave():
    the_plan = v.plan(v.ring_pairs(["a", "b", "c"]), {h: v.parse_rails(["mlx5_0"]) for h in "abc"},
                      {h: probe(port()) for h in "abc"})
    first = the_plan["jobs"][0]
    assert v.job_counters(first, {}, the_plan["jobs"])["shared"] == ["b--c--r0", "c--a--r0"]


def test_slow_rail_whose_counters_grew_names_retransmissions_as_the_cause():
    the_plan, job = one_job(probe(port(rate_gbps=400.0)), probe(port(rate_gbps=400.0)))
    counters = v.job_counters(job, readings({"packet_seq_err": 1805, "local_ack_timeout_err": 201},
                                            {"out_of_sequence": 1807, "duplicate_request": 200}), the_plan["jobs"])
    row = v.judge(job, {"status": "listening"}, ran(232.8), counters, SETTINGS)
    assert row["status"] == "fail" and [c["kind"] for c in row["causes"]] == ["retransmissions", "below_line_rate"]
    assert row["cause"] == ("retransmissions during the test: a mlx5_0/1 (client) packet_seq_err +1800, "
                            "local_ack_timeout_err +200; b mlx5_0/1 (server) out_of_sequence +1800, "
                            "duplicate_request +200")
    assert row["counters"]["client"]["deltas"] == {"packet_seq_err": 1800, "local_ack_timeout_err": 200}
    assert row["counters"]["shared"] == []
    md = v.markdown(v.report([row], [], SETTINGS))
    assert "retransmissions during the test: a mlx5_0/1 (client) packet_seq_err +1800" in md


def test_slow_rail_whose_counters_did_not_grow_says_so():
    the_plan, job = one_job(probe(port(rate_gbps=400.0)), probe(port(rate_gbps=400.0)))
    row = v.judge(job, {"status": "listening"}, ran(200.0), v.job_counters(job, readings(), the_plan["jobs"]), SETTINGS)
    assert [c["kind"] for c in row["causes"]] == ["below_line_rate"]
    assert row["notes"] == ["the retransmission and congestion counters did not grow during the test (a mlx5_0/1, "
                            "b mlx5_0/1): no packet was lost or marked on this path, look elsewhere"]
    # counters that could not be read are said so, and nothing is concluded from them
    row = v.judge(job, {"status": "listening"}, ran(200.0), v.job_counters(job, {}, the_plan["jobs"]), SETTINGS)
    assert [c["kind"] for c in row["causes"]] == ["below_line_rate"]
    assert row["notes"] == ["a mlx5_0/1: retransmission counters not read (no reading around the test)",
                            "b mlx5_0/1: retransmission counters not read (no reading around the test)"]


def test_congestion_and_connections_that_gave_up():
    the_plan, job = one_job(probe(port()), probe(port()))
    counters = v.job_counters(job, readings({"rp_cnp_handled": 500}, {"np_cnp_sent": 500}), the_plan["jobs"])
    row = v.judge(job, {"status": "listening"}, ran(120.0), counters, SETTINGS)
    assert [c["kind"] for c in row["causes"]] == ["congestion", "below_line_rate"]
    assert "a mlx5_0/1 (client) rp_cnp_handled +500; b mlx5_0/1 (server) np_cnp_sent +500" in row["cause"]
    # the client failed (transport retry counter exceeded): its counters say why
    counters = v.job_counters(job, readings({"req_transport_retries_exceeded": 1, "local_ack_timeout_err": 8}),
                              the_plan["jobs"])
    row = v.judge(job, {"status": "listening"}, {"rc": 1, "timed_out": False, "seconds": 9, "output": "",
                                                 "result": {"avg_gbps": None, "errors": [
                                                     "Completion with error at client"]}}, counters, SETTINGS)
    assert [c["kind"] for c in row["causes"]] == ["client", "retransmissions"]
    assert "local_ack_timeout_err +7, req_transport_retries_exceeded +1" in row["causes"][1]["text"]


def test_a_passing_rail_that_retransmitted_gets_a_note_and_a_reset_is_named():
    the_plan, job = one_job(probe(port()), probe(port()))
    counters = v.job_counters(job, readings({"packet_seq_err": 25}), the_plan["jobs"])
    row = v.judge(job, {"status": "listening"}, ran(195.0), counters, SETTINGS)
    assert row["status"] == "pass" and row["notes"] == [
        "retransmissions during the test: a mlx5_0/1 (client) packet_seq_err +20, although the row reached the line"]
    counters = v.job_counters(job, readings({"packet_seq_err": 2}), the_plan["jobs"])
    row = v.judge(job, {"status": "listening"}, ran(100.0), counters, SETTINGS)
    assert row["cause"].startswith("retransmissions during the test: a mlx5_0/1 (client) packet_seq_err +2")
    assert "a mlx5_0/1: packet_seq_err went back during the test (driver reload or reset), counted from 0" in row["notes"]
