"""The counters layer (issue 22 item 5, a room judged and not provisioned): its observer on the simulator's mlx5 ports
(ConnectX-7 InfiniBand, ConnectX-6 Dx RoCE), one and two readings, hostile sysfs values; the judge's totals, rates,
options and the growth validate uses; rdma_facts and the audit end to end through the registry."""

import pytest

import hwsim
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import catalogue, judge, observe

HW = "sys/class/infiniband/%s/ports/1/hw_counters"


def render(name, root):
    hwsim.render(name, root)
    return root


def port(section, device):
    return [p for p in section["ports"] if p["device"] == device][0]


def findings(checks):
    return sorted((c["id"], c["subject"], c["status"]) for c in checks if c["status"] != "ok")


def write(root, device, name, value):
    (root / (HW % device) / name).write_text("%s\n" % value, encoding="utf-8")


# -- observe -----------------------------------------------------------------------------------------------------
def test_one_reading_of_every_port_that_is_not_a_vf(tmp_path):
    root = render("dgx-h100", tmp_path)
    section = observe.facts(HostRoot(str(root)))
    assert [p["device"] for p in section["ports"]] == ["mlx5_%d" % i for i in range(12)]
    first = port(section, "mlx5_0")
    assert first["link_layer"] == "InfiniBand" and first["previous"] is None and section["interval"] is None
    assert "lifespan" not in first["counters"] and first["counters"]["local_ack_timeout_err"] == 0
    assert set(catalogue.KNOWN) <= set(first["counters"])  # ConnectX-7 has every counter the layer judges
    assert port(section, "mlx5_1")["link_layer"] == "Ethernet"
    assert all(check["status"] == "ok" for check in judge.judge(section, None))


def test_two_readings_interval_apart(tmp_path):
    root = render("roce-cx6dx", tmp_path)
    slept = []

    def sleep(seconds):  # traffic while rdma_facts waits: the port's counters grow
        slept.append(seconds)
        write(root, "mlx5_0", "local_ack_timeout_err", 4)
        write(root, "mlx5_0", "np_cnp_sent", 300)
    section = observe.facts(HostRoot(str(root)), interval=2, sleep=sleep)
    assert slept == [2] and section["interval"] is not None and section["interval"] >= 0
    mlx5_0 = port(section, "mlx5_0")
    assert (mlx5_0["previous"]["local_ack_timeout_err"], mlx5_0["counters"]["local_ack_timeout_err"]) == (0, 4)
    section["interval"] = 2.0  # the measured time of a test's sleep is ~0: judge it as the two seconds asked for
    checks = judge.judge(section, None)
    rates = dict((c["subject"], c) for c in checks if c["id"] == "counters.rates")
    assert rates["mlx5_0/1"]["status"] == "fail" and "local_ack_timeout_err +4 in 2 s (2/s > 0/s)" in rates[
        "mlx5_0/1"]["detail"]
    assert rates["mlx5_0/1"]["live"]["np_cnp_sent"] == {"delta": 300, "per_second": 150.0}  # shown, not judged
    assert "np_cnp_sent +300" in rates["mlx5_0/1"]["detail"] and rates["mlx5_1/1"]["status"] == "ok"


@pytest.mark.parametrize("value", [-1, 61, True, "5", None, float("nan")])
def test_interval_is_checked(tmp_path, value):
    with pytest.raises(InputError, match="counters_interval must be a number of seconds from 0 to 60"):
        observe.facts(HostRoot(str(tmp_path)), interval=value)


def test_hostile_values_and_a_port_without_hw_counters(tmp_path):
    root = render("roce-cx6dx", tmp_path)
    write(root, "mlx5_0", "packet_seq_err", "N/A")
    target = root / (HW % "mlx5_0") / "out_of_sequence"
    target.unlink()
    target.mkdir()  # read() fails: unreadable, with the reason
    for entry in (root / (HW % "mlx5_1")).iterdir():
        entry.unlink()
    (root / (HW % "mlx5_1")).rmdir()
    section = observe.facts(HostRoot(str(root)))
    mlx5_0 = port(section, "mlx5_0")
    assert mlx5_0["counters"]["packet_seq_err"] == "N/A" and mlx5_0["counters"]["out_of_sequence"] is None
    assert mlx5_0["problems"] and port(section, "mlx5_1")["counters"] is None
    checks = judge.judge(section, None)
    assert findings(checks) == [("counters.totals", "mlx5_0/1", "unknown")]
    assert "packet_seq_err" in checks[0]["detail"] and "out_of_sequence" in checks[0]["detail"]
    assert not [c for c in checks if c["subject"] == "mlx5_1/1"]


# -- judge ---------------------------------------------------------------------------------------------------------
def section_of(counters, previous=None, interval=None, device="mlx5_0", layer="Ethernet"):
    return {"time": 1.0, "interval": interval, "ports": [{"device": device, "port": 1, "link_layer": layer,
                                                          "counters": counters, "previous": previous, "problems": []}]}


def clean():
    return dict((name, 0) for name in catalogue.KNOWN)


def test_totals_name_the_port_and_counters_over_their_thresholds():
    counters = dict(clean(), local_ack_timeout_err=250, packet_seq_err=10000, rp_cnp_ignored=3, np_cnp_sent=10 ** 9)
    checks = judge.judge(section_of(counters), None)
    assert findings(checks) == [("counters.totals", "mlx5_0/1", "fail")]
    check = checks[0]
    assert check["detail"].startswith("local_ack_timeout_err 250 > 100; rp_cnp_ignored 3 > 0")
    assert "packet_seq_err" not in check["detail"]  # at its threshold, not above
    assert check["desired"]["local_ack_timeout_err"] == "<= 100" and "np_cnp_sent" not in check["desired"]
    assert "roce_rp/enable" in check["remedy"] and "lost" in check["remedy"]
    # no rates without a second reading
    assert not [c for c in checks if c["id"] == "counters.rates"]


def test_thresholds_from_the_inventory_and_bad_options():
    counters = dict(clean(), local_ack_timeout_err=250, rnr_nak_retry_err=7)
    desired = {"rdma_audit_hw_counter_thresholds": {"local_ack_timeout_err": None, "rnr_nak_retry_err": 5}}
    checks = judge.judge(section_of(counters), desired)
    assert findings(checks) == [("counters.totals", "mlx5_0/1", "fail")] and checks[0]["detail"].startswith(
        "rnr_nak_retry_err 7 > 5")
    for bad in ({"rdma_audit_hw_counter_thresholds": {"rcvd_seq_err": 1}},
                {"rdma_audit_hw_counter_thresholds": {"packet_seq_err": 1.5}},
                {"rdma_audit_hw_counter_rates": {"packet_seq_err": -1}},
                {"rdma_audit_hw_counter_rates": ["packet_seq_err"]}):
        checks = judge.judge(section_of(counters), bad)
        options = [c for c in checks if c["id"] == "counters.options"]
        assert len(options) == 1 and options[0]["status"] == "fail", bad
        # the option keeps its defaults: local_ack_timeout_err 250 > 100 still fails
        assert ("counters.totals", "mlx5_0/1", "fail") in findings(checks)
    assert judge.judge(section_of(counters), {"rdma_audit_hw_counter_rates": {"packet_seq_err": 0.5}})[0]["id"] == \
        "counters.totals"


def test_rates_between_two_readings():
    before = clean()
    after = dict(clean(), packet_seq_err=1500, out_of_sequence=900, np_cnp_sent=40)
    checks = judge.judge(section_of(after, before, 10.0), None)
    rates = [c for c in checks if c["id"] == "counters.rates"][0]
    assert rates["status"] == "fail" and rates["subject"] == "mlx5_0/1"
    assert rates["detail"].startswith("packet_seq_err +1500 in 10 s (150/s > 100/s)")
    assert "out_of_sequence +900" in rates["detail"] and "np_cnp_sent +40" in rates["detail"]
    assert rates["live"]["out_of_sequence"] == {"delta": 900, "per_second": 90.0}
    ok = judge.judge(section_of(dict(clean(), packet_seq_err=50), before, 10.0), None)
    assert [c["status"] for c in ok if c["id"] == "counters.rates"] == ["ok"]
    quiet = judge.judge(section_of(clean(), before, 10.0), None)
    assert [(c["status"], c["live"], c["detail"]) for c in quiet if c["id"] == "counters.rates"] == [("ok", {}, None)]


def test_a_counter_that_went_back_is_counted_from_zero():
    found = judge.growth(dict(clean(), packet_seq_err=4294967000, out_of_sequence=7),
                         dict(clean(), packet_seq_err=25, out_of_sequence=9))
    assert found == {"deltas": {"out_of_sequence": 2, "packet_seq_err": 25}, "reset": ["packet_seq_err"], "unread": []}
    checks = judge.judge(section_of(dict(clean(), local_ack_timeout_err=1), dict(clean(), local_ack_timeout_err=9), 5.0),
                         None)
    rates = [c for c in checks if c["id"] == "counters.rates"][0]
    assert rates["status"] == "fail" and "went back" in rates["detail"]


def test_growth_with_unread_and_absent_counters():
    found = judge.growth({"packet_seq_err": 1, "out_of_sequence": "N/A"},
                         {"packet_seq_err": 3, "out_of_sequence": 5, "rx_write_requests": 99})
    assert found == {"deltas": {"packet_seq_err": 2}, "reset": [], "unread": ["out_of_sequence"]}
    assert judge.growth(None, None) == {"deltas": {}, "reset": [], "unread": []}


def test_no_facts_from_an_older_collection():
    assert [c["status"] for c in judge.judge(None, None)] == ["unknown"]


# -- end to end ------------------------------------------------------------------------------------------------------
def test_rdma_facts_and_the_audit_carry_the_layer(monkeypatch, tmp_path):
    from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit  # pylint: disable=import-outside-toplevel
    from unit.plugins.modules.harness import ModuleFail, run_module  # pylint: disable=import-outside-toplevel
    assert _registry.by_name("counters").judge is judge.judge
    root = render("roce-cx6dx", tmp_path)
    write(root, "mlx5_1", "req_transport_retries_exceeded", 11)
    facts = run_module(monkeypatch, rdma_facts.main, {"host_root": str(root)})["ansible_facts"]["rdma"]
    assert [p["device"] for p in facts["layers"]["counters"]["ports"]] == ["mlx5_0", "mlx5_1"]
    checks = [c for c in _audit.audit_host(facts, None, ["counters"]) if c["layer"] == "counters"]
    assert findings(checks) == [("counters.totals", "mlx5_1/1", "fail")]
    assert "req_transport_retries_exceeded 11 > 10" in [c for c in checks if c["status"] == "fail"][0]["detail"]
    failed = run_module(monkeypatch, rdma_facts.main, {"host_root": str(root), "counters_interval": 90}, expect=ModuleFail)
    assert "counters_interval must be a number of seconds from 0 to 60, got 90" in failed["msg"]
