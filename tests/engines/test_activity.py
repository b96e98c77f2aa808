"""Attempts per minute from job_attempts (shared.ops.activity): the window starts at the right
attempt, also across gaps left by purges, and counts completed, failed and retried. On every
engine (the ``engine`` fixture)."""

from __future__ import annotations

from shared.ops import activity
from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock, iso
from shared.model.job import Finish
from supervisor.views import actions as ops


def _run(q: JobQueue, clock: FakeClock, outcome: str) -> str:
    job_id = q.enqueue("t", None)
    [job] = q.store.claim("w:1:1", 1, clock.now())
    text = None if outcome == "completed" else "boom"
    q.store.finish(
        Finish(outcome, job.id, job.attempts, text, clock.now() + 10_000), job.owner, clock.now()
    )
    return job_id


def test_per_minute_counts_and_window_start(engine):
    clock = FakeClock()
    start = clock.now()
    with JobQueue(config=engine.config(), clock=clock) as q:
        ids = []
        for minute, outcomes in enumerate(
            [["completed"], ["failed", "completed"], ["retry", "completed", "completed"]]
        ):
            for o in outcomes:
                ids.append(_run(q, clock, o))
                clock.advance(5)
            clock.advance(60 - 5 * len(outcomes))
        ops.purge_ids(q.store, ids[:1])  # a gap at the start of the sequence
        assert activity.first_attempt_since(q.store, start + 60) == 2
        assert activity.first_attempt_since(q.store, clock.now()) == 7  # none: one past the last
        rows = activity.finished_per_minute(q.store, start + 60)
        got = {(r["minute"], r["status"]): r["n"] for r in rows}
        m1, m2 = iso(start + 60)[:16], iso(start + 120)[:16]
        assert got == {
            (m1, "failed"): 1,
            (m1, "completed"): 1,
            (m2, "retried"): 1,
            (m2, "completed"): 2,
        }
