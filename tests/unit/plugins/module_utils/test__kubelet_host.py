"""layers/kubelet/host.py: the kubelet's command line and configuration read from a host root as the node starts it."""

import json
import os
import sys
import traceback

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe
from unit.plugins.kubelet_nodes import SCENARIOS, build_tree, scenario, write


def kubelet_facts(host, **kwargs):
    """``runtime.kubelet`` as rdma_facts returns it: the kubelet room's facts without the planner's input."""
    return kubelet_observe.report_of(kubelet_observe.facts(host, **kwargs))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_unit_command_of_each_real_node_is_the_one_written_out_by_hand(tmp_path, name):
    spec = scenario(name)
    build_tree(tmp_path, spec)
    host = HostRoot(str(tmp_path))
    problems = []
    assert [w for w, o in kh.unit_command(host, kh.unit_files(host), problems)] == spec["cmdline"]
    assert problems == []
    line = kh.command_line(host)
    assert line["source"] == "unit" and line["config"] == spec["config"]
    assert line["config_dir"] == spec.get("dropin_dir") and line["flags"] == []


def _process(root, pid, words):
    write(root, "/proc/%d/comm" % pid, "kubelet\n")
    write(root, "/proc/%d/cmdline" % pid, "\0".join(words) + "\0")


def test_the_running_kubelet_is_the_truth_and_its_flags_name_their_file(tmp_path):
    spec = scenario("kubeadm-deb")
    build_tree(tmp_path, spec)
    write(tmp_path, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS='--cpu-manager-policy=static --reserved-cpus=0'\n")
    _process(tmp_path, 77, spec["cmdline"][:3] + ["--config=/etc/old.yaml", "--cpu-manager-policy=static",
                                                  "--topology-manager-policy=none"])
    host = HostRoot(str(tmp_path))
    assert kh.find_pid(host) == 77
    line = kh.command_line(host, 77)
    assert line["source"] == "process" and line["config"] == "/etc/old.yaml"
    assert [f["flag"] for f in line["flags"]] == ["--cpu-manager-policy=static", "--reserved-cpus=0"]
    assert line["flags"][0]["source"] == "$KUBELET_EXTRA_ARGS from /etc/default/kubelet"
    assert [(f["flag"], f["source"]) for f in line["live_flags"]] == [
        ("--cpu-manager-policy=static", "$KUBELET_EXTRA_ARGS from /etc/default/kubelet"),
        ("--topology-manager-policy=none", "/proc/77/cmdline")]
    assert "a restart changes which file it reads" in line["problems"][0]["error"]


def test_a_masked_unit_and_no_process_fall_back_to_the_flag_files(tmp_path):
    build_tree(tmp_path, scenario("kubeadm-deb"))
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "etc/systemd/system/kubelet.service").symlink_to("/dev/null")
    write(tmp_path, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--topology-manager-policy=restricted\n")
    line = kh.command_line(HostRoot(str(tmp_path)))
    assert line["unit"] is None and line["source"] == "env files" and line["config"] is None
    assert [(f["flag"], f["origin"]["file"], f["origin"]["var"]) for f in line["flags"]] == [
        ("--topology-manager-policy=restricted", "/etc/default/kubelet", "KUBELET_EXTRA_ARGS")]


def test_nothing_at_all(tmp_path):
    line = kh.command_line(HostRoot(str(tmp_path)))
    assert (line["source"], line["config"], line["flags"], line["problems"]) == (None, None, [], [])


def test_a_required_environment_file_that_is_missing_is_a_problem(tmp_path):
    spec = scenario("eks-al2023")
    build_tree(tmp_path, dict(spec, extra={}))
    line = kh.command_line(HostRoot(str(tmp_path)))
    assert line["problems"] == [{"what": "/etc/eks/kubelet/environment", "error": "EnvironmentFile=/etc/eks/kubelet/"
                                 "environment (in /etc/systemd/system/kubelet.service) does not exist: systemd refuses "
                                 "to start the kubelet"}]


def test_environment_file_globs_and_drop_in_directories_in_priority_order(tmp_path):
    write(tmp_path, "/usr/lib/systemd/system/kubelet.service",
          "[Service]\nEnvironmentFile=-/etc/kubelet.d/*.env\nExecStart=/usr/bin/kubelet $A $B\n")
    write(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/20-x.conf", "[Service]\nEnvironment=B=--from-usr\n")
    write(tmp_path, "/etc/systemd/system/kubelet.service.d/20-x.conf", "[Service]\nEnvironment=B=--from-etc\n")
    write(tmp_path, "/etc/systemd/system/service.d/10-all.conf", "[Service]\nEnvironment=A=--all-services\n")
    write(tmp_path, "/etc/kubelet.d/1.env", "A=--one\n")
    write(tmp_path, "/etc/kubelet.d/2.env", "A=--two --cpu-manager-policy=static\n")
    host = HostRoot(str(tmp_path))
    assert [p for p, t in kh.unit_files(host)] == ["/usr/lib/systemd/system/kubelet.service",
                                                   "/etc/systemd/system/service.d/10-all.conf",
                                                   "/etc/systemd/system/kubelet.service.d/20-x.conf"]
    words = kh.unit_command(host, kh.unit_files(host), [])
    assert [w for w, o in words] == ["/usr/bin/kubelet", "--two", "--cpu-manager-policy=static", "--from-etc"]
    assert words[2][1] == {"file": "/etc/kubelet.d/2.env", "how": "EnvironmentFile", "var": "A"}


def test_drop_ins_walk_like_the_kubelet(tmp_path):
    base = "/etc/kubernetes/kubelet.conf.d"
    doc = json.dumps({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"})
    for name in ("50-b.conf", "10-a.conf", "20-sub/z.conf", "20-sub/a.conf", ".hidden.conf", "x.conf.bak", "y.yaml"):
        write(tmp_path, base + "/" + name, doc)
    assert [n for n, p in kh.walk_dropins(HostRoot(str(tmp_path)), base)] == [
        ".hidden.conf", "10-a.conf", "20-sub/a.conf", "20-sub/z.conf", "50-b.conf"]


def test_config_layers_mark_only_the_collections_own_files(tmp_path):
    base = "/etc/kubernetes/kubelet.conf.d"
    write(tmp_path, "/var/lib/kubelet/config.yaml", "cpuManagerPolicy: none\nstaticPodPath: /x\n")
    write(tmp_path, base + "/50-rdma-k8s-node-topology.conf", "# Managed by rdma.k8s_node.kubelet_topology\ncpuManagerPolicy: static\n")
    write(tmp_path, base + "/99-rdma-k8s-node-topology.conf", "cpuManagerPolicy: none\n")  # same name, not ours
    layers, docs = kh.config_layers(HostRoot(str(tmp_path)), "/var/lib/kubelet/config.yaml", base,
                                    "50-rdma-k8s-node-topology.conf")
    assert [(layer["kind"], layer.get("ours")) for layer in layers] == [
        ("config", None), ("dropin", True), ("dropin", False)]
    assert layers[0]["settings"] == {"cpuManagerPolicy": "none"} and docs["/var/lib/kubelet/config.yaml"]["fmt"] == "yaml"


def test_a_malformed_drop_in_is_an_error_naming_it_or_a_problem(tmp_path):
    base = "/etc/kubernetes/kubelet.conf.d"
    write(tmp_path, base + "/10-bad.conf", '{"kind": "KubeletConfiguration",')
    with pytest.raises(ParseError) as info:
        kh.config_layers(HostRoot(str(tmp_path)), None, base)
    assert base + "/10-bad.conf" in info.value.msg
    problems = []
    assert kh.config_layers(HostRoot(str(tmp_path)), None, base, problems=problems) == ([], {})
    assert problems[0]["what"] == base + "/10-bad.conf"


def test_facts_without_unit_or_process_read_the_flag_files_and_the_default_config(tmp_path):
    write(tmp_path, "/var/lib/kubelet/config.yaml", "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n")
    write(tmp_path, "/var/lib/kubelet/kubeadm-flags.env", 'KUBELET_KUBEADM_ARGS="--cpu-manager-policy=none"\n')
    facts = kubelet_facts(HostRoot(str(tmp_path)))
    assert facts["config_file"] == "/var/lib/kubelet/config.yaml" and facts["command_line"]["source"] == "env files"
    assert facts["settings"]["cpuManagerPolicy"] == "none"  # the flag wins over the file


DEEP = 300


def test_a_deep_drop_in_tree_is_walked_without_recursion(tmp_path):
    """300 nested directories are walked with the stack limited to 60 frames more than the test's own: the walk
    does not recurse, so a drop-in directory as deep as PATH_MAX allows (about 2,000 levels) is no RecursionError."""
    base = "/etc/kubernetes/kubelet.conf.d"
    (tmp_path / base.lstrip("/")).mkdir(parents=True)
    fd = os.open(str(tmp_path / base.lstrip("/")), os.O_RDONLY | os.O_DIRECTORY)
    for dummy in range(DEEP):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("x.conf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(traceback.extract_stack()) + 60)
    try:
        names = kh.walk_dropins(HostRoot(str(tmp_path)), base)
    finally:
        sys.setrecursionlimit(limit)
    assert [n.count("/") for n, p in names] == [DEEP]


def test_a_field_of_the_wrong_type_in_a_drop_in_is_a_parse_error_naming_it(tmp_path):
    base = "/etc/kubernetes/kubelet.conf.d"
    write(tmp_path, base + "/10-x.conf", '{"kubeReserved": ["cpu=1"]}')
    with pytest.raises(ParseError) as info:
        kh.config_layers(HostRoot(str(tmp_path)), None, base)
    assert base + "/10-x.conf: kubeReserved must be" in info.value.msg
