# Copyright: rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-core's linear strategy, waiting for a free worker without spinning, with the workers' JSON profiles
loaded once."""

from __future__ import annotations

DOCUMENTATION = r"""
name: linear
short_description: ansible.builtin.linear, with less controller CPU per host and task
description:
  - Runs the play exactly as C(ansible.builtin.linear) does (it is that strategy, with the same task order, the
    same C(serial) batches, C(run_once), handlers and failures); two things cost the controller less.
  - When all C(forks) workers are busy, ansible-core's strategy polls each worker's process in turn and sleeps
    0.1 ms between rounds until one has ended. On a fleet most of a task's time is that wait (the hosts run their
    modules), so the controller spends a core polling. This strategy sleeps in the kernel on the workers' process
    sentinels (C(multiprocessing.connection.wait)) and wakes when one ends, then hands the task to
    ansible-core, which finds the free worker at once.
  - Every forked worker that runs a module imports ansible-core's JSON profiles for the module's arguments and its
    result (C(_module_legacy_c2m), C(_module_legacy_m2c)), because the main process never did. This strategy
    imports them once before the play, and the workers inherit them.
  - The collection's playbooks (C(rdma.k8s_node.audit), C(provision), C(validate)) run with it. The figures are in
    the collection's C(docs/benchmarks.md) and C(docs/scale.md).
  - If a future ansible-core no longer keeps its workers as this strategy expects, it waits as
    C(ansible.builtin.linear) does.
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
version_added: 0.2.0
notes:
  - A play's C(strategy) keyword wins over C(ansible.cfg) and C(ANSIBLE_STRATEGY), so the collection's playbooks
    always run with this strategy; in C(ansible.cfg) it applies to plays that name none.
  - One difference from C(ansible.builtin.linear) remains, in the task debugger only. When a failed C(run_once)
    task is redone there, ansible-core puts the play's other hosts back only under a strategy named C(linear).
  - With C(throttle) as a plain number, it waits on the first C(throttle) workers, as ansible-core looks at those
    only; with a templated C(throttle), it waits as ansible-core does.
"""

from multiprocessing.connection import wait as wait_any

try:
    from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
except ImportError:     # an ansible-core before its JSON profiles: nothing to load ahead
    Direction = get_module_decoder = get_module_encoder = None

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategy

# While every worker is busy, look again at least this often (a run being torn down, a worker that ended without its
# sentinel saying so).
WAKE_S = 0.5


def load_module_json_profiles():
    """Import the JSON profiles a worker uses to send a module its arguments and to read its result, so that forked
    workers inherit them (about 11 ms of a worker's wall time each on this machine's fleet benchmark)."""
    if Direction is None:
        return
    for profile in ("legacy",):
        try:
            get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)
            get_module_decoder(profile, Direction.MODULE_TO_CONTROLLER)
        except (ImportError, AttributeError, ValueError):
            pass        # a profile this ansible-core does not have: the worker loads what it needs, as before


class StrategyModule(LinearStrategy):
    """ansible.builtin.linear whose ``_queue_task`` finds a worker free before ansible-core looks for one."""

    def run(self, iterator, play_context):
        load_module_json_profiles()
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        self._wait_for_a_free_worker(task)
        super()._queue_task(host, task, task_vars, play_context)

    def _wait_for_a_free_worker(self, task=None):
        """Return once one of the worker slots ansible-core will look at for ``task`` is free (a slot never used, or
        a process that ended), sleeping on the busy processes' sentinels meanwhile; at once when the workers are not
        what this strategy knows, and whenever in doubt (ansible-core's own loop then polls, as it always did)."""
        workers = getattr(self, "_workers", None)
        if not isinstance(workers, list) or not workers:
            return
        # ansible-core looks at the first `throttle` slots only (a plain number; run_once ignores throttle)
        throttle = getattr(task, "throttle", 0)
        if (isinstance(throttle, int) and not isinstance(throttle, bool) and 0 < throttle < len(workers)
                and not getattr(task, "run_once", False) and getattr(self, "ALLOW_BASE_THROTTLING", False)):
            workers = workers[:throttle]
        while not getattr(self._tqm, "_terminated", False):
            try:
                sentinels = []
                for worker in workers:
                    if worker is None or not worker.is_alive():
                        return
                    sentinels.append(worker.sentinel)
                ready = wait_any(sentinels, timeout=WAKE_S)
            except (AttributeError, ValueError, OSError):   # not a started multiprocessing.Process, or closed
                return
            if ready and all(worker.is_alive() for worker in workers):
                return      # a sentinel that says "ended" of a live process: never sleep on it in a loop
