"""The SQLite engine's reads for the dashboard's job listing and the activity charts (the
"browse" group of ``OpsStore`` in :mod:`shared.contract`; the paging rules are
:mod:`shared.browse`'s, the windows' meaning :mod:`shared.activity`'s).

Every listing walks one index in its listing order from right after the cursor:

- pending: ``jobs_claim`` (``priority DESC, run_at, created_at``; ties by rowid), claim order;
- failed, cancelled: ``jobs_dead``, newest id first;
- running: ``jobs_running`` (its few rows, then a sort); anything else: the primary key, newest first.

A filter the walked index does not answer (type, search text, ``completed`` on the primary key)
is applied to at most ``window`` entries of the walk. The cursor of a row is ``(priority,
run_at, created_at, rowid)`` in claim order, ``(id,)`` otherwise.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Sequence

from ...clock import iso

_COLUMNS = ("j.id, j.type, j.status, j.attempts, j.max_attempts, j.priority, j.run_at, j.started_at, "
            "j.completed_at, j.created_at, j.updated_at, j.key, j.owner_pid, substr(j.payload, 1, 160) AS payload, "
            "CASE WHEN j.status <> 'completed' THEN substr(j.error, -300) END AS error")  # the tail: the exception
_DEAD = "status IN ('failed', 'cancelled')"  # jobs_dead's own condition, literally (partial index)
_PER_MINUTE = ("SELECT substr(ended_at, 1, 16) AS minute, "
               "CASE outcome WHEN 'retry' THEN 'retried' ELSE outcome END AS status, count(*) AS n "
               "FROM job_attempts WHERE seq > :after")


class SqliteBrowse:
    """The listing's and the activity's reads (mixed into :class:`SqliteStore`)."""

    conn: sqlite3.Connection

    # -- the jobs listing ------------------------------------------------------------------------

    def browse_jobs(self, status: str | None, job_type: str | None, q: str | None, after: Sequence[Any] | None,
                    limit: int, window: int) -> tuple[list[dict[str, Any]], tuple | None]:
        """See :meth:`shared.contract.OpsStore.browse_jobs`."""
        claim = status == "pending"
        walk, params = _walk(status, after)
        filters, fparams = _filters(status, job_type, q)
        # without a filter every entry of the walk is a row of the page: walk just one page
        params.update(fparams, w=window if filters else limit, page=limit)
        where = f"WHERE {' AND '.join(filters)} " if filters else ""
        # CROSS JOIN keeps the window as the outer loop, so rows come out in the walk's order and the
        # query stops at the page's last row; an ORDER BY here would read the whole window first.
        rows = self.conn.execute(
            f"SELECT {_COLUMNS}, w.k1, w.k2, w.k3, w.rid FROM (SELECT * FROM ({walk}) LIMIT :w) AS w "
            f"CROSS JOIN jobs j ON j.rowid = w.rid {where}LIMIT :page", params).fetchall()
        out = [_with_cursor(r, claim) for r in rows]
        end = None
        if len(rows) < limit and filters:
            last = self.conn.execute(
                f"SELECT * FROM (SELECT *, row_number() OVER () AS n FROM (SELECT * FROM ({walk}) LIMIT :w)) "
                f"WHERE n = :w", params).fetchone()
            end = None if last is None else _with_cursor(last, claim)["cursor"]
        return out, end

    def find_jobs(self, q: str, status: str | None = None, job_type: str | None = None,
                  limit: int = 10) -> list[dict[str, Any]]:
        """See :meth:`shared.contract.OpsStore.find_jobs` (primary key and ``jobs_key``)."""
        conds, params = [], {"qlo": q.lower(), "qhi": q.lower() + "\U0010ffff", "q": q, "limit": limit}
        if status is not None:
            conds.append("j.status = :status")
            params["status"] = status
        if job_type is not None:
            conds.append("j.type = :type")
            params["type"] = job_type
        extra = "".join(f" AND {c}" for c in conds)
        return self.conn.execute(
            f"SELECT {_COLUMNS} FROM jobs j WHERE j.rowid IN (SELECT rid FROM (SELECT rowid AS rid FROM jobs "
            f"WHERE id >= :qlo AND id < :qhi ORDER BY id LIMIT :limit) UNION SELECT rowid FROM jobs WHERE key = :q)"
            f"{extra} ORDER BY j.id DESC", params).fetchall()

    def job_texts(self, job_id: str) -> dict[str, Any] | None:
        """See :meth:`shared.contract.OpsStore.job_texts`."""
        return self.conn.execute("SELECT payload, result FROM jobs WHERE id = ?", (job_id,)).fetchone()

    # -- activity --------------------------------------------------------------------------------

    def attempts_per_minute(self, after: int, upto: int | None = None,
                            since: float | None = None) -> list[dict[str, Any]]:
        """See :meth:`shared.contract.OpsStore.attempts_per_minute` (a range of the primary key)."""
        sql, params = _PER_MINUTE, {"after": after, "upto": upto, "since": None if since is None else iso(since)}
        if upto is not None:
            sql += " AND seq <= :upto"
        if since is not None:
            sql += " AND ended_at >= :since"
        return self.conn.execute(sql + " GROUP BY minute, status ORDER BY minute, status", params).fetchall()

    def attempt_seq_bounds(self) -> tuple[int, int]:
        """See :meth:`shared.contract.OpsStore.attempt_seq_bounds`."""
        # two statements: min and max together defeat SQLite's min/max shortcut (it would scan)
        lo = self.conn.execute("SELECT min(seq) AS s FROM job_attempts").fetchone()["s"]
        hi = self.conn.execute("SELECT max(seq) AS s FROM job_attempts").fetchone()["s"]
        return (1, 0) if lo is None else (lo, hi)

    def attempt_from(self, seq: int) -> dict[str, Any] | None:
        """See :meth:`shared.contract.OpsStore.attempt_from`."""
        return self.conn.execute("SELECT seq, ended_at FROM job_attempts WHERE seq >= ? ORDER BY seq LIMIT 1",
                                 (seq,)).fetchone()

    def rate_window_use(self, job_type: str, since: float) -> int:
        """See :meth:`shared.contract.OpsStore.rate_window_use` (index ``type_starts_by_type``)."""
        return self.conn.execute("SELECT count(*) AS n FROM type_starts WHERE type = ? AND started_at > ?",
                                 (job_type, iso(since))).fetchone()["n"]


def _with_cursor(row: dict[str, Any], claim: bool) -> dict[str, Any]:
    """The row without the walk's columns, with its ``cursor``."""
    cursor = (row["k1"], row["k2"], row["k3"], row["rid"]) if claim else (row["k1"],)
    out = {k: v for k, v in row.items() if k not in ("k1", "k2", "k3", "rid", "n")}
    out["cursor"] = cursor
    return out


def _walk(status: str | None, after: Sequence[Any] | None) -> tuple[str, dict[str, Any]]:
    """The index walk of ``status``'s order as SQL yielding ``rid, k1, k2, k3`` in listing order,
    starting after ``after``; each part is ordered and limited to the window by itself."""
    if status == "pending":
        cols = "SELECT rowid AS rid, priority AS k1, run_at AS k2, created_at AS k3 FROM jobs WHERE status = 'pending'"
        order = "ORDER BY priority DESC, run_at, created_at, rowid LIMIT :w"
        if after is None:
            return f"SELECT * FROM ({cols} {order})", {}
        p, r, c, rid = after
        # Two ordered parts: the rest of the cursor's priority (a row-value seek), then lower priorities.
        same = f"{cols} AND priority = :p AND (run_at, created_at, rowid) > (:r, :c, :rid) {order}"
        lower = f"{cols} AND priority < :p {order}"
        return f"SELECT * FROM ({same}) UNION ALL SELECT * FROM ({lower})", {"p": p, "r": r, "c": c, "rid": rid}
    base = {"failed": f"{_DEAD} AND status = :status", "cancelled": f"{_DEAD} AND status = :status",
            "running": "status = 'running'"}.get(status or "", "1")
    # running jobs are few: their partial index, then a sort (+id: not the primary key's walk)
    by = "+id" if status == "running" else "id"
    cond = " AND id < :after" if after is not None else ""
    sql = (f"SELECT * FROM (SELECT rowid AS rid, id AS k1, NULL AS k2, NULL AS k3 FROM jobs "
           f"WHERE {base}{cond} ORDER BY {by} DESC LIMIT :w)")
    return sql, {"status": status, "after": after[0] if after is not None else None}


def _filters(status: str | None, job_type: str | None, q: str | None) -> tuple[list[str], dict[str, Any]]:
    """Conditions on the window's jobs ``j`` that the walked index does not guarantee."""
    out, params = [], {}
    if status == "completed":
        out.append("j.status = 'completed'")
    if job_type is not None:
        out.append("j.type = :type")
        params["type"] = job_type
    if q is not None:
        out.append("(instr(j.payload, :q) > 0 OR instr(coalesce(j.error, ''), :q) > 0 OR j.key = :q "
                   "OR (j.id >= :qlo AND j.id < :qhi))")
        params.update(q=q, qlo=q.lower(), qhi=q.lower() + "\U0010ffff")
    return out, params
