"""The attempt feed (``job_attempts``, written by the triggers): what ``top`` and the metrics
follow. Every read is a range of its primary key (``seq``), so it costs the range's rows.
"""

from __future__ import annotations

from typing import Any, Sequence

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore


def last_attempt_seq(store: OpsStore) -> int:
    """The newest ``job_attempts.seq`` (0 when there is none)."""
    return int(store.read("SELECT coalesce(max(seq), 0) AS s FROM job_attempts")[0]["s"])


def recent_attempts(store: OpsStore, since: float, limit: int) -> list[dict[str, Any]]:
    """At most the last ``limit`` ended attempts, of those that ended at or after ``since``, oldest
    first: ``{type, outcome, due_at, started_at, ended_at}`` (a range of the key, no scan)."""
    return store.read(
        "SELECT type, outcome, due_at, started_at, ended_at FROM job_attempts "
        "WHERE seq > (SELECT coalesce(max(seq), 0) FROM job_attempts) - :limit AND ended_at >= :since ORDER BY seq",
        {"limit": limit, "since": iso(since)},
    )


def attempt_aggregates(
    store: OpsStore, after: int, upto: int, bounds: Sequence[float]
) -> list[dict[str, Any]]:
    """Per (type, outcome), over attempts with ``after < seq <= upto``: ``n``, ``wait_sum``,
    ``run_sum`` and cumulative bucket counts ``wait_le_<i>``/``run_le_<i>`` for each of
    ``bounds`` (seconds). wait: due -> start; run: start -> end; both clamped at 0 (and 0 where
    a time is missing). Computed in SQL: following a busy queue costs no Python per attempt."""
    d = store.dialect
    buckets = "".join(
        f", sum(CASE WHEN w <= {float(b)!r} THEN 1 ELSE 0 END) AS wait_le_{i}"
        f", sum(CASE WHEN r <= {float(b)!r} THEN 1 ELSE 0 END) AS run_le_{i}"
        for i, b in enumerate(bounds)
    )
    wait, run = d.between("started_at", "due_at"), d.between("ended_at", "started_at")
    return store.read(
        f"SELECT type, outcome, count(*) AS n, sum(w) AS wait_sum, sum(r) AS run_sum{buckets} FROM ("
        f"SELECT type, outcome, {d.greatest}(coalesce({wait}, 0.0), 0.0) AS w, "
        f"{d.greatest}(coalesce({run}, 0.0), 0.0) AS r "
        "FROM job_attempts WHERE seq > :after AND seq <= :upto) a GROUP BY type, outcome",
        {"after": after, "upto": upto},
    )
