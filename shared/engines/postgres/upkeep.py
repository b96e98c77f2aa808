"""The PostgreSQL engine's periodic work for the supervisor: folding the count deltas, and
fresh planner statistics for the jobs table.

- The statement triggers append one row per (type, status) change to ``job_count_deltas``
  (appends never wait on each other's locks); folding them into ``job_counts`` keeps the
  readers' sum short. Any supervisor may fold (a delta row is deleted, and counted, once); the upkeep lead does.
- The claim must walk the claim index in order and stop after ``limit`` rows. A table the
  planner has no statistics for (a new queue, or one that grew by a burst of enqueues before
  autovacuum's next look, up to a minute later) gets a plan that reads and sorts every pending
  row per claim instead; ``ANALYZE`` as soon as a tenth of the table changed prevents that.
"""

from __future__ import annotations

from shared.engines.contract import CLUSTER, Round, UpkeepTask

FOLD_EVERY = 2.0  # seconds: the deltas of a busy queue stay a few thousand rows
ANALYZE_EVERY = 2.0  # seconds between looks at how much of the table changed


def _fold(rnd: Round) -> None:
    rnd.store.fold_counts()  # type: ignore[attr-defined] - this engine's store


def _analyze(rnd: Round) -> None:
    rnd.store.analyze_if_stale()  # type: ignore[attr-defined] - this engine's store


def upkeep_tasks() -> list[UpkeepTask]:
    """The same work for every supervisor of the database: the upkeep lead's (``CLUSTER``)."""
    return [
        UpkeepTask("fold_counts", FOLD_EVERY, _fold, CLUSTER),
        UpkeepTask("analyze", ANALYZE_EVERY, _analyze, CLUSTER),
    ]
