"""The kubelet room's facts (runtime.kubelet): config, drop-ins and state files read from a host root; PyYAML only when a config exists."""

import builtins
import json
import sys

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe


def kubelet_facts(host, **kwargs):
    """``runtime.kubelet`` as rdma_facts returns it: the kubelet room's facts without the planner's input."""
    return kubelet_observe.report_of(kubelet_observe.facts(host, **kwargs))


def _write(root, path, text):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _kubelet_process(root, pid, cmdline):
    _write(root, "/proc/%d/comm" % pid, "kubelet\n")
    _write(root, "/proc/%d/cmdline" % pid, "\0".join(cmdline) + "\0")


@pytest.fixture
def no_yaml(monkeypatch):
    """Import of PyYAML fails (as on a node without python3-yaml); yields the names that were asked for."""
    asked = []
    real_import = builtins.__import__

    def guarded(name, *args, **kwargs):
        if name == "yaml" or name.startswith("yaml."):
            asked.append(name)
            raise ImportError("No module named %r" % name)
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "yaml", raising=False)
    monkeypatch.setattr(builtins, "__import__", guarded)
    yield asked


def test_config_and_drop_ins_merge_as_the_kubelet_merges(tmp_path):
    _kubelet_process(tmp_path, 4242, ["/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml",
                                      "--config-dir=/etc/kubernetes/kubelet.conf.d"])
    _write(tmp_path, "/var/lib/kubelet/config.yaml",
           "kind: KubeletConfiguration\ncpuManagerPolicy: none\ntopologyManagerPolicyOptions: {prefer-closest-numa-nodes: 'true'}\n")
    _write(tmp_path, "/etc/kubernetes/kubelet.conf.d/10-rdma.conf",
           "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\ntopologyManagerPolicyOptions: {max-allowable-numa-nodes: '8'}\n")
    _write(tmp_path, "/etc/kubernetes/kubelet.conf.d/ignored.yaml", "cpuManagerPolicy: none\n")
    _write(tmp_path, "/var/lib/kubelet/cpu_manager_state", json.dumps({"policyName": "static"}))
    facts = kubelet_facts(HostRoot(str(tmp_path)))
    assert facts["running"] is True and facts["config_dir"] == "/etc/kubernetes/kubelet.conf.d"
    assert facts["settings"]["cpuManagerPolicy"] == "static"
    assert facts["settings"]["reservedSystemCPUs"] == "0-1"
    assert facts["settings"]["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "true",
                                                                 "max-allowable-numa-nodes": "8"}
    assert facts["settings"]["topologyManagerPolicy"] == "none"  # the kubelet's default
    assert facts["state_files"]["cpuManagerPolicy"]["policy"] == "static"
    assert facts["state_files"]["memoryManagerPolicy"]["policy"] is None
    assert facts["problems"] == []


def test_a_config_that_is_not_yaml_is_a_problem_not_a_failure(tmp_path):
    _write(tmp_path, "/var/lib/kubelet/config.yaml", "cpuManagerPolicy: [static\n")
    _write(tmp_path, "/var/lib/kubelet/memory_manager_state", "{not json")
    facts = kubelet_facts(HostRoot(str(tmp_path)))
    assert [p["what"] for p in facts["problems"]] == ["/var/lib/kubelet/config.yaml"]
    assert facts["settings"] == {}  # unknown (the kubelet refuses such a file), not the kubelet's defaults
    assert facts["state_files"]["memoryManagerPolicy"]["policy"] == "unreadable"


def test_without_a_config_pyyaml_is_not_imported(tmp_path, no_yaml):
    facts = kubelet_facts(HostRoot(str(tmp_path)))
    assert no_yaml == []
    assert facts["problems"] == [] and facts["running"] is False
    assert facts["settings"] == dict((key, kub.DEFAULTS.get(key)) for key in kub.MANAGED_KEYS)


def test_a_config_without_pyyaml_is_reported_and_not_guessed(tmp_path, no_yaml):
    _write(tmp_path, "/var/lib/kubelet/config.yaml", "cpuManagerPolicy: static\n")
    facts = kubelet_facts(HostRoot(str(tmp_path)))
    assert no_yaml == ["yaml"]
    assert facts["problems"] == [{"what": "kubelet config", "error": "PyYAML is not installed: settings not read"}]
    assert facts["settings"] == {}


def test_an_unreadable_config_leaves_the_settings_unknown(tmp_path, monkeypatch):
    _write(tmp_path, "/var/lib/kubelet/config.yaml", "cpuManagerPolicy: static\n")
    _write(tmp_path, "/var/lib/kubelet/cpu_manager_state", json.dumps({"policyName": "static"}))
    host = HostRoot(str(tmp_path))
    real_read = host.read_text

    def eio(node_path, default=None):  # what HostRoot raises for EIO/EACCES (root reads a mode-0 file)
        if node_path == "/var/lib/kubelet/config.yaml":
            raise HostReadError("cannot read %s: Input/output error" % node_path, {"path": node_path, "errno": 5})
        return real_read(node_path, default)

    monkeypatch.setattr(host, "read_text", eio)
    facts = kubelet_facts(host)
    assert facts["settings"] == {}
    assert facts["problems"] == [{"what": "kubelet config",
                                  "error": "cannot read /var/lib/kubelet/config.yaml: Input/output error"}]
    assert facts["state_files"]["cpuManagerPolicy"]["policy"] == "static"  # the rest of the section is still read


def test_malformed_proc_limits_is_a_problem_not_a_failure(tmp_path):
    """Found by the fuzz suite: a 'Max locked memory' line without two numbers raised IndexError/ValueError out of
    containerd_facts (rdma_facts failed)."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd.observe import facts as containerd_facts
    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "77" / "comm").write_text("containerd\n")
    (tmp_path / "proc" / "77" / "limits").write_text("Max locked memory  8388608\n")
    facts = containerd_facts(HostRoot(str(tmp_path)))
    assert facts["running"] == {"pid": 77, "memlock": None}
    assert [p["what"] for p in facts["problems"]] == ["/proc/77/limits"]
