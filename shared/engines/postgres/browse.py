"""The PostgreSQL engine's reads for the dashboard's job listing and the activity charts (the
"browse" group of ``OpsStore`` in :mod:`shared.contract`; the paging rules are
:mod:`shared.browse`'s, the windows' meaning :mod:`shared.activity`'s).

Every listing walks one index in its listing order from right after the cursor, as SQLite's does:

- pending: ``jobs_claim`` (``priority DESC, run_at, created_at``; ties by id), claim order;
- failed, cancelled: ``jobs_dead`` (``status, id``), newest id first;
- running: ``jobs_running`` (its few rows, then a sort); anything else: the primary key, newest first.

A filter the walked index does not answer (type, search text, ``completed`` on the primary key)
is applied to at most ``window`` entries of the walk. Unlike SQLite, PostgreSQL keeps no join
order, so the page query orders the window's matches itself: a sort of at most ``window`` rows,
still bounded. The cursor of a row is ``(priority, run_at, created_at, id)`` in claim order,
``(id,)`` otherwise. Times are text in the "C" collation (see the schema): they compare as SQLite's.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...clock import iso

_COLUMNS = ("j.id, j.type, j.status, j.attempts, j.max_attempts, j.priority, j.run_at, j.started_at, "
            "j.completed_at, j.created_at, j.updated_at, j.key, j.owner_pid, left(j.payload, 160) AS payload, "
            "CASE WHEN j.status <> 'completed' THEN right(j.error, 300) END AS error")  # the tail: the exception
_DEAD = "status IN ('failed', 'cancelled')"  # jobs_dead's own condition (partial index)
_CLAIM_ORDER = "k1 DESC, k2, k3, id"
_ID_ORDER = "k1 DESC"
_PER_MINUTE = ("SELECT substr(ended_at, 1, 16) AS minute, "
               "CASE outcome WHEN 'retry' THEN 'retried' ELSE outcome END AS status, count(*) AS n "
               "FROM job_attempts WHERE seq > %(after)s")


class PgBrowse:
    """The listing's and the activity's reads (mixed into :class:`PgStore`)."""

    conn: Any  # psycopg.Connection, dict rows, search_path = jobq's schema

    # -- the jobs listing ------------------------------------------------------------------------

    def browse_jobs(self, status: str | None, job_type: str | None, q: str | None, after: Sequence[Any] | None,
                    limit: int, window: int) -> tuple[list[dict[str, Any]], tuple | None]:
        """See :meth:`shared.contract.OpsStore.browse_jobs`."""
        claim = status == "pending"
        order = _CLAIM_ORDER if claim else _ID_ORDER
        walk, params = _walk(status, after)
        filters, fparams = _filters(status, job_type, q)
        # without a filter every entry of the walk is a row of the page: walk just one page
        params.update(fparams, w=window if filters else limit, page=limit)
        where = f"WHERE {' AND '.join(filters)} " if filters else ""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS}, w.k1, w.k2, w.k3 FROM ({walk}) AS w JOIN jobs j ON j.id = w.id "
            f"{where}ORDER BY {', '.join('w.' + o for o in order.split(', '))} LIMIT %(page)s", params).fetchall()
        out = [_with_cursor(r, claim) for r in rows]
        end = None
        if len(rows) < limit and filters:
            params["wlast"] = params["w"] - 1
            last = self.conn.execute(f"SELECT id, k1, k2, k3 FROM ({walk}) AS w ORDER BY {order} "
                                     f"OFFSET %(wlast)s LIMIT 1", params).fetchone()
            end = None if last is None else _with_cursor(last, claim)["cursor"]
        return out, end

    def find_jobs(self, q: str, status: str | None = None, job_type: str | None = None,
                  limit: int = 10) -> list[dict[str, Any]]:
        """See :meth:`shared.contract.OpsStore.find_jobs` (primary key and ``jobs_key``)."""
        conds, params = [], {"qlo": q.lower(), "qhi": q.lower() + "\U0010ffff", "q": q, "limit": limit}
        if status is not None:
            conds.append("j.status = %(status)s")
            params["status"] = status
        if job_type is not None:
            conds.append("j.type = %(type)s")
            params["type"] = job_type
        extra = "".join(f" AND {c}" for c in conds)
        return self.conn.execute(
            f"SELECT {_COLUMNS} FROM jobs j WHERE j.id IN (SELECT id FROM (SELECT id FROM jobs "
            f"WHERE id >= %(qlo)s AND id < %(qhi)s ORDER BY id LIMIT %(limit)s) AS p "
            f"UNION SELECT id FROM jobs WHERE key = %(q)s){extra} ORDER BY j.id DESC", params).fetchall()

    def job_texts(self, job_id: str) -> dict[str, Any] | None:
        """See :meth:`shared.contract.OpsStore.job_texts`."""
        return self.conn.execute("SELECT payload, result FROM jobs WHERE id = %s", (job_id,)).fetchone()

    # -- activity --------------------------------------------------------------------------------

    def attempts_per_minute(self, after: int, upto: int | None = None,
                            since: float | None = None) -> list[dict[str, Any]]:
        """See :meth:`shared.contract.OpsStore.attempts_per_minute` (a range of the primary key)."""
        sql, params = _PER_MINUTE, {"after": after, "upto": upto, "since": None if since is None else iso(since)}
        if upto is not None:
            sql += " AND seq <= %(upto)s"
        if since is not None:
            sql += " AND ended_at >= %(since)s"
        return self.conn.execute(sql + " GROUP BY minute, status ORDER BY minute, status", params).fetchall()

    def attempt_seq_bounds(self) -> tuple[int, int]:
        """See :meth:`shared.contract.OpsStore.attempt_seq_bounds` (both ends of the primary key)."""
        r = self.conn.execute("SELECT min(seq) AS lo, max(seq) AS hi FROM job_attempts").fetchone()
        return (1, 0) if r["lo"] is None else (r["lo"], r["hi"])

    def attempt_from(self, seq: int) -> dict[str, Any] | None:
        """See :meth:`shared.contract.OpsStore.attempt_from`."""
        return self.conn.execute("SELECT seq, ended_at FROM job_attempts WHERE seq >= %s ORDER BY seq LIMIT 1",
                                 (seq,)).fetchone()

    def rate_window_use(self, job_type: str, since: float) -> int:
        """See :meth:`shared.contract.OpsStore.rate_window_use` (index ``type_starts_by_type``)."""
        return self.conn.execute("SELECT count(*) AS n FROM type_starts WHERE type = %s AND started_at > %s",
                                 (job_type, iso(since))).fetchone()["n"]


def _with_cursor(row: dict[str, Any], claim: bool) -> dict[str, Any]:
    """The row without the walk's columns, with its ``cursor``."""
    cursor = (row["k1"], row["k2"], row["k3"], row["id"]) if claim else (row["k1"],)
    out = {k: v for k, v in row.items() if k not in ("k1", "k2", "k3")}
    out["cursor"] = cursor
    return out


def _walk(status: str | None, after: Sequence[Any] | None) -> tuple[str, dict[str, Any]]:
    """The index walk of ``status``'s order as SQL yielding ``id, k1, k2, k3``, at most the
    window's ``%(w)s`` entries after ``after`` (the caller orders: see the module)."""
    if status == "pending":
        cols = "SELECT id, priority AS k1, run_at AS k2, created_at AS k3 FROM jobs WHERE status = 'pending'"
        order = "ORDER BY priority DESC, run_at, created_at, id LIMIT %(w)s"
        if after is None:
            return f"{cols} {order}", {}
        p, r, c, tie = after
        # Two ordered parts: the rest of the cursor's priority (a row-value seek on the index's
        # columns, the id among equals), then lower priorities.
        same = (f"{cols} AND priority = %(p)s AND (run_at, created_at) >= (%(r)s, %(c)s) "
                f"AND (run_at, created_at, id) > (%(r)s, %(c)s, %(tie)s) {order}")
        lower = f"{cols} AND priority < %(p)s {order}"
        return (f"SELECT * FROM (({same}) UNION ALL ({lower})) AS u ORDER BY {_CLAIM_ORDER} LIMIT %(w)s",
                {"p": p, "r": r, "c": c, "tie": str(tie)})
    cond = " AND id < %(after)s" if after is not None else ""
    params = {"status": status, "after": after[0] if after is not None else None}
    cols = "SELECT id, id AS k1, NULL::text AS k2, NULL::text AS k3 FROM jobs"
    if status == "running":
        # running jobs are few: their partial index, then a sort (OFFSET 0 keeps the planner
        # from walking the whole primary key backwards for them)
        return (f"SELECT * FROM ({cols} WHERE status = 'running'{cond} OFFSET 0) AS r "
                f"ORDER BY {_ID_ORDER} LIMIT %(w)s", params)
    base = f"{_DEAD} AND status = %(status)s" if status in ("failed", "cancelled") else "TRUE"
    return f"{cols} WHERE {base}{cond} ORDER BY id DESC LIMIT %(w)s", params


def _filters(status: str | None, job_type: str | None, q: str | None) -> tuple[list[str], dict[str, Any]]:
    """Conditions on the window's jobs ``j`` that the walked index does not guarantee."""
    out, params = [], {}
    if status == "completed":
        out.append("j.status = 'completed'")
    if job_type is not None:
        out.append("j.type = %(type)s")
        params["type"] = job_type
    if q is not None:
        out.append("(strpos(j.payload, %(q)s) > 0 OR strpos(coalesce(j.error, ''), %(q)s) > 0 "
                   "OR j.key = %(q)s OR (j.id >= %(qlo)s AND j.id < %(qhi)s))")
        params.update(q=q, qlo=q.lower(), qhi=q.lower() + "\U0010ffff")
    return out, params
