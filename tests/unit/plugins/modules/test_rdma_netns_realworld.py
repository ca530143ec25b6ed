"""rdma_netns on node trees built from the real-world corpus (DOCA/MLNX_OFED, rdma-core, systemd and Azure HPC
modprobe.d files) and with sriov-network-operator's modprobe file: the settings kmod gives ib_core after ours."""

import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import plan as _netns
from ansible_collections.rdma.k8s_node.plugins.modules import rdma_netns
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.realworld_trees import DOCA_MODPROBE, OPERATOR_MODPROBE, build, operator_modprobe

OURS = "/etc/modprobe.d/rdma-k8s-node-ib_core.conf"


def run(monkeypatch, root, check=False, expect=None, **args):
    args.setdefault("host_root", str(root))
    args.setdefault("mode", "exclusive")
    args.setdefault("initramfs", "never")
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, rdma_netns.main, args, check=check, diff=True, **kwargs)


def tree(tmp_path, extra=None):
    return build(tmp_path, dict(DOCA_MODPROBE, **(extra or {})))


def contents(root):
    out = {}
    for base, dummy, files in os.walk(root):
        for name in files:
            with open(os.path.join(base, name), "rb") as handle:
                out[os.path.join(base, name)] = handle.read()
    return out


def test_doca_node_check_apply_idempotent_others_untouched(monkeypatch, tmp_path):
    root = tree(tmp_path)
    before = contents(root)
    check = run(monkeypatch, root, check=True)
    assert check["changed"] is True and check["overrides"] == [] and contents(root) == before
    applied = run(monkeypatch, root)
    assert applied["observed"]["persisted"] == "exclusive" and applied["observed"]["persisted_by"] == OURS
    after = contents(root)
    assert set(after) - set(before) == {os.path.join(root, OURS.lstrip("/"))}
    assert all(after[path] == data for path, data in before.items())
    assert run(monkeypatch, root)["changed"] is False


def test_operator_file_sorting_after_ours_is_refused_then_ignored(monkeypatch, tmp_path):
    root = tree(tmp_path, {OPERATOR_MODPROBE: operator_modprobe(1)})
    failure = run(monkeypatch, root, expect=ModuleFail)
    assert OPERATOR_MODPROBE + ":2 sets ib_core netns_mode=1 (shared)" in failure["msg"]
    assert "nothing was written" in failure["msg"]
    assert failure["details"]["overrides"] == [{"file": OPERATOR_MODPROBE, "line": 2, "value": "1", "mode": "shared"}]
    assert not os.path.exists(os.path.join(root, OURS.lstrip("/")))
    result = run(monkeypatch, root, on_conflict="ignore")
    assert result["changed"] is True and result["observed"]["persisted"] == "shared"
    assert result["observed"]["persisted_by"] == OPERATOR_MODPROBE
    assert any(OPERATOR_MODPROBE in w for w in result["warnings"])
    assert result["overrides"][0]["file"] == OPERATOR_MODPROBE


def test_operator_file_that_agrees_is_no_override(monkeypatch, tmp_path):
    root = tree(tmp_path, {OPERATOR_MODPROBE: operator_modprobe(0)})
    result = run(monkeypatch, root)
    assert result["overrides"] == [] and result["observed"]["persisted_by"] == OPERATOR_MODPROBE


def test_a_file_of_our_name_in_usr_lib_is_hidden_by_ours(monkeypatch, tmp_path):
    root = tree(tmp_path, {"/usr/lib/modprobe.d/rdma-k8s-node-ib_core.conf": "options ib_core netns_mode=1\n"})
    assert run(monkeypatch, root)["overrides"] == []


def test_a_value_the_kernel_refuses_is_an_override(monkeypatch, tmp_path):
    root = tree(tmp_path, {"/etc/modprobe.d/zz-local.conf": "options ib-core netns-mode=maybe\n"})
    failure = run(monkeypatch, root, expect=ModuleFail)
    assert "a value the kernel refuses: ib_core fails to load" in failure["msg"]


@pytest.mark.parametrize("settings, mode, found", [
    ([("0", "/o", 1)], "exclusive", []),
    ([("0", "/o", 1), ("1", "/z", 2)], "exclusive", [{"file": "/z", "line": 2, "value": "1", "mode": "shared"}]),
    # the last one wins: a later file that agrees again hides the one in between
    ([("0", "/o", 1), ("1", "/y", 2), ("0", "/z", 1)], "exclusive", []),
    ([("1", "/a", 1), ("0", "/o", 1)], "exclusive", []),
    # a bare bool parameter sets it
    ([("0", "/o", 1), ("", "/z", 3)], "exclusive", [{"file": "/z", "line": 3, "value": "", "mode": "shared"}]),
    ([("0", "/o", 1), ("1", "/proc/cmdline", None)], "exclusive",
     [{"file": "/proc/cmdline", "line": None, "value": "1", "mode": "shared"}]),
])
def test_overrides_planner(settings, mode, found):
    assert _netns.overrides(settings, "/o", mode) == found


def test_planner_on_kmod_layers():
    layers = _modprobe.with_ours([(OPERATOR_MODPROBE, _modprobe.directives(operator_modprobe(1)))], OURS,
                                 _modprobe.directives(_netns.render_conf("exclusive")))
    settings = _modprobe.settings_of(layers, "ib_core", "netns_mode")
    assert settings == [("0", OURS, 3), ("1", OPERATOR_MODPROBE, 2)]
    assert _netns.overrides(settings, OURS, "exclusive")[0]["mode"] == "shared"
