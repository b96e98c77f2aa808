"""The PostgreSQL engine's SQL for operators (issue 5, 14): what the ops CLI, ``top``, the metrics
and the dashboard read and write (the ``OpsStore`` part of :mod:`shared.contract`).

:class:`PgOps` is a mixin of ``PgStore`` and returns the rows the SQLite engine's ``OpsSql``
returns (plain dicts, the same keys, times as ISO text, counts as ints). Every write is one
autocommit statement or one short transaction; ``now`` comes from the caller. Reads work with
no supervisor running.

- Counts per (type, status) are ``job_counts`` plus the deltas the triggers appended and upkeep
  has not folded yet (``schema.COUNTS``): no read here writes.
- Bulk writes (``retry_failed``, ``purge``) go ``BATCH`` rows per statement, each its own
  transaction: PostgreSQL locks rows, so nothing else waits for them, but no transaction grows
  with the table (nor its locks, nor the rows autovacuum may not yet reclaim).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ...clock import iso
from ...job import TERMINAL
from . import schema

if TYPE_CHECKING:
    import psycopg

BATCH = 1000  # rows per statement of a bulk write

# The partial indexes jobs_dead / jobs_finished serve a query whose condition implies theirs.
_FINISHED = "status IN ('completed', 'failed', 'cancelled')"

# The next rows of a batched write, by id after the last one done, locked and checked again
# (FOR UPDATE in READ COMMITTED): a row another session changed meanwhile is passed over, and
# the LIMIT still fills with rows that qualify, so a short batch means the walk is at its end.
_NEXT = "SELECT id FROM jobs WHERE id > %(after)s AND {cond} ORDER BY id LIMIT %(batch)s FOR UPDATE"

RETRYABLE = ("failed", "cancelled")

_LIST_ORDER = {
    None: "id DESC",                                    # newest first (ids are time-ordered)
    "pending": "priority DESC, run_at, created_at",     # claim order: what runs next first
    "running": "started_at",
}
# Finish time, newest first, along jobs_finished (backward scan). Unlike SQLite, a finished row
# without completed_at (jobq writes none; an old copied row may lack it) comes first: "NULLS
# LAST" would not follow the index and sorts every finished job (200,000 rows: 162 ms against
# 0.13 ms, one noisy run).
_FINISHED_ORDER = "completed_at DESC, id DESC"

_COUNTS = f"SELECT type, status, n FROM ({schema.COUNTS}) c"

# Seconds between two of jobq's ISO texts (NULL when either is), as a double.
_SECONDS = "extract(epoch from ({end}::timestamptz - {start}::timestamptz))::float8"


class PgOps:
    """The operators' queries and bulk writes (mixed into ``PgStore``)."""

    conn: "psycopg.Connection"
    _write: Callable[..., Any]
    _tx: Callable[..., Any]

    # -- reads: the queue -----------------------------------------------------------------------------

    def counts_by_type(self) -> list[dict[str, Any]]:
        """Rows ``{type, status, n}`` for every (type, status) that has jobs, from the counts the
        triggers keep (folded and not yet folded): the cost does not grow with the queue."""
        return self.conn.execute(f"{_COUNTS} WHERE n > 0 AND status <> 'delayed' "
                                 "ORDER BY type, status").fetchall()

    def scheduled_by_type(self, now: float) -> dict[str, int]:
        """``{type: n}`` of pending jobs not due yet (delayed, or waiting for a retry).

        The triggers count delayed jobs (pending, ``run_at`` later than creation); the ones among
        them already due are counted from the ``jobs_delayed`` index, up to ``now``.
        """
        delayed = {r["type"]: r["n"] for r in self.conn.execute(
            f"{_COUNTS} WHERE status = 'delayed' AND n > 0").fetchall()}
        if not delayed:
            return {}
        for r in self.conn.execute("SELECT type, count(*) AS n FROM jobs WHERE status = 'pending' "
                                   "AND run_at > created_at AND run_at <= %s GROUP BY type", (iso(now),)).fetchall():
            delayed[r["type"]] = delayed.get(r["type"], 0) - r["n"]
        return {t: n for t, n in delayed.items() if n > 0}

    def oldest_due(self, now: float) -> dict[str, Any] | None:
        """The due pending job that has waited longest: ``{id, type, run_at, created_at}`` or None.

        One probe of the claim index per distinct priority (they are few), so the cost does not
        grow with the queue depth.
        """
        stamp, best, below = iso(now), None, None
        while True:
            row = self.conn.execute(
                "SELECT priority FROM jobs WHERE status = 'pending' " + ("" if below is None else "AND priority < %s ")
                + "ORDER BY priority DESC LIMIT 1", None if below is None else (below,)).fetchone()
            if row is None:
                return best
            below = row["priority"]
            top = self.conn.execute(
                "SELECT id, type, run_at, created_at FROM jobs WHERE status = 'pending' AND priority = %s "
                "AND run_at <= %s ORDER BY run_at, created_at LIMIT 1", (below, stamp)).fetchone()
            if top is not None and (best is None or top["run_at"] < best["run_at"]):
                best = top

    def finished_per_minute(self, since: float) -> list[dict[str, Any]]:
        """Rows ``{minute, status, n}``: completed and failed jobs per minute (``YYYY-MM-DDTHH:MM``)
        that finished at or after ``since`` (index ``jobs_finished``)."""
        return self.conn.execute(
            f"SELECT substr(completed_at, 1, 16) AS minute, status, count(*) AS n FROM jobs "
            f"WHERE {_FINISHED} AND status IN ('completed', 'failed') AND completed_at >= %s "
            f"GROUP BY minute, status ORDER BY minute, status", (iso(since),)).fetchall()

    def recent_failures(self, limit: int = 10) -> list[dict[str, Any]]:
        """The last ``limit`` jobs that failed for good, newest first: read through the
        ``jobs_dead`` index (newest ids first, a few times ``limit`` of them), ordered by failure
        time here (no index orders jobs by ``completed_at``)."""
        rows = self.conn.execute(
            "SELECT id, type, attempts, completed_at, error FROM jobs WHERE status IN ('failed', 'cancelled') "
            "AND status = 'failed' ORDER BY id DESC LIMIT %s", (limit * 20,)).fetchall()
        return sorted(rows, key=lambda r: r["completed_at"] or "", reverse=True)[:limit]

    def list_jobs(self, status: str | None = None, job_type: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Jobs filtered by ``status`` and ``job_type``, at most ``limit``. Order: newest first;
        pending jobs in claim order; running by start; finished ones by finish time, newest first."""
        where, params = [], []
        if status is not None:
            where.append(f"{_FINISHED} AND status = %s" if status in TERMINAL else "status = %s")
            params.append(status)
        if job_type is not None:
            where.append("type = %s")
            params.append(job_type)
        sql = ("SELECT id, type, status, attempts, max_attempts, priority, run_at, started_at, completed_at, "
               "created_at, updated_at, key, owner_pid, error FROM jobs")
        if where:
            sql += " WHERE " + " AND ".join(where)
        order = _LIST_ORDER.get(status, _FINISHED_ORDER)
        return self.conn.execute(f"{sql} ORDER BY {order} LIMIT %s", (*params, limit)).fetchall()

    def find_ids(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids that start with ``prefix`` (a range over the primary key), at most ``limit``."""
        if "\x00" in prefix:   # PostgreSQL text cannot hold NUL: no id has one
            return []
        rows = self.conn.execute("SELECT id FROM jobs WHERE id >= %s AND id < %s ORDER BY id LIMIT %s",
                                 (prefix, prefix + "\U0010ffff", limit)).fetchall()
        return [r["id"] for r in rows]

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of the ids that exist."""
        out: dict[str, str] = {}
        for chunk in _chunks(i for i in ids if "\x00" not in i):
            for r in self.conn.execute("SELECT id, status FROM jobs WHERE id = ANY(%s)", (chunk,)).fetchall():
                out[r["id"]] = r["status"]
        return out

    def attempt_history(self, job_id: str) -> list[dict[str, Any]]:
        """The ended attempts of one job, oldest first (``job_attempts``, see the schema)."""
        return self.conn.execute(
            "SELECT seq, attempt, outcome, due_at, started_at, ended_at, owner, error FROM job_attempts "
            "WHERE job_id = %s ORDER BY seq", (job_id,)).fetchall()

    # -- reads: processes -----------------------------------------------------------------------------

    def worker_rows(self) -> list[dict[str, Any]]:
        """Registered workers with the job(s) each is running: one row per (worker, running job),
        ``job_id`` None for an idle worker. Ordered by slot, then the job's start (NULLs first,
        as SQLite sorts them)."""
        return self.conn.execute(
            "SELECT p.id AS token, p.pid, p.host, p.slot, p.parent, p.started_at, p.heartbeat_at, "
            "j.id AS job_id, j.type AS job_type, j.attempts AS job_attempt, j.started_at AS job_started_at "
            "FROM processes p LEFT JOIN jobs j ON j.status = 'running' AND j.owner = p.id "
            "WHERE p.kind = 'worker' "
            "ORDER BY p.slot NULLS FIRST, p.pid, j.started_at NULLS FIRST, j.id NULLS FIRST").fetchall()

    def running_without_worker(self) -> list[dict[str, Any]]:
        """Running jobs whose owner has no process row (a worker run alone, or one that died)."""
        return self.conn.execute(
            "SELECT id, type, attempts, owner, owner_pid, started_at FROM jobs j "
            "WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM processes p WHERE p.id = j.owner)"
        ).fetchall()

    # -- reads: attempt feed (metrics, top) -----------------------------------------------------------

    def last_attempt_seq(self) -> int:
        """The newest ``job_attempts.seq`` (0 when there is none)."""
        return self.conn.execute("SELECT coalesce(max(seq), 0) AS s FROM job_attempts").fetchone()["s"]

    def recent_attempts(self, since: float, limit: int) -> list[dict[str, Any]]:
        """At most the last ``limit`` ended attempts, of those that ended at or after ``since``,
        oldest first: ``{type, outcome, due_at, started_at, ended_at}`` (a range of the key)."""
        return self.conn.execute(
            "SELECT type, outcome, due_at, started_at, ended_at FROM job_attempts "
            "WHERE seq > (SELECT coalesce(max(seq), 0) FROM job_attempts) - %s AND ended_at >= %s ORDER BY seq",
            (limit, iso(since))).fetchall()

    def attempt_aggregates(self, after: int, upto: int,
                           bounds: Sequence[float]) -> list[dict[str, Any]]:
        """Per (type, outcome), over attempts with ``after < seq <= upto``: ``n``, ``wait_sum``,
        ``run_sum`` and cumulative bucket counts ``wait_le_<i>``/``run_le_<i>`` for each of
        ``bounds`` (seconds). wait: due -> start; run: start -> end; both clamped at 0 (and 0
        where a time is missing). Computed in SQL: following a busy queue costs no Python per
        attempt."""
        buckets = "".join(f", count(*) FILTER (WHERE w <= {float(b)!r}) AS wait_le_{i}"
                          f", count(*) FILTER (WHERE r <= {float(b)!r}) AS run_le_{i}"
                          for i, b in enumerate(bounds))
        wait = _SECONDS.format(start="due_at", end="started_at")
        run = _SECONDS.format(start="started_at", end="ended_at")
        sql = (f"SELECT type, outcome, count(*) AS n, coalesce(sum(w), 0)::float8 AS wait_sum, "
               f"coalesce(sum(r), 0)::float8 AS run_sum{buckets} FROM ("
               f"SELECT type, outcome, greatest(coalesce({wait}, 0), 0) AS w, "
               f"greatest(coalesce({run}, 0), 0) AS r "
               "FROM job_attempts WHERE seq > %s AND seq <= %s) a GROUP BY type, outcome")
        return self.conn.execute(sql, (after, upto)).fetchall()

    # -- writes: jobs ---------------------------------------------------------------------------------

    def retry_jobs(self, ids: Sequence[str], now: float) -> list[str]:
        """Put failed or cancelled jobs back to pending, due now, with their attempts reset.
        One statement. Returns the ids retried, in the order given (others were missing or in
        another state)."""
        stamp = iso(now)
        return self._wake(self._by_ids(
            "UPDATE jobs SET status = 'pending', attempts = 0, run_at = %s, completed_at = NULL, updated_at = %s "
            "WHERE id = ANY(%s) AND status IN ('failed', 'cancelled') RETURNING id", (stamp, stamp), ids))

    def retry_failed(self, now: float, job_type: str | None = None) -> int:
        """Retry every failed job (of ``job_type``), ``BATCH`` per transaction. Returns how many."""
        cond = f"{_FINISHED} AND status = 'failed'" + ("" if job_type is None else " AND type = %(type)s")
        sql = ("UPDATE jobs SET status = 'pending', attempts = 0, run_at = %(now)s, completed_at = NULL, "
               f"updated_at = %(now)s WHERE id IN ({_NEXT.format(cond=cond)}) RETURNING id")
        return self._wake(self._repeat(sql, {"now": iso(now), "type": job_type}))

    def _wake(self, done: Any) -> Any:
        """After jobs became pending (committed): notify the idle workers; returns ``done``."""
        if done:
            self.conn.execute("SELECT pg_notify(%s, '')", (self.channel,))
        return done

    def cancel_jobs(self, ids: Sequence[str], now: float) -> list[str]:
        """Cancel pending jobs (a running job cannot be cancelled). One statement; returns the
        ids cancelled, in the order given."""
        stamp = iso(now)
        return self._by_ids(
            "UPDATE jobs SET status = 'cancelled', completed_at = %s, updated_at = %s "
            "WHERE id = ANY(%s) AND status = 'pending' RETURNING id", (stamp, stamp), ids)

    def purge_jobs(self, ids: Sequence[str]) -> list[str]:
        """Delete the named jobs that are finished (completed, failed or cancelled), with their
        attempt history (trigger). One statement; returns the ids deleted, in the order given."""
        return self._by_ids(f"DELETE FROM jobs WHERE id = ANY(%s) AND {_FINISHED} RETURNING id", (), ids)

    def purge(self, status: str, before: float, *, dry_run: bool = False) -> int:
        """Delete jobs of a terminal ``status`` that finished before ``before`` (a job without
        ``completed_at`` counts from ``updated_at``), ``BATCH`` per transaction; their attempt
        history goes with them (trigger). With ``dry_run``, count only. Returns how many."""
        if status not in TERMINAL:
            raise ValueError(f"purge: status must be one of {', '.join(TERMINAL)}, got {status!r}")
        cond = f"{_FINISHED} AND status = %(status)s AND coalesce(completed_at, updated_at) < %(before)s"
        params = {"status": status, "before": iso(before)}
        if dry_run:
            return self.conn.execute(f"SELECT count(*) AS n FROM jobs WHERE {cond}", params).fetchone()["n"]
        return self._repeat(f"DELETE FROM jobs WHERE id IN ({_NEXT.format(cond=cond)}) RETURNING id", params)

    def _by_ids(self, sql: str, params: tuple[Any, ...], ids: Sequence[str]) -> list[str]:
        """Run a ``... id = ANY(%s) ... RETURNING id`` statement for ``ids`` (the array comes
        after ``params``); the ids it touched, in the order given, each once."""
        wanted = [i for i in dict.fromkeys(ids) if "\x00" not in i]
        if not wanted:
            return []
        done = {r["id"] for r in self._write(lambda c: c.execute(sql, (*params, wanted)).fetchall())}
        return [i for i in wanted if i in done]

    def _repeat(self, sql: str, params: dict[str, Any]) -> int:
        """Run a batched ``... RETURNING id`` statement (``%(after)s``, ``%(batch)s``), one
        autocommit statement (its own short transaction) per batch, until it touches fewer rows
        than asked; the total."""
        total, after = 0, ""
        while True:
            ids = self._write(lambda c: [r["id"] for r in c.execute(
                sql, {**params, "after": after, "batch": BATCH}).fetchall()])
            total += len(ids)
            if len(ids) < BATCH:
                return total
            after = max(ids)

    # -- control rows: scale requests and supervisor counters ----------------------------------------

    def request_scale(self, supervisor: str, workers: int) -> None:
        """Ask the supervisor with owner token ``supervisor`` to run ``workers`` workers."""
        self._write(lambda c: c.execute(
            "INSERT INTO control (name, value) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (_scale_key(supervisor), str(int(workers)))))

    def pending_scale(self, supervisor: str) -> int | None:
        """The scale request not yet taken by ``supervisor``, or None."""
        row = self.conn.execute("SELECT value FROM control WHERE name = %s", (_scale_key(supervisor),)).fetchone()
        return None if row is None else int(row["value"])

    def take_scale_request(self, supervisor: str) -> int | None:
        """Remove and return ``supervisor``'s scale request (one statement: two takers never
        both get it)."""
        row = self._write(lambda c: c.execute("DELETE FROM control WHERE name = %s RETURNING value",
                                              (_scale_key(supervisor),)).fetchone())
        return None if row is None else int(row["value"])

    def save_counters(self, supervisor: str, counters: dict[str, int]) -> None:
        """Publish a supervisor's own counters (restarts, reaped jobs ...) for ``status``; drops the
        rows of supervisors that no longer have a process row. One transaction."""
        def tx(c: "psycopg.Connection") -> None:
            c.execute("INSERT INTO control (name, value) VALUES (%s, %s) "
                      "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                      (_counters_key(supervisor), json.dumps(counters, sort_keys=True)))
            c.execute("DELETE FROM control WHERE name LIKE 'counters:%' "
                      "AND substr(name, 10) NOT IN (SELECT id FROM processes)")
        self._tx(tx)

    def supervisor_counters(self) -> dict[str, dict[str, int]]:
        """``{supervisor token: counters}`` as published by :meth:`save_counters`."""
        rows = self.conn.execute("SELECT name, value FROM control WHERE name LIKE 'counters:%'").fetchall()
        out = {}
        for r in rows:
            try:
                out[r["name"][len("counters:"):]] = json.loads(r["value"])
            except ValueError:
                continue
        return out

    def wal_bytes(self) -> int | None:
        """None: the server's write-ahead log is the whole cluster's and the server reclaims it
        itself (checkpoints); there is nothing of jobq's own to measure or to checkpoint."""
        return None


def _scale_key(supervisor: str) -> str:
    return f"scale:{supervisor}"


def _counters_key(supervisor: str) -> str:
    return f"counters:{supervisor}"


def _chunks(items: Iterable[str], size: int = 500) -> Iterable[list[str]]:
    buf: list[str] = []
    for i in items:
        buf.append(i)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf
