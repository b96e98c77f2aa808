"""The supervisor's upkeep: a list of tasks, each run on its own interval, in list order; the
``cluster`` ones only while this supervisor holds the upkeep lead (``supervisor.election``).

    timeouts          host     every round: hard timeouts and expired leases of our children
                               (first: the others learn from it whether jobs are running)
    recovery          host     every round: this host's dead or silent owners' jobs re-queued
    foreign_recovery  cluster  every round: other hosts' owners whose leases expired, re-queued
    processes         host     every PROCESS_TOUCH_EVERY s: refresh our process row (and our
                               idle workers')
    prune_here        host     every PROCESS_PRUNE_EVERY s: prune this host's dead processes' rows
    prune_processes   cluster  every PROCESS_TOUCH_EVERY s: prune other hosts' stale rows
    <engine>          cluster  the engine's own (SQLite: the WAL checkpoint; PostgreSQL: the
                               count fold, ANALYZE; ``shared.engines.upkeep_tasks``)
    schedules         cluster  every round: enqueue due ``[[schedule]]`` ticks (retention is
                               one: the ``cleanup:old-data`` job)
    ops_requests      host     every round: take a ``jobq scale`` request, publish our counters
    unserved          host     once per config: the queues no pool serves

Before the tasks, each round asks the election whether we lead (``lead``: it renews the lease, or
asks for it, when due). A cluster task not run because we do not lead stays due: a supervisor
that takes the lead runs it at once.

A task that raises is reported (``run`` returns it) and tried again next round; it never stops
the tasks after it. ``run_now`` (at boot) lets the error through.
"""

from __future__ import annotations

from typing import Callable, Iterable

from shared.engines.contract import CLUSTER, Round, UpkeepTask

PROCESS_TOUCH_EVERY = 15.0  # refresh our `processes` row and prune dead ones this often: rarely,
# since every write wakes every idle worker (they watch for commits)
PROCESS_PRUNE_EVERY = 60.0  # read the rows to prune this host's dead ones: at boot, then
# rarely: our own dead children's rows go as they are reaped, so only another supervisor of this
# host that died (and its workers) leaves any, which the next one's boot prunes too
PROCESS_STALE_AFTER = 3 * PROCESS_TOUCH_EVERY  # a row of another host is pruned once older than
# this or lease_timeout, whichever is longer: rows are refreshed every 15 s (a supervisor's
# touch, which renews its idle workers' rows too; busy workers' beats), so a live one never is


class Upkeep:
    """Runs ``tasks`` when due, the cluster ones while ``lead(round)`` says we lead (None: we
    always do). ``run_now`` runs one at once (at boot) and restarts its interval."""

    def __init__(
        self, tasks: Iterable[UpkeepTask], lead: Callable[[Round], bool] | None = None
    ) -> None:
        self.tasks = list(tasks)
        self.next_at = {t.name: 0.0 for t in self.tasks}
        self.lead = lead

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tasks]

    def run(self, rnd: Round) -> list[tuple[str, Exception]]:
        """Run every due task; returns ``(name, exception)`` for each that raised (the election
        as ``lead``: then the round runs as a follower's)."""
        failed = []
        try:
            self.elect(rnd)
        except Exception as exc:  # noqa: BLE001 - our own children are looked after all the same
            rnd.lead = False
            failed.append(("lead", exc))
        for task in self.tasks:
            if rnd.monotonic >= self.next_at[task.name] and self.ours(task, rnd):
                try:
                    self._run(task, rnd)
                except Exception as exc:  # noqa: BLE001 - one failing task never stops the others
                    failed.append((task.name, exc))
        return failed

    def elect(self, rnd: Round) -> bool:
        """Set and return ``rnd.lead``: whether we run the cluster tasks this round."""
        rnd.lead = True if self.lead is None else self.lead(rnd)
        return rnd.lead

    @staticmethod
    def ours(task: UpkeepTask, rnd: Round) -> bool:
        """Is ``task`` ours to run this round (a host task, or a cluster task and we lead)?"""
        return task.scope != CLUSTER or rnd.lead

    def run_now(self, name: str, rnd: Round) -> None:
        """Run task ``name`` now (a cluster task only if ``rnd.lead``)."""
        task = next(t for t in self.tasks if t.name == name)
        if self.ours(task, rnd):
            self._run(task, rnd)

    def _run(self, task: UpkeepTask, rnd: Round) -> None:
        self.next_at[task.name] = rnd.monotonic + task.every
        task.run(rnd)
