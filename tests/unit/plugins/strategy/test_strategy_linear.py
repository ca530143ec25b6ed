"""rdma.k8s_node.linear: ansible.builtin.linear that sleeps on its workers' sentinels instead of polling them, and
loads the workers' JSON profiles once.  The wait is tested with real processes; the strategy as a whole with real
ansible-playbook runs of the same play under both strategies, which must print the same thing."""

import multiprocessing
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.strategy import linear

COLLECTIONS = pathlib.Path(__file__).resolve().parents[4] / ".cache" / "collections"
CTX = multiprocessing.get_context("fork")   # as ansible-core starts its workers


class FakeTQM:
    _terminated = False


def strategy_with(workers):
    """A strategy object with only what the wait reads (the workers' list and the task queue manager)."""
    strategy = linear.StrategyModule.__new__(linear.StrategyModule)
    strategy._workers = workers
    strategy._tqm = FakeTQM()
    return strategy


def sleeper(seconds):
    proc = CTX.Process(target=time.sleep, args=(seconds,))
    proc.start()
    return proc


class Task:
    def __init__(self, throttle=0, run_once=False):
        self.throttle, self.run_once = throttle, run_once


def test_the_wait_sleeps_until_a_worker_ends(monkeypatch):
    # woken by the ended worker's sentinel, not by the periodic look (30 s here)
    monkeypatch.setattr(linear, "WAKE_S", 30)
    workers = [sleeper(0.6), sleeper(5)]
    try:
        cpu, start = time.process_time(), time.monotonic()
        strategy_with(workers)._wait_for_a_free_worker(Task())
        waited, used = time.monotonic() - start, time.process_time() - cpu
        assert 0.5 < waited < 4.5
        assert not workers[0].is_alive() and workers[1].is_alive()
        # ansible-core's loop polls every worker each 0.1 ms meanwhile: a large share of a core for those 0.6 s
        assert used < 0.1
    finally:
        for worker in workers:
            worker.kill()
            worker.join()


@pytest.mark.parametrize("workers", [
    [None, "busy"],     # a slot never used
    ["ended", "busy"],  # a worker that ended
    [],                 # no workers (nothing to wait for)
    "not a list",       # an ansible-core that keeps them otherwise: wait as it does
    ["not a process"],  # ... or keeps something without is_alive/sentinel
])
def test_the_wait_returns_at_once_when_a_slot_is_free_or_unknown(workers):
    made = []

    def make(kind):
        if kind == "busy":
            made.append(sleeper(5))
            return made[-1]
        if kind == "ended":
            proc = sleeper(0)
            proc.join()
            return proc
        return kind
    if isinstance(workers, list):
        workers = [make(kind) for kind in workers]
    try:
        start = time.monotonic()
        strategy_with(workers)._wait_for_a_free_worker(Task())
        assert time.monotonic() - start < 1
    finally:
        for proc in made:
            proc.kill()
            proc.join()


@pytest.mark.parametrize("task, waits", [
    (Task(throttle=1), True),                   # ansible-core looks at slot 0 only: wait for it
    (Task(throttle=1, run_once=True), False),   # run_once ignores throttle: slot 1 is free
    (Task(throttle="{{ n }}"), False),          # a template: every slot, then ansible-core's own loop
    (Task(throttle=0), False),
])
def test_the_wait_looks_at_the_slots_a_throttled_task_may_use(monkeypatch, task, waits):
    monkeypatch.setattr(linear, "WAKE_S", 30)
    busy = sleeper(0.6)
    ended = sleeper(0)
    ended.join()
    try:
        start = time.monotonic()
        strategy_with([busy, ended])._wait_for_a_free_worker(task)
        waited = time.monotonic() - start
        assert (waited > 0.5) is waits and waited < 10
    finally:
        busy.kill()
        busy.join()


def test_the_wait_ends_when_the_run_is_terminated():
    workers = [sleeper(5)]
    strategy = strategy_with(workers)
    strategy._tqm._terminated = True
    try:
        start = time.monotonic()
        strategy._wait_for_a_free_worker(Task())
        assert time.monotonic() - start < 1
    finally:
        workers[0].kill()
        workers[0].join()


def test_run_loads_the_profiles_before_the_play(monkeypatch):
    calls = []
    monkeypatch.setattr(linear, "load_module_json_profiles", lambda: calls.append("profiles"))
    monkeypatch.setattr(linear.LinearStrategy, "run", lambda self, iterator, play_context: calls.append("play") or 0)
    assert strategy_with([]).run(None, None) == 0
    assert calls == ["profiles", "play"]


def test_no_profiles_to_load_on_an_older_ansible_core(monkeypatch):
    monkeypatch.setattr(linear, "Direction", None)
    linear.load_module_json_profiles()      # an ansible-core without module JSON profiles: nothing, no error


@pytest.mark.skipif(linear.Direction is None, reason="this ansible-core has no module JSON profiles")
def test_the_json_profiles_are_loaded_in_the_main_process():
    code = ("import sys\n"
            "from ansible_collections.rdma.k8s_node.plugins.strategy import linear\n"
            "profiles = 'ansible.module_utils._internal._json._profiles._module_legacy_'\n"
            "before = sorted(name for name in sys.modules if name.startswith(profiles))\n"
            "linear.load_module_json_profiles()\n"
            "print(before, sorted(name for name in sys.modules if name.startswith(profiles)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    before, after = done.stdout.split("] [")
    assert before == "["
    assert after.rstrip("]\n").replace("'", "").split(", ") == [
        "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
        "ansible.module_utils._internal._json._profiles._module_legacy_m2c"]


PLAY = """
- name: Same play, two strategies
  hosts: all
  gather_facts: false
  strategy: "{{ test_strategy }}"
  serial: [2, 3]
  tasks:
    - name: A module on every host, longer on some (workers end out of order)
      ansible.builtin.command: "sleep {{ '0.4' if inventory_hostname in ['h1', 'h3'] else '0.05' }}"
      changed_when: inventory_hostname == 'h2'
      notify: A handler
    - name: Once per batch
      ansible.builtin.debug:
        msg: "batch of {{ ansible_play_batch | length }}"
      run_once: true
    - name: One host fails, the others go on
      ansible.builtin.command: "{{ 'false' if inventory_hostname == 'h4' else 'true' }}"
      changed_when: false
    - name: Registered and read back
      ansible.builtin.set_fact:
        seen: "{{ inventory_hostname }}"
  handlers:
    - name: A handler
      ansible.builtin.debug:
        msg: "handler on {{ inventory_hostname }}"
"""


def run_play(tmp_path, strategy):
    (tmp_path / "play.yml").write_text(PLAY, encoding="utf-8")
    hosts = "\n".join("h%d ansible_connection=local ansible_python_interpreter=%s" % (n, sys.executable)
                      for n in range(6))
    (tmp_path / "hosts.ini").write_text("[all]\n%s\n" % hosts, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS="2",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_STDOUT_CALLBACK="default")
    env.pop("PYTHONUNBUFFERED", None)
    playbook = pathlib.Path(sys.executable).with_name("ansible-playbook")
    done = subprocess.run([str(playbook), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "play.yml"),
                           "-e", "test_strategy=%s" % strategy], capture_output=True, text=True, check=False,
                          env=env, timeout=300, cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


def normalized(output):
    """The run's lines with what differs between two runs of one play left out: the order of hosts within one task
    (whichever worker ends first prints first), and the fatal result's timings."""
    blocks, current = [], []
    for line in output.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [", "PLAY [", "PLAY RECAP")):
            blocks.append(sorted(current))
            current = [line]
        elif line.strip():
            current.append(re.sub(r'"(delta|end|start)": "[^"]*"', r'"\1": "-"', line))
    blocks.append(sorted(current))
    return blocks


@pytest.mark.skipif(not (COLLECTIONS / "ansible_collections" / "rdma" / "k8s_node").exists(),
                    reason="the collection is not installed in .cache/collections (scripts/setup)")
def test_the_play_runs_as_under_ansible_builtin_linear(tmp_path):
    ours = run_play(tmp_path, "rdma.k8s_node.linear")
    theirs = run_play(tmp_path, "ansible.builtin.linear")
    assert ours[0] == theirs[0] == 2            # h4 failed
    assert normalized(ours[1]) == normalized(theirs[1])
    # the serial batches, run_once per batch and the handler ran as written (not vacuously the same)
    assert [ours[1].count('"msg": "batch of %d"' % size) for size in (1, 2, 3)] == [1, 1, 1]
    assert '"msg": "handler on h2"' in ours[1]
    assert re.search(r"h4 +: ok=1 +changed=0 +unreachable=0 +failed=1", ours[1])
    assert re.search(r"h5 +: ok=4 ", ours[1])


@pytest.mark.skipif(not (COLLECTIONS / "ansible_collections" / "rdma" / "k8s_node").exists(),
                    reason="the collection is not installed in .cache/collections (scripts/setup)")
def test_the_play_names_the_strategy_it_runs_with(tmp_path):
    """The comparison above is between two strategies: a name ansible-core cannot find fails the play."""
    rc, _output, errors = run_play(tmp_path, "rdma.k8s_node.no_such_strategy")
    assert rc != 0 and "Invalid play strategy specified: rdma.k8s_node.no_such_strategy" in errors
