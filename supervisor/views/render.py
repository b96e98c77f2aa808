"""Human output: the text of ``status``, ``jobs`` and ``show``, built from the cells of
:mod:`supervisor.views.cells` (whose table, durations, sizes, sparklines and error lines are
importable from here too).

Pure functions from data (the dicts that ``--json`` prints) to text.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from shared.model import unserved

from .cells import duration, error_line, size, sparkline, table


def gauge_text(gauge: dict[str, Any]) -> str:
    """One of the engine's gauges as its label and value (``<label> 1.2 MiB`` for bytes)."""
    value = gauge["value"]
    return f"{gauge['label']} {size(value) if gauge.get('unit') == 'bytes' else value}"


def gauges_note(snap: dict[str, Any]) -> str:
    """The engine's own gauges after the database, `` (<label> 1.2 MiB)``, or nothing where the
    engine has none (each engine names and labels its own: ``OpsStore.gauges``)."""
    shown = ", ".join(gauge_text(g) for g in snap.get("gauges", ()))
    return f" ({shown})" if shown else ""


# -- status ---------------------------------------------------------------------------------------


def status_text(snap: dict[str, Any]) -> str:
    """The human ``status`` report of a :func:`supervisor.views.snapshot.collect` snapshot."""
    parts = [
        _header(snap),
        _jobs(snap),
        queues_text(snap.get("queues") or []),
        _throughput(snap),
        _latency(snap),
        workers_text(snap["workers"]),
        _schedules(snap),
    ]
    return "\n\n".join(p for p in parts if p)


def _header(snap: dict[str, Any]) -> str:
    live = [s for s in snap["supervisors"] if s["alive"]]
    if live:
        sup = "; ".join(
            f"running, pid {s['pid']} on {s['host']}, up {duration(s['up_s'])}{_counters(s)}"
            for s in live
        )
    else:
        sup = "not running"
    paused = "PAUSED (workers claim nothing; `jobq resume`)" if snap["paused"] else "active"
    oldest = snap["oldest_due"]
    old = f"{duration(oldest['age_s'])} (job {oldest['id']}, {oldest['type']})" if oldest else "-"
    rows = [
        ("database", f"{snap['database']}{gauges_note(snap)}"),
        ("supervisor", sup),
        ("queue", paused),
        ("oldest due", old),
    ]
    if snap.get("unowned"):
        rows.append(
            (
                "unowned",
                f"{len(snap['unowned'])} running jobs have no registered worker (a worker "
                f"run alone, or one that died: a supervisor re-queues those)",
            )
        )
    return "\n".join(f"{k:<11} {v}" for k, v in rows)


def queues_text(queues: Sequence[dict[str, Any]]) -> str:
    """The named queues (shared.ops.queues), when there is more than ``default`` to show; below
    them, a line per queue no worker serves (``shared.model.unserved``)."""
    if not any(q["queue"] != "default" or q["paused"] or q.get("unserved") for q in queues):
        return ""
    rows = [
        [
            q["queue"],
            q["pending"],
            q["due"],
            q["running"],
            "PAUSED" if q["paused"] else "-",
            q["completed_per_min"],
            duration(q["wait_s"]["p50"]),
            duration(q["wait_s"]["p99"]),
        ]
        for q in queues
    ]
    head = ["QUEUE", "PENDING", "DUE", "RUNNING", "PAUSED", "DONE/MIN", "WAIT P50", "WAIT P99"]
    return "\n".join([table(head, rows)] + unserved_lines(queues))


def unserved_lines(queues: Sequence[dict[str, Any]]) -> list[str]:
    """``no worker serves queue X: N pending`` for each unserved queue of ``queues``."""
    return [unserved.sentence(q["queue"], q["pending"]) for q in queues if q.get("unserved")]


def _schedules(snap: dict[str, Any]) -> str:
    rows = [
        [
            r["name"],
            r["type"],
            f"{r['cron']} ({r['timezone']})",
            r["next_at"] or "never",
            r["last_tick"] or "-",
        ]
        for r in snap.get("schedules") or []
    ]
    return table(["SCHEDULE", "TYPE", "CRON", "NEXT RUN", "LAST TICK"], rows) if rows else ""


def _counters(sup: dict[str, Any]) -> str:
    c = sup.get("counters") or {}
    if not c:
        return ""
    return (
        f" (worker restarts {c.get('worker_restarts', 0)}, crashes {c.get('worker_crashes', 0)}, "
        f"jobs reaped {c.get('jobs_reaped', 0)})"
    )


def _jobs(snap: dict[str, Any]) -> str:
    cols = ["waiting", "pending", "scheduled", "running", "completed", "failed", "cancelled"]
    rows = [[t] + [c.get(k, 0) for k in cols] for t, c in sorted(snap["by_type"].items())]
    rows.append(["total"] + [snap["jobs"].get(k, 0) for k in cols])
    return table(["TYPE"] + [c.upper() for c in cols], rows)


def _throughput(snap: dict[str, Any]) -> str:
    t = snap["throughput"]
    minutes = t["per_minute"]
    headers = ["PER MINUTE"] + [m["minute"][11:] for m in minutes] + ["AVG/MIN"]
    rows = [
        [name] + [m[name] for m in minutes] + [round(t[f"{name}_per_min"], 1)]
        for name in ("completed", "failed", "retried")
    ]
    return table(headers, rows)


def _latency(snap: dict[str, Any]) -> str:
    lat = snap["latency"]
    title = f"LAST {duration(lat['window_s'])} ({lat['attempts']} attempts)"
    rows = [
        [name] + [duration(lat[key][q]) for q in ("p50", "p90", "p99", "max")]
        for name, key in (("wait (due to start)", "wait_s"), ("run time", "run_s"))
    ]
    return table([title, "P50", "P90", "P99", "MAX"], rows)


def workers_text(workers: Sequence[dict[str, Any]]) -> str:
    """The workers table: slot, pid, memory (RSS; USS, what the worker alone holds; PSS, its
    share of shared pages), liveness, the job each runs and for how long."""
    rows = []
    for w in workers:
        rss, uss, pss = (_mib(w.get(k)) for k in ("rss_mb", "uss_mb", "pss_mb"))
        jobs = w["jobs"]
        first = jobs[0] if jobs else None
        more = f" (+{len(jobs) - 1} claimed)" if len(jobs) > 1 else ""
        rows.append(
            [
                w["slot"],
                w["pid"],
                rss,
                uss,
                pss,
                "alive" if w["alive"] else "GONE",
                (first["id"] + more) if first else "idle",
                first["type"] if first else "",
                duration(first["running_s"]) if first else "",
                _doing(first),
            ]
        )
    if not rows:
        return "WORKERS  none registered"
    return table(
        ["SLOT", "PID", "RSS", "USS", "PSS", "STATE", "JOB", "TYPE", "RUNNING FOR", "PROGRESS"],
        rows,
    )


def _doing(job: dict[str, Any] | None) -> str:
    """The progress column: the job's progress, and whether it is being cancelled."""
    if job is None:
        return ""
    text = progress_text(job["progress"], 40) if job.get("progress") is not None else ""
    return (text + " CANCELLING").strip() if job.get("cancel_requested_at") else text


def _mib(value: float | None) -> str:
    return f"{value:.0f} MiB" if value is not None else "-"


# -- jobs and show --------------------------------------------------------------------------------


def jobs_text(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no jobs"
    out = [
        [
            r["id"],
            r["type"],
            r["status"],
            f"{r['attempts']}/{r['max_attempts'] or '-'}",
            r["priority"],
            r["created_at"],
            _when(r),
            error_line(r["error"], 50) if r["status"] != "completed" else "",
        ]
        for r in rows
    ]
    return table(
        ["ID", "TYPE", "STATUS", "ATTEMPTS", "PRIO", "CREATED", "RUN/DONE AT", "LAST ERROR"], out
    )


def _when(r: dict[str, Any]) -> str:
    if r["status"] in ("completed", "failed", "cancelled"):
        return r["completed_at"] or r["updated_at"]
    if r["status"] == "running":
        return r["started_at"]
    return r["run_at"]


# the fields ``show`` lists first, one a line, in this order
SHOW_FIELDS = (
    "id",
    "type",
    "status",
    "queue",
    "limit_key",
    "attempts",
    "max_attempts",
    "priority",
    "key",
    "created_at",
    "run_at",
    "started_at",
    "completed_at",
    "updated_at",
    "owner",
)


def job_text(job: dict[str, Any], history: Sequence[dict[str, Any]]) -> str:
    """``show``: the job's fields, payload, result, error with traceback, attempt history."""
    lines = _field_lines(job)
    lines += ["", "payload:", _indent(_pretty(job["payload"]))]
    if job["result"] is not None:
        lines += ["", "result:", _indent(_pretty(job["result"]))]
    if job["error"]:
        lines += ["", "error:", _indent(job["error"].rstrip())]
    lines += ["", "attempts:", _history_text(history)]
    return "\n".join(lines)


def _field_lines(job: dict[str, Any]) -> list[str]:
    """The job's fields, a stop being asked for and its progress, one a line."""
    lines = [f"{k:<13} {job.get(k) if job.get(k) is not None else '-'}" for k in SHOW_FIELDS]
    if job.get("cancel_requested_at") and job["status"] == "running":
        lines.append(
            f"{'cancel asked':<13} {job['cancel_requested_at']} (the handler is being stopped)"
        )
    if job.get("progress") is not None:
        lines.append(f"{'progress':<13} {progress_text(job['progress'])}")
    return lines


def _history_text(history: Sequence[dict[str, Any]]) -> str:
    """The table of the job's ended attempts, indented, or a line saying none has ended."""
    if not history:
        return "  none ended yet"
    rows = [
        [
            h["attempt"],
            h["outcome"],
            h["started_at"],
            h["ended_at"],
            duration(h["run_s"]),
            h["owner"] or "-",
            error_line(h["error"], 60) if h["error"] else "",
        ]
        for h in history
    ]
    return table(["#", "OUTCOME", "STARTED", "ENDED", "RAN", "WORKER", "ERROR"], rows, indent="  ")


def progress_text(progress: Any, width: int = 200) -> str:
    """A job's progress on one line: ``42% copying (files=10)``; anything else as compact JSON."""
    if not isinstance(progress, dict):
        return json.dumps(progress, ensure_ascii=False)[:width]
    rest = {k: v for k, v in progress.items() if k not in ("fraction", "note")}
    parts = []
    if isinstance(progress.get("fraction"), (int, float)):
        parts.append(f"{progress['fraction'] * 100:.0f}%")
    if progress.get("note"):
        parts.append(str(progress["note"]))
    if rest:
        parts.append(
            "("
            + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in rest.items())
            + ")"
        )
    return " ".join(parts)[:width] or "-"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.splitlines())


def keys_text(rows: list[dict[str, Any]]) -> str:
    """The ``status --types`` table."""
    body = [
        [
            r["type"],
            r["running"],
            r["due"],
            r["waiting"],
            ", ".join(f"{k['key']} ({k['running']} running, {k['due']} due)" for k in r["busiest"])
            or "-",
        ]
        for r in rows
    ]
    headers = ["TYPE", "RUNNING", "DUE", "WAITING ON A LIMIT", "BUSIEST KEYS"]
    return table(headers, body) if body else "TYPES  no type has a limit"
