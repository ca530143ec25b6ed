"""validate.yml on simulated nodes (issue 22 item 5): four one-rail ConnectX-7 nodes, each a FUSE-mounted simulator,
tested in two pairs with the hwsim ib_write_bw shim as perftest. The server of one pair has a port that loses
packets (a ``retransmit`` fault): its row is below the line and names the retransmissions its two ports counted, with
the counters and their increase; the clean pair passes without any."""

import json
import os
import pathlib
import socket
import sys

import pytest
import yaml

import hwsim
from hwsim.rail import rail_spec

REPO = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
SHIM = REPO / "tests" / "hwsim" / "shims" / "ib_write_bw"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(not PLAYBOOK.exists(), reason=".venv/bin/ansible-playbook is not installed")
def test_validate_names_retransmissions_as_the_cause_of_the_slow_rail(tmp_path):
    reason = hwsim.fuse_available()
    if reason:
        pytest.skip("needs FUSE: %s" % reason)
    names = ("a", "b", "c", "d")
    hosts = {}
    with hwsim.mounted(_spec(tmp_path, "a", 1), tmp_path / "a", threads=False) as node_a, \
            hwsim.mounted(_spec(tmp_path, "b", 2), tmp_path / "b", threads=False) as node_b, \
            hwsim.mounted(_spec(tmp_path, "c", 3), tmp_path / "c", threads=False) as node_c, \
            hwsim.mounted(_spec(tmp_path, "d", 4), tmp_path / "d", threads=False) as node_d:
        mounts = dict(zip(names, (node_a, node_b, node_c, node_d)))
        # d's port drops 2000 packets a second while traffic runs and delivers 60 % of its rate
        node_d.call({"cmd": "fault_add", "path": "sys/class/infiniband/mlx5_0/ports/1", "action": "retransmit",
                     "per_second": 2000, "throughput": 0.6})
        for name, mount in mounts.items():
            wrapper = tmp_path / ("ib_write_bw-%s" % name)  # perftest on this node: the shim with its simulator
            wrapper.write_text("#!/bin/sh\nHWSIM_ROOT=%s exec %s %s \"$@\"\n" % (mount.root, sys.executable, SHIM),
                               encoding="utf-8")
            wrapper.chmod(0o755)
            hosts[name] = {"rdma_k8s_node_host_root": str(mount.root), "rdma_validate_perftest_binary": str(wrapper),
                           "rdma_validate_base_port": free_port(), "ansible_host": "127.0.0.1"}
        inventory = {"all": {"hosts": hosts, "vars": {
            "ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv" / "bin" / "python")}}}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
        extra = {"rdma_validate_pairs": [["a", "b"], ["c", "d"]], "rdma_validate_gpu": False,
                 "rdma_validate_duration": 1, "rdma_validate_timeout": 30, "rdma_validate_start_timeout": 15,
                 "rdma_validate_dir": str(tmp_path / "out"), "ansible_become": False}
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
        import subprocess  # pylint: disable=import-outside-toplevel
        done = subprocess.run([str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"),
                               str(REPO / "playbooks" / "validate.yml"), "-e", json.dumps(extra)],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
        counted = dict((name, mount.root.joinpath("sys/class/infiniband/mlx5_0/ports/1/hw_counters")) for name, mount
                       in mounts.items())
        on_d = int((counted["d"] / "out_of_sequence").read_text(encoding="utf-8"))
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    rows = dict((row["pair"], row) for row in report["pairs"])
    clean, slow = rows["a -> b"], rows["c -> d"]
    assert clean["status"] == "pass" and clean["gbps"] == pytest.approx(388.0, abs=0.1), clean
    assert not [c for c in clean["causes"] if c["kind"] in ("retransmissions", "congestion")]
    assert not [n for n in clean["notes"] if "retransmission" in n]
    assert clean["counters"]["client"]["deltas"] == {} and clean["counters"]["server"]["deltas"] == {}
    assert slow["status"] == "fail" and slow["gbps"] == pytest.approx(232.8, abs=0.1), slow
    assert [c["kind"] for c in slow["causes"]] == ["retransmissions", "below_line_rate"]
    assert slow["cause"] == ("retransmissions during the test: c mlx5_0/1 (client) packet_seq_err +1800, "
                             "local_ack_timeout_err +200; d mlx5_0/1 (server) out_of_sequence +1800, "
                             "duplicate_request +200")
    assert slow["counters"]["server"]["deltas"] == {"out_of_sequence": 1800, "duplicate_request": 200}
    assert on_d == 1800
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "retransmissions during the test: c mlx5_0/1 (client) packet_seq_err +1800" in markdown
    assert "c -> d rail 0 FAIL 232.80 Gb/s: retransmissions during the test" in done.stdout


def _spec(tmp_path, name, index):
    return rail_spec(tmp_path, name, guid="a088:c203:0055:aa%02x" % index, lid=0x10 + index)
