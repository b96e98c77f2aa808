"""One snapshot of the queue, its workers and supervisors, read from the database.

:func:`collect` returns plain JSON-ready data: what ``jobq status --json`` prints, ``jobq top``
draws and the dashboard's overview shows (the CLI's ``status`` command is
``supervisor/cli/status.py``).
"""

from __future__ import annotations

from typing import Any

from shared.settings import cron, schedule
from shared import ops
from shared.ops import activity, queues
from shared.runtime.clock import iso, parse_iso
from shared.engines.location import redacted
from shared.model.job import STATUSES, decoded
from shared.engines.contract import OpsStore
from shared.runtime.processes import host_id, memory_mb, token_alive

from shared.ops import stats

WINDOW_MINUTES = 5
SAMPLE = 20_000  # most recent attempts looked at for latency percentiles


def collect(
    store: OpsStore, now: float, *, detail: bool = True, config: Any = None
) -> dict[str, Any]:
    """Everything ``status`` reports, as of ``now``; without ``detail``, no throughput and
    latency (``top`` draws its own from the attempt feed); with ``config``, the next run of each
    ``[[schedule]]`` entry."""
    jobs, by_type = _job_counts(store)
    scheduled = ops.scheduled_by_type(store, now)
    jobs["scheduled"] = sum(scheduled.values())
    sups = _supervisors_with_counters(store, now)
    gauges = ops.gauges.read(
        store
    )  # the engine's own: each under its key, and described for display
    snap = {
        "now": iso(now),
        "database": redacted(store.location),
        **{g["key"]: g["value"] for g in gauges},
        "paused": store.is_paused(),
        "gauges": [{k: g[k] for k in ("key", "label", "unit", "value")} for g in gauges],
        "supervisors": sups,
        "jobs": jobs,
        "by_type": _with_scheduled(by_type, scheduled),
        "oldest_due": _oldest(store, now),
        "workers": workers(store, now),
        "unowned": ops.running_without_worker(store),
        "queues": queues.by_queue(store, now, config),
    }
    if config is not None:
        snap["schedules"] = _schedules(store, now, config)
    if detail:
        snap["throughput"] = throughput(store, now)
        snap["latency"] = latency(store, now)
    return snap


def _job_counts(store: OpsStore) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Jobs by status (every status, 0 if none), and by type and status."""
    jobs = dict.fromkeys(STATUSES, 0)
    by_type: dict[str, dict[str, int]] = {}
    for r in ops.counts_by_type(store):
        jobs[r["status"]] = jobs.get(r["status"], 0) + r["n"]
        by_type.setdefault(r["type"], dict.fromkeys(STATUSES, 0))[r["status"]] = r["n"]
    return jobs, by_type


def _supervisors_with_counters(store: OpsStore, now: float) -> list[dict[str, Any]]:
    """:func:`supervisors`, each with its ``counters`` and ``up_s`` rounded to milliseconds."""
    counters = ops.supervisor_counters(store)
    sups = supervisors(store, now)
    for s in sups:
        s["counters"] = counters.get(s["token"], {})
        s["up_s"] = round(s["up_s"], 3)
    return sups


def _schedules(store: OpsStore, now: float, config: Any) -> list[dict[str, Any]]:
    """The next run of each ``[[schedule]]`` entry of ``config``, and its last enqueued tick."""
    return [
        {
            "name": r.name,
            "type": r.type,
            "cron": r.cron,
            "timezone": r.timezone,
            "next_at": iso(r.next_at) if r.next_at is not None else None,
            "last_tick": _iso(enqueued_tick(r)),
        }
        for r in schedule.next_runs(config, now, store)
    ]


def supervisors(store: OpsStore, now: float) -> list[dict[str, Any]]:
    """Every supervisor row: ``{token, pid, host, started_at, up_s, alive, local}``."""
    here = host_id()
    out = []
    for row in store.processes("supervisor"):
        out.append(
            {
                "token": row["id"],
                "pid": row["pid"],
                "host": row["host"],
                "started_at": row["started_at"],
                "up_s": max(now - parse_iso(row["started_at"]), 0.0),
                "alive": token_alive(row["id"], here),
                "local": row["host"] == here,
            }
        )
    return out


def enqueued_tick(run: schedule.NextRun) -> float | None:
    """The last tick ``run``'s schedule handled, or None: the mark a supervisor writes when it
    first sees a schedule (or its timing changes) holds that moment, which is no tick of the
    cron expression, and no job was enqueued for it."""
    t = run.last_tick
    return t if t is not None and cron.next_after(run.cron, run.timezone, t - 1.0) == t else None


def _iso(t: float | None) -> str | None:
    return iso(t) if t is not None else None


def _with_scheduled(
    by_type: dict[str, dict[str, int]], scheduled: dict[str, int]
) -> dict[str, Any]:
    for job_type, counts in by_type.items():
        counts["scheduled"] = scheduled.get(job_type, 0)
    return by_type


def _oldest(store: OpsStore, now: float) -> dict[str, Any] | None:
    row = ops.oldest_due(store, now)
    if row is None:
        return None
    due = max(row["run_at"], row["created_at"])
    return {
        "id": row["id"],
        "type": row["type"],
        "due_at": due,
        "age_s": round(max(now - parse_iso(due), 0.0), 3),
    }


def throughput(store: OpsStore, now: float) -> dict[str, Any]:
    """Completed, failed and retried attempts per minute over the last minutes."""
    start = (int(now // 60) - (WINDOW_MINUTES - 1)) * 60.0
    minutes = [iso(start + 60 * i)[:16] for i in range(WINDOW_MINUTES)]
    per = {m: {"minute": m, "completed": 0, "failed": 0, "retried": 0} for m in minutes}
    for r in activity.finished_per_minute(store, start):
        if r["minute"] in per:
            per[r["minute"]][r["status"]] = r["n"]
    span = max((now - start) / 60.0, 1e-9)
    out: dict[str, Any] = {"window_s": round(now - start, 3), "per_minute": list(per.values())}
    for name in ("completed", "failed", "retried"):
        out[f"{name}_per_min"] = round(sum(p[name] for p in per.values()) / span, 3)
    return out


def latency(store: OpsStore, now: float, window: float = WINDOW_MINUTES * 60.0) -> dict[str, Any]:
    """Wait and run-time percentiles and histograms of the attempts that ended in ``window``."""
    rows = ops.recent_attempts(store, now - window, SAMPLE)
    waits, runs = stats.durations(rows)
    return {
        "window_s": window,
        "attempts": len(rows),
        "sampled": len(rows) >= SAMPLE,
        "wait_s": stats.summary(waits),
        "run_s": stats.summary(runs),
        "buckets_le_s": list(stats.BOUNDS) + ["+Inf"],
        "wait_hist": stats.cumulative(waits),
        "run_hist": stats.cumulative(runs),
    }


def workers(store: OpsStore, now: float) -> list[dict[str, Any]]:
    """Registered workers: slot, pid, liveness, memory (RSS, USS, PSS in MiB), and the job(s)
    each runs (with its progress and when its cancel was asked, if it was)."""
    here = host_id()
    out: dict[str, dict[str, Any]] = {}
    for r in ops.worker_rows(store):
        w = out.get(r["token"])
        if w is None:
            alive = token_alive(r["token"], here)
            w = out[r["token"]] = {
                "slot": r["slot"],
                "pid": r["pid"],
                "host": r["host"],
                "alive": alive,
                "started_at": r["started_at"],
                "heartbeat_at": r["heartbeat_at"],
                **_memory(r["pid"] if alive and r["host"] == here else None),
                "jobs": [],
            }
        if r["job_id"]:
            w["jobs"].append(
                {
                    "id": r["job_id"],
                    "type": r["job_type"],
                    "attempt": r["job_attempt"],
                    "started_at": r["job_started_at"],
                    "running_s": round(max(now - parse_iso(r["job_started_at"]), 0.0), 3),
                    "progress": decoded(r["job_progress"]),
                    "cancel_requested_at": r["job_cancel_requested_at"],
                }
            )
    return list(out.values())


def _memory(pid: int | None) -> dict[str, Any]:
    """RSS, USS and PSS (MiB) of a live local worker; None for each where unknown. Workers
    forked from the template share most pages: USS is what each one really adds."""
    mem = memory_mb(pid) if pid is not None else None
    return mem or {"rss_mb": None, "uss_mb": None, "pss_mb": None}
