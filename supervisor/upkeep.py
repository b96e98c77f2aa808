"""The supervisor's upkeep: a list of tasks, each run on its own interval, in list order.

    timeouts       every round: hard timeouts and expired leases of our children (first: the
                   others learn from it whether jobs are running)
    recovery       every round: dead or silent foreign owners' jobs re-queued
    processes      every PROCESS_TOUCH_EVERY s: refresh our process row, prune dead ones
    <engine>       the engine's own (SQLite: the WAL checkpoint; ``shared.engines.upkeep_tasks``)
    schedules      every round: enqueue due ``[[schedule]]`` ticks
    ops_requests   every round: take a ``jobq scale`` request, publish our counters

A task that raises is reported (``run`` returns it) and tried again next round; it never stops
the tasks after it. ``run_now`` (at boot) lets the error through.
"""

from __future__ import annotations

from typing import Iterable

from shared.engines.contract import Round, UpkeepTask

PROCESS_TOUCH_EVERY = 15.0  # refresh our `processes` row and prune dead ones this often: rarely,
# since every write wakes every idle worker (they watch for commits)
PROCESS_STALE_AFTER = 3 * PROCESS_TOUCH_EVERY  # a row of another host is pruned once older than
# this or lease_timeout, whichever is longer: rows are refreshed every
# 15 s (supervisors here, idle workers' beats), so a live one never is


class Upkeep:
    """Runs ``tasks`` when due. ``run_now`` runs one at once (at boot) and restarts its interval."""

    def __init__(self, tasks: Iterable[UpkeepTask]) -> None:
        self.tasks = list(tasks)
        self.next_at = {t.name: 0.0 for t in self.tasks}

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tasks]

    def run(self, rnd: Round) -> list[tuple[str, Exception]]:
        """Run every due task; returns ``(name, exception)`` for each that raised."""
        failed = []
        for task in self.tasks:
            if rnd.monotonic >= self.next_at[task.name]:
                try:
                    self._run(task, rnd)
                except Exception as exc:  # noqa: BLE001 - one failing task never stops the others
                    failed.append((task.name, exc))
        return failed

    def run_now(self, name: str, rnd: Round) -> None:
        self._run(next(t for t in self.tasks if t.name == name), rnd)

    def _run(self, task: UpkeepTask, rnd: Round) -> None:
        self.next_at[task.name] = rnd.monotonic + task.every
        task.run(rnd)
