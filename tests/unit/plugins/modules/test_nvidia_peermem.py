"""nvidia_peermem on a simulated node: test-load before persisting, the EINVAL build-order failure named with its
fix, a missing module, an already loaded one, DMA-BUF on the open GPU kernel modules, the openibd drop-in, check
mode, diff, idempotence, a reboot, and faults on reads and writes."""

import pathlib

import pytest
import yaml

import hwsim

from ansible_collections.rdma.k8s_node.plugins.modules import nvidia_peermem
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

CONF = "modules-load.d/nvidia-peermem.conf"
DROPIN = "systemd/system/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf"
EINVAL = "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument"


def spec_variant(tmp_path, base, name, catalogue=None, **top):
    """A copy of archetype ``base`` with catalogue entries and top-level keys changed."""
    data = yaml.safe_load(pathlib.Path(hwsim.load(base).path).read_text(encoding="utf-8"))
    data["name"] = name
    if catalogue:
        data.setdefault("modules", {}).setdefault("catalogue", {}).update(catalogue)
    data.update(top)
    path = tmp_path / (name + ".yaml")
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        yield node


@pytest.fixture
def stub(tmp_path, monkeypatch):
    """DOCA-OFED node whose NVIDIA driver was built before DOCA-OFED: nvidia-peermem is the EINVAL stub."""
    spec = spec_variant(tmp_path, "dgx-h100", "stub", {"nvidia_peermem": {"built_against_ofed": None}})
    with sim_node(spec, tmp_path, monkeypatch) as node:
        yield node


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, nvidia_peermem.main, args, check=check, diff=True, **kwargs)


def loaded(node):
    return (node.root / "sys/module/nvidia_peermem").is_dir()


def test_check_mode_predicts_without_loading_or_writing(monkeypatch, dgx):
    result = run(monkeypatch, dgx, check=True)
    assert result["changed"] is True
    assert [a["action"] for a in result["actions"]] == ["load_module", "create_file"]
    assert result["gpudirect"]["method"] == "peermem" and result["gpudirect"]["active"] == "none"
    assert "proprietary kernel module" in result["gpudirect"]["reason"]
    assert result["diff"]["after"].endswith("\nnvidia_peermem\n")
    assert not loaded(dgx) and not (dgx.etc / CONF).exists()


def test_loads_then_persists_idempotent_and_survives_reboot(monkeypatch, dgx):
    result = run(monkeypatch, dgx)
    assert result["changed"] is True and loaded(dgx)
    assert result["gpudirect"]["active"] == "peermem" and result["gpudirect"]["peermem_loaded"] is True
    assert result["gpudirect"]["ofed"] == {"flavor": None, "version": None, "running_version": "24.10-1.1.4"}
    assert result["reboot_required"] is False and result["daemon_reload_required"] is False
    assert (dgx.etc / CONF).read_text(encoding="utf-8").endswith("\nnvidia_peermem\n")
    assert not (dgx.etc / DROPIN).exists(), "no openibd on this node, so no drop-in"
    again = run(monkeypatch, dgx)
    assert again["changed"] is False and again["actions"] == []
    assert run(monkeypatch, dgx, check=True)["changed"] is False
    dgx.reboot()
    assert loaded(dgx), "systemd-modules-load (simulated power-on) loads it from the file"
    assert run(monkeypatch, dgx)["changed"] is False


def test_openibd_dropin(monkeypatch, dgx):
    unit = dgx.etc / "systemd/system/openibd.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/etc/init.d/openibd start\n", encoding="utf-8")
    result = run(monkeypatch, dgx)
    assert result["daemon_reload_required"] is True
    assert [a["target"] for a in result["actions"]][1:] == ["/etc/" + CONF, "/etc/" + DROPIN]
    text = (dgx.etc / DROPIN).read_text(encoding="utf-8")
    assert "[Service]\nExecStartPost=-" in text and text.endswith("modprobe nvidia_peermem\n")
    assert run(monkeypatch, dgx)["daemon_reload_required"] is False
    never = run(monkeypatch, dgx, openibd_dropin="never")
    assert [a["action"] for a in never["actions"]] == ["delete_file"] and never["daemon_reload_required"] is True
    assert not (dgx.etc / DROPIN).exists() and (dgx.etc / CONF).exists()


def test_already_loaded_is_only_persisted(monkeypatch, dgx):
    dgx.call({"cmd": "modprobe", "name": "nvidia_peermem"})
    result = run(monkeypatch, dgx)
    assert [a["action"] for a in result["actions"]] == ["create_file"]
    assert result["observed"]["peermem_loaded"] is True


def test_einval_is_diagnosed_and_nothing_persisted(monkeypatch, stub):
    failure = run(monkeypatch, stub, expect=ModuleFail)
    assert failure["diagnosis"] == "einval"
    assert failure["details"]["stderr"].strip() == EINVAL
    assert "built before DOCA-OFED was installed" in failure["msg"]
    assert "rebuild the NVIDIA kernel modules after DOCA-OFED" in failure["msg"]
    assert "Nothing was persisted" in failure["msg"]
    assert failure["changed"] is False and failure["actions"] == []
    assert not (stub.etc / CONF).exists() and not loaded(stub)
    # the fix: the NVIDIA driver rebuilt by DKMS now that DOCA-OFED is installed
    stub.call({"cmd": "module_rebuild", "name": "nvidia_peermem"})
    result = run(monkeypatch, stub)
    assert result["changed"] is True and loaded(stub) and (stub.etc / CONF).exists()


def test_einval_cannot_be_seen_in_check_mode(monkeypatch, stub):
    result = run(monkeypatch, stub, check=True)
    assert result["changed"] is True and [a["action"] for a in result["actions"]][0] == "load_module"


def test_missing_module_fails_also_in_check_mode(monkeypatch, dgx):
    dgx.call({"cmd": "module_set", "name": "nvidia_peermem", "absent": True})
    for check in (True, False):
        failure = run(monkeypatch, dgx, check=check, expect=ModuleFail)
        assert failure["diagnosis"] == "missing"
        assert "not installed for the running kernel" in failure["msg"]
        assert "not found in directory /lib/modules/6.1.0-28-amd64" in failure["msg"]
    assert not (dgx.etc / CONF).exists()


def test_unknown_symbol(monkeypatch, dgx):
    dgx.call({"cmd": "module_set", "name": "nvidia_peermem", "load_error": "ENOENT"})
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert failure["diagnosis"] == "unknown_symbol" and "restart openibd" in failure["msg"]


def test_dmabuf_on_open_modules_removes_peermem_persistence(monkeypatch, tmp_path):
    spec = spec_variant(tmp_path, "dgx-h100", "open", nvidia_kernel_module="open")
    with sim_node(spec, tmp_path, monkeypatch) as node:
        (node.etc / CONF).write_text("nvidia_peermem\n", encoding="utf-8")
        node.call({"cmd": "modprobe", "name": "nvidia_peermem"})
        check = run(monkeypatch, node, check=True)
        assert [a["action"] for a in check["actions"]] == ["delete_file"] and (node.etc / CONF).exists()
        result = run(monkeypatch, node)
        assert result["gpudirect"]["method"] == "dmabuf" and result["gpudirect"]["dmabuf_capable"] is True
        assert result["gpudirect"]["active"] == "peermem", "still loaded: left alone, and it is what runs"
        assert any("left loaded" in w for w in result.get("warnings", []))
        assert not (node.etc / CONF).exists() and loaded(node)
        node.reboot()
        after = run(monkeypatch, node)
        assert after["changed"] is False and after["gpudirect"]["active"] == "dmabuf"
        assert after["gpudirect"]["nvidia_driver"] == {"version": "550.127.05", "open": True}


def test_dmabuf_refused_on_the_proprietary_driver(monkeypatch, dgx):
    failure = run(monkeypatch, dgx, method="dmabuf", expect=ModuleFail)
    assert "DMA-BUF GPUDirect RDMA is not possible here" in failure["msg"]
    assert "proprietary kernel module" in failure["msg"]
    assert failure["gpudirect"]["dmabuf_capable"] is False


def test_inbox_node_has_no_path(monkeypatch, tmp_path):
    spec = spec_variant(tmp_path, "roce-cx6dx", "inbox", {"nvidia_peermem": {"built_against_ofed": None}})
    with sim_node(spec, tmp_path, monkeypatch) as node:
        failure = run(monkeypatch, node, expect=ModuleFail)
        assert "no GPUDirect RDMA path" in failure["msg"] and "inbox ib_core" in failure["msg"]
        forced = run(monkeypatch, node, method="peermem", expect=ModuleFail)
        assert forced["diagnosis"] == "einval" and "no MLNX/DOCA-OFED is installed" in forced["msg"]
        assert not (node.etc / CONF).exists()


def test_write_failure_rolls_back_and_says_the_module_stays_loaded(monkeypatch, dgx):
    (dgx.etc / "systemd/system").mkdir(parents=True)
    (dgx.etc / "systemd/system/openibd.service").write_text("[Service]\n", encoding="utf-8")
    (dgx.etc / "systemd/system/openibd.service.d").write_text("not a directory\n", encoding="utf-8")
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert "rolled back" in failure["msg"] and "stays loaded for this boot but is not persisted" in failure["msg"]
    assert not (dgx.etc / CONF).exists(), "the modules-load.d file written first was rolled back"
    assert loaded(dgx)


def test_read_fault_on_the_driver_banner(monkeypatch, dgx):
    dgx.call({"cmd": "fault_add", "path": "proc/driver/nvidia/version", "op": "read", "errno": "EIO"})
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert failure["msg"] == "cannot read /proc/driver/nvidia/version: Input/output error"
    assert not loaded(dgx)


def test_backup_of_a_replaced_file(monkeypatch, dgx):
    (dgx.etc / CONF).write_text("nvidia-peermem\n", encoding="utf-8")
    result = run(monkeypatch, dgx, backup=True)
    assert [a["action"] for a in result["actions"]] == ["load_module", "update_file"]
    backup = pathlib.Path(result["backup_files"]["/etc/" + CONF])
    assert backup.read_text(encoding="utf-8") == "nvidia-peermem\n"


def test_backup_files_is_edited_path_to_old_copy_and_empty_in_check_mode_and_no_op(monkeypatch, dgx):
    """backup_files is ``{edited path: backup path}`` on a changing run with backup=true, ``{}`` otherwise (RETURN)."""
    old = "# by hand\nnvidia-peermem\n"
    (dgx.etc / CONF).write_text(old, encoding="utf-8")
    check = run(monkeypatch, dgx, check=True, backup=True)
    assert check["changed"] is True and check["backup_files"] == {}
    assert (dgx.etc / CONF).read_text(encoding="utf-8") == old
    result = run(monkeypatch, dgx, backup=True)
    assert list(result["backup_files"]) == ["/etc/" + CONF]
    copy = result["backup_files"]["/etc/" + CONF]
    assert copy.startswith(str(dgx.root) + "/etc/" + CONF + ".") and copy.endswith("~")
    assert pathlib.Path(copy).read_text(encoding="utf-8") == old
    assert (dgx.etc / CONF).read_text(encoding="utf-8") != old
    again = run(monkeypatch, dgx, backup=True)
    assert again["changed"] is False and again["backup_files"] == {}


def test_backup_files_empty_for_a_new_file_or_without_backup(monkeypatch, dgx):
    """Creating the file backs nothing up; backup=false keeps no copy of a replaced file: ``{}`` both times."""
    created = run(monkeypatch, dgx, backup=True)
    assert [a["action"] for a in created["actions"]] == ["load_module", "create_file"] and created["backup_files"] == {}
    (dgx.etc / CONF).write_text("nvidia-peermem\n", encoding="utf-8")
    replaced = run(monkeypatch, dgx)
    assert [a["action"] for a in replaced["actions"]] == ["update_file"] and replaced["backup_files"] == {}
    assert [p.name for p in (dgx.etc / "modules-load.d").iterdir() if p.name.endswith("~")] == []


def test_backup_of_a_removed_file_holds_its_content(monkeypatch, tmp_path):
    """DMA-BUF removes the peermem file; with backup=true its copy is returned by the removed path."""
    spec = spec_variant(tmp_path, "dgx-h100", "open", nvidia_kernel_module="open")
    with sim_node(spec, tmp_path, monkeypatch) as node:
        (node.etc / CONF).write_text("nvidia_peermem\n", encoding="utf-8")
        result = run(monkeypatch, node, backup=True)
        assert [a["action"] for a in result["actions"]] == ["delete_file"] and not (node.etc / CONF).exists()
        assert pathlib.Path(result["backup_files"]["/etc/" + CONF]).read_text(encoding="utf-8") == "nvidia_peermem\n"


@pytest.mark.parametrize("args, message", [
    ({"method": "gdr"}, "value of method must be one of"),
    ({"conf_file": "/etc/modules-load.d/peermem"}, "conf_file must be a .conf file directly in /etc/modules-load.d"),
    ({"conf_file": "/etc/modules/nvidia-peermem.conf"}, "conf_file must be a .conf file"),
    ({"dropin_file": "/etc/systemd/system/openibd.service.d/x.txt"}, "dropin_file must be a .conf file"),
    ({"openibd_dropin": "sometimes"}, "value of openibd_dropin must be one of"),
    ({"host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert not loaded(dgx)
