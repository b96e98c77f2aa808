"""Paging through jobs for the dashboard (issue 15): filters, search and keyset pagination.

The SQL is the engine's (``OpsStore.browse_jobs`` and ``find_jobs``); this module decides what a
page is: the filter, its cursor, the window's end and the exact hits first.

Every page walks one index in its listing order and starts right after the previous page's last
row (a keyset cursor, never OFFSET), so page 1000 costs what page 1 does:

- pending: the claim index ``jobs_claim`` (``priority DESC, run_at, created_at``), claim order
  (ties by the engine's tiebreak: SQLite's rowid, PostgreSQL's id);
- failed, cancelled: ``jobs_dead``, newest first (ids grow with creation time);
- running: ``jobs_running``; everything else (no status, completed): the primary key, newest first.

A filter the walked index does not answer (a type, search text, ``completed`` on the primary key)
is applied to a bounded *window* of at most :data:`WINDOW` index entries. When the window ends
before a page is full, the page says so (``partial``) and its cursor continues the search where
the window stopped: a rare match in a million jobs costs a few bounded pages, never one long scan.

Search text matches an id prefix, an idempotency key exactly, or a substring of the payload or
the error (case-sensitive). Id and key hits are found through their indexes and listed first;
when the text looks like an id (hex) and finds jobs that way, payloads and errors are searched
only on request (``text=1``).
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .contract import OpsStore
from .job import STATUSES

WINDOW = 10_000     # index entries examined per page at most, when a filter needs a look
PAGE = 50
MAX_QUERY = 200

_HEX = re.compile(r"[0-9a-fA-F]{4,32}")


@dataclass(frozen=True)
class JobFilter:
    """What the jobs page lists. Build it with :func:`parse_filter`."""
    status: str | None = None
    type: str | None = None
    q: str | None = None
    after: tuple | None = None  # the keyset cursor: the last row of the previous page
    text: bool = False          # search payloads and errors even when ``q`` found a job by id or key

    def claim_order(self) -> bool:
        return self.status == "pending"


@dataclass
class Page:
    rows: list[dict[str, Any]]
    next: str | None            # cursor of the next page (None: this is the last)
    partial: bool = False       # the window ended before the page filled: more may match further on
    exact: list[dict[str, Any]] = field(default_factory=list)  # id-prefix and key hits (page 1)
    text_skipped: bool = False  # ``q`` found jobs by id or key; payloads and errors were not searched


def parse_filter(params: Any) -> JobFilter:
    """A :class:`JobFilter` from query parameters ``status``, ``type``, ``q``, ``after``.
    Raises ValueError naming the parameter and the value when one is not acceptable."""
    status = (params.get("status") or "").strip() or None
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    job_type = (params.get("type") or "").strip() or None
    q = (params.get("q") or "").strip() or None
    if q is not None and len(q) > MAX_QUERY:
        raise ValueError(f"search text is {len(q)} characters long; at most {MAX_QUERY} are accepted")
    after = params.get("after") or None
    return JobFilter(status, job_type, q, _decode_cursor(after, status == "pending") if after else None,
                     text=params.get("text") == "1")


def encode_cursor(key: tuple) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def _decode_cursor(text: str, claim: bool) -> tuple:
    try:
        key = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        raise ValueError(f"after {text!r} is not a page cursor of this list") from None
    # claim order: (priority, run_at, created_at, the engine's tiebreak: a rowid or an id)
    shape = (int, str, str, (int, str)) if claim else (str,)
    if not (isinstance(key, list) and len(key) == len(shape)
            and all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape))):
        raise ValueError(f"after {text!r} is not a page cursor of this list")
    return tuple(key)


def page_jobs(store: OpsStore, f: JobFilter, limit: int = PAGE, window: int = WINDOW) -> Page:
    """One page of jobs matching ``f``, in the listing order of its status (see the module)."""
    if f.q and f.after is None and not f.text and _HEX.fullmatch(f.q):
        exact = exact_hits(store, f)
        if exact:  # an id or a key was meant: answer from the indexes, offer the text search
            return Page([], None, exact=exact, text_skipped=True)
    rows, window_end = store.browse_jobs(f.status, f.type, f.q, f.after, limit, window)
    page = Page([_strip(r) for r in rows], None)
    if len(rows) == limit:
        page.next = encode_cursor(tuple(rows[-1]["cursor"]))
    elif window_end is not None:  # the window ended first: more may match further on
        page.partial = True
        page.next = encode_cursor(tuple(window_end))
    if f.q and f.after is None:
        page.exact = exact_hits(store, f)
    return page


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "cursor"}


def exact_hits(store: OpsStore, f: JobFilter, limit: int = 10) -> list[dict[str, Any]]:
    """Jobs whose id starts with ``f.q`` or whose idempotency key is ``f.q`` (primary key and
    ``jobs_key`` index), that also match ``f``'s status and type."""
    return store.find_jobs(f.q or "", f.status, f.type, limit)
