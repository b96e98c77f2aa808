"""Paging through jobs for the dashboard (issue 15): filters, search and keyset pagination.

Every page walks one index in its listing order and starts right after the previous page's last
row (a keyset cursor, never OFFSET), so page 1000 costs what page 1 does:

- pending: the claim index ``jobs_claim`` (``priority DESC, run_at, created_at``), claim order;
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

from .job import STATUSES

WINDOW = 10_000     # index entries examined per page at most, when a filter needs a look
PAGE = 50
MAX_QUERY = 200

_COLUMNS = ("j.id, j.type, j.status, j.attempts, j.max_attempts, j.priority, j.run_at, j.started_at, "
            "j.completed_at, j.created_at, j.updated_at, j.key, j.owner_pid, substr(j.payload, 1, 160) AS payload, "
            "CASE WHEN j.status <> 'completed' THEN substr(j.error, -300) END AS error")  # the tail: the exception
_HEX = re.compile(r"[0-9a-fA-F]{4,32}")
_DEAD = "status IN ('failed', 'cancelled')"  # jobs_dead's own condition, literally (partial index)


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
    shape = (int, str, str, int) if claim else (str,)
    if not (isinstance(key, list) and len(key) == len(shape)
            and all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape))):
        raise ValueError(f"after {text!r} is not a page cursor of this list")
    return tuple(key)


def page_jobs(store: Any, f: JobFilter, limit: int = PAGE, window: int = WINDOW) -> Page:
    """One page of jobs matching ``f``, in the listing order of its status (see the module)."""
    if f.q and f.after is None and not f.text and _HEX.fullmatch(f.q):
        exact = exact_hits(store, f)
        if exact:  # an id or a key was meant: answer from the indexes, offer the text search
            return Page([], None, exact=exact, text_skipped=True)
    conn = store.conn
    walk, params = _walk(f)
    filters, fparams = _filters(f)
    # without a filter every entry of the walk is a row of the page: walk just one page
    params.update(fparams, w=window if filters else limit, page=limit)
    where = f"WHERE {' AND '.join(filters)} " if filters else ""
    # CROSS JOIN keeps the window as the outer loop, so rows come out in the walk's order and the
    # query stops at the page's last row; an ORDER BY here would read the whole window first.
    rows = conn.execute(f"SELECT {_COLUMNS}, w.k1, w.k2, w.k3, w.rid FROM (SELECT * FROM ({walk}) LIMIT :w) AS w "
                        f"CROSS JOIN jobs j ON j.rowid = w.rid {where}LIMIT :page", params).fetchall()
    page = Page([_strip(r) for r in rows], None)
    if len(rows) == limit:
        page.next = encode_cursor(_key(rows[-1], f))
    elif filters:
        last = _window_end(conn, walk, params, f)
        if last is not None:
            page.partial = True
            page.next = encode_cursor(last)
    if f.q and f.after is None:
        page.exact = exact_hits(store, f)
    return page


def _window_end(conn: Any, walk: str, params: dict[str, Any], f: JobFilter) -> tuple | None:
    """The key of the window's last entry when the window was full (the walk goes on), else None."""
    row = conn.execute(f"SELECT * FROM (SELECT *, row_number() OVER () AS n FROM (SELECT * FROM ({walk}) LIMIT :w)) "
                       f"WHERE n = :w", params).fetchone()
    return None if row is None else _key(row, f)


def _key(row: dict[str, Any], f: JobFilter) -> tuple:
    return (row["k1"], row["k2"], row["k3"], row["rid"]) if f.claim_order() else (row["k1"],)


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("k1", "k2", "k3", "rid")}


def _walk(f: JobFilter) -> tuple[str, dict[str, Any]]:
    """The index walk of ``f``'s order as SQL yielding ``rid, k1, k2, k3`` in listing order,
    starting after ``f.after``; each part is ordered and limited to the window by itself."""
    if f.claim_order():
        cols = "SELECT rowid AS rid, priority AS k1, run_at AS k2, created_at AS k3 FROM jobs WHERE status = 'pending'"
        order = "ORDER BY priority DESC, run_at, created_at, rowid LIMIT :w"
        if f.after is None:
            return f"SELECT * FROM ({cols} {order})", {}
        p, r, c, rid = f.after
        # Two ordered parts: the rest of the cursor's priority (a row-value seek), then lower priorities.
        same = f"{cols} AND priority = :p AND (run_at, created_at, rowid) > (:r, :c, :rid) {order}"
        lower = f"{cols} AND priority < :p {order}"
        return f"SELECT * FROM ({same}) UNION ALL SELECT * FROM ({lower})", {"p": p, "r": r, "c": c, "rid": rid}
    base = {"failed": f"{_DEAD} AND status = :status", "cancelled": f"{_DEAD} AND status = :status",
            "running": "status = 'running'"}.get(f.status or "", "1")
    # running jobs are few: their partial index, then a sort (+id: not the primary key's walk)
    by = "+id" if f.status == "running" else "id"
    after = " AND id < :after" if f.after is not None else ""
    sql = (f"SELECT * FROM (SELECT rowid AS rid, id AS k1, NULL AS k2, NULL AS k3 FROM jobs "
           f"WHERE {base}{after} ORDER BY {by} DESC LIMIT :w)")
    params = {"status": f.status, "after": f.after[0] if f.after else None}
    return sql, params


def _filters(f: JobFilter) -> tuple[list[str], dict[str, Any]]:
    """Conditions on the window's jobs ``j`` that the walked index does not guarantee."""
    out, params = [], {}
    if f.status == "completed":
        out.append("j.status = 'completed'")
    if f.type is not None:
        out.append("j.type = :type")
        params["type"] = f.type
    if f.q is not None:
        out.append("(instr(j.payload, :q) > 0 OR instr(coalesce(j.error, ''), :q) > 0 OR j.key = :q "
                   "OR (j.id >= :qlo AND j.id < :qhi))")
        params.update(q=f.q, qlo=f.q.lower(), qhi=f.q.lower() + "\U0010ffff")
    return out, params


def exact_hits(store: Any, f: JobFilter, limit: int = 10) -> list[dict[str, Any]]:
    """Jobs whose id starts with ``f.q`` or whose idempotency key is ``f.q`` (primary key and
    ``jobs_key`` index), that also match ``f``'s status and type."""
    q = f.q or ""
    conds, params = [], {"qlo": q.lower(), "qhi": q.lower() + "\U0010ffff", "q": q, "limit": limit}
    if f.status is not None:
        conds.append("j.status = :status")
        params["status"] = f.status
    if f.type is not None:
        conds.append("j.type = :type")
        params["type"] = f.type
    extra = "".join(f" AND {c}" for c in conds)
    return store.conn.execute(
        f"SELECT {_COLUMNS} FROM jobs j WHERE j.rowid IN (SELECT rid FROM (SELECT rowid AS rid FROM jobs "
        f"WHERE id >= :qlo AND id < :qhi ORDER BY id LIMIT :limit) UNION SELECT rowid FROM jobs WHERE key = :q)"
        f"{extra} ORDER BY j.id DESC",
        params).fetchall()
