"""The sriov role's boot-time applier on a simulated node: power-on reset, then the applier, then no drift."""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import yaml

from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.plugins.modules.harness import run_module
from unit.plugins.modules.simnode import sim_node

REPO = pathlib.Path(__file__).resolve().parents[3]
APPLIER = REPO / "roles" / "sriov" / "files" / "sriov_apply.py"


def load_applier():
    spec = importlib.util.spec_from_file_location("sriov_apply", APPLIER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def state(root):
    common = {"allow_vf_reset": False, "timeout": 30, "host_root": str(root)}
    vfs = dict(common, netdev="ibp24s0", rdma_device=None, pci_address=None, num_vfs=3,
               vf_defaults={"link_state": "auto"}, vfs=None, firmware_check="auto")
    guids = dict(common, netdev=None, rdma_device=None, pci_address="0000:18:00.0", scheme="pf_guid", guid_prefix="02",
                 guids=None, pool_file="/etc/sriov-operator/infiniband/guids", export_pool_file=False, exclude_guids=[])
    return {"version": 1, "sriov_vfs": [vfs], "ib_vf_guids": [guids]}


def given(params):
    """Module arguments as a playbook passes them: options left out rather than null."""
    return dict((key, value) for key, value in params.items() if value is not None)


def test_reboot_then_applier_then_no_drift(tmp_path, monkeypatch, capsys):
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        assert applier.main(["--state", str(state_file)]) == 0
        provisioned = run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)
        assert provisioned["changed"] is False
        before = [row["guid"] for row in provisioned["guids"]]

        node.reboot()
        assert applier.main(["--state", str(state_file), "--check"]) == 2, "after power-on the VFs are gone: drift"
        assert applier.main(["--state", str(state_file)]) == 0
        assert applier.main(["--state", str(state_file), "--check"]) == 0
        assert run_module(monkeypatch, sriov_vfs.main, given(data["sriov_vfs"][0]), check=True)["changed"] is False
        after = run_module(monkeypatch, ib_vf_guids.main, given(data["ib_vf_guids"][0]), check=True)
        assert after["changed"] is False and [row["guid"] for row in after["guids"]] == before
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {"step": "sriov_vfs", "pf": "ibp24s0", "changed": True,
                "actions": ["write", "wait_for_vfs", "set_vf", "set_vf", "set_vf"]} in lines


def test_applier_reports_failures_and_goes_on(tmp_path, monkeypatch, capsys):
    applier = load_applier()
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        data = state(node.root)
        data["sriov_vfs"].insert(0, dict(data["sriov_vfs"][0], netdev="ib99"))
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(data))
        assert applier.main(["--state", str(state_file)]) == 1
        out = capsys.readouterr().out
        assert "there is no network interface 'ib99'" in out and '"pf": "ibp24s0", "changed": true' in out
        state_file.write_text(json.dumps(dict(data, version=7)))
        assert applier.main(["--state", str(state_file)]) == 1


def render_bundle(path):
    """What the role's templates/sriov_bundle.py.j2 renders: the module_utils sources, JSON-encoded twice."""
    names = yaml.safe_load((REPO / "roles/sriov/vars/main.yml").read_text())["sriov__module_utils"]
    sources = dict((name[:-3], (REPO / "plugins/module_utils" / name).read_text()) for name in names)
    path.write_text("import json\n\nSOURCES = json.loads(%s)\n" % json.dumps(json.dumps(sources)))


def test_applier_runs_from_the_bundle_alone(tmp_path, monkeypatch):
    """As on a node: a fresh python3 with no collection on sys.path, only sriov_apply.py + sriov_bundle.py."""
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        lib = tmp_path / "lib"
        lib.mkdir()
        shutil.copy(APPLIER, lib / "sriov_apply.py")
        render_bundle(lib / "sriov_bundle.py")
        state_file = tmp_path / "sriov.json"
        state_file.write_text(json.dumps(state(node.root)))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        argv = [sys.executable, "-I", str(lib / "sriov_apply.py"), "--state", str(state_file), "--lib", str(tmp_path)]
        first = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert first.returncode == 0, first.stdout + first.stderr
        assert '"step": "ib_vf_guids", "pf": "0000:18:00.0", "changed": true' in first.stdout
        again = subprocess.run(argv + ["--check"], env=env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stdout + again.stderr
