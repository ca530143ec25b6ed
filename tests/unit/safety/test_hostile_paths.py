"""Hostile node trees: every file a module owns is replaced by something an attacker (or a confused tool) could
leave there, and nothing outside ``host_root`` may change, nothing may hang, and no traceback may reach the user.

For every module bench (benches.py) and every node file it writes, the owned path becomes in turn:

* ``abs_link``   a symlink to a sentinel file outside the root, by its absolute machine path;
* ``rel_link``   a symlink climbing out with ``../../..`` to the same sentinel;
* ``inside_link`` a symlink to another file inside the root (the other file must stay untouched);
* ``parent_link`` its directory a symlink to a directory outside the root;
* ``fifo``       a FIFO (a blocking ``open`` would hang the run);
* ``dir``        a directory where a file is expected;

and ``abs_link`` once more in check mode.  Invariants: the sentinels outside the root are byte-identical with the
same mode and mtime; the module either succeeded or failed with a message naming the path (never a traceback); the
run finished (an alarm fails a hang).  A module may succeed only where chroot semantics make the write land inside
the root (``parent_link``: the absolute target is re-rooted, as a chrooted tool would see it).
"""

import os
import shutil
import signal
import stat

import pytest

from unit.safety.benches import BENCHES, bench_paths
# the fault campaign's bench cache, as a pytest fixture of this module too
from unit.safety.test_fault_campaign import benches  # noqa: F401  pylint: disable=unused-import

ATTACKS = ("abs_link", "rel_link", "inside_link", "parent_link", "fifo", "dir", "abs_link_check")
SENTINEL = b"sentinel: must never change\n"


def _cases():
    out = []
    for name in sorted(BENCHES):
        for path in bench_paths(name):
            if path.layer != "file":
                continue
            for attack in ATTACKS:
                out.append(pytest.param(name, path.target, attack, id="%s-%s-%s" % (name, path.target, attack)))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A directory outside every bench's root with a sentinel file and a sentinel directory."""
    base = tmp_path_factory.mktemp("outside")
    (base / "sentinel").write_bytes(SENTINEL)
    (base / "dir").mkdir()
    (base / "dir/keep").write_bytes(SENTINEL)
    return base


def _fingerprint(base):
    out = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            data = None
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    data = handle.read()
            out[os.path.relpath(path, base)] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode),
                                                info.st_mtime_ns, data)
    return out


def _plant(root, target, attack, outside):
    """Make the attack at ``root/target``; returns a function that removes it again."""
    full = root / target.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    original = full.read_bytes() if full.is_file() and not full.is_symlink() else None
    if attack == "inside_link":
        pass
    elif os.path.lexists(full) and not os.path.isdir(full):
        full.unlink()
    elif os.path.isdir(full) and not os.path.islink(full):
        shutil.rmtree(full)
    if attack in ("abs_link", "abs_link_check"):
        os.symlink(str(outside / "sentinel"), full)
    elif attack == "rel_link":
        os.symlink("../" * (len(full.relative_to(root).parts) + 6) + str(outside / "sentinel").lstrip("/"), full)
    elif attack == "inside_link":
        other = root / "etc/other-file"  # the owned file's own content behind a link: only the link rule refuses it
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_bytes(original if original is not None else b"")
        if full.exists():
            full.unlink()
        os.symlink("/etc/other-file", full)
    elif attack == "fifo":
        os.mkfifo(full)
    elif attack == "dir":
        full.mkdir()
    elif attack == "parent_link":
        saved = full.parent.with_name(full.parent.name + ".hostile-saved")
        os.rename(full.parent, saved)
        os.symlink(str(outside / "dir"), full.parent)

        def undo_parent():
            os.unlink(full.parent)
            os.rename(saved, full.parent)
        return undo_parent

    def undo():
        if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
            full.unlink()
        elif os.path.isdir(full):
            shutil.rmtree(full)
        (root / "etc/other-file").unlink(missing_ok=True)
    return undo


def _alarm(signum, frame):  # pylint: disable=unused-argument
    raise TimeoutError("the module hung on a hostile node tree")


@pytest.mark.fuse
@pytest.mark.parametrize("name, target, attack", CASES)
def test_hostile_owned_path(benches, outside, monkeypatch, name, target, attack):
    bench = benches.get(name)
    bench.activate()
    if bench.state() != bench.baseline:
        bench.restore_baseline()
    before_outside = _fingerprint(outside)
    other_before = None
    undo = _plant(bench.root, target, attack, outside)
    if attack == "inside_link":
        other_before = (bench.root / "etc/other-file").read_bytes()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        if attack == "abs_link_check":
            ok, out = _run_check(bench, monkeypatch)
        else:
            ok, out = bench.run_either(bench.request(), monkeypatch)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        try:
            assert _fingerprint(outside) == before_outside, "%s / %s / %s: a file OUTSIDE the root changed" % (
                name, target, attack)
            if other_before is not None:
                assert (bench.root / "etc/other-file").read_bytes() == other_before, "written through an inside link"
        finally:
            undo()
            bench.restore_baseline()
    text = repr(out)
    assert "Traceback" not in text and "exception" not in out, out
    if not ok:
        assert out.get("msg"), out
    if not ok and attack != "parent_link":
        # parent_link: the write lands inside the root where the link leads, and the module's own verification
        # (the tool or service reads the old place) fails it with its own words and restores the files
        assert target in out["msg"] or "link" in out["msg"], "the message names neither the file nor the link: %s" % (
            out["msg"],)
    if attack == "inside_link" and not ok:
        assert "symbolic link" in out["msg"], out["msg"]
    if attack in ("fifo", "dir"):
        assert not ok, "%s / %s / %s: the module accepted %s at its own file: %s" % (name, target, attack, attack, out)


def _run_check(bench, monkeypatch):
    from unit.plugins.modules.harness import ModuleExit, ModuleFail  # pylint: disable=import-outside-toplevel
    try:
        return True, bench.run_main(bench.main, bench.request(), monkeypatch, check=True)
    except ModuleFail as exc:
        return False, exc.args[0]
    except ModuleExit as exc:  # pragma: no cover - run_main returns on exit
        return True, exc.args[0]


def test_matrix_size():
    """Every bench that writes a node file is in the matrix, with every attack (pytest -s prints the size)."""
    with_files = set(name for name in BENCHES if any(p.layer == "file" for p in bench_paths(name)))
    assert set(c.values[0] for c in CASES) == with_files and len(with_files) >= 8
    assert len(CASES) == len(ATTACKS) * sum(1 for n in with_files for p in bench_paths(n) if p.layer == "file")
    print("hostile owned paths: %d cases over %d benches" % (len(CASES), len(with_files)))
