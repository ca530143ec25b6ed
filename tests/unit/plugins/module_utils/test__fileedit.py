"""File edits: the pure planner, diff shape, atomic apply with backups, and all-or-nothing rollback."""

import multiprocessing
import os
import random
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, HostRootError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import (
    DirectoryLock, FilePlan, FileState, FileTransaction, observe_file, plan_file, revert,
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


def test_symlinked_target_is_read_through_but_never_written_through(tmp_path):
    """An owned file that is a link: its content is read (inside the root), but any change is refused in the
    planner (so check mode says so too) and nothing is written, replaced or deleted."""
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/real.conf").write_text("a\n")
    os.symlink("real.conf", tmp_path / "etc/link.conf")
    observed = observe_file(host, "/etc/link.conf")
    assert observed.exists and observed.content == "a\n" and observed.link == "real.conf"
    assert plan_file(observed, "a\n", observed.mode, observed.uid, observed.gid).kind is None
    for content in ("b\n", None):
        with pytest.raises(HostRootError, match="link.conf is a symbolic link \\(to real.conf\\)"):
            plan_file(observed, content, 0o644, UID, GID)
    assert os.readlink(tmp_path / "etc/link.conf") == "real.conf"
    assert (tmp_path / "etc/real.conf").read_text() == "a\n"


def test_a_link_swapped_in_after_planning_is_not_written_through(tmp_path):
    """Plan against a regular file, then an attacker replaces it with a link to a file outside the root: the
    transaction sees a conflict under the lock and writes nothing anywhere."""
    outside = tmp_path / "outside"
    outside.write_text("sentinel\n")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/a.conf").write_text("old\n")
    host = HostRoot(str(root))
    plan = plan_file(observe_file(host, "/etc/a.conf"), "new\n", 0o644, UID, GID)
    (root / "etc/a.conf").unlink()
    os.symlink(str(outside), root / "etc/a.conf")
    with pytest.raises(ApplyError, match="changed on the node"):
        FileTransaction(host).apply_all([plan])
    assert outside.read_text() == "sentinel\n"
    assert os.readlink(root / "etc/a.conf") == str(outside)


def test_a_linked_parent_directory_resolves_inside_the_root(tmp_path):
    """/etc/modprobe.d -> /opt/conf (absolute, as the node sees it): the write lands in root/opt/conf, never in the
    machine's /opt/conf."""
    root = tmp_path / "root"
    (root / "opt/conf").mkdir(parents=True)
    (root / "etc").mkdir()
    os.symlink("/opt/conf", root / "etc/modprobe.d")
    host = HostRoot(str(root))
    FileTransaction(host).apply_all([plan_file(observe_file(host, "/etc/modprobe.d/x.conf"), "y\n", 0o644, UID, GID)])
    assert (root / "opt/conf/x.conf").read_text() == "y\n"
    assert not os.path.exists("/opt/conf/x.conf")


def test_directory_in_place_of_file_is_refused(tmp_path):
    (tmp_path / "etc/x.conf").mkdir(parents=True)
    with pytest.raises(HostReadError, match="not a regular file"):
        observe_file(HostRoot(str(tmp_path)), "/etc/x.conf")


# -- backups, compare-before-replace, locking -------------------------------------------------------------------------

def _etc(tmp_path, name="a.conf", text="old\n", mode=0o644):
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "etc" / name).write_text(text)
    os.chmod(tmp_path / "etc" / name, mode)
    return HostRoot(str(tmp_path))


def test_backups_are_0600_and_roots_even_when_the_original_is_world_readable(tmp_path):
    host = _etc(tmp_path, text="secret = 1\n", mode=0o644)
    os.umask(0o022)
    backups = FileTransaction(host, backup=True).apply_all(
        [plan_file(observe_file(host, "/etc/a.conf"), "secret = 2\n", 0o644, UID, GID)])
    info = os.stat(backups["/etc/a.conf"])
    assert stat.S_IMODE(info.st_mode) == 0o600
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (0, 0)
    assert open(backups["/etc/a.conf"]).read() == "secret = 1\n"


def test_rollback_puts_the_original_mode_back_not_the_backups(tmp_path):
    host = _etc(tmp_path, mode=0o640)
    txn = FileTransaction(host)
    txn.apply(plan_file(observe_file(host, "/etc/a.conf"), "new\n", 0o644, UID, GID))
    assert txn.rollback() == (["/etc/a.conf"], [])
    assert (tmp_path / "etc/a.conf").read_text() == "old\n"
    assert stat.S_IMODE((tmp_path / "etc/a.conf").stat().st_mode) == 0o640
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["a.conf"]


def test_two_backups_in_one_second_do_not_overwrite_each_other(tmp_path):
    host = _etc(tmp_path, text="v1\n")
    first = FileTransaction(host, backup=True).apply_all([plan_file(observe_file(host, "/etc/a.conf"), "v2\n", 0o644, UID, GID)])
    second = FileTransaction(host, backup=True).apply_all([plan_file(observe_file(host, "/etc/a.conf"), "v3\n", 0o644, UID, GID)])
    assert first["/etc/a.conf"] != second["/etc/a.conf"]
    assert open(first["/etc/a.conf"]).read() == "v1\n" and open(second["/etc/a.conf"]).read() == "v2\n"


def test_a_file_changed_after_planning_is_not_overwritten(tmp_path):
    host = _etc(tmp_path, text="user = 1\n")
    (tmp_path / "etc/b.conf").write_text("b\n")
    plans = [plan_file(observe_file(host, "/etc/b.conf"), "b2\n", 0o644, UID, GID),
             plan_file(observe_file(host, "/etc/a.conf"), "user = 1\nours = 1\n", 0o644, UID, GID)]
    (tmp_path / "etc/a.conf").write_text("user = 2\n")  # another run (or the operator) edits it in between
    with pytest.raises(ApplyError) as info:
        FileTransaction(host).apply_all(plans)
    assert "/etc/a.conf changed on the node after this run read it" in info.value.msg
    assert info.value.details["conflict"] is True and info.value.details["rolled_back"] == ["/etc/b.conf"]
    assert (tmp_path / "etc/a.conf").read_text() == "user = 2\n", "the other writer's content must survive"
    assert (tmp_path / "etc/b.conf").read_text() == "b\n", "and this run's earlier file is rolled back"


def test_a_file_that_already_holds_the_result_is_left_alone(tmp_path):
    host = _etc(tmp_path)
    plan = plan_file(observe_file(host, "/etc/a.conf"), "new\n", 0o644, UID, GID)
    (tmp_path / "etc/a.conf").write_text("new\n")  # a concurrent identical run won the race
    assert FileTransaction(host).apply_all([plan]) == {}
    assert (tmp_path / "etc/a.conf").read_text() == "new\n"


def test_rollback_does_not_clobber_a_newer_write_by_someone_else(tmp_path):
    host = _etc(tmp_path)
    txn = FileTransaction(host)
    txn.apply(plan_file(observe_file(host, "/etc/a.conf"), "ours\n", 0o644, UID, GID))
    (tmp_path / "etc/a.conf").write_text("theirs\n")
    assert txn.rollback() == ([], ["/etc/a.conf"])
    assert (tmp_path / "etc/a.conf").read_text() == "theirs\n"


def test_revert_skips_files_someone_else_changed_and_reverts_the_rest(tmp_path):
    host = _etc(tmp_path)
    (tmp_path / "etc/b.conf").write_text("b\n")
    plans = [plan_file(observe_file(host, "/etc/a.conf"), "a2\n", 0o644, UID, GID),
             plan_file(observe_file(host, "/etc/b.conf"), "b2\n", 0o644, UID, GID)]
    FileTransaction(host, backup=False).apply_all(plans)
    (tmp_path / "etc/b.conf").write_text("theirs\n")
    assert revert(host, plans) == ["/etc/a.conf"]
    assert (tmp_path / "etc/a.conf").read_text() == "old\n" and (tmp_path / "etc/b.conf").read_text() == "theirs\n"


def test_revert_failure_names_the_first_cause_and_the_file(tmp_path, monkeypatch):
    host = _etc(tmp_path)
    plan = plan_file(observe_file(host, "/etc/a.conf"), "a2\n", 0o644, UID, GID)
    FileTransaction(host, backup=False).apply_all([plan])
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kwargs):
        if str(dst) == "a.conf" or str(dst).endswith("/etc/a.conf"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ApplyError) as info:
        revert(host, [plan], cause="update-grub failed (rc=1)")
    assert info.value.msg.startswith("update-grub failed (rc=1); putting the previous files back FAILED: writing /etc/a.conf")
    assert "No space left on device" in info.value.msg
    monkeypatch.setattr(os, "replace", real_replace)
    assert (tmp_path / "etc/a.conf").read_text() == "a2\n"


def test_a_held_directory_lock_times_out_with_a_clear_message(tmp_path):
    host = _etc(tmp_path)
    plan = plan_file(observe_file(host, "/etc/a.conf"), "new\n", 0o644, UID, GID)
    with DirectoryLock(host, "/etc"):
        child = subprocess.run(
            [sys.executable, "-c", _CHILD_TXN, str(tmp_path)], capture_output=True, text=True, check=False,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert child.returncode == 3, child.stderr
    assert "another run has held the lock on /etc for 0.3s" in child.stdout
    assert (tmp_path / "etc/a.conf").read_text() == "old\n"
    FileTransaction(host).apply_all([plan])  # released: the same edit goes through
    assert (tmp_path / "etc/a.conf").read_text() == "new\n"


_CHILD_TXN = """
import sys
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction, observe_file, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
host = HostRoot(sys.argv[1])
try:
    FileTransaction(host, lock_timeout=0.3).apply_all([plan_file(observe_file(host, "/etc/a.conf"), "child\\n", 0o644)])
except ApplyError as exc:
    print(exc.msg)
    sys.exit(3)
"""


def _racer(root, tag, rounds, seed, out):
    """A read-modify-write editor: plan from what it reads, pause (as a module does while it plans), apply; retry
    on a conflict.  Appends one line per round to a shared file that both racers edit."""
    rng = random.Random(seed)
    host = HostRoot(root)
    conflicts = 0
    for index in range(rounds):
        while True:
            seen = observe_file(host, "/etc/shared.conf")
            plan = plan_file(seen, (seen.content or "") + "%s-%d\n" % (tag, index), 0o644, UID, GID)
            time.sleep(rng.uniform(0, 0.004))
            try:
                FileTransaction(host, backup=False).apply_all([plan])
                break
            except ApplyError as exc:
                if not exc.details.get("conflict"):
                    raise
                conflicts += 1
    out.put((tag, conflicts))


def test_two_processes_racing_on_one_file_lose_nothing(tmp_path):
    """Two editors at once: every line of both survives, nothing is torn, no temp or backup file is left."""
    (tmp_path / "etc").mkdir()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    rounds = 40
    procs = [ctx.Process(target=_racer, args=(str(tmp_path), tag, rounds, seed, out)) for tag, seed in (("a", 1), ("b", 2))]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    conflicts = dict(out.get(timeout=5) for dummy in procs)
    lines = (tmp_path / "etc/shared.conf").read_text().splitlines()
    assert sorted(lines) == sorted(["%s-%d" % (tag, i) for tag in "ab" for i in range(rounds)]), \
        "lost updates: %d of %d lines" % (len(lines), 2 * rounds)
    for tag in "ab":
        assert [line for line in lines if line.startswith(tag)] == ["%s-%d" % (tag, i) for i in range(rounds)]
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["shared.conf"]
    assert sum(conflicts.values()) > 0, "the racers never collided; the test proved nothing"


def test_rollback_and_revert_remove_the_directories_they_created(tmp_path):
    host = HostRoot(str(tmp_path))
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/blocker").write_text("a file where a directory is needed\n")
    plans = [plan_file(observe_file(host, "/etc/systemd/system/x.service.d/50.conf"), "a\n", 0o644, UID, GID),
             plan_file(observe_file(host, "/etc/blocker/c.conf"), "c\n", 0o644, UID, GID)]
    with pytest.raises(ApplyError):
        FileTransaction(host).apply_all(plans)
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["blocker"]
    plans = [plan_file(observe_file(host, "/etc/systemd/system/x.service.d/50.conf"), "a\n", 0o644, UID, GID)]
    FileTransaction(host).apply_all(plans)
    (tmp_path / "etc/systemd/system/other.conf").write_text("someone else's\n")
    assert revert(host, plans) == ["/etc/systemd/system/x.service.d/50.conf"]
    assert sorted(p.name for p in (tmp_path / "etc/systemd/system").iterdir()) == ["other.conf"], \
        "the empty drop-in directory goes, the directory holding another file stays"
