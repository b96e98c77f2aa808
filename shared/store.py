"""The SQLite store: every SQL statement jobq runs lives here.

Contract (what a PostgreSQL store must also do):
- Every write is one statement or a ``BEGIN IMMEDIATE`` transaction; reads never turn into writes
  inside a deferred transaction. RETURNING cursors are always fetched fully.
- ``claim`` is one guarded ``UPDATE ... RETURNING``: a pending, due job becomes ``running`` with
  ``attempts + 1`` and the caller as owner, atomically.
- ``complete``/``retry``/``fail`` are guarded by id, ``status='running'``, the attempt number and
  the owner. They return False when zero rows matched: the lease was lost and the caller must drop
  its result.
- Times come from the caller (an injected clock), never from SQLite.
- A connection belongs to the process (and thread) that opened it: open after ``fork()``.
"""
from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from . import schema
from .clock import iso
from .job import Job
from .store_lifecycle import LifecycleStore

T = TypeVar("T")

OPEN_RETRIES = 40  # opening: ~1 s of jittered retries while another process sets the file up
BUSY_RETRIES = 6  # after the busy timeout itself; each retry sleeps a jittered, growing delay


class StoreError(RuntimeError):
    """The database cannot be used; the message names the file and the cause."""


@dataclass(slots=True)
class NewJob:
    """A validated job ready to insert (see :meth:`shared.api.JobQueue.enqueue`)."""
    id: str
    type: str
    payload: str
    priority: int
    run_at: float
    max_attempts: int | None
    key: str | None


@dataclass(frozen=True)
class Released:
    """What :meth:`SqliteStore.release_owner` did to one job."""
    id: str
    type: str
    status: str  # 'pending' (re-queued) or 'failed' (attempts used up)
    attempts: int


@dataclass(frozen=True)
class Finish:
    """An outcome to record for a running job (see :meth:`SqliteStore.finish_and_claim`).

    ``kind``: 'completed' (``text`` is the JSON result or None), 'retry' (``text`` is the error,
    due again at ``run_at``) or 'failed' (``text`` is the error).
    """
    kind: str
    job_id: str
    attempt: int
    text: str | None
    run_at: float = 0.0
    max_attempts: int | None = None


_JOB_COLUMNS = ("id, type, status, payload, result, error, attempts, max_attempts, priority, run_at, "
                "started_at, completed_at, created_at, updated_at, key, owner, owner_pid, heartbeat_at")

_INSERT_INTO = ("INSERT INTO jobs (id, type, status, payload, attempts, max_attempts, priority, run_at, "
                "created_at, updated_at, key) VALUES ")
_INSERT_ROW = "(?, ?, 'pending', ?, 0, ?, ?, ?, ?, ?, ?)"  # the parameters of _insert_params
_INSERT = _INSERT_INTO + _INSERT_ROW
# Many jobs per statement: executemany runs one statement per row, each with its own statement
# journal and bookkeeping; CHUNK rows per statement cut SQLite's work per row by about a third.
# 9 parameters a row keeps a chunk below every SQLite's limit on parameters (999 before 3.32).
CHUNK = 100
_INSERT_CHUNK = _INSERT_INTO + ", ".join([_INSERT_ROW] * CHUNK)

_CLAIM = f"""
UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid,
       started_at = :now, heartbeat_at = :now, updated_at = :now
WHERE rowid IN (SELECT rowid FROM jobs
                WHERE status = 'pending' AND run_at <= :now
                ORDER BY priority DESC, run_at, created_at LIMIT :limit)
  AND status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM control WHERE name = 'paused' AND value = '1')
RETURNING {_JOB_COLUMNS}
"""

_GUARD = "WHERE id = :id AND status = 'running' AND attempts = :attempt AND owner = :owner"
_RELEASE = "owner = NULL, owner_pid = NULL, heartbeat_at = NULL "

_FINISH_SQL = {
    "completed": "UPDATE jobs SET status = 'completed', result = :text, completed_at = :now, "
                 "updated_at = :now, " + _RELEASE + _GUARD,
    "retry": "UPDATE jobs SET status = 'pending', error = :text, run_at = :run_at, "
             "max_attempts = coalesce(max_attempts, :max), updated_at = :now, " + _RELEASE + _GUARD,
    "failed": "UPDATE jobs SET status = 'failed', error = :text, completed_at = :now, updated_at = :now, "
              "max_attempts = coalesce(max_attempts, :max), " + _RELEASE + _GUARD,
}

# All of a batch's completions in one guarded statement (the hot path: one statement per commit
# instead of one per job). RETURNING names the jobs whose guard matched; the others lost their
# lease. ?1 is the time, ?2 the owner, then (id, attempt, result) per job.
_COMPLETE_MANY = ("UPDATE jobs SET status = 'completed', result = f.column3, completed_at = ?1, "
                  "updated_at = ?1, " + _RELEASE + "FROM (VALUES {rows}) AS f "
                  "WHERE jobs.id = f.column1 AND jobs.status = 'running' AND jobs.attempts = f.column2 "
                  "AND jobs.owner = ?2 RETURNING jobs.id")


def _complete_many_sql(n: int) -> str:
    return _COMPLETE_MANY.format(rows=", ".join(f"(?{3 * i + 3}, ?{3 * i + 4}, ?{3 * i + 5})"
                                                for i in range(n)))


_UNCLAIM = ("UPDATE jobs SET status = 'pending', attempts = attempts - 1, run_at = ?, updated_at = ?, "
            + _RELEASE + "WHERE id = ? AND status = 'running' AND owner = ?")

_HAS_DUE = ("SELECT 1 FROM jobs WHERE status = 'pending' AND run_at <= ? "
            "ORDER BY priority DESC, run_at, created_at LIMIT 1")


def _fetch_rows(c: sqlite3.Connection, sql: str, params: Any) -> list[tuple]:
    """Run a statement (``_JOB_COLUMNS`` for a claim); plain tuples, fully fetched."""
    cur = c.cursor()
    cur.row_factory = None
    return cur.execute(sql, params).fetchall()


def _record_finishes(c: sqlite3.Connection, finishes: Sequence["Finish"], owner: str,
                     stamp: str) -> list[bool]:
    """Run the guarded updates of ``finishes`` (completions together); per finish, did it match."""
    completed = [f for f in finishes if f.kind == "completed"]
    matched: set[str] = set()
    if completed:
        params: list[Any] = [stamp, owner]
        for f in completed:
            params += (f.job_id, f.attempt, f.text)
        matched = {r[0] for r in _fetch_rows(c, _complete_many_sql(len(completed)), params)}
    return [f.job_id in matched if f.kind == "completed" else
            c.execute(_FINISH_SQL[f.kind], _finish_params(f, owner, stamp)).rowcount == 1
            for f in finishes]


def _finish_params(f: "Finish", owner: str, stamp: str) -> dict[str, Any]:
    return {"id": f.job_id, "attempt": f.attempt, "owner": owner, "text": f.text, "now": stamp,
            "run_at": iso(f.run_at) if f.kind == "retry" else None, "max": f.max_attempts}


def _row_factory(cursor: sqlite3.Cursor, row: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row)}


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class SqliteStore(LifecycleStore):
    """One SQLite connection to a jobq database, and the operations on it."""

    def __init__(self, path: str, *, synchronous: str = "normal", busy_timeout: float = 5.0,
                 migrate: bool = True) -> None:
        self.path = path
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._open(migrate)

    @classmethod
    def from_config(cls, config: Any, *, migrate: bool = True) -> "SqliteStore":
        return cls(config.database, synchronous=config.synchronous,
                   busy_timeout=config.busy_timeout, migrate=migrate)

    # -- connection ---------------------------------------------------------------------------

    def _open(self, migrate: bool) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise StoreError(f"database {self.path}: folder {folder} does not exist")
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout,
                                   check_same_thread=True)
        except sqlite3.Error as exc:
            raise StoreError(f"database {self.path}: cannot open: {exc}") from exc
        try:
            self._setup(conn, migrate)
            conn.row_factory = _row_factory
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"database {self.path}: {_explain(exc)}") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _setup(self, conn: sqlite3.Connection, migrate: bool) -> None:
        """WAL mode, pragmas and migrations. Switching a new file to WAL needs an exclusive lock
        and does not wait in SQLite's busy handler: two processes opening a brand-new database
        at once can get "database is locked" here, so retry with jitter (bounded)."""
        for attempt in range(OPEN_RETRIES + 1):
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode != "wal":
                    raise StoreError(f"database {self.path}: cannot switch to WAL mode (got {mode!r})")
                conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                if migrate:
                    schema.migrate(conn)
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == OPEN_RETRIES:
                    raise
                time.sleep(random.uniform(0.01, 0.05))

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"database {self.path}: store is closed")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def __enter__(self) -> "SqliteStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _no_busy_wait(self) -> Iterator[None]:
        """Statements inside return SQLITE_BUSY at once instead of waiting for a lock."""
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a write, retrying with jittered back-off if SQLite stays busy past its timeout."""
        for attempt in range(BUSY_RETRIES + 1):
            try:
                return fn(self.conn)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == BUSY_RETRIES:
                    raise
                time.sleep(random.uniform(0.5, 1.0) * min(0.01 * 2 ** attempt, 0.5))
        raise AssertionError("unreachable")

    def _immediate(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside ``BEGIN IMMEDIATE``...``COMMIT`` (with busy retries)."""
        def tx(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return out
        return self._write(tx)

    # -- producers ----------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: float,
                conn: sqlite3.Connection | None = None) -> list[str]:
        """Insert jobs; return their ids in order. A job whose ``key`` a kept job already has
        is not inserted: the existing job's id is returned instead.

        With ``conn`` the rows are written through the caller's connection and transaction
        (nothing is committed here). Otherwise one job is one statement and many jobs are one
        ``BEGIN IMMEDIATE`` transaction.
        """
        stamp = iso(now)
        if conn is not None:
            return [self._insert_one(conn, j, stamp, now) for j in jobs]
        if len(jobs) == 1 and jobs[0].key is None:
            j = jobs[0]
            self._write(lambda c: c.execute(_INSERT, _insert_params(j, stamp, now)))
            return [j.id]

        def many(c: sqlite3.Connection) -> list[str]:
            _insert_plain(c, [j for j in jobs if j.key is None], stamp, now)
            keyed = {j.id: self._insert_one(c, j, stamp, now) for j in jobs if j.key is not None}
            return [keyed.get(j.id, j.id) for j in jobs]
        return self._immediate(many)

    @staticmethod
    def _insert_one(c: sqlite3.Connection, j: NewJob, stamp: str, now: float) -> str:
        if j.key is None:
            c.execute(_INSERT, _insert_params(j, stamp, now))
            return j.id
        rows = c.execute(_INSERT + " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id",
                         _insert_params(j, stamp, now)).fetchall()
        if rows:
            return rows[0]["id"] if isinstance(rows[0], dict) else rows[0][0]
        found = c.execute("SELECT id FROM jobs WHERE key = ?", (j.key,)).fetchone()
        return found["id"] if isinstance(found, dict) else found[0]

    # -- reads --------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        row = self.conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return Job.from_row(row) if row else None

    def counts(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT status, count(*) AS n FROM jobs GROUP BY status").fetchall()
        return {r["status"]: r["n"] for r in rows}

    def running(self) -> list[Job]:
        rows = self.conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = 'running' ORDER BY started_at").fetchall()
        return [Job.from_row(r) for r in rows]

    # -- workers ------------------------------------------------------------------------------

    def claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job]:
        """Atomically take up to ``limit`` due pending jobs (highest priority, then first due,
        then first created). Returns nothing while the queue is paused."""
        stamp = iso(now)
        params = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}
        return [Job.from_tuple(r) for r in self._write(lambda c: _fetch_rows(c, _CLAIM, params))]

    def try_claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job] | None:
        """``claim``, but None at once if another connection holds the write lock, so that the
        caller waits its own way instead of in SQLite's busy handler, whose sleeps (1, 2, 5,
        10 ms...) are longer than most transactions here."""
        params = {"owner": owner, "pid": owner_pid, "now": iso(now), "limit": limit}
        try:
            with self._no_busy_wait():
                rows = _fetch_rows(self.conn, _CLAIM, params)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            return None
        return [Job.from_tuple(r) for r in rows]

    def finish(self, f: Finish, owner: str, now: float) -> bool:
        """Record one outcome with one guarded update (autocommit); False when zero rows matched
        (the lease was lost). The worker records its outcomes with :meth:`finish_and_claim`."""
        params = _finish_params(f, owner, iso(now))
        return self._write(lambda c: c.execute(_FINISH_SQL[f.kind], params).rowcount) == 1

    def finish_and_claim(self, finishes: Sequence[Finish], owner: str, owner_pid: int, now: float,
                         limit: int, limits: dict | None = None) -> tuple[list[bool], list[Job]]:
        """Record outcomes and claim up to ``limit`` more jobs in one ``BEGIN IMMEDIATE``
        transaction: one commit (one fsync under synchronous=full) for a whole batch.

        Returns, per finish, whether its guarded update matched (False: the lease was lost and
        that outcome was dropped), and the claimed jobs. Nothing is committed unless all is.
        With ``limits`` (shared.limits.type_limits: some type has a concurrency or rate limit)
        the claim is :meth:`claim_limited_in` instead of the fast statement.
        """
        stamp = iso(now)
        claim = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}

        def tx(c: sqlite3.Connection) -> tuple[list[bool], list[Any]]:
            done = _record_finishes(c, finishes, owner, stamp)
            if limits:
                return done, self.claim_limited_in(c, owner, owner_pid, now, limits, limit)
            return done, (_fetch_rows(c, _CLAIM, claim) if limit > 0 else [])
        if not finishes:
            if limit <= 0:
                return [], []
            if limits:
                return [], self.claim_limited(owner, owner_pid, now, limits, limit)
            return [], self.claim(owner, owner_pid, now, limit)
        done, got = self._immediate(tx)
        # Jobs are built after the commit: the write lock is held for SQL only.
        return done, [g if isinstance(g, Job) else Job.from_tuple(g) for g in got]

    def release_unstarted(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        """Give back jobs that ``owner`` claimed but never started: pending again, due now, and
        the attempt the claim counted is returned. Returns how many were released."""
        if not job_ids:
            return 0
        stamp = iso(now)

        def tx(c: sqlite3.Connection) -> int:
            return sum(c.execute(_UNCLAIM, (stamp, stamp, job_id, owner)).rowcount for job_id in job_ids)
        return self._immediate(tx)

    def next_due(self) -> str | None:
        """The earliest ``run_at`` of a pending job scheduled later than it was created (a delayed
        or retried job), or None. Served by the small ``jobs_delayed`` index."""
        row = self.conn.execute("SELECT min(run_at) AS t FROM jobs "
                                "WHERE status = 'pending' AND run_at > created_at").fetchone()
        return row["t"]

    def has_due(self, now: float) -> bool:
        """Is any pending job due? (a read: cheaper than a claim that finds nothing)"""
        return bool(self.conn.execute(_HAS_DUE, (iso(now),)).fetchall())

    def heartbeat(self, owner: str, now: float | Callable[[], float]) -> int:
        """Refresh the lease of every job ``owner`` runs, and its process row. Returns job count.

        ``now`` may be a clock function: it is then read once the write lock is held, so a beat
        that waited for the lock does not record a lease older than it is."""
        def tx(c: sqlite3.Connection) -> int:
            stamp = iso(now() if callable(now) else now)
            n = c.execute("UPDATE jobs SET heartbeat_at = ? WHERE status = 'running' AND owner = ?",
                          (stamp, owner)).rowcount
            c.execute("UPDATE processes SET heartbeat_at = ? WHERE id = ?", (stamp, owner))
            return n
        return self._immediate(tx)

    # -- supervisor -----------------------------------------------------------------------------

    def release_owner(self, owner: str, reason: str, now: float, *,
                      max_attempts_for: Callable[[Job], int], count_attempt: bool = True,
                      unstarted: Iterable[str] = ()) -> list[Released]:
        """Re-queue the running jobs of a dead or killed ``owner``, in one transaction.

        With ``count_attempt`` the interrupted run counts: a job whose attempts are used up is
        ``failed`` with ``reason``; others go back to pending, due now. Without it (a shutdown
        the supervisor itself ordered) the attempt is given back. Jobs in ``unstarted`` (claimed
        in a batch, never begun) always get their attempt back.
        """
        unstarted = set(unstarted)
        stamp = iso(now)

        def tx(c: sqlite3.Connection) -> list[Released]:
            rows = c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = 'running' AND owner = ?",
                             (owner,)).fetchall()
            out = []
            for row in rows:
                job = Job.from_row(row)
                limit = max_attempts_for(job)
                counts = count_attempt and job.id not in unstarted
                if counts and job.attempts >= limit:
                    status, attempts = "failed", job.attempts
                else:
                    status = "pending"
                    attempts = job.attempts if counts else max(job.attempts - 1, 0)
                c.execute("UPDATE jobs SET status = ?, attempts = ?, error = ?, run_at = CASE WHEN ? = 'pending' "
                          "THEN ? ELSE run_at END, completed_at = CASE WHEN ? = 'failed' THEN ? END, "
                          "max_attempts = coalesce(max_attempts, ?), updated_at = ?, owner = NULL, "
                          "owner_pid = NULL, heartbeat_at = NULL WHERE id = ? AND status = 'running' AND owner = ?",
                          (status, attempts, reason, status, stamp, status, stamp, limit, stamp, job.id, owner))
                out.append(Released(job.id, job.type, status, attempts))
            return out
        return self._immediate(tx)

    def owners(self) -> list[str]:
        """Distinct owners of running jobs."""
        return [r["owner"] for r in
                self.conn.execute("SELECT DISTINCT owner FROM jobs WHERE status = 'running'").fetchall()]

    def set_paused(self, paused: bool) -> None:
        self._write(lambda c: c.execute(
            "INSERT INTO control (name, value) VALUES ('paused', ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value", ("1" if paused else "0",)))

    def is_paused(self) -> bool:
        row = self.conn.execute("SELECT value FROM control WHERE name = 'paused'").fetchone()
        return bool(row) and row["value"] == "1"

    def register_process(self, token: str, kind: str, pid: int, host: str, now: float, *,
                         slot: int | None = None, parent: str | None = None) -> None:
        stamp = iso(now)
        self._write(lambda c: c.execute(
            "INSERT OR REPLACE INTO processes (id, kind, pid, host, slot, parent, started_at, heartbeat_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (token, kind, pid, host, slot, parent, stamp, stamp)))

    def touch_process(self, token: str, now: float) -> None:
        self._write(lambda c: c.execute("UPDATE processes SET heartbeat_at = ? WHERE id = ?", (iso(now), token)))

    def remove_process(self, token: str) -> None:
        self._write(lambda c: c.execute("DELETE FROM processes WHERE id = ?", (token,)))

    def processes(self, kind: str | None = None) -> list[dict[str, Any]]:
        if kind is None:
            return self.conn.execute("SELECT * FROM processes ORDER BY kind, slot").fetchall()
        return self.conn.execute("SELECT * FROM processes WHERE kind = ? ORDER BY slot", (kind,)).fetchall()

    # -- upkeep ---------------------------------------------------------------------------------

    def wal_bytes(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def checkpoint(self, mode: str = "TRUNCATE") -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(mode)``: (busy, wal pages, pages checkpointed).

        TRUNCATE empties the WAL file; PASSIVE copies its pages into the database and leaves
        the file as long as it is, so the next commits overwrite it from the start instead of
        growing it (at synchronous=full each growing commit pays a costlier fsync).

        Run without a busy timeout: a TRUNCATE checkpoint that waits (for a long reader, or a
        writer) holds off every new writer meanwhile, so with the connection's busy timeout one
        open report would stall all workers' claims, outcomes and heartbeats for that long, each
        time. Without it SQLite copies what it can and returns busy=1; the caller tries later.
        """
        if mode not in ("TRUNCATE", "PASSIVE"):
            raise ValueError(f"checkpoint mode must be TRUNCATE or PASSIVE, got {mode!r}")
        with self._no_busy_wait():
            row = self.conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        return tuple(row.values())  # type: ignore[return-value]


def _insert_plain(c: sqlite3.Connection, jobs: Sequence[NewJob], stamp: str, now: float) -> None:
    """Insert jobs without an idempotency key (the caller holds a transaction): CHUNK rows per
    statement, the rest one by one."""
    full = len(jobs) - len(jobs) % CHUNK
    if full:
        c.executemany(_INSERT_CHUNK, [[v for j in jobs[k:k + CHUNK] for v in _insert_params(j, stamp, now)]
                                      for k in range(0, full, CHUNK)])
    if full < len(jobs):
        c.executemany(_INSERT, [_insert_params(j, stamp, now) for j in jobs[full:]])


def _insert_params(j: NewJob, stamp: str, now: float) -> tuple:
    # ``now`` is what most jobs are due at: reuse its text instead of formatting it again
    run_at = stamp if j.run_at == now else iso(j.run_at)
    return (j.id, j.type, j.payload, j.max_attempts, j.priority, run_at, stamp, stamp, j.key)


def _explain(exc: sqlite3.Error) -> str:
    msg = str(exc)
    if "readonly" in msg:
        return f"{msg} (is the file or its folder read-only?)"
    if "not a database" in msg:
        return f"{msg} (the file exists but is not a SQLite database)"
    if "unable to open" in msg:
        return f"{msg} (missing folder or no permission?)"
    return msg


# An immutable encoder built once: json.dumps with non-default options builds one per call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_json(value: Any, what: str) -> str:
    """JSON-encode ``value``; a TypeError names ``what`` and the offending type."""
    if value is None:
        return "null"  # the commonest payload and result; the encoder's slow path otherwise
    try:
        return _ENCODE(value)
    except TypeError as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
