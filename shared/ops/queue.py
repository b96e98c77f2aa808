"""The queue at a glance (``status``, ``top``, the metrics, the dashboard): counts per type and
status, what waits, what failed. Each read follows an index or the counts the triggers keep, so
its cost does not grow with the queue.
"""

from __future__ import annotations

from typing import Any

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore
from .fragments import FINISHED


def counts_by_type(store: OpsStore) -> list[dict[str, Any]]:
    """Rows ``{type, status, n}`` for every (type, status) that has jobs, from the counts the
    triggers keep (the engine's ``counts`` source: on PostgreSQL with the deltas not folded yet)."""
    return store.read(
        f"SELECT type, status, n FROM {store.dialect.counts} c WHERE n > 0 AND status <> 'delayed' "
        "ORDER BY type, status"
    )


def scheduled_by_type(store: OpsStore, now: float) -> dict[str, int]:
    """``{type: n}`` of pending jobs not due yet (delayed, or waiting for a retry).

    The triggers count delayed jobs (pending, ``run_at`` later than creation); the ones among
    them already due are counted from the ``jobs_delayed`` index alone, up to ``now``: few,
    unless workers fall behind. Jobs far in the future are never read.
    """
    delayed = {
        r["type"]: r["n"]
        for r in store.read(
            f"SELECT type, n FROM {store.dialect.counts} c WHERE status = 'delayed' AND n > 0"
        )
    }
    if not delayed:
        return {}
    for r in store.read(
        "SELECT type, count(*) AS n FROM jobs WHERE status = 'pending' "
        "AND run_at > created_at AND run_at <= :now GROUP BY type",
        {"now": iso(now)},
    ):
        delayed[r["type"]] = delayed.get(r["type"], 0) - r["n"]
    return {t: n for t, n in delayed.items() if n > 0}


def oldest_due(store: OpsStore, now: float) -> dict[str, Any] | None:
    """The due pending job that has waited longest: ``{id, type, run_at, created_at}`` or None.

    One probe of the claim index per distinct priority (they are few), so the cost does not grow
    with the queue depth.
    """
    stamp, best, below = iso(now), None, None
    while True:
        rows = store.read(
            "SELECT priority FROM jobs WHERE status = 'pending' "
            + ("" if below is None else "AND priority < :below ")
            + "ORDER BY priority DESC LIMIT 1",
            {"below": below},
        )
        if not rows:
            return best
        below = rows[0]["priority"]
        top = store.read(
            "SELECT id, type, run_at, created_at FROM jobs WHERE status = 'pending' "
            "AND priority = :p AND run_at <= :now ORDER BY run_at, created_at LIMIT 1",
            {"p": below, "now": stamp},
        )
        if top and (best is None or top[0]["run_at"] < best["run_at"]):
            best = top[0]


def finished_per_minute(store: OpsStore, since: float) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}``: completed and failed jobs per minute (``YYYY-MM-DDTHH:MM``)
    that finished at or after ``since`` (index ``jobs_finished``)."""
    return store.read(
        f"SELECT substr({store.dialect.iso('completed_at')}, 1, 16) AS minute, status, count(*) AS n FROM jobs "
        f"WHERE {FINISHED} AND status IN ('completed', 'failed') AND completed_at >= :since "
        f"GROUP BY minute, status ORDER BY minute, status",
        {"since": iso(since)},
    )


def recent_failures(store: OpsStore, limit: int = 10) -> list[dict[str, Any]]:
    """The last ``limit`` jobs that failed for good, newest first.

    Read through the ``jobs_dead`` index (newest ids first, a few times ``limit`` of them) and
    ordered by failure time here: no index orders jobs by ``completed_at``, and a sort of every
    failed job would cost a scan of the table each refresh of ``top``.
    """
    rows = store.read(
        "SELECT id, type, attempts, completed_at, error FROM jobs "
        "WHERE status IN ('failed', 'cancelled') AND status = 'failed' ORDER BY id DESC LIMIT :n",
        {"n": limit * 20},
    )
    return sorted(rows, key=lambda r: r["completed_at"] or "", reverse=True)[:limit]
