"""Per named queue: depth, running, paused, throughput and latency, for ``jobq
status``, ``jobq top``, the metrics and the dashboard.

Depth and running are counted from the pending claim index by queue (``jobs_queue_claim``: the
index alone, no table rows) and from the running rows; throughput and latency from the last
attempts (the sample ``status`` reads), matched to their jobs' queues by id. With the config,
each row says whether any pool of it serves the queue (``shared.model.unserved``).
"""

from __future__ import annotations

from typing import Any

from shared.runtime.clock import iso
from shared.engines.contract import OpsStore
from shared.model.queuenames import DEFAULT_QUEUE
from shared.model.unserved import unserved
from shared.ops import stats

_DEPTH = (
    "SELECT queue, count(*) AS n, sum(CASE WHEN run_at <= :now THEN 1 ELSE 0 END) AS due "
    "FROM jobs WHERE status = 'pending' GROUP BY queue"
)
_RUNNING = "SELECT queue, count(*) AS n FROM jobs WHERE status = 'running' GROUP BY queue"
_RECENT = (
    "SELECT j.queue, a.outcome, a.due_at, a.started_at, a.ended_at FROM job_attempts a "
    "JOIN jobs j ON j.id = a.job_id "
    "WHERE a.seq > (SELECT coalesce(max(seq), 0) FROM job_attempts) - :limit AND a.ended_at >= :since"
)


def by_queue(
    store: OpsStore, now: float, config: Any = None, window: float = 300.0, sample: int = 20_000
) -> list[dict[str, Any]]:
    """One row per queue that has jobs, a ``[queues]`` table or a pause: ``{queue, pending, due,
    running, paused, unserved, completed_per_min, failed_per_min, wait_s: {p50, p90, p99, max}}``,
    by name. ``unserved``: no pool of ``config`` takes jobs from the queue (False without one)."""
    rows: dict[str, dict[str, Any]] = {}
    _count(store, rows, now, config)
    _add_recent(store, rows, now, window, sample)
    if not rows:
        _row(rows, DEFAULT_QUEUE)
    for name in unserved(config, rows) if config is not None else ():
        rows[name]["unserved"] = True
    for q in rows.values():
        q["wait_s"] = stats.summary(q.pop("waits"))
        q["completed_per_min"] = round(q["completed_per_min"], 3)
        q["failed_per_min"] = round(q["failed_per_min"], 3)
    return [rows[n] for n in sorted(rows)]


def _row(rows: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """The row of the queue ``name`` in ``rows``, added (all zero) if it is not there yet."""
    return rows.setdefault(
        name,
        {
            "queue": name,
            "pending": 0,
            "due": 0,
            "running": 0,
            "paused": False,
            "unserved": False,
            "completed_per_min": 0.0,
            "failed_per_min": 0.0,
            "waits": [],
        },
    )


def _count(store: OpsStore, rows: dict[str, dict[str, Any]], now: float, config: Any) -> None:
    """Into ``rows``: each queue's pause (the config's, then the database's), its pending and
    due jobs and its running ones."""
    for name in getattr(config, "queues", None) or {}:
        _row(rows, name).update(paused=bool(config.queues[name].paused))
    for r in store.read(_DEPTH, {"now": iso(now)}):
        _row(rows, r["queue"]).update(pending=int(r["n"]), due=int(r["due"] or 0))
    for r in store.read(_RUNNING):
        _row(rows, r["queue"])["running"] = int(r["n"])
    for name in store.paused_queues():
        _row(rows, name)["paused"] = True


def _add_recent(
    store: OpsStore, rows: dict[str, dict[str, Any]], now: float, window: float, sample: int
) -> None:
    """Into ``rows``: the completions and failures per minute of the last ``window`` seconds,
    and the waits of those attempts (among the last ``sample``)."""
    for r in store.read(_RECENT, {"limit": sample, "since": iso(now - window)}):
        q = _row(rows, r["queue"])
        if r["outcome"] in ("completed", "failed"):
            q[f"{r['outcome']}_per_min"] += 60.0 / window
        q["waits"] += stats.durations([r])[0]
