"""Jinja filters: durations, sizes, times, pretty JSON (all return text; autoescape applies)."""

from __future__ import annotations

import json
from typing import Any

from shared.runtime.clock import parse_iso
from supervisor.views import render


def ago(stamp: str | None, now: float) -> str:
    """``3m 12s ago`` / ``in 5s`` for an ISO time, relative to ``now``."""
    if not stamp:
        return "-"
    delta = now - parse_iso(stamp)
    return f"{render.duration(abs(delta))} ago" if delta >= 0 else f"in {render.duration(-delta)}"


def pretty(text: str | None) -> str:
    """Stored JSON text indented for reading; text that is not JSON as it is."""
    if text is None:
        return "null"
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def hms(stamp: str | None) -> str:
    """``2026-12-01 20:13:58`` from an ISO time (UTC), ``-`` for none."""
    return "-" if not stamp else stamp[:19].replace("T", " ")


def first_line(text: str | None, width: int = 90) -> str:
    """An error's line: its final exception and the first line of its message (the page shows
    the whole text where there is room)."""
    return render.error_line(text, width) if text else ""


SHORT_ID = 20  # the time part (12 hex digits) and 8 random ones: jobs of one batch differ there


def short_id(job_id: str) -> str:
    """Enough of an id to tell jobs apart (those enqueued together share their first 12 digits);
    the pages give the full id on hover and on the job's own page."""
    return job_id if len(job_id) <= SHORT_ID else job_id[:SHORT_ID] + "…"


def install(env: Any) -> None:
    env.filters.update(
        duration=render.duration,
        size=render.size,
        ago=ago,
        pretty=pretty,
        hms=hms,
        first_line=first_line,
        short_id=short_id,
    )
