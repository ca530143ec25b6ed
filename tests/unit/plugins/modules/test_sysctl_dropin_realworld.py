"""sysctl_dropin on node trees built from the real-world corpus: the files systemd, procps, Debian, EKS AL2023, Ubuntu's
cloud image and Azure's HPC image put in sysctl.d and /etc/sysctl.conf, and the later files that beat ours.

live=false: these trees have no /proc/sys; the live path is tested on the simulator (test_sysctl_dropin.py).
"""

import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import sysctl_dropin
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.realworld_trees import (
    DEBIAN12_LINKS, DEBIAN12_SYSCTL, EKS_AL2023_SYSCTL, UBUNTU_CLOUDIMG_SYSCTL, build, corpus,
)

OURS = "/etc/sysctl.d/90-rdma-k8s-node.conf"
SETTINGS = {"net.ipv4.conf.all.arp_ignore": 1, "net.ipv4.conf.all.arp_announce": 2, "net.ipv4.conf.all.rp_filter": 2,
            "net.ipv4.conf.default.rp_filter": 2, "net.ipv4.conf.ibp24s0.arp_ignore": 2}


def run(monkeypatch, root, check=False, expect=None, **args):
    args.setdefault("host_root", str(root))
    args.setdefault("settings", SETTINGS)
    args.setdefault("live", False)
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, sysctl_dropin.main, args, check=check, diff=True, **kwargs)


def snapshot(root):
    out = {}
    for base, dirs, files in os.walk(str(root)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            full = os.path.join(base, name)
            out[full] = os.readlink(full) if os.path.islink(full) else open(full, "rb").read()
    return out


@pytest.mark.parametrize("files, links", [
    (DEBIAN12_SYSCTL, DEBIAN12_LINKS),
    (EKS_AL2023_SYSCTL, {}),
    (UBUNTU_CLOUDIMG_SYSCTL, {}),
    # Azure HPC images append their tuning to the distribution's /etc/sysctl.conf
    (dict(DEBIAN12_SYSCTL, **{"/etc/sysctl.conf": (corpus("debian12/etc/sysctl.conf")
                                                   + corpus("azhpc-images/etc/sysctl.conf.appended"))}), DEBIAN12_LINKS),
], ids=["debian12", "eks-al2023", "ubuntu-cloudimg", "azhpc"])
def test_stock_nodes_check_apply_idempotent_and_others_untouched(monkeypatch, tmp_path, files, links):
    root = build(tmp_path, files, links)
    before = snapshot(root)
    check = run(monkeypatch, root, check=True)
    assert check["changed"] is True and check["overrides"] == []
    assert snapshot(root) == before
    applied = run(monkeypatch, root)
    assert applied["changed"] is True and applied["overrides"] == []
    after = snapshot(root)
    assert set(after) - set(before) == {os.path.join(root, OURS.lstrip("/"))}
    assert all(after[path] == value for path, value in before.items()), "no other file may change"
    again = run(monkeypatch, root)
    assert again["changed"] is False and again["overrides"] == []


def debian_edited(tmp_path):
    """Debian 12 with the two rp_filter lines of its stock /etc/sysctl.conf uncommented (strict reverse-path
    filtering, as its comment suggests); procps' link makes systemd-sysctl read it as 99-sysctl.conf."""
    text = corpus("debian12/etc/sysctl.conf").replace("#net.ipv4.conf.default.rp_filter=1",
                                                      "net.ipv4.conf.default.rp_filter=1")
    text = text.replace("#net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.all.rp_filter=1")
    return build(tmp_path, dict(DEBIAN12_SYSCTL, **{"/etc/sysctl.conf": text}), DEBIAN12_LINKS)


def test_debian_sysctl_conf_read_after_ours_is_refused_naming_file_line_and_value(monkeypatch, tmp_path):
    root = debian_edited(tmp_path)
    for check in (True, False):
        failure = run(monkeypatch, root, check=check, expect=ModuleFail)
        assert "/etc/sysctl.d/99-sysctl.conf:19 sets net.ipv4.conf.default.rp_filter = 1" in failure["msg"]
        assert "/etc/sysctl.d/99-sysctl.conf:20 sets net.ipv4.conf.all.rp_filter = 1" in failure["msg"]
        assert "nothing was written" in failure["msg"]
        found = failure["details"]["overrides"]
        assert [(f["key"], f["value"], f["link"], f["reader"]) for f in found] == [
            ("net.ipv4.conf.all.rp_filter", "1", "../sysctl.conf", "systemd-sysctl"),
            ("net.ipv4.conf.default.rp_filter", "1", "../sysctl.conf", "systemd-sysctl")]
        assert failure["changed"] is False and failure["actions"] == []
        assert not os.path.exists(os.path.join(root, OURS.lstrip("/")))


def test_debian_override_ignored_writes_warns_and_reports(monkeypatch, tmp_path):
    root = debian_edited(tmp_path)
    result = run(monkeypatch, root, on_conflict="ignore")
    assert result["changed"] is True and len(result["overrides"]) == 2
    assert sum("99-sysctl.conf" in w for w in result["warnings"]) == 2
    assert os.path.exists(os.path.join(root, OURS.lstrip("/")))
    assert "net.ipv4.conf.all.rp_filter=1" in open(os.path.join(root, "etc/sysctl.conf")).read()


def test_a_file_named_to_sort_after_the_other_one_wins(monkeypatch, tmp_path):
    root = debian_edited(tmp_path)
    result = run(monkeypatch, root, path="/etc/sysctl.d/99-zz-rdma-k8s-node.conf")
    assert result["changed"] is True
    # systemd-sysctl now reads ours last; only 'sysctl --system' (procps) still reads /etc/sysctl.conf after it
    assert [(f["reader"], f["kind"], f["file"]) for f in result["overrides"]] == [
        ("sysctl --system", "sysctl_conf", "/etc/sysctl.conf")] * 2
    assert all("not at boot" in w for w in result["warnings"] if "sysctl.conf" in w)


def test_systemds_default_copied_late_excludes_all_from_ours(monkeypatch, tmp_path):
    """An operator's copy of systemd's 50-default.conf named to sort last: its '-net.ipv4.conf.all.rp_filter' makes
    systemd-sysctl write nothing to all.rp_filter, so our value never applies at boot."""
    root = build(tmp_path, dict(UBUNTU_CLOUDIMG_SYSCTL, **{
        "/etc/sysctl.d/99-default.conf": "corpus:systemd/upstream/usr/lib/sysctl.d/50-default.conf"}))
    failure = run(monkeypatch, root, expect=ModuleFail)
    found = failure["details"]["overrides"]
    # its 'net.ipv4.conf.default.rp_filter = 2' (line 25) agrees with ours, and its glob never touches explicit keys
    assert [(f["key"], f["kind"], f["value"], f["line"]) for f in found] == [
        ("net.ipv4.conf.all.rp_filter", "excluded", None, 27)]
    assert "writes nothing to it at boot" in failure["msg"]


def test_a_later_file_that_agrees_is_no_override(monkeypatch, tmp_path):
    root = build(tmp_path, dict(EKS_AL2023_SYSCTL, **{"/etc/sysctl.d/99-zz.conf": "net.ipv4.conf.all.rp_filter = 2\n"}))
    assert run(monkeypatch, root)["overrides"] == []


def test_a_masked_later_file_is_no_override(monkeypatch, tmp_path):
    root = build(tmp_path, dict(EKS_AL2023_SYSCTL, **{"/usr/lib/sysctl.d/99-zz.conf": "net.ipv4.conf.all.rp_filter = 1\n"}),
                 {"/etc/sysctl.d/99-zz.conf": "/dev/null"})
    assert run(monkeypatch, root)["overrides"] == []


def test_an_unreadable_other_file_fails_naming_it(monkeypatch, tmp_path):
    root = build(tmp_path, EKS_AL2023_SYSCTL)
    os.makedirs(os.path.join(root, "etc/sysctl.d/99-dir.conf"))
    failure = run(monkeypatch, root, expect=ModuleFail)
    assert "99-dir.conf" in failure["msg"]
    assert not os.path.exists(os.path.join(root, OURS.lstrip("/")))
