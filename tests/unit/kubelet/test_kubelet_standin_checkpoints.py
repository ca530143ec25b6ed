"""The kubelet stand-in refuses a checkpoint its configuration no longer matches, as the kubelet does at start.

Sources: pkg/kubelet/cm/memorymanager/policy_static.go (validateState, getDefaultMachineState, areMachineStatesEqual)
and pkg/kubelet/cm/cpumanager/policy_static.go (validateState).
"""

import json
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

STANDIN = pathlib.Path(__file__).resolve().parents[2] / "kubelet" / "kubelet_standin.py"
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
MEMORY = ("kubeReserved: {memory: 512Mi}\nsystemReserved: {memory: 512Mi}\nmemoryManagerPolicy: Static\n"
          "reservedMemory:\n- {numaNode: 0, limits: {memory: %s}}\n- {numaNode: 1, limits: {memory: %s}}\n")


@pytest.fixture(name="node")
def node_fixture(tmp_path):
    (tmp_path / "etc/kubelet-standin").mkdir(parents=True)
    (tmp_path / "etc/kubelet-standin/version").write_text("v1.31.2\n")
    (tmp_path / "var/lib/kubelet").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    for node in (0, 1):
        (tmp_path / ("sys/devices/system/node/node%d" % node)).mkdir(parents=True)
        (tmp_path / ("sys/devices/system/node/node%d/meminfo" % node)).write_text(
            "Node %d MemTotal:       4194304 kB\nNode %d MemFree:        1000000 kB\n" % (node, node))
    return tmp_path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(node, config, port=None):
    """(True, None) when the stand-in is still up after its managers started, else (False, stderr)."""
    port = port or free_port()
    (node / "var/lib/kubelet/config.yaml").write_text(HEADER + "healthzPort: %d\n" % port + config)
    proc = subprocess.Popen([sys.executable, str(STANDIN), "--config=/var/lib/kubelet/config.yaml"],
                            env={"KUBELET_STANDIN_ROOT": str(node), "KUBELET_STANDIN_MODULES_DELAY": "0"},
                            stderr=subprocess.PIPE, text=True)
    try:
        for dummy in range(100):
            if proc.poll() is not None:
                return False, proc.stderr.read()
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        # healthz answers before the managers restore their checkpoints (as the kubelet's does): give them time,
        # generously, since a busy CI machine can take seconds to schedule the stand-in
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False, proc.stderr.read()
            time.sleep(0.05)
        return True, None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()


def test_static_memory_writes_the_machine_state_and_takes_it_back(node):
    assert run(node, MEMORY % ("1Gi", "100Mi")) == (True, None)
    state = json.loads((node / "var/lib/kubelet/memory_manager_state").read_text())
    assert state["policyName"] == "Static"
    assert state["machineState"]["0"]["memoryMap"]["memory"]["systemReserved"] == 1 << 30
    assert state["machineState"]["1"]["memoryMap"]["memory"]["total"] == 4 << 30
    assert run(node, MEMORY % ("1024Mi", "100Mi")) == (True, None)      # the same bytes: the same machine state


def test_a_reserved_memory_change_over_the_old_checkpoint_stops_the_kubelet(node):
    assert run(node, MEMORY % ("1Gi", "100Mi"))[0]
    ok, err = run(node, MEMORY % ("562Mi", "562Mi"))
    assert not ok and "the expected machine state is different from the real one" in err
    (node / "var/lib/kubelet/memory_manager_state").unlink()          # what kubelet_topology does with restart=true
    assert run(node, MEMORY % ("562Mi", "562Mi")) == (True, None)


def test_memory_assignments_without_a_machine_state_are_refused(node):
    (node / "var/lib/kubelet/memory_manager_state").write_text(json.dumps(
        {"policyName": "Static", "machineState": {}, "entries": {"pod": {"c": []}}}))
    ok, err = run(node, MEMORY % ("1Gi", "100Mi"))
    assert not ok and "machine state can not be empty" in err


def test_static_cpu_writes_the_online_cpus(node):
    assert run(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n") == (True, None)
    assert json.loads((node / "var/lib/kubelet/cpu_manager_state").read_text())["defaultCpuSet"] == "0-3"
    # a reservation change is accepted while no container holds a newly reserved CPU (validateState)
    assert run(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0-1'\n") == (True, None)


def test_a_reserved_cpu_held_by_a_container_stops_the_kubelet(node):
    (node / "var/lib/kubelet/cpu_manager_state").write_text(json.dumps(
        {"policyName": "static", "defaultCpuSet": "0,2-3", "entries": {"pod": {"c": "1"}}}))
    ok, err = run(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0-1'\n")
    assert not ok and 'not all reserved cpus: "0-1" are present in defaultCpuSet: "0,2-3"' in err


def test_a_checkpoint_of_other_cpus_stops_the_kubelet(node):
    (node / "var/lib/kubelet/cpu_manager_state").write_text(json.dumps({"policyName": "static", "defaultCpuSet": "0-7"}))
    ok, err = run(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n")
    assert not ok and "doesn't match with CPUs in state" in err
