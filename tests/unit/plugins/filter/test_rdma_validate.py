"""rdma_validate filters on what Ansible registers: an unreachable node (its facts unreachable, its probe skipped),
a failed probe, and a node that answered."""

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_validate as f

UNREACHABLE = {"unreachable": True, "changed": False,
               "msg": "Failed to connect to the host via ssh: ssh: connect to host 192.0.2.9 port 22: No route to host"}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False",
           "false_condition": "rdma_validate__facts is not unreachable"}
FAILED_PROBE = {"failed": True, "changed": False, "msg": "MODULE FAILURE: python3 not found"}


def probe(address):
    return {"changed": False, "failed": False, "skipped": False,
            "perftest": {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "bind_source_ip": False},
            "pod": {"status": "skipped", "reason": "no pod_image given"},
            "ports": [{"device": "mlx5_0", "port": 1, "exists": True, "state": "ACTIVE", "phys_state": "LinkUp",
                       "link_layer": "Ethernet", "rate_gbps": 100.0, "netdev": "eth2", "operstate": "up",
                       "mtu": 4200, "gid_index": 3, "gid_problem": None, "ipv4": address}]}


def facts():
    return {"changed": False, "ansible_facts": {"rdma": {"devices": []}}}


def hostvars():
    return {
        "good1": {"rdma_validate__facts": facts(), "rdma_validate__probe": probe("192.0.2.1"),
                  "rdma_validate__rails": [{"device": "mlx5_0", "port": 1, "netns": None}]},
        "good2": {"rdma_validate__facts": facts(), "rdma_validate__probe": probe("192.0.2.2"),
                  "rdma_validate__rails": [{"device": "mlx5_0", "port": 1, "netns": None}]},
        # unreachable: the facts task registers unreachable, the probe is skipped, the rails are never set
        "down": {"rdma_validate__facts": UNREACHABLE, "rdma_validate__probe": SKIPPED},
        "broken": {"rdma_validate__facts": facts(), "rdma_validate__probe": FAILED_PROBE,
                   "rdma_validate__rails": [{"device": "mlx5_0", "port": 1, "netns": None}]},
    }


def test_unreachable_node_is_unreachable_in_the_plan_and_the_report():
    hv = hostvars()
    the_plan = f.rdma_validate_plan([["good1", "down"], ["down", "good2"], ["good1", "broken"]], hv)
    kinds = [job["blocked"][0][0] for job in the_plan["jobs"]]
    assert kinds == ["unreachable", "unreachable", "unreachable"]
    assert "probe failed: MODULE FAILURE" in the_plan["jobs"][2]["blocked"][0][1]
    rep = f.rdma_validate_report(the_plan, ["good1", "good2", "down", "broken"], hv, {"min_pct": 90})
    assert [r["causes"][0]["kind"] for r in rep["pairs"]] == ["unreachable"] * 3
    nodes = dict((n["host"], n) for n in rep["nodes"])
    assert nodes["down"]["status"] == "fail" and nodes["down"]["cause"] == "unreachable or probe failed"
    assert nodes["broken"]["status"] == "fail" and nodes["good1"]["status"] == "skipped"


def test_a_probe_registered_unreachable_with_reachable_facts():
    hv = hostvars()
    hv["good2"]["rdma_validate__probe"] = UNREACHABLE
    the_plan = f.rdma_validate_plan([["good1", "good2"]], hv)
    assert the_plan["jobs"][0]["blocked"][0][0] == "unreachable"


def test_rdma_facts_failing_on_a_reachable_node_is_its_own_cause():
    hv = hostvars()
    # failed_when: false on the facts task: the registered result is not failed, it just has no facts
    hv["good2"]["rdma_validate__facts"] = {"changed": False, "failed": False, "failed_when_result": False,
                                           "msg": "cannot read /sys/class/infiniband: Permission denied"}
    hv["good2"]["rdma_validate__rails"] = []
    the_plan = f.rdma_validate_plan([["good1", "good2"]], hv)
    assert the_plan["jobs"][0]["blocked"] == [
        ("no_facts", "good2: rdma_facts failed: cannot read /sys/class/infiniband: Permission denied")]
    assert not the_plan["clients"] and not the_plan["servers"]
    rep = f.rdma_validate_report(the_plan, ["good1", "good2"], hv, {"min_pct": 90})
    assert rep["pairs"][0]["causes"][0]["kind"] == "no_facts"
    # the node answered and its probe ran: its pod row is the probe's, not "unreachable or probe failed"
    nodes = dict((n["host"], n) for n in rep["nodes"])
    assert nodes["good2"]["status"] == "skipped" and nodes["good2"]["cause"] == "no pod_image given"


def test_reachable_pair_runs_with_the_server_rail_address():
    the_plan = f.rdma_validate_plan([["good1", "good2"]], hostvars())
    assert the_plan["clients"]["good1"][0]["server_address"] == "192.0.2.2"
    assert f.rdma_validate_server_lifetime(the_plan, 60, 20) == 20 + 300 + (60 + 60) * 1


def test_nccl_skipped_below_two_gpus_is_a_skipped_row():
    hv = hostvars()
    hv["good1"]["rdma_validate__nccl_plan"] = f.rdma_validate_nccl_command({"gpus": [{"driver": "nvidia"}]})
    hv["good1"]["rdma_validate__nccl"] = SKIPPED
    rep = f.rdma_validate_report({"jobs": []}, ["good1"], hv, {"nccl": True})
    nccl = [n for n in rep["nodes"] if n["step"] == "4-nccl"][0]
    assert nccl["status"] == "skipped" and "one rank opens no NCCL transport" in nccl["cause"]


def test_report_reads_the_client_results_of_every_wave():
    hv = hostvars()
    the_plan = f.rdma_validate_plan([["good1", "good2"]], hv)
    job_id = the_plan["jobs"][0]["id"]
    hv["good2"]["rdma_validate__server"] = {"changed": True, "jobs": [{"id": job_id, "status": "listening"}]}
    hv["good2"]["rdma_validate__stop"] = {"changed": True, "jobs": [{"id": job_id, "was_running": False}]}
    # the last wave's registered result is a skip; the accumulated list has the run
    hv["good1"]["rdma_validate__client"] = SKIPPED
    hv["good1"]["rdma_validate__clients"] = [{"id": job_id, "rc": 0, "timed_out": False, "seconds": 5.2,
                                              "output": "", "result": {"avg_gbps": 95.1, "errors": []}}]
    rep = f.rdma_validate_report(the_plan, ["good1", "good2"], hv, {"min_pct": 90})
    assert rep["pairs"][0]["status"] == "pass" and rep["pairs"][0]["gbps"] == 95.1


def test_report_reads_each_waves_counter_readings():
    """The counters registered around each wave (clients.yml) reach the row: grown ones name the cause."""
    hv = hostvars()
    the_plan = f.rdma_validate_plan([["good1", "good2"]], hv)
    job_id = the_plan["jobs"][0]["id"]
    hv["good2"]["rdma_validate__server"] = {"changed": True, "jobs": [{"id": job_id, "status": "listening"}]}
    hv["good1"]["rdma_validate__clients"] = [{"id": job_id, "rc": 0, "timed_out": False, "seconds": 5.2,
                                              "output": "", "result": {"avg_gbps": 40.0, "errors": []}}]

    def taken(packet_seq_err):
        return {"time": 1.0, "ports": [{"device": "mlx5_0", "port": 1, "problems": [],
                                        "counters": {"packet_seq_err": packet_seq_err, "out_of_sequence": 0}},
                                       {"device": "mlx5_1", "port": 1, "problems": [], "counters": None}]}
    hv["good1"]["rdma_validate__counters"] = [{"wave": 0, "before": taken(3), "after": taken(953), "msg": None}]
    hv["good2"]["rdma_validate__counters"] = [{"wave": 0, "before": taken(0), "after": taken(0), "msg": None}]
    rep = f.rdma_validate_report(the_plan, ["good1", "good2"], hv, {"min_pct": 90})
    row = rep["pairs"][0]
    assert row["status"] == "fail" and row["causes"][0]["kind"] == "retransmissions"
    assert row["cause"] == "retransmissions during the test: good1 mlx5_0/1 (client) packet_seq_err +950"
    assert rep["summary"]["causes"] == ["retransmissions"]
    # switched off: neither read nor judged
    rep = f.rdma_validate_report(the_plan, ["good1", "good2"], hv, {"min_pct": 90, "counters": False})
    assert [c["kind"] for c in rep["pairs"][0]["causes"]][0] == "below_line_rate" and "counters" not in rep["pairs"][0]
