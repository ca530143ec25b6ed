"""rdma_netns on a simulated node: persistence, the live switch and the kernel's EBUSY refusal, reboot."""

import pathlib

import pytest
import yaml

import hwsim

from ansible_collections.rdma.k8s_node.plugins.modules import rdma_netns
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

CONF = "modprobe.d/rdma-k8s-node-ib_core.conf"


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        yield node


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, rdma_netns.main, args, check=check, diff=True, **kwargs)


def live_mode(node):
    return (node.root / "sys/module/ib_core/parameters/netns_mode").read_text().strip()


def test_check_mode_predicts_without_writing(monkeypatch, dgx):
    result = run(monkeypatch, dgx, check=True, mode="exclusive")
    assert result["changed"] is True
    assert [a["action"] for a in result["actions"]] == ["create_file", "run"]
    assert result["actions"][1]["target"] == "rdma system set netns exclusive"
    assert result["observed"]["live"] == "shared" and result["observed"]["persisted"] == "exclusive"
    assert "options ib_core netns_mode=0" in result["diff"]["after"]
    assert result["live_switch"] == "skipped"
    assert not (dgx.etc / CONF).exists()
    assert live_mode(dgx) == "Y"


def test_quiet_node_switches_live_and_persists(monkeypatch, dgx):
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["live_switch"] == "switched" and result["reboot_required"] is False
    assert live_mode(dgx) == "N"
    assert (dgx.etc / CONF).read_text().endswith("options ib_core netns_mode=0\n")
    again = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert again["changed"] is False and again["live_switch"] == "not_needed"
    dgx.reboot()
    assert live_mode(dgx) == "N", "the persisted option must survive a power cycle"


def test_busy_node_persists_and_asks_for_reboot(monkeypatch, dgx):
    dgx.call({"cmd": "netns_add", "name": "cni-1234"})
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["changed"] is True
    assert result["live_switch"] == "refused_busy" and result["reboot_required"] is True
    assert any("non-init network namespaces" in w for w in result.get("warnings", []))
    assert live_mode(dgx) == "Y"
    # a re-run does not loop on the refused switch: it tries once per run and keeps reporting
    again = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert again["reboot_required"] is True and [a["action"] for a in again["actions"]] == ["run"]
    dgx.reboot()
    after = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert after["changed"] is False and after["reboot_required"] is False
    assert after["observed"]["live"] == "exclusive"


def test_live_false_only_reports(monkeypatch, dgx):
    result = run(monkeypatch, dgx, mode="exclusive", live=False, initramfs="never")
    assert result["reboot_required"] is True and result["live_switch"] == "skipped"
    assert live_mode(dgx) == "Y"


def test_later_file_overriding_is_a_conflict(monkeypatch, dgx):
    (dgx.etc / "modprobe.d/sriov_network_operator_modules_config.conf").write_text("options ib_core netns_mode=1\n")
    failure = run(monkeypatch, dgx, mode="exclusive", expect=ModuleFail)
    assert "sriov_network_operator_modules_config.conf" in failure["msg"]
    assert not (dgx.etc / CONF).exists()


def test_earlier_file_is_overridden_by_ours(monkeypatch, dgx):
    (dgx.etc / "modprobe.d/00-old.conf").write_text("options ib_core netns_mode=1\n")
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["observed"]["persisted_by"] == "/etc/" + CONF


def test_cmdline_conflict_is_warned(monkeypatch, tmp_path):
    spec = yaml.safe_load(pathlib.Path(hwsim.load("dgx-h100").path).read_text())
    spec["kernel"]["cmdline"] += " ib_core.netns_mode=1"
    spec_file = tmp_path / "booted-shared.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    with sim_node(spec_file, tmp_path, monkeypatch) as node:
        result = run(monkeypatch, node, mode="exclusive", initramfs="never", live=False)
        assert result["observed"]["cmdline"] == "shared"
        assert any("kernel_cmdline" in w for w in result.get("warnings", []))


def test_no_ib_core_loaded_persists_only(monkeypatch, tmp_path):
    with sim_node("no-rdma", tmp_path, monkeypatch) as node:
        result = run(monkeypatch, node, mode="exclusive", initramfs="never")
        assert result["observed"]["ib_core_loaded"] is False and result["observed"]["live"] is None
        assert [a["action"] for a in result["actions"]] == ["create_file"]
        assert result["reboot_required"] is False


@pytest.mark.parametrize("args, message", [
    ({"mode": "private"}, "value of mode must be one of"),
    ({}, "missing required arguments: mode"),
    ({"mode": "exclusive", "conf_file": "/etc/modprobe.d/ib_core"}, "must be a .conf file"),
    ({"mode": "exclusive", "conf_file": "/lib/modprobe.d/x.conf"}, "must be a .conf file"),
    ({"mode": "exclusive", "initramfs": "sometimes"}, "value of initramfs must be one of"),
    ({"mode": "exclusive", "host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert not (dgx.etc / CONF).exists()
    assert live_mode(dgx) == "Y"


def test_failed_initramfs_update_reverts_the_file(monkeypatch, dgx):
    (dgx.etc / CONF).write_text("options ib_core netns_mode=1\n")
    before = (dgx.etc / CONF).read_bytes()
    monkeypatch.setattr(rdma_netns, "initramfs_argv", lambda host, commands: ["false"])
    monkeypatch.setattr(rdma_netns.HostCommands, "run", lambda self, argv, data=None: (1, "", "dracut: cannot write"))
    failure = run(monkeypatch, dgx, mode="exclusive", initramfs="always", expect=ModuleFail)
    assert "dracut: cannot write" in failure["msg"] and "restored" in failure["msg"]
    assert (dgx.etc / CONF).read_bytes() == before
    assert live_mode(dgx) == "Y", "no live switch after a failed persistent step"
