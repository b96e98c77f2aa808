"""Counts kept per statement: the hot path's writes add their changes to ``job_counts``
themselves, one upsert per (type, status) per transaction, instead of the per-row triggers' two
statements per row (about a fifth of the SQL time of a worker's batch).

A statement that does so marks its rows (it writes ``tally``: 1 in an insert, :data:`MARK` in an
update), and
the count triggers skip exactly the rows so marked (see ``schema.TALLY``). It must run inside the
transaction that then calls :func:`add` with its deltas, so the counts are never seen wrong.
The pseudo-status ``delayed`` (pending and ``run_at > created_at``, compared as the stored text)
is kept the same way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

MARK = "tally = 1 - tally, "  # in an UPDATE's SET: this statement counts its rows itself
_ADD = (
    "INSERT INTO job_counts (type, status, n) VALUES (?, ?, ?) "
    "ON CONFLICT (type, status) DO UPDATE SET n = n + excluded.n"
)

# Positions in a claimed row (shared.engines.sql.JOB_COLUMNS): type, run_at, created_at.
_TYPE, _RUN_AT, _CREATED = 1, 9, 12
_NEW_TYPE, _NEW_RUN_AT, _NEW_CREATED = 1, 5, 6  # and in an insert's parameters


def add(c: Any, deltas: Counter) -> None:
    """Add ``deltas`` ((type, status) -> change) to the counts, in the caller's transaction."""
    rows = [(t, s, n) for (t, s), n in deltas.items() if n]
    if rows:
        c.executemany(_ADD, rows)


def inserted(params: Sequence[Sequence[Any]]) -> Counter:
    """The deltas of new pending jobs from their insert parameters (type at 1, run_at at 5,
    created_at at 6: ``store._insert_params``). (Counted by ``Counter``'s own loop: a batch of
    1,000 rows is on a producer's hot path.)"""
    out: Counter = Counter()
    for status, types in (
        ("pending", [p[_NEW_TYPE] for p in params]),
        ("delayed", [p[_NEW_TYPE] for p in params if p[_NEW_RUN_AT] > p[_NEW_CREATED]]),
    ):
        for t, n in Counter(types).items():
            out[t, status] += n
    return out


def claimed(rows: Sequence[Sequence[Any]]) -> Counter:
    """The deltas of pending jobs claimed (running now), from the claim's returned rows.
    (Counted per type by ``Counter``'s own loop, as :func:`inserted`: every claim's path.)"""
    out = moved([r[_TYPE] for r in rows], "pending", "running")
    for t, n in Counter([r[_TYPE] for r in rows if r[_RUN_AT] > r[_CREATED]]).items():
        out[t, "delayed"] -= n
    return out


def moved(types: Iterable[str], before: str, after: str) -> Counter:
    """The deltas of running jobs of ``types`` (one entry per job) moved from ``before`` to
    ``after`` (counted per type by ``Counter``'s own loop: every commit's path)."""
    out: Counter = Counter()
    for t, n in Counter(types).items():
        out[t, before] -= n
        out[t, after] += n
    return out
