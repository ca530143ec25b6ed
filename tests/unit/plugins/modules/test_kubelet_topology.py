"""kubelet_topology's health check: a kubelet that answers healthz and then dies is not healthy.

The kubelet serves /healthz before it starts its container manager (cmd/kubelet/app/server.go: the healthz server
starts with RunKubelet; the CPU and memory managers restore their checkpoints later, in containerManager.Start, and
exit the process when that fails).  One "ok" right after the restart proves nothing: the module must see the same
main process answer for ``settle_time`` seconds, else roll back.
"""

import json

import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
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


# -- a kubelet that does not start: fail at once, not after restart_timeout --------------------------------------------
def failing_start_when(bench, marker, restart_always=True, times=None):
    """The kubelet's start fails while its config holds ``marker`` (at most ``times`` times): what a kubelet refusing
    its configuration shows systemd.  ``restart_always``: kubeadm's unit (Restart=always), else systemd gives up."""
    fired = []

    def fails(root):
        config = root / bench.target().lstrip("/")
        if marker in config.read_text() and (times is None or len(fired) < times):
            fired.append(1)
            return True
        return False
    bench.systemd.fail_start["kubelet"] = fails
    if restart_always:
        bench.systemd.restart_always.add("kubelet")
    return fired


def test_a_crash_looping_kubelet_is_rolled_back_without_waiting_for_the_timeout(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    before = bench.observe()
    fired = failing_start_when(bench, "best-effort")
    # restart_timeout is an hour: only the crash-loop rule can end the wait in this test's lifetime
    failure = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=3600),
                        expect=ModuleFail)
    assert "did not become healthy after the change (activating: it exited and systemd restarted it 2 times)" \
        in failure["msg"]
    assert "the files were restored" in failure["msg"] and failure["details"]["healthy_after_rollback"] is True
    assert len(fired) >= 3          # our restart and at least systemd's two (the fake retries at every poll)
    after = bench.observe()
    assert after["tree"] == before["tree"] and after["services"] == {"kubelet": "active"}


def test_a_kubelet_systemd_gave_up_on_is_rolled_back_at_once(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    failing_start_when(bench, "best-effort", restart_always=False)
    failure = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=3600),
                        expect=ModuleFail)
    assert "did not become healthy after the change (failed: systemd is not restarting it)" in failure["msg"]
    assert failure["details"]["healthy_after_rollback"] is True


def test_a_kubelet_that_fails_once_then_starts_is_healthy(tmp_path, monkeypatch):
    """One failed start is not a crash loop: the kubelet systemd brought back at its first retry is accepted."""
    bench = KubeletBench(tmp_path, monkeypatch)
    fired = failing_start_when(bench, "best-effort", times=1)
    result = bench.run(bench.args(topology_manager_policy="best-effort", restart=True, restart_timeout=3600,
                                  settle_time=1))
    assert result["changed"] is True and len(fired) == 1
    assert bench.observe()["services"] == {"kubelet": "active"}


# -- default policy options: applied only where the kubelet accepts them ----------------------------------------------
PREFER = {"prefer-closest-numa-nodes": "true"}


def config_of(bench):
    return yaml.safe_load((bench.root / "var/lib/kubelet/config.yaml").read_text())


def test_a_default_option_is_applied_where_the_kubelet_accepts_it(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)   # 1.29: prefer-closest-numa-nodes is beta and on by default
    result = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_default_options=PREFER))
    assert result["default_options"] == {"applied": PREFER, "left_out": {}}
    assert config_of(bench)["topologyManagerPolicyOptions"] == PREFER
    again = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_default_options=PREFER))
    assert again["changed"] is False


def test_a_default_option_the_kubelet_would_refuse_is_left_out_with_a_warning(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch, version="v1.27.9")   # beta, its gates off by default before 1.28
    result = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_default_options=PREFER))
    assert result["default_options"]["applied"] == {}
    assert "needs kubelet 1.28 or later" in result["default_options"]["left_out"]["prefer-closest-numa-nodes"]
    assert any("left out" in w and "1.28" in w for w in result["warnings"])
    assert "topologyManagerPolicyOptions" not in config_of(bench)
    assert config_of(bench)["topologyManagerPolicy"] == "restricted"


def test_the_same_option_set_explicitly_is_refused_on_that_kubelet(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch, version="v1.27.9")
    failure = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_policy_options=PREFER),
                        expect=ModuleFail)
    assert "needs kubelet 1.28 or later" in failure["msg"]


def test_explicit_settings_win_over_default_options(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    result = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_default_options=PREFER,
                                  topology_manager_policy_options={"prefer-closest-numa-nodes": "false"}))
    assert result["default_options"] == {"applied": {}, "left_out": {}}
    assert config_of(bench)["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "false"}


def test_the_nodes_own_value_is_kept(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    config = bench.root / "var/lib/kubelet/config.yaml"
    config.write_text(config.read_text() + "topologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: 'false'\n")
    result = bench.run(bench.args(topology_manager_policy="restricted", topology_manager_default_options=PREFER))
    assert "kept" in result["default_options"]["left_out"]["prefer-closest-numa-nodes"]
    assert config_of(bench)["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "false"}


def test_prefer_closest_is_left_out_under_single_numa_node(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch, version="v1.32.1")
    result = bench.run(bench.args(topology_manager_policy="single-numa-node", topology_manager_default_options=PREFER))
    assert "only affects the best-effort and restricted" in result["default_options"]["left_out"]["prefer-closest-numa-nodes"]
    assert "topologyManagerPolicyOptions" not in config_of(bench)


# -- every change the kubelet checks against its checkpoint removes the state file ------------------------------------
MEMORY_STATE = "/var/lib/kubelet/memory_manager_state"
CPU_STATE = "/var/lib/kubelet/cpu_manager_state"
GI = 1 << 30


def memory_checkpoint(reserved):
    """A Static memory_manager_state as the kubelet writes it (state.MemoryTable: total, systemReserved,
    allocatable, reserved, free), two NUMA nodes of 64 GiB, ``reserved`` bytes per node."""
    machine = dict((str(node), {"numberOfAssignments": 0, "cells": [node], "memoryMap": {"memory": {
        "total": 64 * GI, "systemReserved": amount, "allocatable": 64 * GI - amount, "reserved": 0,
        "free": 64 * GI - amount}}}) for node, amount in reserved.items())
    return json.dumps({"policyName": "Static", "machineState": machine, "checksum": 1})


def static_memory_node(tmp_path, monkeypatch, reserved=(("0", "1Gi"), ("1", "100Mi"))):
    bench = KubeletBench(tmp_path, monkeypatch)
    config = bench.root / "var/lib/kubelet/config.yaml"
    config.write_text(config.read_text() + "kubeReserved: {memory: 512Mi}\nsystemReserved: {memory: 512Mi}\n"
                      "memoryManagerPolicy: Static\nreservedMemory:\n" + "".join(
                          "- numaNode: %s\n  limits: {memory: %s}\n" % pair for pair in reserved))
    table = dict((int(n), kub.parse_quantity(q, "q")) for n, q in reserved)
    (bench.root / MEMORY_STATE.lstrip("/")).write_text(memory_checkpoint(table))
    return bench


RESPLIT = [{"numa_node": 0, "limits": {"memory": "562Mi"}}, {"numa_node": 1, "limits": {"memory": "562Mi"}}]


def test_a_reserved_memory_change_under_static_needs_the_restart(tmp_path, monkeypatch):
    bench = static_memory_node(tmp_path, monkeypatch)
    failure = bench.run(bench.args(memory_manager_policy="Static", reserved_memory=RESPLIT), expect=ModuleFail)
    assert "reservedMemory changes under the Static memory manager" in failure["msg"] and "restart=true" in failure["msg"]
    assert (bench.root / MEMORY_STATE.lstrip("/")).exists()


def test_a_reserved_memory_change_under_static_removes_the_checkpoint(tmp_path, monkeypatch):
    bench = static_memory_node(tmp_path, monkeypatch)
    result = bench.run(bench.args(memory_manager_policy="Static", reserved_memory=RESPLIT, restart=True,
                                  restart_timeout=1))
    assert result["removed_state_files"] == [MEMORY_STATE]
    assert not (bench.root / MEMORY_STATE.lstrip("/")).exists()
    assert CPU_STATE not in result["stale_state_files"]


def test_the_same_reservation_written_otherwise_keeps_the_checkpoint(tmp_path, monkeypatch):
    """1Gi and 1024Mi are the same bytes: the kubelet's machine state is the same, nothing to remove."""
    bench = static_memory_node(tmp_path, monkeypatch)
    same = [{"numa_node": 0, "limits": {"memory": "1024Mi"}}, {"numa_node": 1, "limits": {"memory": "100Mi"}}]
    result = bench.run(bench.args(memory_manager_policy="Static", reserved_memory=same))
    assert result["stale_state_files"] == {} and (bench.root / MEMORY_STATE.lstrip("/")).exists()


def test_a_checkpoint_of_another_reservation_is_removed(tmp_path, monkeypatch):
    bench = static_memory_node(tmp_path, monkeypatch)
    (bench.root / MEMORY_STATE.lstrip("/")).write_text(memory_checkpoint({0: 562 << 20, 1: 562 << 20}))
    result = bench.run(bench.args(memory_manager_policy="Static", restart=True, restart_timeout=1))
    assert "systemReserved" in result["stale_state_files"][MEMORY_STATE]
    assert result["removed_state_files"] == [MEMORY_STATE]


def test_a_reserved_memory_change_under_none_keeps_the_checkpoint(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    (bench.root / MEMORY_STATE.lstrip("/")).write_text(json.dumps({"policyName": "None", "machineState": {}}))
    result = bench.run(bench.args(reserved_memory=RESPLIT))
    assert result["stale_state_files"] == {} and result["removed_state_files"] == []


def test_a_reserved_cpus_change_under_static_removes_the_cpu_checkpoint(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    config = bench.root / "var/lib/kubelet/config.yaml"
    config.write_text(config.read_text().replace("cpuManagerPolicy: none", "cpuManagerPolicy: static\nreservedSystemCPUs: '0'"))
    (bench.root / CPU_STATE.lstrip("/")).write_text(json.dumps({"policyName": "static", "defaultCpuSet": "0-3"}))
    failure = bench.run(bench.args(reserved_system_cpus="0-1"), expect=ModuleFail)
    assert "reservedSystemCPUs changes (0 -> 0-1) under the static CPU manager" in failure["msg"]
    result = bench.run(bench.args(reserved_system_cpus="0-1", restart=True, restart_timeout=1))
    assert result["removed_state_files"] == [CPU_STATE]


def test_a_reserved_cpus_change_under_none_keeps_the_cpu_checkpoint(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)
    result = bench.run(bench.args(reserved_system_cpus="0-1"))
    assert result["stale_state_files"] == {} and (bench.root / CPU_STATE.lstrip("/")).exists()


# -- backup_files: {edited path: backup path}, {} when nothing was backed up (RETURN) ------------------------------------
def test_backup_files_map_the_edited_config_to_a_copy_of_its_old_content(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch)   # 1.29 without --config-dir: config.yaml is edited in place
    config = bench.root / "var/lib/kubelet/config.yaml"
    old = config.read_text()
    check = bench.run(bench.args(topology_manager_policy="restricted", backup=True), check=True)
    assert check["changed"] is True and check["backup_files"] == {} and config.read_text() == old
    result = bench.run(bench.args(topology_manager_policy="restricted", backup=True))
    assert result["changed"] is True and list(result["backup_files"]) == [bench.config]
    copy = result["backup_files"][bench.config]
    assert copy.startswith(str(config) + ".") and copy.endswith("~")
    with open(copy, encoding="utf-8") as saved:
        assert saved.read() == old
    assert config_of(bench)["topologyManagerPolicy"] == "restricted"
    again = bench.run(bench.args(topology_manager_policy="restricted", backup=True))
    assert again["changed"] is False and again["backup_files"] == {}


def test_backup_files_of_the_dropin_only_once_it_exists_and_none_without_backup(tmp_path, monkeypatch):
    bench = KubeletBench(tmp_path, monkeypatch, version="v1.31.2", dropin=True)
    dropin = bench.root / bench.target().lstrip("/")
    created = bench.run(bench.args(topology_manager_policy="restricted", backup=True))
    assert created["target"]["mode"] == "dropin" and created["backup_files"] == {}, "a new file has nothing to back up"
    old = dropin.read_text()
    updated = bench.run(bench.args(topology_manager_policy="best-effort", backup=True))
    assert list(updated["backup_files"]) == [bench.target()]
    with open(updated["backup_files"][bench.target()], encoding="utf-8") as saved:
        assert saved.read() == old
    plain = bench.run(bench.args(topology_manager_policy="single-numa-node"))
    assert plain["changed"] is True and plain["backup_files"] == {}
    assert len([p for p in dropin.parent.iterdir() if p.name.endswith("~")]) == 1, "backup=false keeps no copy"
