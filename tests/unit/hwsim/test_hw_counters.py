"""hw_counters of the simulated mlx5 ports: the files per model, spec values, growth while traffic runs through a
port with a retransmit fault, and the ib_write_bw shim between two mounted nodes."""

import errno
import os
import json
import socket
import stat
import subprocess
import sys
import time

import pytest
from conftest import SHIMS, _require_fuse
from hwsim_helpers import errno_of

import hwsim
from hwsim import control
from hwsim.models import HW_COUNTER_GROUPS, MODELS
from hwsim.rail import rail_spec

HW = "sys/class/infiniband/%s/ports/1/hw_counters"


def counters(node, dev="mlx5_0"):
    return dict((name, int(node.read("%s/%s" % (HW % dev, name)))) for name in node.readdir(HW % dev)
                if name != "lifespan")


def test_files_per_model_and_link_layer(make_node):
    dgx = make_node("dgx-h100")  # ConnectX-7: InfiniBand rails and Ethernet storage ports
    ib, eth = sorted(dgx.readdir(HW % "mlx5_0")), sorted(dgx.readdir(HW % "mlx5_1"))
    assert dgx.read("sys/class/infiniband/mlx5_1/ports/1/link_layer") == "Ethernet\n"
    # the groups are per device capability, not per port: the same files on an IB and a RoCE port
    assert ib == eth == sorted(MODELS["connectx-7"].hw_counters + ("lifespan",))
    assert {"out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err", "implied_nak_seq_err",
            "duplicate_request", "req_cqe_error", "resp_cqe_error", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
            "np_ecn_marked_roce_packets", "roce_adp_retrans", "roce_slow_restart"} <= set(ib)
    roce = make_node("roce-cx6dx")  # ConnectX-6 Dx: the same groups
    assert sorted(roce.readdir(HW % "mlx5_0")) == ib
    a100 = make_node("a100-10nic")  # ConnectX-6 (VPI): no RoCE acceleration, no ICRC counter
    cx6 = set(a100.readdir(HW % "mlx5_0"))
    assert not cx6 & set(HW_COUNTER_GROUPS["roce_accl"] + ("rx_icrc_encapsulated",))
    assert {"out_of_sequence", "local_ack_timeout_err", "np_cnp_sent"} <= cx6
    assert all(value == 0 for value in counters(dgx).values())


def test_attribute_modes_and_lifespan(make_node):
    node = make_node("roce-cx6dx")
    assert node.read(HW % "mlx5_0" + "/lifespan") == "10\n"
    assert node.write(HW % "mlx5_0" + "/lifespan", "100\n") == 4
    for bad in ("x", "10001", "-1", "1 2"):
        assert errno_of(node.write, HW % "mlx5_0" + "/lifespan", bad) == errno.EINVAL, bad
    assert errno_of(node.write, HW % "mlx5_0" + "/out_of_sequence", "0") == errno.EACCES


def test_spec_values_and_their_checks(tmp_path):
    spec = hwsim.load(rail_spec(tmp_path, "r", extra=", hw_counters: {out_of_sequence: 17, np_cnp_sent: 5}"))
    node = hwsim.Node(spec)
    values = counters(node)
    assert (values["out_of_sequence"], values["np_cnp_sent"], values["packet_seq_err"]) == (17, 5, 0)
    with pytest.raises(hwsim.SpecError, match="not one of this model's"):
        hwsim.load(rail_spec(tmp_path, "bad", extra=", hw_counters: {rcvd_seq_err: 1}"))
    with pytest.raises(hwsim.SpecError, match="32-bit"):
        hwsim.load(rail_spec(tmp_path, "big", extra=", hw_counters: {out_of_sequence: 4294967296}"))


def test_counters_grow_while_traffic_runs_then_stop(make_node, clock):
    node = make_node("roce-cx6dx")
    node.faults.add_retransmit("sys/class/infiniband/mlx5_0/ports/1", per_second=1000, throughput=0.6,
                               cnps_per_second=20)
    before = counters(node)
    node.traffic("mlx5_0", 1, "requester", 10)
    clock.advance(5)
    half = counters(node)
    assert (half["packet_seq_err"], half["local_ack_timeout_err"], half["roce_adp_retrans"], half["rp_cnp_handled"]) \
        == (4500, 500, 500, 100)
    clock.advance(60)
    done = counters(node)
    assert (done["packet_seq_err"], done["local_ack_timeout_err"]) == (9000, 1000)
    # the requester's responder-side counters and the other port did not move
    assert done["out_of_sequence"] == before["out_of_sequence"] == 0 and counters(node, "mlx5_1") == counters(
        make_node("roce-cx6dx"), "mlx5_1")
    # a responder counts the peer's losses as gaps (NAKed) and duplicates (after the peer's timeouts)
    node.traffic("mlx5_1", 1, "responder", 2, peer={"per_second": 100, "cnps_per_second": 10})
    clock.advance(2)
    other = counters(node, "mlx5_1")
    assert (other["out_of_sequence"], other["duplicate_request"], other["np_cnp_sent"],
            other["np_ecn_marked_roce_packets"]) == (180, 20, 20, 20)


def test_infiniband_traffic_counts_no_roce_counters_and_q_counters_wrap(tmp_path, clock):
    spec = hwsim.load(rail_spec(tmp_path, "r", extra=", hw_counters: {packet_seq_err: 4294967290}"))
    node = hwsim.Node(spec, clock=clock)
    node.faults.add_retransmit("sys/class/infiniband/mlx5_0/ports/1", per_second=100, cnps_per_second=50)
    node.traffic("mlx5_0", 1, "requester", 1)
    clock.advance(1)
    values = counters(node)
    assert values["packet_seq_err"] == (4294967290 + 90) - (1 << 32)  # a 32-bit Q counter wraps
    assert values["local_ack_timeout_err"] == 10
    assert values["roce_adp_retrans"] == values["rp_cnp_handled"] == 0  # RoCE-only


def test_a_power_on_starts_the_counters_again(make_node, clock):
    node = make_node("roce-cx6dx")
    node.faults.add_retransmit("sys/devices/*/infiniband/mlx5_*/ports/1", per_second=10)  # globs match the canonical path
    node.traffic("mlx5_0", 1, "requester", 1)
    clock.advance(1)
    assert counters(node)["packet_seq_err"] == 9
    node.power_on()
    assert counters(node)["packet_seq_err"] == 0
    assert node.port_fault("mlx5_0", 1)["per_second"] == 10  # faults are instrumentation: they survive a reset


def test_control_commands(make_node):
    node = make_node("roce-cx6dx")
    reply = json.loads(control.handle(node, json.dumps({
        "cmd": "fault_add", "path": "sys/class/infiniband/mlx5_0/ports/1", "action": "retransmit", "per_second": 5,
        "throughput": 0.5})))
    assert reply["ok"] and reply["result"]["action"] == "retransmit"
    fault = json.loads(control.handle(node, '{"cmd": "port_fault", "dev": "mlx5_0"}'))["result"]
    assert (fault["per_second"], fault["throughput"], fault["rate"], fault["link_layer"]) == (
        5.0, 0.5, "100 Gb/sec (2X HDR)", "Ethernet")
    ran = json.loads(control.handle(node, '{"cmd": "traffic", "dev": "mlx5_0", "role": "responder", "seconds": 1}'))
    assert ran["result"]["rates"] == {"out_of_sequence": 4.5, "duplicate_request": 0.5}
    assert json.loads(control.handle(node, '{"cmd": "traffic", "dev": "mlx5_9", "role": "responder", "seconds": 1}'))[
        "errno"] == "ENODEV"
    assert "role must be" in json.loads(control.handle(node, '{"cmd": "traffic", "dev": "mlx5_0", "role": "x", '
                                                             '"seconds": 1}'))["error"]
    bad = json.loads(control.handle(node, '{"cmd": "fault_add", "path": "x", "action": "retransmit", "throughput": 0}'))
    assert not bad["ok"] and "0 < throughput" in bad["error"]
    assert "retransmit" in json.dumps(json.loads(control.handle(node, '{"cmd": "dump"}'))["result"]["faults"])
    assert json.loads(control.handle(node, '{"cmd": "fault_clear"}'))["result"] == {"cleared": 1}
    assert node.port_fault("mlx5_0", 1)["per_second"] == 0


def test_render_writes_the_values(tmp_path):
    root = hwsim.render(rail_spec(tmp_path, "r", extra=", hw_counters: {duplicate_request: 3}"), tmp_path / "root")
    base = root / (HW % "mlx5_0")
    assert (base / "duplicate_request").read_text(encoding="utf-8") == "3\n"
    assert stat.S_IMODE(os.stat(base / "out_of_sequence").st_mode) == 0o444
    assert stat.S_IMODE(os.stat(base / "lifespan").st_mode) == 0o644


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _shim(mount, *args):
    env = dict(os.environ, HWSIM_ROOT=str(mount.root))
    return [sys.executable, str(SHIMS / "ib_write_bw")] + list(args), env


def test_ib_write_bw_shim_between_two_mounted_nodes(tmp_path):
    """The server's port loses packets: both ends count the retransmissions, the client reports the lower rate."""
    _require_fuse()
    with hwsim.mounted(rail_spec(tmp_path, "srv"), tmp_path / "srv") as srv, \
            hwsim.mounted(rail_spec(tmp_path, "cli", guid="a088:c203:0055:bb00", lid=0x12), tmp_path / "cli") as cli:
        srv.call({"cmd": "fault_add", "path": "sys/class/infiniband/mlx5_0/ports/1", "action": "retransmit",
                  "per_second": 2000, "throughput": 0.6})
        help_text = subprocess.run(*_shim(cli, "--help")[:1], env=_shim(cli)[1], capture_output=True, text=True,
                                   check=True).stdout
        assert "--bind_source_ip" in help_text and "--use_cuda" not in help_text
        port = _free_port()
        argv, env = _shim(srv, "-d", "mlx5_0", "-i", "1", "-p", str(port), "-D", "1", "-F", "--report_gbits")
        server = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            seen = []
            while not any("Waiting for client" in line for line in seen):  # printed once it listens
                seen.append(server.stdout.readline())
                assert seen[-1], "".join(seen)
            argv, env = _shim(cli, "-d", "mlx5_0", "-i", "1", "-p", str(port), "-D", "1", "-F", "--report_gbits",
                              "127.0.0.1")
            client = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
            out = "".join(seen) + server.communicate(timeout=30)[0]
        finally:
            server.kill()
        assert client.returncode == 0, client.stderr
        assert "Waiting for client to connect" in out and server.returncode == 0
        row = [line for line in client.stdout.splitlines() if line.strip().startswith("65536")][0].split()
        assert float(row[3]) == pytest.approx(400 * 0.97 * 0.6, abs=0.01)
        time.sleep(0.2)
        on_client = dict((n, int((cli.root / (HW % "mlx5_0") / n).read_text()))
                         for n in ("packet_seq_err", "local_ack_timeout_err"))
        on_server = dict((n, int((srv.root / (HW % "mlx5_0") / n).read_text()))
                         for n in ("out_of_sequence", "duplicate_request"))
        assert on_client == {"packet_seq_err": 1800, "local_ack_timeout_err": 200}
        assert on_server == {"out_of_sequence": 1800, "duplicate_request": 200}
        failed = subprocess.run(*_shim(cli, "-d", "mlx5_7", "-p", str(port), "127.0.0.1")[:1],
                                env=_shim(cli)[1], capture_output=True, text=True, check=False)
        assert failed.returncode == 1 and "Unable to find the Infiniband/RoCE device" in failed.stderr
