"""kubelet_topology's health check: a kubelet that answers healthz and then dies is not healthy.

The kubelet serves /healthz before it starts its container manager (cmd/kubelet/app/server.go: the healthz server
starts with RunKubelet; the CPU and memory managers restore their checkpoints later, in containerManager.Start, and
exit the process when that fails).  One "ok" right after the restart proves nothing: the module must see the same
main process answer for ``settle_time`` seconds, else roll back.
"""

from unit.safety.benches import KubeletBench
from unit.safety.nodes import ModuleFail


def crash_after_healthz_when(bench, marker):
    """The fake systemd's kubelet restarts (a new main PID) a moment after it first reported active, while the
    config holds ``marker``: what systemd's Restart=always shows when the kubelet exits after serving healthz."""
    systemd = bench.systemd
    real_active = systemd.active
    seen = {"count": 0}

    def active(name):
        state = real_active(name)
        config = (bench.root / bench.target().lstrip("/")).read_text() if (bench.root / bench.target().lstrip("/")).exists() else ""
        if name == "kubelet" and state and marker in config:
            seen["count"] += 1
            if seen["count"] == 2:
                systemd._stop(name)  # pylint: disable=protected-access
                systemd._start(name)  # pylint: disable=protected-access
        return state
    systemd.active = active


def test_a_kubelet_that_dies_after_answering_is_rolled_back(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    before = bench.observe()
    crash_after_healthz_when(bench, "best-effort")
    failure = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=5,
                                   settle_time=3), expect=ModuleFail)
    assert "did not become healthy" in failure["msg"] and "main process changed" in failure["msg"]
    assert "the files were restored" in failure["msg"]
    assert failure["details"]["healthy_after_rollback"] is True
    after = bench.observe()
    assert after["tree"] == before["tree"] and after["services"] == {"kubelet": "active"}


def test_the_same_kubelet_without_settle_time_is_taken_at_its_word(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    crash_after_healthz_when(bench, "best-effort")
    result = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=5))
    assert result["changed"] is True   # settle_time=0 (the bench's default): the first ok is accepted


def test_a_stable_kubelet_passes_the_settle_time(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    result = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=5,
                                  settle_time=2))
    assert result["changed"] is True
