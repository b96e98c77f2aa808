"""The PostgreSQL engine's periodic work for the supervisor: folding the count deltas.

The statement triggers append one row per (type, status) change to ``job_count_deltas``
(appends never wait on each other's locks); folding them into ``job_counts`` keeps the
readers' sum short. Any supervisor may fold: a delta row is deleted, and counted, once.
"""
from __future__ import annotations

from ...contract import Round, UpkeepTask

FOLD_EVERY = 2.0  # seconds: the deltas of a busy queue stay a few thousand rows


def _fold(rnd: Round) -> None:
    rnd.store.fold_counts()  # type: ignore[attr-defined] - this engine's store


def upkeep_tasks() -> list[UpkeepTask]:
    return [UpkeepTask("fold_counts", FOLD_EVERY, _fold)]
