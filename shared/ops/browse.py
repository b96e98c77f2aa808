"""Paging through jobs for the dashboard: filters, search and keyset pagination.

This module decides what a page is (the filter, its cursor, the window's end, the exact hits
first) and reads it with SQL written once (:func:`browse_jobs`, :func:`find_jobs`); where the
engines differ it asks the store's dialect (the claim order's tiebreak, whether a join keeps
the window's order, the substring function).

Every page walks one index in its listing order and starts right after the previous page's last
row (a keyset cursor, never OFFSET), so page 1000 costs what page 1 does:

- pending: the claim index ``jobs_claim`` (``priority DESC, run_at, created_at``), claim order
  (ties by the dialect's ``rowid``: the order the claim index keeps among equals);
- failed, cancelled: ``jobs_dead``, newest first (ids grow with creation time);
- running: ``jobs_running``; everything else (no status, completed, waiting): the primary key, newest first.

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
from typing import Any, Sequence

from shared.engines.contract import OpsStore
from shared.model.job import STATUSES
from .fragments import DEAD, id_range

WINDOW = 10_000  # index entries examined per page at most, when a filter needs a look
PAGE = 50
MAX_QUERY = 200

_HEX = re.compile(r"[0-9a-fA-F]{4,32}")


@dataclass(frozen=True)
class JobFilter:
    """What the jobs page lists. Build it with :func:`parse_filter`."""

    status: str | None = None
    type: str | None = None
    q: str | None = None
    after: tuple[Any, ...] | None = None  # the keyset cursor: the last row of the previous page
    text: bool = False  # search payloads and errors even when ``q`` found a job by id or key

    def claim_order(self) -> bool:
        return self.status == "pending"


@dataclass
class Page:
    rows: list[dict[str, Any]]
    next: str | None  # cursor of the next page (None: this is the last)
    partial: bool = False  # the window ended before the page filled: more may match further on
    exact: list[dict[str, Any]] = field(default_factory=list)  # id-prefix and key hits (page 1)
    text_skipped: bool = (
        False  # ``q`` found jobs by id or key; payloads and errors were not searched
    )


def parse_filter(params: Any) -> JobFilter:
    """A :class:`JobFilter` from query parameters ``status``, ``type``, ``q``, ``after``.
    Raises ValueError naming the parameter and the value when one is not acceptable."""
    status = (params.get("status") or "").strip() or None
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    job_type = (params.get("type") or "").strip() or None
    q = (params.get("q") or "").strip() or None
    if q is not None and len(q) > MAX_QUERY:
        raise ValueError(
            f"search text is {len(q)} characters long; at most {MAX_QUERY} are accepted"
        )
    after = params.get("after") or None
    return JobFilter(
        status,
        job_type,
        q,
        _decode_cursor(after, status == "pending") if after else None,
        text=params.get("text") == "1",
    )


def encode_cursor(key: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def _decode_cursor(text: str, claim: bool) -> tuple[Any, ...]:
    try:
        key = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        raise ValueError(f"after {text!r} is not a page cursor of this list") from None
    # claim order: (priority, run_at, created_at, the engine's tiebreak: a rowid or an id)
    shape: tuple[Any, ...] = (int, str, str, (int, str)) if claim else (str,)
    if not (
        isinstance(key, list)
        and len(key) == len(shape)
        and all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape))
    ):
        raise ValueError(f"after {text!r} is not a page cursor of this list")
    return tuple(key)


def page_jobs(store: OpsStore, f: JobFilter, limit: int = PAGE, window: int = WINDOW) -> Page:
    """One page of jobs matching ``f``, in the listing order of its status (see the module)."""
    if f.q and f.after is None and not f.text and _HEX.fullmatch(f.q):
        exact = exact_hits(store, f)
        if exact:  # an id or a key was meant: answer from the indexes, offer the text search
            return Page([], None, exact=exact, text_skipped=True)
    rows, window_end = browse_jobs(store, f.status, f.type, f.q, f.after, limit, window)
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
    return find_jobs(store, f.q or "", f.status, f.type, limit)


# -- the SQL: one index walk in listing order, then the window's jobs ----------------------------

_COLUMNS = (
    "j.id, j.type, j.status, j.attempts, j.max_attempts, j.priority, j.run_at, j.started_at, "
    "j.completed_at, j.created_at, j.updated_at, j.key, j.owner_pid, substr({payload}, 1, 160) AS payload, "
    # the error's tail (its final exception, shared.model.errortext): its last 2,000 characters
    "CASE WHEN j.status <> 'completed' "
    "THEN substr(j.error, length(j.error) - 1999) END AS error"
)
_CLAIM_ORDER = "k1 DESC, k2, k3, rid"


def _columns(store: OpsStore) -> str:
    """A listing's columns, the payload as the engine's JSON text (its first 160 characters)."""
    return _COLUMNS.format(payload=store.dialect.json("j.payload"))


_ID_ORDER = "k1 DESC"


def browse_jobs(
    store: OpsStore,
    status: str | None,
    job_type: str | None,
    q: str | None,
    after: Sequence[Any] | None,
    limit: int,
    window: int,
) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
    """One page of the job listing: ``(rows, window_end)``.

    Order, by ``status``: ``pending`` in claim order (``priority`` descending, ``run_at``,
    ``created_at``, then the dialect's ``rowid``); every other status, and None (all jobs), by
    id, newest first. The walk starts right after ``after`` (a ``cursor`` this engine gave, or
    None). Filters: ``status``, ``job_type`` (exact), and ``q``: a substring of the payload or the
    error (case-sensitive), the idempotency key exactly, or an id prefix (lowercased). When a
    filter is one the walked index does not answer, only ``window`` entries of the walk are
    examined and ``window_end`` is the cursor of the window's last entry when the window was full
    and the page was not (else None). Rows carry ``cursor``: ``(priority, run_at, created_at,
    tiebreak)`` in claim order, ``(id,)`` otherwise. The cost is the window's entries at most.
    """
    claim = status == "pending"
    walk, params = _walk(store, status, after)
    filters, fparams = _filters(store, status, job_type, q)
    # without a filter every entry of the walk is a row of the page: walk just one page
    params.update(fparams, w=window if filters else limit, page=limit, wlast=window - 1)
    rows = _page(store, walk, params, filters, claim)
    out = [_with_cursor(r, claim) for r in rows]
    end = None
    if len(rows) < limit and filters:
        end = _window_end(store, walk, params, claim)
    return out, end


def _page(
    store: OpsStore, walk: str, params: dict[str, Any], filters: list[str], claim: bool
) -> list[dict[str, Any]]:
    """The page's rows: the window's jobs that pass ``filters``, in listing order, with the
    walk's columns, at most ``:page`` of them."""
    d = store.dialect
    where = f"WHERE {' AND '.join(filters)} " if filters else ""
    # Where a CROSS JOIN keeps the window as the outer loop (``window_sorted``), rows come out in the walk's
    # order and the query stops at the page's last row; elsewhere the page sorts the window's matches.
    join, order = (
        ("CROSS JOIN", "") if d.window_sorted else ("JOIN", "ORDER BY " + _order(claim, "w."))
    )
    return store.read(
        f"SELECT {_columns(store)}, w.k1, w.k2, w.k3, w.rid FROM ({walk}) AS w {join} jobs j "
        f"ON j.{d.rowid} = w.rid {where}{order} LIMIT :page",
        params,
    )


def _window_end(
    store: OpsStore, walk: str, params: dict[str, Any], claim: bool
) -> tuple[Any, ...] | None:
    """The cursor of the window's last entry (``:wlast``), or None if the window is not full."""
    last = store.read(
        f"SELECT * FROM ({walk}) AS w {'' if store.dialect.window_sorted else 'ORDER BY ' + _order(claim)} "
        "LIMIT 1 OFFSET :wlast",
        params,
    )
    return _with_cursor(last[0], claim)["cursor"] if last else None


def find_jobs(
    store: OpsStore, q: str, status: str | None = None, job_type: str | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """Jobs whose id starts with ``q`` lowercased (the first ``limit`` ids of that range) or whose
    idempotency key is ``q``, that also have ``status`` and ``job_type`` when given; newest id
    first. Row keys: those of :func:`browse_jobs` without ``cursor``. Found through the primary
    key and the key's index."""
    qlo, qhi = id_range(q)
    extra = ("" if status is None else " AND j.status = :status") + (
        "" if job_type is None else " AND j.type = :type"
    )
    return store.read(
        f"SELECT {_columns(store)} FROM jobs j WHERE j.id IN (SELECT id FROM (SELECT id FROM jobs "
        f"WHERE id >= :qlo AND id <= :qhi ORDER BY id LIMIT :limit) AS p UNION SELECT id FROM jobs WHERE key = :q)"
        f"{extra} ORDER BY j.id DESC",
        {
            "qlo": qlo,
            "qhi": qhi,
            "q": q,
            "limit": limit,
            "status": status,
            "type": job_type,
        },
    )


def _order(claim: bool, prefix: str = "") -> str:
    return ", ".join(prefix + o for o in (_CLAIM_ORDER if claim else _ID_ORDER).split(", "))


def _with_cursor(row: dict[str, Any], claim: bool) -> dict[str, Any]:
    """The row without the walk's columns, with its ``cursor``."""
    cursor = (row["k1"], row["k2"], row["k3"], row["rid"]) if claim else (row["k1"],)
    out = {k: v for k, v in row.items() if k not in ("k1", "k2", "k3", "rid")}
    out["cursor"] = cursor
    return out


def _walk(
    store: OpsStore, status: str | None, after: Sequence[Any] | None
) -> tuple[str, dict[str, Any]]:
    """The index walk of ``status``'s order as SQL yielding ``rid, k1, k2, k3`` in listing order,
    at most the window's ``:w`` entries, starting after ``after``."""
    if status == "pending":
        return _pending_walk(store, after)
    rowid = store.dialect.rowid
    cond = " AND id < :after" if after is not None else ""
    params = {"status": status, "after": after[0] if after is not None else None}
    base = {
        "failed": f"{DEAD} AND status = :status",
        "cancelled": f"{DEAD} AND status = :status",
        "running": "status = 'running'",
    }.get(status or "", "1 = 1")
    # running jobs are few: their partial index, then a sort (an expression, not the primary key's walk)
    key = "id || ''" if status == "running" else "id"
    return (
        f"SELECT {rowid} AS rid, id AS k1, NULL AS k2, NULL AS k3 FROM jobs WHERE {base}{cond} "
        f"ORDER BY {key} DESC LIMIT :w",
        params,
    )


def _pending_walk(store: OpsStore, after: Sequence[Any] | None) -> tuple[str, dict[str, Any]]:
    """:func:`_walk` of the pending jobs, in claim order (``after``: ``(priority, run_at,
    created_at, tiebreak)``)."""
    rowid = store.dialect.rowid
    cols = (
        f"SELECT {rowid} AS rid, priority AS k1, run_at AS k2, created_at AS k3 FROM jobs "
        "WHERE status = 'pending'"
    )
    order = f"ORDER BY priority DESC, run_at, created_at, {rowid} LIMIT :w"
    if after is None:
        return f"SELECT * FROM ({cols} {order}) AS c", {}
    p, r, c, tie = after
    # Two ordered parts: the rest of the cursor's priority (a row-value seek on the index's
    # columns, the tiebreak among equals), then lower priorities; the union in that order.
    same = (
        f"{cols} AND priority = :p AND (run_at, created_at) >= (:r, :c) "
        f"AND (run_at, created_at, {rowid}) > (:r, :c, :tie) {order}"
    )
    lower = f"{cols} AND priority < :p {order}"
    resort = "" if store.dialect.window_sorted else f" ORDER BY {_CLAIM_ORDER}"
    return (
        f"SELECT * FROM (SELECT * FROM ({same}) AS s UNION ALL SELECT * FROM ({lower}) AS l) AS u"
        f"{resort} LIMIT :w",
        {"p": p, "r": r, "c": c, "tie": str(tie) if rowid == "id" else tie},
    )


def _filters(
    store: OpsStore, status: str | None, job_type: str | None, q: str | None
) -> tuple[list[str], dict[str, Any]]:
    """Conditions on the window's jobs ``j`` that the walked index does not guarantee."""
    out: list[str] = []
    params: dict[str, Any] = {}
    if status in ("completed", "waiting"):  # walked by the primary key: filtered here
        out.append(f"j.status = '{status}'")
    if job_type is not None:
        out.append("j.type = :type")
        params["type"] = job_type
    if q is not None:
        find = store.dialect.instr
        out.append(
            f"({find}({store.dialect.json('j.payload')}, :q) > 0 OR {find}(coalesce(j.error, ''), :q) > 0 OR j.key = :q "
            "OR (j.id >= :qlo AND j.id <= :qhi))"
        )
        qlo, qhi = id_range(q)
        params.update(q=q, qlo=qlo, qhi=qhi)
    return out, params
