"""The SQLite engine's SQL for operators (issue 5): what the ops CLI, ``top``, the metrics and the
dashboard read and write (the ``OpsStore`` part of :mod:`shared.contract`).

:class:`OpsSql` is a mixin of :class:`SqliteStore` and keeps its contract: every write is one
statement or a ``BEGIN IMMEDIATE`` transaction (through the store's busy-retrying ``_write`` and
``_immediate``), cursors are fetched fully, and ``now`` comes from the caller. Reads work with
no supervisor running. Bulk writes (``retry_failed``, ``purge``) go in batches so the write lock
is never held for long while workers run.

Attempt history lives in ``job_attempts`` (written by triggers, see ``shared.schema``).
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, Iterable, Sequence

from ...clock import iso
from ...job import TERMINAL
from .bulk import Pacer

BATCH = 1000  # rows per statement of a bulk write

# The partial index jobs_finished serves a query only if its own condition appears literally.
_FINISHED = "status IN ('completed', 'failed', 'cancelled')"

# The next rows of a batched write, by id after the last one done: each row is looked at once,
# however many rows that do not qualify lie before the ones that do.
_NEXT = "SELECT id FROM jobs WHERE id > :after AND"

RETRYABLE = ("failed", "cancelled")

_LIST_ORDER = {
    None: "id DESC",                                    # newest first (ids are time-ordered)
    "pending": "priority DESC, run_at, created_at",     # claim order: what runs next first
    "running": "started_at",
}


class OpsSql:
    """The operators' queries and bulk writes (mixed into :class:`SqliteStore`)."""

    conn: sqlite3.Connection
    _write: Callable[..., Any]
    _immediate: Callable[..., Any]

    # -- reads: the queue -----------------------------------------------------------------------------

    def counts_by_type(self) -> list[dict[str, Any]]:
        """Rows ``{type, status, n}`` for every (type, status) that has jobs: the ``job_counts``
        table the triggers keep (see the engine's schema), so the cost does not grow with the queue."""
        return self.conn.execute("SELECT type, status, n FROM job_counts WHERE n > 0 AND status <> 'delayed' "
                                 "ORDER BY type, status").fetchall()

    def scheduled_by_type(self, now: float) -> dict[str, int]:
        """``{type: n}`` of pending jobs not due yet (delayed, or waiting for a retry).

        The triggers count delayed jobs (pending, ``run_at`` later than creation); the ones among
        them already due are counted from the ``jobs_delayed`` index alone, up to ``now``: few,
        unless workers fall behind. Jobs far in the future are never read.
        """
        delayed = {r["type"]: r["n"] for r in self.conn.execute(
            "SELECT type, n FROM job_counts WHERE status = 'delayed' AND n > 0").fetchall()}
        if not delayed:
            return {}
        for r in self.conn.execute("SELECT type, count(*) AS n FROM jobs WHERE status = 'pending' "
                                   "AND run_at > created_at AND run_at <= ? GROUP BY type", (iso(now),)).fetchall():
            delayed[r["type"]] = delayed.get(r["type"], 0) - r["n"]
        return {t: n for t, n in delayed.items() if n > 0}

    def oldest_due(self, now: float) -> dict[str, Any] | None:
        """The due pending job that has waited longest: ``{id, type, run_at, created_at}`` or None.

        One probe of the claim index per distinct priority (they are few), so the cost does not grow
        with the queue depth.
        """
        stamp, best, below = iso(now), None, None
        while True:
            row = self.conn.execute(
                "SELECT priority FROM jobs WHERE status = 'pending' " + ("" if below is None else "AND priority < ? ")
                + "ORDER BY priority DESC LIMIT 1", () if below is None else (below,)).fetchone()
            if row is None:
                return best
            below = row["priority"]
            top = self.conn.execute(
                "SELECT id, type, run_at, created_at FROM jobs WHERE status = 'pending' AND priority = ? "
                "AND run_at <= ? ORDER BY run_at, created_at LIMIT 1", (below, stamp)).fetchone()
            if top is not None and (best is None or top["run_at"] < best["run_at"]):
                best = top

    def finished_per_minute(self, since: float) -> list[dict[str, Any]]:
        """Rows ``{minute, status, n}``: completed and failed jobs per minute (``YYYY-MM-DDTHH:MM``)
        that finished at or after ``since`` (index ``jobs_finished``)."""
        return self.conn.execute(
            f"SELECT substr(completed_at, 1, 16) AS minute, status, count(*) AS n FROM jobs "
            f"WHERE {_FINISHED} AND status IN ('completed', 'failed') AND completed_at >= ? "
            f"GROUP BY minute, status ORDER BY minute", (iso(since),)).fetchall()

    def recent_failures(self, limit: int = 10) -> list[dict[str, Any]]:
        """The last ``limit`` jobs that failed for good, newest first.

        Read through the ``jobs_dead`` index (newest ids first, a few times ``limit`` of them) and
        ordered by failure time here: no index orders jobs by ``completed_at``, and a sort of every
        failed job would cost a scan of the table each refresh of ``top``.
        """
        rows = self.conn.execute(
            "SELECT id, type, attempts, completed_at, error FROM jobs WHERE status IN ('failed', 'cancelled') "
            "AND status = 'failed' ORDER BY id DESC LIMIT ?", (limit * 20,)).fetchall()
        return sorted(rows, key=lambda r: r["completed_at"] or "", reverse=True)[:limit]

    def list_jobs(self, status: str | None = None, job_type: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Jobs filtered by ``status`` and ``job_type``, at most ``limit``. Order: newest first;
        pending jobs in claim order; running by start; finished ones by finish time, newest first.
        Each order follows an index, so a listing costs the same in a big database."""
        where, params = [], []
        if status is not None:
            where.append(f"{_FINISHED} AND status = ?" if status in TERMINAL else "status = ?")
            params.append(status)
        if job_type is not None:
            where.append("type = ?")
            params.append(job_type)
        sql = ("SELECT id, type, status, attempts, max_attempts, priority, run_at, started_at, completed_at, "
               "created_at, updated_at, key, owner_pid, error FROM jobs")
        if where:
            sql += " WHERE " + " AND ".join(where)
        order = _LIST_ORDER.get(status, "completed_at DESC, id DESC")
        return self.conn.execute(f"{sql} ORDER BY {order} LIMIT ?", (*params, limit)).fetchall()

    def find_ids(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids that start with ``prefix`` (a range over the primary key), at most ``limit``."""
        rows = self.conn.execute("SELECT id FROM jobs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                                  (prefix, prefix + "\U0010ffff", limit)).fetchall()
        return [r["id"] for r in rows]

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of the ids that exist."""
        out: dict[str, str] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for r in self.conn.execute(f"SELECT id, status FROM jobs WHERE id IN ({marks})", chunk).fetchall():
                out[r["id"]] = r["status"]
        return out

    def attempt_history(self, job_id: str) -> list[dict[str, Any]]:
        """The ended attempts of one job, oldest first (see ``job_attempts`` in shared.schema)."""
        return self.conn.execute(
            "SELECT seq, attempt, outcome, due_at, started_at, ended_at, owner, error FROM job_attempts "
            "WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()

    # -- reads: processes -----------------------------------------------------------------------------

    def worker_rows(self) -> list[dict[str, Any]]:
        """Registered workers with the job(s) each is running: one row per (worker, running job),
        ``job_id`` None for an idle worker. Ordered by slot, then the job's start."""
        return self.conn.execute(
            "SELECT p.id AS token, p.pid, p.host, p.slot, p.parent, p.started_at, p.heartbeat_at, "
            "j.id AS job_id, j.type AS job_type, j.attempts AS job_attempt, j.started_at AS job_started_at "
            "FROM processes p LEFT JOIN jobs j ON j.status = 'running' AND j.owner = p.id "
            "WHERE p.kind = 'worker' ORDER BY p.slot, p.pid, j.started_at, j.id").fetchall()

    def running_without_worker(self) -> list[dict[str, Any]]:
        """Running jobs whose owner has no process row (a worker run alone, or one that died)."""
        return self.conn.execute(
            "SELECT id, type, attempts, owner, owner_pid, started_at FROM jobs "
            "WHERE status = 'running' AND owner NOT IN (SELECT id FROM processes)").fetchall()

    # -- reads: attempt feed (metrics, top) -----------------------------------------------------------

    def last_attempt_seq(self) -> int:
        """The newest ``job_attempts.seq`` (0 when there is none)."""
        return self.conn.execute("SELECT coalesce(max(seq), 0) AS s FROM job_attempts").fetchone()["s"]

    def recent_attempts(self, since: float, limit: int) -> list[dict[str, Any]]:
        """At most the last ``limit`` ended attempts, of those that ended at or after ``since``,
        oldest first: ``{type, outcome, due_at, started_at, ended_at}`` (a rowid range, no scan)."""
        return self.conn.execute(
            "SELECT type, outcome, due_at, started_at, ended_at FROM job_attempts "
            "WHERE seq > (SELECT coalesce(max(seq), 0) FROM job_attempts) - ? AND ended_at >= ? ORDER BY seq",
            (limit, iso(since))).fetchall()

    def attempt_aggregates(self, after: int, upto: int,
                           bounds: Sequence[float]) -> list[dict[str, Any]]:
        """Per (type, outcome), over attempts with ``after < seq <= upto``: ``n``, ``wait_sum``,
        ``run_sum`` and cumulative bucket counts ``wait_le_<i>``/``run_le_<i>`` for each of
        ``bounds`` (seconds). wait: due -> start; run: start -> end; both clamped at 0.

        Computed in SQL so that following a busy queue costs no Python per attempt.
        """
        buckets = ", ".join(f"sum(w <= {float(b)!r}) AS wait_le_{i}, sum(r <= {float(b)!r}) AS run_le_{i}"
                            for i, b in enumerate(bounds))
        sql = (f"SELECT type, outcome, count(*) AS n, total(w) AS wait_sum, total(r) AS run_sum"
               f"{', ' + buckets if buckets else ''} FROM ("
               "SELECT type, outcome, "
               "max(coalesce((julianday(started_at) - julianday(due_at)) * 86400.0, 0), 0) AS w, "
               "max(coalesce((julianday(ended_at) - julianday(started_at)) * 86400.0, 0), 0) AS r "
               "FROM job_attempts WHERE seq > ? AND seq <= ?) GROUP BY type, outcome")
        return self.conn.execute(sql, (after, upto)).fetchall()

    # -- writes: jobs ---------------------------------------------------------------------------------

    def retry_jobs(self, ids: Sequence[str], now: float) -> list[str]:
        """Put failed or cancelled jobs back to pending, due now, with their attempts reset.
        One transaction. Returns the ids retried (others were missing or in another state)."""
        stamp = iso(now)
        sql = ("UPDATE jobs SET status = 'pending', attempts = 0, run_at = ?, completed_at = NULL, updated_at = ? "
               "WHERE id = ? AND status IN ('failed', 'cancelled')")

        def tx(c: sqlite3.Connection) -> list[str]:
            return [i for i in dict.fromkeys(ids) if c.execute(sql, (stamp, stamp, i)).rowcount == 1]
        return self._immediate(tx)

    def retry_failed(self, now: float, job_type: str | None = None) -> int:
        """Retry every failed job (of ``job_type``) in short paced transactions. Returns how many."""
        stamp = iso(now)
        type_cond = "" if job_type is None else "AND type = :type "
        sql = ("UPDATE jobs SET status = 'pending', attempts = 0, run_at = :now, completed_at = NULL, updated_at = :now "
               f"WHERE id IN ({_NEXT} {_FINISHED} AND status = 'failed' {type_cond}ORDER BY id LIMIT :batch) RETURNING id")
        return self._repeat(sql, {"now": stamp, "type": job_type})

    def cancel_jobs(self, ids: Sequence[str], now: float) -> list[str]:
        """Cancel pending jobs (a running job cannot be cancelled). One transaction; returns the
        ids cancelled."""
        stamp = iso(now)
        sql = "UPDATE jobs SET status = 'cancelled', completed_at = ?, updated_at = ? WHERE id = ? AND status = 'pending'"

        def tx(c: sqlite3.Connection) -> list[str]:
            return [i for i in dict.fromkeys(ids) if c.execute(sql, (stamp, stamp, i)).rowcount == 1]
        return self._immediate(tx)

    def purge_jobs(self, ids: Sequence[str]) -> list[str]:
        """Delete the named jobs that are finished (completed, failed or cancelled), with their
        attempt history (trigger). One transaction; returns the ids deleted."""
        sql = f"DELETE FROM jobs WHERE id = ? AND {_FINISHED}"

        def tx(c: sqlite3.Connection) -> list[str]:
            return [i for i in dict.fromkeys(ids) if c.execute(sql, (i,)).rowcount == 1]
        return self._immediate(tx)

    def purge(self, status: str, before: float, *, dry_run: bool = False) -> int:
        """Delete jobs of a terminal ``status`` that finished before ``before`` (a job without
        ``completed_at`` counts from ``updated_at``), ``BATCH`` per statement; their attempt history
        goes with them (trigger). With ``dry_run``, count only. Returns how many."""
        if status not in TERMINAL:
            raise ValueError(f"purge: status must be one of {', '.join(TERMINAL)}, got {status!r}")
        cond = f"{_FINISHED} AND status = :status AND coalesce(completed_at, updated_at) < :before"
        params = {"status": status, "before": iso(before)}
        if dry_run:
            return self.conn.execute(f"SELECT count(*) AS n FROM jobs WHERE {cond}", params).fetchone()["n"]
        return self._repeat(f"DELETE FROM jobs WHERE id IN ({_NEXT} {cond} ORDER BY id LIMIT :batch) RETURNING id",
                            params)

    def pacer(self, rows: int = BATCH) -> Pacer:
        """A pacer for a bulk write (see ``bulk``): short ``BEGIN IMMEDIATE`` chunks with pauses."""
        return Pacer(rows)

    def _repeat(self, sql: str, params: dict[str, Any], pacer: Pacer | None = None) -> int:
        """Run a batched ``... RETURNING id`` statement (``:after``, ``:batch``) in short paced
        transactions (``bulk``) until it touches fewer rows than asked; the total."""
        pacer = pacer or Pacer(BATCH)
        total, after = 0, ""
        while True:
            ids, rows = pacer.chunk(self, lambda c, rows: (
                [r["id"] for r in c.execute(sql, {**params, "after": after, "batch": rows}).fetchall()], rows))
            total += len(ids)
            if len(ids) < rows:
                return total
            after = max(ids)

    # -- control rows: scale requests and supervisor counters ----------------------------------------

    def request_scale(self, supervisor: str, workers: int) -> None:
        """Ask the supervisor with owner token ``supervisor`` to run ``workers`` workers."""
        self._write(lambda c: c.execute(
            "INSERT INTO control (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (_scale_key(supervisor), str(int(workers)))))

    def pending_scale(self, supervisor: str) -> int | None:
        """The scale request not yet taken by ``supervisor``, or None."""
        row = self.conn.execute("SELECT value FROM control WHERE name = ?", (_scale_key(supervisor),)).fetchone()
        return None if row is None else int(row["value"])

    def take_scale_request(self, supervisor: str) -> int | None:
        """Remove and return ``supervisor``'s scale request (a read, then a write only if one is there)."""
        wanted = self.pending_scale(supervisor)
        if wanted is None:
            return None
        self._write(lambda c: c.execute("DELETE FROM control WHERE name = ?", (_scale_key(supervisor),)))
        return wanted

    def save_counters(self, supervisor: str, counters: dict[str, int]) -> None:
        """Publish a supervisor's own counters (restarts, reaped jobs ...) for ``status``; drops the
        rows of supervisors that no longer have a process row. One transaction."""
        def tx(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO control (name, value) VALUES (?, ?) "
                      "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                      (_counters_key(supervisor), json.dumps(counters, sort_keys=True)))
            c.execute("DELETE FROM control WHERE name LIKE 'counters:%' "
                      "AND substr(name, 10) NOT IN (SELECT id FROM processes)")
        self._immediate(tx)

    def supervisor_counters(self) -> dict[str, dict[str, int]]:
        """``{supervisor token: counters}`` as published by :func:`save_counters`."""
        rows = self.conn.execute("SELECT name, value FROM control WHERE name LIKE 'counters:%'").fetchall()
        out = {}
        for r in rows:
            try:
                out[r["name"][len("counters:"):]] = json.loads(r["value"])
            except ValueError:
                continue
        return out


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
