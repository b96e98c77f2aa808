"""Numbers from attempt history: percentiles, histograms and a follower of ``job_attempts``.

Pure computation on what ``shared.ops`` reads; used by ``status``, ``top`` and the metrics.
wait: from when an attempt became due (enqueue, or its ``run_at`` if later) to its start;
run: from its start to its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from shared import ops
from shared.runtime.clock import parse_iso
from shared.engines.contract import OpsStore

# Histogram bucket upper bounds, in seconds (Prometheus style: cumulative, plus +Inf).
BOUNDS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
OUTCOMES = ("completed", "failed", "retry")
FEED_CHUNK = 200_000  # attempts aggregated per query when catching up


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` (0-100) of already sorted values; None if empty."""
    if not sorted_values:
        return None
    rank = max(math.ceil(q / 100.0 * len(sorted_values)), 1)
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summary(values: Iterable[float]) -> dict[str, float | None]:
    """``{p50, p90, p99, max}`` of ``values`` (None each when there are none)."""
    v = sorted(round(x, 6) for x in values)
    return {
        "p50": percentile(v, 50),
        "p90": percentile(v, 90),
        "p99": percentile(v, 99),
        "max": v[-1] if v else None,
    }


def cumulative(values: Iterable[float], bounds: Sequence[float] = BOUNDS) -> list[int]:
    """Cumulative bucket counts: how many values are ``<=`` each bound, then the total (+Inf)."""
    v = sorted(values)
    out, i = [], 0
    for b in bounds:
        while i < len(v) and v[i] <= b:
            i += 1
        out.append(i)
    out.append(len(v))
    return out


def durations(rows: Iterable[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """(waits, runs) in seconds of attempt rows ``{due_at, started_at, ended_at}``."""
    waits, runs = [], []
    for r in rows:
        if not r["started_at"]:
            continue
        start = parse_iso(r["started_at"])
        if r["due_at"]:
            waits.append(max(start - parse_iso(r["due_at"]), 0.0))
        runs.append(max(parse_iso(r["ended_at"]) - start, 0.0))
    return waits, runs


@dataclass
class Histogram:
    """A cumulative histogram: bucket counts per ``BOUNDS`` (+Inf last), sum and count."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(BOUNDS) + 1))
    sum: float = 0.0
    count: int = 0

    def add_aggregate(self, row: dict[str, Any], prefix: str) -> None:
        """Fold one ``ops.attempt_aggregates`` row (``prefix`` 'wait' or 'run') into this."""
        for i in range(len(BOUNDS)):
            self.buckets[i] += row[f"{prefix}_le_{i}"] or 0
        self.buckets[-1] += row["n"]
        self.sum += row[f"{prefix}_sum"] or 0.0
        self.count += row["n"]


@dataclass
class Totals:
    """Counters and histograms per job type, accumulated from the attempt feed."""

    attempts: dict[tuple[str, str], int] = field(default_factory=dict)  # (type, outcome) -> n
    wait: dict[str, Histogram] = field(default_factory=dict)  # type -> histogram
    run: dict[str, Histogram] = field(default_factory=dict)

    def add(self, row: dict[str, Any]) -> None:
        key = (row["type"], row["outcome"])
        self.attempts[key] = self.attempts.get(key, 0) + row["n"]
        self.wait.setdefault(row["type"], Histogram()).add_aggregate(row, "wait")
        self.run.setdefault(row["type"], Histogram()).add_aggregate(row, "run")

    def count(self, outcome: str | None = None) -> int:
        return sum(n for (_, o), n in self.attempts.items() if outcome is None or o == outcome)


class AttemptFeed:
    """Follows ``job_attempts`` from where it was created: each :meth:`poll` folds the attempts
    that ended since the last one into :attr:`totals` and returns the new ones' aggregates.

    ``seq`` only grows while history is kept; if purging made it go back, the feed restarts
    from the new end rather than counting anything twice.
    """

    def __init__(self, store: OpsStore) -> None:
        self.seq = ops.last_attempt_seq(store)
        self.totals = Totals()

    def poll(self, store: OpsStore) -> list[dict[str, Any]]:
        last = ops.last_attempt_seq(store)
        if last < self.seq:
            self.seq = last
            return []
        new: list[dict[str, Any]] = []
        while self.seq < last:
            upto = min(self.seq + FEED_CHUNK, last)
            rows = ops.attempt_aggregates(store, self.seq, upto, BOUNDS)
            for r in rows:
                self.totals.add(r)
            new += rows
            self.seq = upto
        return new


def mean_of(rows: Sequence[dict[str, Any]], prefix: str) -> float | None:
    """Mean wait or run time over aggregate rows; None if they hold no attempts."""
    n = sum(r["n"] for r in rows)
    return sum(r[f"{prefix}_sum"] or 0.0 for r in rows) / n if n else None
