"""The kubelet stand-in of the runtime scenario refuses at start what the kubelet refuses (tests/kubelet)."""

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


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(name="node")
def node_fixture(tmp_path):
    (tmp_path / "etc/kubelet-standin").mkdir(parents=True)
    (tmp_path / "etc/kubelet-standin/version").write_text("v1.31.2\n")
    (tmp_path / "var/lib/kubelet").mkdir(parents=True)
    (tmp_path / "etc/kubernetes/kubelet.conf.d").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    return tmp_path


def wait_healthz(proc, port):
    for dummy in range(100):
        try:
            return urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1).read()
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
    raise AssertionError("no healthz")


def start(node, config, *flags, version=None):
    if version:
        (node / "etc/kubelet-standin/version").write_text(version + "\n")
    (node / "var/lib/kubelet/config.yaml").write_text(HEADER + config)
    return subprocess.Popen([sys.executable, str(STANDIN), "--config=/var/lib/kubelet/config.yaml"] + list(flags),
                            env={"KUBELET_STANDIN_ROOT": str(node), "KUBELET_STANDIN_MODULES_DELAY": "0.3"}, stderr=subprocess.PIPE, text=True)


def refused(node, config, *flags, version=None):
    proc = start(node, config, *flags, version=version)
    dummy_out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    return err


def test_version(node):
    out = subprocess.run([sys.executable, str(STANDIN), "--version"], env={"KUBELET_STANDIN_ROOT": str(node)},
                         capture_output=True, text=True, check=True).stdout
    assert out == "Kubernetes v1.31.2\n"


def test_a_checkpoint_of_another_policy_stops_the_kubelet_after_it_answered_healthz(node):
    (node / "var/lib/kubelet/cpu_manager_state").write_text(json.dumps({"policyName": "none"}))
    port = free_port()
    proc = start(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\nhealthzPort: %d\n" % port)
    assert wait_healthz(proc, port) == b"ok"        # the kubelet answers first ...
    dummy_out, err = proc.communicate(timeout=30)   # ... then its CPU manager refuses the checkpoint
    assert proc.returncode == 1
    assert 'configured policy "static" differs from state checkpoint policy "none"' in err


@pytest.mark.parametrize("config, message", [
    ("cpuManagerPolicy: static\n", "requires systemreserved.cpu + kubereserved.cpu to be greater than zero"),
    ("cpuManagerPolicy: static\nreservedSystemCPUs: 6-7\n", "are not all online"),
    ("topologyManagerPolicy: numa\n", 'topologyManagerPolicy (--topology-manager-policy) "numa" must be one of'),
    ("topologyManagerScope: node\n", "topologyManagerScope"),
    ("memoryManagerPolicy: Static\n", "you should specify the memory reservation"),
    ("memoryManagerPolicy: Static\nreservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]\n",
     'the total amount "1073741824" of type "memory" is not equal to the value "104857600"'),
])
def test_settings_the_kubelet_refuses(node, config, message):
    assert message in refused(node, config)


def test_a_dropin_is_merged_and_checked(node):
    (node / "etc/kubernetes/kubelet.conf.d/50-x.conf").write_text(HEADER + "cpuManagerPolicy: static\n")
    (node / "etc/kubernetes/kubelet.conf.d/10-ignored.yaml").write_text("not: a drop-in\n")
    err = refused(node, "", "--config-dir=/etc/kubernetes/kubelet.conf.d")
    assert "greater than zero" in err


def test_config_dir_needs_a_kubelet_that_has_it(node):
    assert "unknown flag: --config-dir" in refused(node, "", "--config-dir=/etc/kubernetes/kubelet.conf.d",
                                                   version="v1.27.9")


def test_a_good_config_starts_writes_its_checkpoint_and_answers_healthz(node):
    port = free_port()
    proc = start(node, "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\nhealthzPort: %d\n" % port)
    try:
        assert wait_healthz(proc, port) == b"ok"
        time.sleep(0.5)
        assert proc.poll() is None
        assert json.loads((node / "var/lib/kubelet/cpu_manager_state").read_text())["policyName"] == "static"
    finally:
        proc.kill()
        proc.wait()
