"""rdma_facts module: main() in-process (check mode, bad host_root, contract keys) and the real ansible CLI."""

import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zlib

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from unit.plugins.sysfs_tree import SysfsTree

try:
    import hwsim
    from hwsim.renderer import render as _render  # noqa: F401 - probe: the power-on renderer exists
except ImportError:  # pragma: no cover - the simulator is developed in parallel
    hwsim = None

REPO = pathlib.Path(__file__).resolve().parents[4]
ANSIBLE = REPO / ".venv" / "bin" / "ansible"

CONTRACT_KEYS = {"devices", "gpus", "gpu_nic_affinity", "netns_mode", "kernel_cmdline", "modules", "sysctl", "mtu",
                 "rdma_cgroup", "problems", "numa_nodes", "runtime", "persisted",
                 "cpu_vendor", "device_plugins", "drivers", "layers"}


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(autouse=True)
def captured_exit(monkeypatch):
    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as info:
            rdma_facts.main()
    return info.value.args[0]


@pytest.fixture
def node(tmp_path):
    tree = SysfsTree(tmp_path / "node")
    gpu_chain = ["0000:15:01.0", "0000:16:00.0", "0000:17:02.0", "0000:1b:00.0"]
    tree.pci(gpu_chain, host_bridge="pci0000:15", vendor="0x10de", device="0x2330", klass="0x030200", driver="nvidia")
    pf = tree.pci(["0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"], host_bridge="pci0000:15",
                  driver="mlx5_core")
    tree.ibdev(pf, "mlx5_0", node_guid="a088:c203:0055:1e20")
    tree.netdev(pf, "ibp24s0")
    [vf] = tree.sriov(pf, ["0000:18:00.1"])
    tree.ibdev(vf, "mlx5_12")
    tree.file("/sys/module/ib_core/parameters/netns_mode", "Y")
    tree.file("/proc/cmdline", "ro quiet")
    return tmp_path / "node"


def test_check_mode_returns_facts_and_changes_nothing(node):
    before = sorted(str(p) + (os.readlink(str(p)) if p.is_symlink() else "") for p in node.rglob("*"))
    result = run({"host_root": str(node), "_ansible_check_mode": True})
    assert result["changed"] is False
    facts = result["ansible_facts"]["rdma"]
    assert set(facts) == CONTRACT_KEYS
    assert [d["name"] for d in facts["devices"]] == ["mlx5_0", "mlx5_12"]
    assert facts["devices"][0]["vfs"][0]["node_guid"] == "0000:0000:0000:0000"
    assert facts["gpu_nic_affinity"] == {"0000:1b:00.0": {"mlx5_0": "PIX", "mlx5_12": "PIX"}}
    assert facts["netns_mode"] == "shared"
    # a bare file tree has no kernel behind it: the PF's VF admin attributes (rtnetlink only) cannot be read, and
    # that is said, not hidden
    assert [p["path"] for p in facts["problems"]] == ["ip link show dev ibp24s0"]
    assert facts["devices"][0]["vfs"][0]["trust"] is None
    # a node tree with no container runtime: reported as absent, not guessed
    assert set(facts["runtime"]) == {"containerd", "kubelet"}
    after = sorted(str(p) + (os.readlink(str(p)) if p.is_symlink() else "") for p in node.rglob("*"))
    assert before == after


def test_facts_json_returns_the_same_facts_as_one_compact_json_text(node):
    """facts_json: the facts as rdma_facts_json (what rdma_audit_gather made on the controller from
    ansible_facts.rdma: compact separators, ASCII escapes), nothing in ansible_facts."""
    tree = node / "sys" / "class" / "net" / "ibp24s0" / "ifalias"
    tree.write_text("caf\u00e9 \u2603 \"q\"\n", encoding="utf-8")  # a non-ASCII value, whether or not it is read
    facts = run({"host_root": str(node)})["ansible_facts"]["rdma"]
    result = run({"host_root": str(node), "facts_json": True})
    assert set(result) == {"changed", "rdma_facts_json"} and result["changed"] is False
    text = result["rdma_facts_json"]
    assert text == json.JSONEncoder(separators=(",", ":")).encode(facts)
    assert text.isascii() and json.loads(text) == facts


def test_compress_returns_the_same_text_compressed(node):
    """compress: the text of facts_json as zlib in base64 (rdma_facts_json_zlib), nothing else; the audit's reader
    gives back the same text."""
    text = run({"host_root": str(node), "facts_json": True})["rdma_facts_json"]
    result = run({"host_root": str(node), "facts_json": True, "compress": True})
    assert set(result) == {"changed", "rdma_facts_json_zlib"} and result["changed"] is False
    blob = result["rdma_facts_json_zlib"]
    assert blob.isascii() and zlib.decompress(base64.b64decode(blob, validate=True)).decode() == text
    assert _facts_text.inflate(blob) == (text, None) and len(blob) < len(text)


def test_compress_without_facts_json_is_refused(node):
    result = run({"host_root": str(node), "compress": True}, expect=FailJson)
    assert result["msg"] == "compress=true needs facts_json=true: only the JSON text of the facts is compressed"


def test_a_failing_containerd_observer_is_a_problem_and_containerd_is_read_once(node, monkeypatch):
    """The containerd room's observer raises: layers.containerd is null with a problems entry, runtime has no
    containerd section (it is not observed a second time, outside layer_facts' guard), the kubelet is still read."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise HostReadError("cannot read /etc/containerd/config.toml: Input/output error")
    monkeypatch.setattr(ctdh, "observe", broken)
    facts = run({"host_root": str(node)})["ansible_facts"]["rdma"]
    assert len(calls) == 1
    assert facts["layers"]["containerd"] is None
    assert {"path": "layers.containerd", "error": "cannot read /etc/containerd/config.toml: Input/output error"} \
        in facts["problems"]
    assert set(facts["runtime"]) == {"kubelet"}


def test_a_failing_kubelet_observer_is_a_problem_and_the_kubelet_is_read_once(node, monkeypatch):
    """The kubelet room's observer raises: layers.kubelet is null with a problems entry, runtime has no kubelet
    section (it is not observed a second time), containerd is still read."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as kubelet_observe
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise HostReadError("cannot read /proc/1/cmdline: Input/output error")
    monkeypatch.setattr(kubelet_observe, "collect", broken)
    facts = run({"host_root": str(node)})["ansible_facts"]["rdma"]
    assert len(calls) == 1
    assert facts["layers"]["kubelet"] is None
    assert {"path": "layers.kubelet", "error": "cannot read /proc/1/cmdline: Input/output error"} in facts["problems"]
    assert set(facts["runtime"]) == {"containerd"}


def test_same_result_outside_check_mode(node):
    checked = run({"host_root": str(node), "_ansible_check_mode": True})
    normal = run({"host_root": str(node)})
    assert checked == normal


def test_default_host_root_reads_this_machine_without_crashing():
    # whatever this test machine has (a container: usually no RDMA), the real kernel tree must not break discovery
    result = run({"_ansible_check_mode": True})
    assert result["changed"] is False
    assert set(result["ansible_facts"]["rdma"]) == CONTRACT_KEYS


@pytest.mark.parametrize("kind, message", [
    ("missing", "does not exist"),
    ("file", "is not a directory"),
    ("relative", "must be an absolute path"),
])
def test_bad_host_root_fails_before_reading_anything(tmp_path, monkeypatch, kind, message):
    touched = []
    for name in ("read_text", "listdir", "readlink", "exists", "isdir", "resolve"):
        real = getattr(HostRoot, name)

        def spy(self, *args, _real=real, _name=name, **kwargs):
            touched.append((_name, args))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(HostRoot, name, spy)
    if kind == "missing":
        root = str(tmp_path / "nope")
    elif kind == "file":
        (tmp_path / "afile").write_text("x")
        root = str(tmp_path / "afile")
    else:
        monkeypatch.chdir(tmp_path)
        root = "relative/dir"
    result = run({"host_root": root}, expect=FailJson)
    assert message in result["msg"]
    assert "ansible_facts" not in result
    assert touched == []


def test_class_infiniband_as_a_file_counts_as_absent(node):
    # listing it fails with ENOTDIR, which HostRoot treats as "not there"
    shutil.rmtree(str(node / "sys/class/infiniband"))
    (node / "sys/class/infiniband").write_text("junk")
    result = run({"host_root": str(node)})
    assert result["ansible_facts"]["rdma"]["devices"] == []


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    if hwsim is None:
        pytest.skip("tests/hwsim (node simulator) with render() is not available")
    return hwsim.render("dgx-h100", tmp_path_factory.mktemp("dgx-h100"))


def test_module_on_simulated_dgx_h100(dgx):
    result = run({"host_root": str(dgx), "_ansible_check_mode": True})
    facts = result["ansible_facts"]["rdma"]
    runtime = facts.pop("runtime")
    persisted = facts.pop("persisted")
    assert persisted["problems"] == [] and persisted["netns_mode"]["effective"] is None
    drivers = facts.pop("drivers")
    assert drivers["gpudirect"]["nvidia_driver"] == {"version": "550.127.05", "open": False}
    assert drivers["ofed"]["running_version"] == "24.10-1.1.4" and drivers["problems"] == []
    layers = facts.pop("layers")
    # the pcie room's observer reads the simulator's configuration space (power-on MaxReadReq 512, tests/hwsim)
    pcie = layers["pcie"]["devices"]
    assert len(pcie) == 12 and set(d["max_read_request"] for d in pcie.values()) == {512}
    assert facts == json.loads(json.dumps(gather(HostRoot(str(dgx)))))
    assert runtime["containerd"]["config_version"] is None, "the simulated node has no containerd"
    assert len(facts["devices"]) == 12 and len(facts["gpus"]) == 8 and facts["problems"] == []


@pytest.mark.skipif(not ANSIBLE.exists(), reason=".venv/bin/ansible is not installed")
def test_real_cli_ad_hoc_on_simulated_dgx_h100(dgx, tmp_path):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
        "ANSIBLE_PYTHON_INTERPRETER": str(REPO / ".venv" / "bin" / "python"),
    })
    done = subprocess.run(
        [str(ANSIBLE), "localhost", "-m", "rdma.k8s_node.rdma_facts", "-a", "host_root=%s" % dgx, "--check",
         "-t", str(tmp_path / "tree")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "tree" / "localhost").read_text())
    assert result["changed"] is False
    facts = result["ansible_facts"]["rdma"]
    assert set(facts) == CONTRACT_KEYS
    assert facts["gpu_nic_affinity"]["0000:1b:00.0"]["mlx5_0"] == "PIX"
    assert facts["gpu_nic_affinity"]["0000:1b:00.0"]["mlx5_6"] == "SYS"
    assert facts["devices"][0]["node_guid"] == "a088:c203:0055:1e20"

    bad = subprocess.run(
        [str(ANSIBLE), "localhost", "-m", "rdma.k8s_node.rdma_facts", "-a", "host_root=%s" % (tmp_path / "nope")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert bad.returncode != 0
    assert "does not exist" in bad.stdout + bad.stderr


# -- VF admin attributes (ip link show <pf> vfinfo_list) ------------------------------------------------------------
def _vf_facts(monkeypatch, sim, pf_netdev):
    from unit.plugins.modules.harness import run_module  # pylint: disable=import-outside-toplevel
    result = run_module(monkeypatch, rdma_facts.main, {"host_root": str(sim.root)})
    return next(d for d in result["ansible_facts"]["rdma"]["devices"] if pf_netdev in d["netdevs"]), result


def _make_vfs(monkeypatch, sim, netdev, count, **attrs):
    from unit.plugins.modules.harness import run_module  # pylint: disable=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.modules import sriov_vfs  # pylint: disable=import-outside-toplevel
    args = dict({"host_root": str(sim.root), "netdev": netdev, "num_vfs": count}, **attrs)
    run_module(monkeypatch, sriov_vfs.main, args)


@pytest.mark.skipif(hwsim is None, reason="tests/hwsim not importable")
def test_vf_admin_attributes_on_ethernet_and_infiniband(monkeypatch, tmp_path):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as sim:
        _make_vfs(monkeypatch, sim, "ens1f0np0", 2, vf_defaults={"trust": True, "spoofchk": False},
                  vfs=[{"index": 1, "vlan": 100, "qos": 3, "link_state": "disable", "mac": "02:aa:bb:cc:dd:01"}])
        pf, result = _vf_facts(monkeypatch, sim, "ens1f0np0")
        admin = [dict((k, vf[k]) for k in ("link_state", "trust", "spoofchk", "vlan", "qos", "mac")) for vf in pf["vfs"]]
        assert admin == [
            {"link_state": "auto", "trust": True, "spoofchk": False, "vlan": 0, "qos": 0, "mac": "00:00:00:00:00:00"},
            {"link_state": "disable", "trust": True, "spoofchk": False, "vlan": 100, "qos": 3, "mac": "02:aa:bb:cc:dd:01"},
        ]
        assert result["ansible_facts"]["rdma"]["problems"] == []
        other = next(d for d in result["ansible_facts"]["rdma"]["devices"] if "ens1f1np1" in d["netdevs"])
        assert other["vfs"] == [], "a PF without VFs costs no ip call and has no VF rows"
    with sim_node("dgx-h100", tmp_path / "ib", monkeypatch) as sim:
        _make_vfs(monkeypatch, sim, "ibp24s0", 2, vfs=[{"index": 0, "link_state": "auto"}])
        pf, dummy_result = _vf_facts(monkeypatch, sim, "ibp24s0")
        assert [(vf["link_state"], vf["trust"], vf["spoofchk"], vf["vlan"], vf["mac"]) for vf in pf["vfs"]] == [
            ("auto", False, False, 0, None), ("disable", False, False, 0, None)]


def _fake_ip(tmp_path, monkeypatch, body):
    """An ``ip`` first on PATH (before the hwsim shim): ``body`` is shell run before handing over to the shim."""
    directory = tmp_path / "fakebin"
    directory.mkdir()
    script = directory / "ip"
    script.write_text("#!/bin/sh\n%s\nexec %s/ip \"$@\"\n" % (body, hwsim_shims()))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (directory, os.environ["PATH"]))


def hwsim_shims():
    return pathlib.Path(hwsim.__file__).resolve().parent / "shims"


@pytest.mark.skipif(hwsim is None, reason="tests/hwsim not importable")
def test_vf_admin_attributes_from_ip_without_json(monkeypatch, tmp_path):
    """iproute2 before 4.13 has no -j: the text form is parsed instead (same values)."""
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as sim:
        _make_vfs(monkeypatch, sim, "ens1f0np0", 2, vfs=[{"index": 1, "vlan": 7, "qos": 2, "trust": True}])
        json_pf, dummy = _vf_facts(monkeypatch, sim, "ens1f0np0")
        _fake_ip(tmp_path, monkeypatch, 'case "$1" in -j) echo \'Option "-j" is unknown, try "ip -help".\' >&2; '
                                        'exit 255;; esac')
        text_pf, result = _vf_facts(monkeypatch, sim, "ens1f0np0")
        assert text_pf["vfs"] == json_pf["vfs"] and text_pf["vfs"][1]["vlan"] == 7 and text_pf["vfs"][1]["trust"]
        assert result["ansible_facts"]["rdma"]["problems"] == []


@pytest.mark.skipif(hwsim is None, reason="tests/hwsim not importable")
def test_vf_admin_attributes_unreadable_are_null_and_a_problem(monkeypatch, tmp_path):
    from unit.plugins.modules.simnode import sim_node  # pylint: disable=import-outside-toplevel
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as sim:
        _make_vfs(monkeypatch, sim, "ens1f0np0", 1)
        _fake_ip(tmp_path, monkeypatch, 'echo "Cannot open netlink socket: Permission denied" >&2; exit 1')
        pf, result = _vf_facts(monkeypatch, sim, "ens1f0np0")
        assert pf["vfs"][0]["trust"] is None and pf["vfs"][0]["link_state"] is None
        assert pf["vfs"][0]["pci_address"] and pf["vfs"][0]["driver"] == "mlx5_core", "sysfs facts unaffected"
        problems = result["ansible_facts"]["rdma"]["problems"]
        assert problems == [{"path": "ip link show dev ens1f0np0",
                             "error": "rc=1: Cannot open netlink socket: Permission denied"}]


def test_gather_without_commands_leaves_vf_admin_attributes_null(node):
    facts = gather(HostRoot(str(node)))
    assert facts["problems"] == []
    vf = facts["devices"][0]["vfs"][0]
    assert vf["pci_address"] and all(vf[key] is None for key in ("link_state", "trust", "spoofchk", "vlan", "qos", "mac"))


# -- what a run costs: the node compiles and runs only what observing needs (docs/benchmarks.md, session 18) ----------
def test_each_infiniband_pf_lists_the_other_pool_pfs_as_pool_ib_pfs_does(dgx):
    """The node's InfiniBand PFs that can have VFs are read once a run; each PF's ``other_ib_pfs`` is still what
    ``pool_ib_pfs(host, that PF)`` reads."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as sriov_host  # pylint: disable=import-outside-toplevel
    facts = run({"host_root": str(dgx)})["ansible_facts"]["rdma"]
    pfs = facts["layers"]["sriov"]["observed"]["pfs"]
    ib = dict((bdf, entry["guids"]["other_ib_pfs"]) for bdf, entry in pfs.items() if entry["guids"])
    assert len(ib) == 8
    assert ib == dict((bdf, sriov_host.pool_ib_pfs(HostRoot(str(dgx)), bdf)) for bdf in ib)


PLANNER_MODULES = ("layers.containerd.rules", "layers.containerd.plan", "layers.kubelet.rules", "layers.kubelet.plan",
                   "layers.sriov.guid", "module_utils._fileedit", "module_utils._result")


def test_a_facts_run_imports_no_planner_module(dgx):
    """rdma_facts imports only what observing needs: each room's observer imports the room's reading half
    (``containerd/config.py``, ``kubelet/config.py``, ``_filestate.py``), not the planners' rules, the edits or the
    GUID scheme (AnsiballZ ships what the imports name, and Python compiles every module imported on every run)."""
    code = (
        "import json, sys\n"
        "from ansible.module_utils import basic\n"
        "from ansible.module_utils.testing import patch_module_args\n"
        "from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts\n"
        "def leave(self, **kwargs):\n"
        "    raise SystemExit(0)\n"
        "basic.AnsibleModule.exit_json = leave\n"
        "with patch_module_args({'host_root': sys.argv[1]}):\n"
        "    try:\n"
        "        rdma_facts.main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ansible_collections.rdma'))))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / ".cache" / "collections"))
    done = subprocess.run([sys.executable, "-c", code, str(dgx)], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(name.endswith("layers.kubelet.config") for name in imported)
    assert [name for name in imported if name.endswith(PLANNER_MODULES)] == []
