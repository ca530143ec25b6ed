"""Fault campaign: every write path of every module fails with EBUSY, ENOSPC, EIO, EACCES or hangs, and afterwards
the node is as it was (or the message says exactly what is not), the message says what happened, and the services
run.

Faults go in through the layer that carries each write: the hwsim fault table for sysfs attributes and rtnetlink
VF calls (``errno``/``hang``, with ``delay`` entries letting the first writes through to strike a later one), a
test-only hook on the process's ``os``/``tempfile`` calls for regular files under etc/ and var/lib (temp file
creation, data write-back, the rename, the backup copy, moving a state file), failing or hanging stand-ins for
node tools (update-grub, update-initramfs), and a fake systemd whose daemon-reload fails or whose service does
not start with the changed configuration.

``test_systematic`` covers every (module, write path, fault kind) once; ``test_random`` is a seeded, repeatable
draw over module x write path x fault kind x timing (first matching operation, a later one, or every one),
RDMA_FAULT_SEED / RDMA_FAULT_SCENARIOS choose the seed and the count (the seed is in every test id), and
RDMA_FAULT_OUTCOMES=<file> collects one line per scenario (outcome, bench, layer, kind).  After every scenario the invariant is:

* the fault did not fire -> the module succeeded and a re-run changes nothing;
* it fired -> the module failed (no silent success), the message names the cause (errno name or text, or the
  timeout) and the file/attribute/tool/service, and either the node state is identical to before (files byte
  for byte with mode and owner; VF count, admin GUIDs, link states, drivers and RDMA GUIDs; sysctls; netns mode)
  or the message says what could NOT be restored - and then, with the fault gone, a re-run converges and the run
  after it is a no-op;
* containerd and the kubelet are active.
"""

import difflib
import os
import random

import pytest

from unit.safety.benches import BENCHES, ERRNOS, KINDS, STRERROR, bench_paths
from unit.safety.conftest import FAULT_SCENARIOS, FAULT_SEED
from unit.safety.nodes import tree_diff

DISCLOSED = ("NOT restored", "could NOT", "FAILED", "NOT active", "STILL NOT", "NOT healthy",
             "stays loaded for this boot but is not persisted")
HANG_WORDS = ("ETIMEDOUT", "timed out", "did not return", "hung")


class BenchCache:
    """Benches built on first use and kept for the module (a simulated node takes a mount)."""

    def __init__(self, tmp_path_factory, monkeypatch):
        self.factory = tmp_path_factory
        self.monkeypatch = monkeypatch
        self.benches = {}

    def get(self, name):
        if name not in self.benches:
            cls, options = BENCHES[name]
            bench = cls(self.factory.mktemp(name.replace(":", "-")), self.monkeypatch, **options)
            bench.mark_baseline()
            self.benches[name] = bench
        return self.benches[name]

    def close(self):
        for bench in self.benches.values():
            bench.clear_faults()
            bench.close()


@pytest.fixture(scope="module")
def benches(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        cache = BenchCache(tmp_path_factory, monkeypatch)
        try:
            yield cache
        finally:
            cache.close()


def _state_diff(before, after):
    lines = tree_diff(before.get("tree", {}), after.get("tree", {}))
    for key in sorted(set(before) | set(after)):
        if key != "tree" and before.get(key) != after.get(key):
            lines += list(difflib.unified_diff(repr(before.get(key)).split(", "), repr(after.get(key)).split(", "),
                                               key + " before", key + " after", lineterm="", n=0))
    return "\n".join(lines[:40])


def exercise(benches, name, path, kind, phase, skip=0, persistent=False, monkeypatch=None):
    """One scenario; returns its outcome (``not_hit``, ``restored`` or ``disclosed``) after checking the invariant."""
    bench = benches.get(name)
    bench.activate()
    if bench.state() != bench.baseline:
        bench.restore_baseline()
        assert bench.state() == bench.baseline, "the bench could not be reset:\n" + _state_diff(bench.baseline, bench.state())
    before = bench.state()
    fired = path.inject(bench, kind, phase, skip, persistent)
    try:
        ok, out = bench.run_either(bench.request(), monkeypatch)
        hits = fired()
    finally:
        bench.clear_faults()
    after = bench.state()
    where = "%s / %s / %s / phase %s skip %s%s" % (name, path, kind, phase, skip, " persistent" if persistent else "")
    if not hits:
        assert ok, "%s: the fault never fired but the module failed: %s" % (where, out.get("msg"))
        again_ok, again = bench.run_either(bench.request(), monkeypatch)
        assert again_ok and not again["changed"], "%s: not idempotent after success: %s" % (where, again)
        return "not_hit"
    assert not ok, "%s: the fault fired %d time(s) and the module reported success: %s" % (where, hits, out)
    msg = out["msg"]
    if path.layer == "service":
        causes = ("failed", "not active", "did not become healthy")
    elif path.layer == "reload":
        causes = ("daemon-reload failed",)
    elif kind == "hang":
        causes = HANG_WORDS
    else:
        causes = (kind, STRERROR[kind])
    assert any(word in msg for word in causes), "%s: the message does not say why: %s" % (where, msg)
    assert path.says in msg, "%s: the message does not name %s: %s" % (where, path.says, msg)
    assert "Traceback" not in msg and "exception" not in out, out
    disclosed = any(word in msg for word in DISCLOSED)
    restored = after == before
    assert restored or disclosed, "%s: the node was left changed and the message does not say so: %s\n%s" % (
        where, msg, _state_diff(before, after))
    if bench.systemd is not None and not disclosed:
        down = [n for n, svc in bench.systemd.services.items() if svc["state"] != "active"]
        assert not down, "%s: %s not running after the rollback: %s" % (where, down, msg)
    if not restored:
        ok, out = bench.run_either(bench.request(), monkeypatch)
        assert ok, "%s: with the fault gone a re-run did not converge: %s (first failure: %s)" % (where, out["msg"], msg)
        ok, out = bench.run_either(bench.request(), monkeypatch)
        assert ok and not out["changed"], "%s: the run after the repair was not a no-op: %s" % (where, out)
    return "restored" if restored else "disclosed"


def systematic():
    """Every (bench, write path, fault kind) once at the path's first phase; each further phase once, with the
    errnos taking turns."""
    out = []
    turn = 0
    for name in sorted(BENCHES):
        for path in bench_paths(name):
            for kind in path.kinds:
                out.append(pytest.param(name, path, kind, path.phases[0], id="%s-%s-%s" % (name, path, kind)))
            for phase in path.phases[1:]:
                kind = [k for k in ERRNOS if k in path.kinds][turn % len([k for k in ERRNOS if k in path.kinds])]
                turn += 1
                out.append(pytest.param(name, path, kind, phase, id="%s-%s-%s-at-%s" % (name, path, kind, phase)))
    return out


SYSTEMATIC = systematic()


@pytest.mark.fuse
@pytest.mark.parametrize("name, path, kind, phase", SYSTEMATIC)
def test_systematic(benches, monkeypatch, name, path, kind, phase):
    exercise(benches, name, path, kind, phase, monkeypatch=monkeypatch)


def random_scenarios(seed, count):
    """A repeatable draw: bench, write path, fault kind (hangs at half the weight of one errno: they cost seconds),
    phase, and timing - the first matching operation, a later one, or every one (rollback writes included)."""
    rng = random.Random(seed)
    names = sorted(BENCHES)
    out = []
    for index in range(count):
        name = rng.choice(names)
        path = rng.choice(bench_paths(name))
        weights = [0.5 if kind == "hang" else 1.0 for kind in path.kinds]
        kind = rng.choices(path.kinds, weights)[0]
        phase = rng.choice(path.phases)
        timing = "first" if kind == "hang" else rng.choice(("first", "first", "later", "every"))
        skip = 1 if timing == "later" else 0
        out.append(pytest.param(name, path, kind, phase, skip, timing == "every",
                                id="seed%d-%03d-%s-%s-%s-%s-%s" % (seed, index, name, path, kind, phase, timing)))
    return out


@pytest.mark.fuse
@pytest.mark.fault_campaign
@pytest.mark.parametrize("name, path, kind, phase, skip, persistent", random_scenarios(FAULT_SEED, FAULT_SCENARIOS))
def test_random(benches, monkeypatch, name, path, kind, phase, skip, persistent):
    print("RDMA_FAULT_SEED=%d" % FAULT_SEED)
    outcome = exercise(benches, name, path, kind, phase, skip, persistent, monkeypatch=monkeypatch)
    record = os.environ.get("RDMA_FAULT_OUTCOMES")  # optional: a file collecting one line per scenario
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write("%s %s %s %s\n" % (outcome, name, path.layer, kind))


def test_campaign_size():
    """The campaign's size, printed for the record (pytest -s): every bench has write paths, every kind is used."""
    kinds = set(p.values[2] for p in SYSTEMATIC)
    assert kinds == set(KINDS)
    assert set(p.values[0] for p in SYSTEMATIC) == set(BENCHES)
    print("fault campaign: %d systematic scenarios, %d random (seed %d)" % (len(SYSTEMATIC), FAULT_SCENARIOS, FAULT_SEED))
