"""sysctl_dropin on a simulated node: one file owned whole, live values in one call, max rule, rollback.

The node's own all/default keys would be the test machine's if the sysctl shim passed them to the real tool,
so a recorder stands in for the real sysctl (HWSIM_REAL_SYSCTL) and the simulator holds every value.
"""

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import sysctl_dropin
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

CONF = "sysctl.d/90-rdma-k8s-node.conf"
SETTINGS = {
    "net.ipv4.conf.all.arp_ignore": 1,
    "net.ipv4.conf.all.arp_announce": 2,
    "net.ipv4.conf.all.rp_filter": 2,
    "net.ipv4.conf.ibp24s0.arp_ignore": 2,
    "net.ipv4.conf.ibp24s0.rp_filter": 0,
}


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    recorder = tmp_path / "real-sysctl"
    recorder.write_text('#!/bin/sh\necho "$*" >> "%s"\n' % (tmp_path / "real-sysctl.log"))
    recorder.chmod(0o755)
    monkeypatch.setenv("HWSIM_REAL_SYSCTL", str(recorder))
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        node.real_log = tmp_path / "real-sysctl.log"
        yield node


def conf(node, iface, key):
    return (node.root / "proc/sys/net/ipv4/conf" / iface / key).read_text().strip()


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, sysctl_dropin.main, args, check=check, diff=True, **kwargs)


def test_check_mode_lists_every_change_and_touches_nothing(monkeypatch, dgx):
    result = run(monkeypatch, dgx, check=True, settings=SETTINGS)
    kinds = [(a["action"], a["target"]) for a in result["actions"]]
    assert kinds[0] == ("create_file", "/etc/" + CONF)
    assert ("set_live", "net.ipv4.conf.ibp24s0.arp_ignore") in kinds
    assert result["observed"]["live"]["net.ipv4.conf.all.arp_ignore"] == "0"
    assert not (dgx.etc / CONF).exists()
    assert conf(dgx, "ibp24s0", "arp_ignore") == "0"


def test_apply_idempotent_and_effective_max_rule(monkeypatch, dgx):
    calls = []
    real_run_kernel = sysctl_dropin.HostCommands.run_kernel

    def counting(self, argv, data=None):
        calls.append(argv)
        return real_run_kernel(self, argv, data)

    monkeypatch.setattr(sysctl_dropin.HostCommands, "run_kernel", counting)
    result = run(monkeypatch, dgx, settings=SETTINGS)
    assert result["changed"] is True
    assert (dgx.etc / CONF).read_text().splitlines()[1:] == [
        "net.ipv4.conf.all.arp_ignore = 1", "net.ipv4.conf.all.arp_announce = 2", "net.ipv4.conf.all.rp_filter = 2",
        "net.ipv4.conf.ibp24s0.arp_ignore = 2", "net.ipv4.conf.ibp24s0.rp_filter = 0"]
    assert conf(dgx, "ibp24s0", "arp_ignore") == "2" and conf(dgx, "all", "rp_filter") == "2"
    # rp_filter 0 on the interface is lifted to 2 by conf/all: the kernel uses the maximum
    assert result["observed"]["effective"] == {"ibp24s0": {"arp_ignore": 2, "rp_filter": 2}}
    assert len(calls) == 1 and calls[0][:3] == ["sysctl", "-q", "-w"] and len(calls[0]) == 8, "one sysctl call"
    again = run(monkeypatch, dgx, settings=SETTINGS)
    assert again["changed"] is False and again["actions"] == []


def test_file_is_owned_whole(monkeypatch, dgx):
    run(monkeypatch, dgx, settings=SETTINGS)
    renamed = {k.replace("ibp24s0", "ibp64s0"): v for k, v in SETTINGS.items()}
    result = run(monkeypatch, dgx, settings=renamed)
    assert "ibp24s0" in result["diff"]["before"] and "ibp24s0" not in result["diff"]["after"]
    assert "ibp24s0" not in (dgx.etc / CONF).read_text()


def test_missing_interface_is_persisted_only(monkeypatch, dgx):
    result = run(monkeypatch, dgx, settings={"net.ipv4.conf.ibp24s0v0.arp_ignore": 2})
    assert result["missing"] == ["net.ipv4.conf.ibp24s0v0.arp_ignore"]
    assert [a["action"] for a in result["actions"]] == ["create_file"]
    assert any("persisted only" in w for w in result["warnings"])


def test_live_failure_restores_file_and_values(monkeypatch, dgx):
    (dgx.etc / CONF).write_text("net.ipv4.conf.all.arp_ignore = 0\n")
    before = (dgx.etc / CONF).read_bytes()
    dgx.call({"cmd": "fault_add", "path": "proc/sys/net/ipv4/conf/ibp24s0/rp_filter", "op": "write", "errno": "EIO"})
    failure = run(monkeypatch, dgx, settings=SETTINGS, expect=ModuleFail)
    assert "net.ipv4.conf.ibp24s0.rp_filter" in failure["msg"] and "restored" in failure["msg"]
    assert (dgx.etc / CONF).read_bytes() == before
    for iface, key in (("all", "arp_ignore"), ("all", "rp_filter"), ("ibp24s0", "arp_ignore")):
        assert conf(dgx, iface, key) == "0", "%s/%s must be back to its previous value" % (iface, key)


@pytest.mark.parametrize("args, message", [
    ({"settings": {}}, "non-empty"),
    ({"settings": {"net/../../etc/passwd": 1}}, "not a sysctl key"),
    ({"settings": {"net.ipv4.conf.all.arp_ignore": "1; reboot"}}, "cannot"),
    ({"settings": {"net.ipv4.conf.all.arp_ignore": True}}, "needs a number"),
    ({"settings": {"a.b": 1, "a/b": 2}}, "given twice"),
    ({"settings": SETTINGS, "path": "/etc/sysctl.conf"}, "directly in /etc/sysctl.d"),
    ({"settings": SETTINGS, "path": "/etc/sysctl.d/90-rdma"}, "directly in /etc/sysctl.d"),
    ({"settings": ["net.x"]}, "dict"),
    ({"settings": SETTINGS, "host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input_writes_nothing(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert not (dgx.etc / CONF).exists()
    assert conf(dgx, "all", "arp_ignore") == "0"


def test_backup_files_map_the_edited_file_to_a_copy_of_its_old_content(monkeypatch, dgx):
    """backup_files is ``{edited path: backup path}`` on a changing run with backup=true, ``{}`` otherwise (RETURN)."""
    old = "net.ipv4.conf.all.arp_ignore = 0\n"
    (dgx.etc / CONF).write_text(old)
    assert run(monkeypatch, dgx, check=True, settings=SETTINGS, backup=True)["backup_files"] == {}
    assert (dgx.etc / CONF).read_text() == old
    result = run(monkeypatch, dgx, settings=SETTINGS, backup=True)
    assert result["changed"]
    [(edited, copy)] = result["backup_files"].items()
    assert edited == "/etc/" + CONF
    assert copy.startswith(str(dgx.root) + "/etc/" + CONF + ".") and copy.endswith("~")
    with open(copy, encoding="utf-8") as saved:
        assert saved.read() == old
    assert (dgx.etc / CONF).read_text() != old
    again = run(monkeypatch, dgx, settings=SETTINGS, backup=True)
    assert not again["changed"] and again["backup_files"] == {}


def test_backup_files_empty_without_backup_or_previous_file(monkeypatch, dgx):
    """A new file has nothing to back up, and backup=false keeps no copy: ``{}`` either way, no stray copy left."""
    assert run(monkeypatch, dgx, settings=SETTINGS, backup=True)["backup_files"] == {}
    assert run(monkeypatch, dgx, settings=dict(SETTINGS, **{"net.ipv4.conf.all.arp_ignore": 2}))["backup_files"] == {}
    assert sorted(p.name for p in (dgx.etc / "sysctl.d").iterdir() if p.name.endswith("~")) == []
