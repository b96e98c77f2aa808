"""The dashboard's pages (GET). Each reads the database through ``shared`` functions (the same
ones the CLI uses) and renders a template; nothing here writes."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from shared.settings import cron, schedule
from shared import ops as shared_ops
from shared.ops import activity, browse, flows
from shared.settings.durations import parse_rate
from shared.model.job import STATUSES
from supervisor.views import actions as ops
from supervisor.views.render import progress_text
from supervisor.views import snapshot as status
from shared.ops.keys import type_keys

from . import overview as overview_mod
from .html import render, route_path

NEXT_RUNS = 5
STATUS_TABS = ("waiting", "pending", "running", "completed", "failed", "cancelled")


def _backend(request: Request) -> Any:
    return request.app.state.backend


def _flash(request: Request) -> dict[str, Any] | None:
    key = request.query_params.get("done")
    return _backend(request).flashes.get(key) if key else None


async def overview(request: Request) -> Response:
    return render(
        request, "overview.html", {**_overview_context(request), "flash": _flash(request)}
    )


async def overview_live(request: Request) -> Response:
    """The live part of the overview alone: the page's script swaps it in every 1.5 s."""
    return render(request, "overview_live.html", _overview_context(request))


def _overview_context(request: Request) -> dict[str, Any]:
    b = _backend(request)
    now = b.clock.now()
    snap = overview_mod.snapshot(b.store(), now, b.settings.config, b.chart)
    return {
        "s": snap,
        "now": now,
        "statuses": (
            "waiting",
            "pending",
            "scheduled",
            "running",
            "completed",
            "failed",
            "cancelled",
        ),
    }


def no_nul(what: str, value: str) -> None:
    """400 for a NUL character, which no job's field holds (and PostgreSQL refuses in a query)."""
    if "\x00" in value:
        raise HTTPException(400, f"bad {what}: {value!r} contains a NUL character")


async def jobs(request: Request) -> Response:
    for name, value in request.query_params.multi_items():
        no_nul(f"filter {name}", value)
    try:
        f = browse.parse_filter(request.query_params)
    except ValueError as exc:
        raise HTTPException(400, f"bad filter: {exc}") from None
    b = _backend(request)
    store = b.store()
    page = browse.page_jobs(store, f)
    types = sorted({r["type"] for r in shared_ops.counts_by_type(store)})
    return render(
        request,
        "jobs.html",
        {
            "page": page,
            "f": f,
            "types": types,
            "tabs": STATUS_TABS,
            "now": b.clock.now(),
            "flash": _flash(request),
            "query": _query(f),
            "window": browse.WINDOW,
            "back": route_path(request) + (f"?{request.url.query}" if request.url.query else ""),
        },
    )


def _query(f: browse.JobFilter) -> str:
    """The filter as URL parameters (without the cursor), for the next-page link."""
    from urllib.parse import urlencode

    return urlencode(
        {
            k: v
            for k, v in (
                ("status", f.status),
                ("type", f.type),
                ("q", f.q),
                ("text", "1" if f.text else None),
            )
            if v
        }
    )


async def job(request: Request) -> Response:
    b = _backend(request)
    store = b.store()
    row = _job_row(store, request.path_params["job_id"])
    history = [dict(h, run_s=ops.ran_s(h)) for h in shared_ops.attempt_history(store, row.id)]
    return render(
        request,
        "job.html",
        {
            "job": dataclasses.asdict(row),
            "raw": _raw(store, row.id),
            "progress_text": _progress(row),
            "history": history,
            "now": b.clock.now(),
            "flash": _flash(request),
            "flow": flows.relatives(store, row.id),
        },
    )


async def job_live(request: Request) -> Response:
    """The live part of a running job's page (progress, cancel request): app.js swaps it in."""
    row = _job_row(_backend(request).store(), request.path_params["job_id"])
    return render(
        request, "job_live.html", {"job": dataclasses.asdict(row), "progress_text": _progress(row)}
    )


def _job_row(store: Any, job_id: str) -> Any:
    """The job named by ``job_id`` (an id or a unique prefix); 404 otherwise."""
    no_nul("job id", job_id)
    found = ops.resolve_id(store, job_id)
    if not isinstance(found, str):
        raise HTTPException(404, f"job {job_id}: {ops.unresolved(found, 'no job has that id')}")
    row = store.get(found)
    if row is None:
        raise HTTPException(404, f"job {job_id}: no job has that id")
    return row


def _progress(row: Any) -> str:
    return progress_text(row.progress) if row.progress is not None else ""


def _raw(store: Any, job_id: str) -> dict[str, Any]:
    """The stored JSON text of payload and result (pretty-printed by the template)."""
    return shared_ops.job_texts(store, job_id) or {"payload": None, "result": None}


async def schedules(request: Request) -> Response:
    b = _backend(request)
    now = b.clock.now()
    rows = []
    for r in schedule.next_runs(b.settings.config, now, b.store()):
        last, runs, t = status.enqueued_tick(r), [], now
        for _ in range(NEXT_RUNS):
            nxt = cron.next_after(r.cron, r.timezone, t)
            if nxt is None:
                break
            runs.append(_local(nxt, r.timezone))
            t = nxt
        rows.append(
            {
                "name": r.name,
                "type": r.type,
                "cron": r.cron,
                "timezone": r.timezone,
                "catch_up": r.catch_up,
                "runs": runs,
                "next_at": r.next_at,
                "seen": r.last_tick is not None,
                "last_tick": _local(last, r.timezone) if last else None,
            }
        )
    return render(request, "schedules.html", {"rows": rows, "now": now})


def _local(t: float, tz: str) -> str:
    return datetime.fromtimestamp(t, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


async def types(request: Request) -> Response:
    b = _backend(request)
    store, cfg, now = b.store(), b.settings.config, b.clock.now()
    counts: dict[str, dict[str, int]] = {}
    for r in shared_ops.counts_by_type(store):
        counts.setdefault(r["type"], dict.fromkeys(STATUSES, 0))[r["status"]] = r["n"]
    rows = []
    keyed = {
        r["type"]: r for r in type_keys(store, cfg, now)
    }  # busiest keys, jobs waiting on a limit
    for name in sorted(set(counts) | set(cfg.types)):
        t = cfg.for_type(name)
        c = counts.get(name, dict.fromkeys(STATUSES, 0))
        rate = parse_rate(t.rate) if t.rate else None
        used = activity.rate_window_use(store, name, now - rate[1]) if rate else None
        rows.append(
            {
                "type": name,
                "counts": c,
                "concurrency": t.concurrency,
                "running": c["running"],
                "rate": t.rate,
                "rate_used": used,
                "rate_limit": rate[0] if rate else None,
                "rate_period": rate[1] if rate else None,
                "keys": keyed.get(name),
                "settings": {
                    k: v
                    for k, v in dataclasses.asdict(t).items()
                    if v is not None and k not in ("concurrency", "rate")
                },
            }
        )
    return render(
        request,
        "types.html",
        {"rows": rows, "now": now, "utc": datetime.fromtimestamp(now, timezone.utc)},
    )
