"""nvidia_peermem: what keeps the persisted module from loading at boot - kmod's blacklist (applied by
systemd-modules-load), an install line, a later openibd.service drop-in that empties ExecStartPost=, a drop-in of our
name in a more important directory - is refused before anything is loaded or written, or reported with
on_conflict=ignore.  Real files: the MLNX_OFED/rdma-core/systemd modprobe.d files of the corpus, read at test time."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect, _modprobe
from ansible_collections.rdma.k8s_node.plugins.modules import nvidia_peermem
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.realworld_trees import DOCA_MODPROBE, corpus
from unit.plugins.modules.simnode import sim_node

CONF = "modules-load.d/nvidia-peermem.conf"
DROPIN = "/etc/systemd/system/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf"


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        for path, source in DOCA_MODPROBE.items():
            if path.startswith("/etc/"):
                target = node.etc / path[len("/etc/"):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(corpus(source[len("corpus:"):]))
        unit = node.etc / "systemd/system/openibd.service"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text("[Service]\nExecStart=/etc/init.d/openibd start\n", encoding="utf-8")
        yield node


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, nvidia_peermem.main, args, check=check, diff=True, **kwargs)


def put(node, path, text):
    target = node.etc / path[len("/etc/"):]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def loaded(node):
    return (node.root / "sys/module/nvidia_peermem").is_dir()


def test_doca_node_has_no_override(monkeypatch, dgx):
    result = run(monkeypatch, dgx)
    assert result["overrides"] == [] and loaded(dgx) and (dgx.etc / CONF).exists()
    assert run(monkeypatch, dgx)["changed"] is False


@pytest.mark.parametrize("check", [True, False])
def test_blacklist_is_refused_before_loading_or_writing(monkeypatch, dgx, check):
    put(dgx, "/etc/modprobe.d/blacklist-gpudirect.conf", "# site policy\nblacklist nvidia-peermem\n")
    failure = run(monkeypatch, dgx, check=check, expect=ModuleFail)
    assert "/etc/modprobe.d/blacklist-gpudirect.conf:2 blacklists nvidia_peermem" in failure["msg"]
    assert "deny-listed (by kmod)" in failure["msg"]
    assert failure["details"]["overrides"] == [{"file": "/etc/modprobe.d/blacklist-gpudirect.conf", "line": 2,
                                                "kind": "blacklist", "value": None, "what": "modules-load.d"}]
    assert not loaded(dgx) and not (dgx.etc / CONF).exists() and not (dgx.root / DROPIN.lstrip("/")).exists()


def test_blacklist_ignored_loads_persists_and_warns(monkeypatch, dgx):
    put(dgx, "/etc/modprobe.d/blacklist-gpudirect.conf", "blacklist nvidia_peermem\n")
    result = run(monkeypatch, dgx, on_conflict="ignore")
    assert loaded(dgx) and (dgx.etc / CONF).exists() and len(result["overrides"]) == 1
    assert any("blacklists nvidia_peermem" in w for w in result["warnings"])


def test_install_true_is_refused_and_mlnx_style_chaining_is_not(monkeypatch, dgx):
    put(dgx, "/etc/modprobe.d/zz-cis.conf", "install nvidia_peermem /bin/true\n")
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert "replaces loading nvidia_peermem with '/bin/true'" in failure["msg"]
    # MLNX_OFED's own pattern (mlnx-bf.conf does it for ib_umad): run modprobe --ignore-install, then something else
    put(dgx, "/etc/modprobe.d/zz-cis.conf", corpus("mlnx-ofed/etc/modprobe.d/mlnx-bf.conf").replace("ib_umad", "nvidia_peermem"))
    assert run(monkeypatch, dgx)["overrides"] == []


def test_later_dropin_emptying_exec_start_post_is_refused(monkeypatch, dgx):
    put(dgx, "/etc/systemd/system/openibd.service.d/90-site.conf", "[Service]\nExecStartPost=\nExecStartPost=/bin/true\n")
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert "90-site.conf:2 empties ExecStartPost= after %s" % DROPIN in failure["msg"]
    assert [(o["kind"], o["what"]) for o in failure["details"]["overrides"]] == [("reset", "openibd.service")]


def test_earlier_dropin_or_later_addition_is_no_override(monkeypatch, dgx):
    put(dgx, "/etc/systemd/system/openibd.service.d/05-site.conf", "[Service]\nExecStartPost=\n")
    put(dgx, "/etc/systemd/system/openibd.service.d/90-site.conf", "[Service]\nExecStartPost=/usr/bin/logger openibd up\n")
    assert run(monkeypatch, dgx)["overrides"] == []


def test_same_name_in_a_more_important_directory_masks_ours(monkeypatch, dgx):
    put(dgx, "/etc/systemd/system.control/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf", "[Service]\n")
    failure = run(monkeypatch, dgx, expect=ModuleFail)
    assert "systemd reads it instead of ours" in failure["msg"]
    assert failure["details"]["overrides"][0]["kind"] == "masked"


def test_no_dropin_no_dropin_checks(monkeypatch, dgx):
    put(dgx, "/etc/systemd/system/openibd.service.d/90-site.conf", "[Service]\nExecStartPost=\n")
    assert run(monkeypatch, dgx, openibd_dropin="never")["overrides"] == []


def test_dmabuf_has_no_override_checks(monkeypatch, dgx):
    put(dgx, "/etc/modprobe.d/blacklist-gpudirect.conf", "blacklist nvidia_peermem\n")
    result = run(monkeypatch, dgx, persist=False)
    assert result["overrides"] == [] and loaded(dgx)


def test_planner_cmdline_blacklist_and_type_dropin():
    layers = [("/etc/modprobe.d/mlnx.conf", _modprobe.directives(corpus("mlnx-ofed/etc/modprobe.d/mlnx.conf")))]
    found = _gpudirect.peermem_overrides(layers, ("/proc/cmdline", "ro modprobe.blacklist=nouveau,nvidia_peermem"))
    assert found == [{"file": "/proc/cmdline", "line": None, "kind": "blacklist", "value": None, "what": "modules-load.d"}]
    ours = _gpudirect.render_openibd_dropin("/sbin/modprobe")
    # a top-level service.d drop-in is the least specific, but a later file name still wins the setting
    dropins = [(DROPIN, ours), ("/etc/systemd/system/service.d/99-all.conf", "[Service]\nExecStartPost=\n")]
    assert [o["kind"] for o in _gpudirect.peermem_overrides([], None, dropins, DROPIN, ours)] == ["reset"]
