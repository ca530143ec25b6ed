"""File edits: the pure planner, diff shape, atomic apply with backups, and all-or-nothing rollback."""

import os
import stat

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import (
    FilePlan, FileState, FileTransaction, observe_file, plan_file,
)
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot

UID, GID = os.geteuid(), os.getegid()


def state(content=None, mode=0o644, uid=UID, gid=GID):
    if content is None:
        return FileState("/etc/x.conf")
    return FileState("/etc/x.conf", True, content, mode, uid, gid)


@pytest.mark.parametrize("observed, desired, mode, kind", [
    (state(), "a\n", 0o644, FilePlan.CREATE),
    (state("a\n"), "b\n", 0o644, FilePlan.UPDATE),
    (state("a\n"), "a\n", 0o644, None),
    (state("a\n", mode=0o600), "a\n", 0o644, FilePlan.ATTRS),
    (state("a\n"), None, 0o644, FilePlan.DELETE),
    (state(), None, 0o644, None),
])
def test_plan_kinds(observed, desired, mode, kind):
    plan = plan_file(observed, desired, mode, UID, GID)
    assert plan.kind == kind
    assert plan.changed is (kind is not None)
    assert (plan.action() is None) is (kind is None)


def test_owner_difference_is_a_change():
    assert plan_file(state("a\n", uid=UID + 1), "a\n", 0o644, UID, GID).kind == FilePlan.ATTRS


def test_diff_shapes():
    create = plan_file(state(), "new\n", 0o644, UID, GID).diff()
    assert create == {"before": "", "after": "new\n", "before_header": "/etc/x.conf (absent)",
                      "after_header": "/etc/x.conf (content)"}
    delete = plan_file(state("old\n"), None).diff()
    assert delete["before"] == "old\n" and delete["after"] == "" and delete["after_header"].endswith("(absent)")
    chmod = plan_file(state("a\n", mode=0o600), "a\n", 0o644, UID, GID).diff()
    assert chmod["before_header"].endswith("mode 0600") and chmod["after_header"].endswith("mode 0644")


@pytest.mark.parametrize("content, mode", [(b"bytes", 0o644), ("x", 0o17777), ("x", None)])
def test_bad_plan_inputs(content, mode):
    with pytest.raises(InputError):
        plan_file(state(), content, mode)


def test_apply_creates_updates_with_backup_and_is_idempotent(tmp_path):
    host = HostRoot(str(tmp_path))
    plan = plan_file(observe_file(host, "/etc/modprobe.d/ib_core.conf"), "options ib_core netns_mode=0\n", 0o644, UID, GID)
    assert plan.kind == FilePlan.CREATE
    FileTransaction(host).apply_all([plan])
    target = tmp_path / "etc/modprobe.d/ib_core.conf"
    assert target.read_text() == "options ib_core netns_mode=0\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    again = plan_file(observe_file(host, "/etc/modprobe.d/ib_core.conf"), "options ib_core netns_mode=0\n", 0o644, UID, GID)
    assert not again.changed

    update = plan_file(observe_file(host, "/etc/modprobe.d/ib_core.conf"), "options ib_core netns_mode=1\n", 0o640, UID, GID)
    backups = FileTransaction(host, backup=True).apply_all([update])
    backup = backups["/etc/modprobe.d/ib_core.conf"]
    assert open(backup).read() == "options ib_core netns_mode=0\n"
    assert target.read_text() == "options ib_core netns_mode=1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    leftovers = [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert not leftovers


def test_no_backup_leaves_no_copies(tmp_path):
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/a.conf").write_text("1\n")
    FileTransaction(host, backup=False).apply_all([plan_file(observe_file(host, "/etc/a.conf"), "2\n", 0o644, UID, GID)])
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["a.conf"]


def test_failure_rolls_back_every_earlier_file(tmp_path):
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/a.conf").write_text("old-a\n")
    (tmp_path / "etc/blocker").write_text("a file where a directory is needed\n")
    plans = [
        plan_file(observe_file(host, "/etc/a.conf"), "new-a\n", 0o644, UID, GID),
        plan_file(observe_file(host, "/etc/new.conf"), "new\n", 0o644, UID, GID),
        plan_file(observe_file(host, "/etc/blocker/c.conf"), "c\n", 0o644, UID, GID),
    ]
    with pytest.raises(ApplyError) as info:
        FileTransaction(host).apply_all(plans)
    assert "/etc/blocker/c.conf" in info.value.msg and "rolled back" in info.value.msg
    assert info.value.details["rolled_back"] == ["/etc/new.conf", "/etc/a.conf"]
    assert (tmp_path / "etc/a.conf").read_text() == "old-a\n"
    assert not (tmp_path / "etc/new.conf").exists()
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["a.conf", "blocker"]


def test_delete_then_rollback_restores(tmp_path):
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/a.conf").write_text("keep\n")
    txn = FileTransaction(host)
    txn.apply(plan_file(observe_file(host, "/etc/a.conf"), None))
    assert not (tmp_path / "etc/a.conf").exists()
    assert txn.rollback() == (["/etc/a.conf"], [])
    assert (tmp_path / "etc/a.conf").read_text() == "keep\n"


def test_symlinked_target_is_written_through(tmp_path):
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/real.conf").write_text("a\n")
    os.symlink("real.conf", tmp_path / "etc/link.conf")
    FileTransaction(host).apply_all([plan_file(observe_file(host, "/etc/link.conf"), "b\n", 0o644, UID, GID)])
    assert os.path.islink(tmp_path / "etc/link.conf")
    assert (tmp_path / "etc/real.conf").read_text() == "b\n"


def test_directory_in_place_of_file_is_refused(tmp_path):
    (tmp_path / "etc/x.conf").mkdir(parents=True)
    with pytest.raises(HostReadError, match="not a regular file"):
        observe_file(HostRoot(str(tmp_path)), "/etc/x.conf")
