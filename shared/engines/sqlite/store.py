"""The SQLite engine's store: one connection to a jobq database file, and every protocol of
:mod:`shared.engines.contract` on it: the transitions written once in :mod:`shared.engines.sql`
(spelt by :mod:`.dialect`), and here the hot path whose SQL is this engine's own (enqueue, claim,
outcomes in :mod:`.finish`, heartbeats in :mod:`.leases`); the connection, busy retries and error
translation in :mod:`.connection`. The operators' reads run on it through :mod:`shared.ops`.

How this engine keeps the contract:
- Every write is one statement or a ``BEGIN IMMEDIATE`` transaction; reads never turn into writes
  inside a deferred transaction. RETURNING cursors are always fetched fully.
- ``claim`` is one guarded ``UPDATE ... RETURNING``: a pending, due job becomes ``running`` with
  ``attempts + 1`` and the caller as owner, atomically.
- ``complete``/``retry``/``fail`` are guarded by id, ``status='running'``, the attempt number and
  the owner. They return False when zero rows matched: the lease was lost and the caller must drop
  its result; an outcome that had committed already (re-sent after an unknown commit) is
  recognised by its attempt-history row and reported done, never applied twice.
- Times come from the caller (an injected clock), never from SQLite, as Unix seconds; they are
  stored as fixed-width ISO-8601 UTC text (``shared.runtime.clock.iso``), which sorts as time does.
- A connection belongs to the process (and thread) that opened it: open after ``fork()``.
"""

from __future__ import annotations

import sqlite3
from itertools import chain
from typing import Any, Callable, Sequence

from shared.runtime.clock import iso
from shared.engines.opsaccess import Gauge
from shared.model.job import Finish, Job, NewJob, encode_json  # noqa: F401 - encode_json: re-export
from ..sql.jobs import in_claim_order
from ..sql.limits import Now, read_now
from ..sql import GIVEN_BACK, JOB_COLUMNS as _JOB_COLUMNS, RELEASE as _RELEASE, TransitionsSql
from ..sql.queues import IN_QUEUE, QUEUE_FREE, first_claimed
from ..sql.uniquescope import free_keys
from . import tally
from .bulk import Pacer
from .connection import SqliteConnection, is_busy, translate_errors
from .dialect import DIALECT
from .finish import completions, fetch_rows as _fetch_rows, record_finishes
from .leases import SqliteLeases
from .transfer import SqliteTransfer

_INSERT_INTO = (
    "INSERT INTO jobs (id, type, status, payload, attempts, max_attempts, priority, run_at, "
    "created_at, updated_at, key, trace, queue, limit_key) VALUES "
)
_INSERT_ROW = (
    "(?, ?, 'pending', ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)"  # the parameters of _insert_params
)
_INSERT = _INSERT_INTO + _INSERT_ROW
# A batch's plain jobs: marked (tally = 1), the transaction adds their counts itself (``.tally``).
_COUNTED_INTO = _INSERT_INTO.replace(") VALUES ", ", tally) VALUES ")
_COUNTED_ROW = _INSERT_ROW.replace("?)", "?, 1)")
_INSERT_COUNTED = _COUNTED_INTO + _COUNTED_ROW
# Many jobs per statement: executemany runs one statement per row, each with its own statement
# journal and bookkeeping; CHUNK rows per statement cut SQLite's work per row by about a third.
# 12 parameters a row keeps a chunk below every SQLite's limit on parameters (999 before 3.32).
CHUNK = 83
_INSERT_CHUNK = _COUNTED_INTO + ", ".join([_COUNTED_ROW] * CHUNK)


def _claim_sql(which: str, mark: str = "") -> str:
    """The claim of the due pending jobs that ``which`` admits (see ``shared.engines.sql.queues``);
    ``mark``: ``tally.MARK`` when the caller's transaction counts the claimed rows itself. A run
    starts clean: an earlier attempt's error and progress are cleared (its history row keeps the
    error)."""
    return f"""
UPDATE jobs SET {mark}status = 'running', attempts = attempts + 1, owner = :owner, owner_pid = :pid,
       started_at = :now, heartbeat_at = :now, updated_at = :now, error = NULL, progress = NULL
WHERE rowid IN (SELECT rowid FROM jobs
                WHERE {which} AND status = 'pending' AND run_at <= :now
                ORDER BY priority DESC, run_at, created_at LIMIT :limit)
  AND status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM control WHERE name = 'paused' AND value = '1')
RETURNING {_JOB_COLUMNS}
"""


_CLAIM = _claim_sql(QUEUE_FREE)  # every queue's jobs (a paused queue's skipped)
_CLAIM_QUEUE = _claim_sql(IN_QUEUE.format(q=":queue"))  # one queue's, on its own index
_CLAIMS = {
    False: (_CLAIM, _CLAIM_QUEUE),  # counted by the triggers (a claim on its own)
    True: (_claim_sql(QUEUE_FREE, tally.MARK), _claim_sql(IN_QUEUE.format(q=":queue"), tally.MARK)),
}

_UNCLAIM = (
    "UPDATE jobs SET "
    + GIVEN_BACK
    + "attempts = attempts - 1, run_at = ?, updated_at = ?, "
    + _RELEASE
    + "WHERE id = ? AND status = 'running' AND owner = ?"
)


@translate_errors
class SqliteStore(TransitionsSql, SqliteConnection, SqliteLeases, SqliteTransfer):
    """One SQLite connection to a jobq database, and the operations on it (the transitions
    written once in :mod:`shared.engines.sql`; here the hot path, which is this engine's own)."""

    dialect = DIALECT  # the shared SQL (shared.engines.sql, shared.ops) runs through SqlBase
    gauges: tuple[Gauge, ...] = (
        Gauge("wal_bytes", "WAL", "Size of the SQLite write-ahead log.", "bytes"),
    )

    def stats(self) -> dict[str, Any]:
        """The write-ahead log's size (``wal_bytes``), which upkeep's checkpoints keep down."""
        return {"wal_bytes": self.wal_bytes()}

    def pacer(self, rows: int = 1000) -> Pacer:
        """A bulk write's chunks (retention, the operators' retries and purges): short
        ``BEGIN IMMEDIATE`` transactions with pauses between them (see ``bulk``)."""
        return Pacer(rows)

    def _paced(self, fn: Any) -> Any:
        """One chunk of a bulk write (``bulk.Pacer``): a transaction that does not stamp itself
        as a waiting writer (``.wants``: it would pause for itself)."""
        return self._immediate(fn, stamp=False)

    @classmethod
    def from_config(cls, config: Any, *, migrate: bool = True) -> "SqliteStore":
        """A store on ``config.database`` (a plain path; see ``shared.engines.open_store``)."""
        s = config.sqlite
        return cls(
            config.database, synchronous=s.synchronous, busy_timeout=s.busy_timeout, migrate=migrate
        )

    def wakeup(self) -> Any:
        """The idle wait of a worker on this file (the WAL watch and the idle lead)."""
        from .wakeup import SqliteWakeup

        return SqliteWakeup(self)

    # -- producers ----------------------------------------------------------------------------

    def enqueue(
        self, jobs: Sequence[NewJob], now: float, conn: sqlite3.Connection | None = None
    ) -> list[str]:
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
        # a key held outside the job's uniqueness scope is freed first (same transaction)
        free_keys(c.execute, "jobs", (j,), now)
        rows = c.execute(
            _INSERT + " ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id",
            _insert_params(j, stamp, now),
        ).fetchall()
        if rows:
            return rows[0]["id"] if isinstance(rows[0], dict) else rows[0][0]
        found = c.execute("SELECT id FROM jobs WHERE key = ?", (j.key,)).fetchone()
        return found["id"] if isinstance(found, dict) else found[0]

    # -- workers ------------------------------------------------------------------------------

    def claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job]:
        """Atomically take up to ``limit`` due pending jobs (highest priority, then first due,
        then first created). Returns nothing while the queue is paused."""
        stamp = iso(now)
        params = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}
        return in_claim_order(
            Job.from_values(r) for r in self._write(lambda c: self._claim_rows(c, params))
        )

    def _claim_rows(
        self, c: sqlite3.Connection, params: dict[str, Any], counted: bool = False
    ) -> list[Any]:
        """The claim statement on ``c``, for each queue served until one gives jobs. ``counted``
        (inside a transaction only): the claimed rows' counts are added here, per statement."""
        every, one = _CLAIMS[counted]
        rows = first_claimed(
            self.claim_order(),
            lambda q: _fetch_rows(
                c, every if q is None else one, params if q is None else {**params, "queue": q}
            ),
        )
        if counted:
            tally.add(c, tally.claimed(rows))
        return rows

    def try_claim(self, owner: str, owner_pid: int, now: float, limit: int = 1) -> list[Job] | None:
        """``claim``, but None at once if another connection holds the write lock, so that the
        caller waits its own way instead of in SQLite's busy handler, whose sleeps (1, 2, 5,
        10 ms...) are longer than most transactions here."""
        params = {"owner": owner, "pid": owner_pid, "now": iso(now), "limit": limit}
        self.wants.want()  # left standing while busy: a bulk write pauses for the retry
        try:
            with self._no_busy_wait():
                rows = self._claim_rows(self.conn, params)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                self.wants.done()
                raise
            return None
        self.wants.done()
        return in_claim_order(Job.from_values(r) for r in rows)

    def finish(self, f: Finish, owner: str, now: float) -> bool:
        """Record one outcome with one guarded update (autocommit); False when zero rows matched
        (the lease was lost), unless this very outcome had committed before (a re-send after an
        unknown commit: recognised by its history row, not applied again). The worker records
        its outcomes with :meth:`finish_and_claim`."""
        stamp = iso(now)
        return self._write(lambda c: record_finishes(c, [f], owner, stamp))[0]

    def finish_and_claim(
        self,
        finishes: Sequence[Finish],
        owner: str,
        owner_pid: int,
        now: Now,
        limit: int,
        limits: dict | None = None,
        types: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Job]]:
        """Record outcomes and claim up to ``limit`` more jobs in one ``BEGIN IMMEDIATE``
        transaction: one commit (one fsync under synchronous=full) for a whole batch.

        Returns, per finish, whether it is recorded (its guarded update matched, or it had
        committed before: see :meth:`finish`; False: the lease was lost and that outcome was
        dropped), and the claimed jobs. Nothing is committed unless all is.
        With ``limits`` (shared.model.limits.type_limits: some type has a concurrency or rate limit)
        the claim is :meth:`claim_limited_in` instead of the fast statement; so it is with
        ``types`` (only jobs of these types). ``now``: a time, or a clock's ``now``, which a
        limited claim reads once ``BEGIN IMMEDIATE`` holds the write lock (see ``claim_limited_in``).
        """
        limits = (limits or {}) if types is not None else (limits or None)  # None: the fast claim
        if limits is None:
            now = read_now(now)
        if not finishes:
            return [], self._claim_alone(owner, owner_pid, now, limit, limits, types)
        done, got = self._immediate(
            self._batch_tx(finishes, owner, owner_pid, now, limit, limits, types)
        )
        # Jobs are built after the commit: the write lock is held for SQL only.
        return done, in_claim_order(g if isinstance(g, Job) else Job.from_values(g) for g in got)

    def _claim_alone(
        self,
        owner: str,
        owner_pid: int,
        now: Now,
        limit: int,
        limits: dict | None,
        types: Sequence[str] | None,
    ) -> list[Job]:
        """:meth:`finish_and_claim` with no outcome to record: the claim alone, limited or not
        (``limits`` None: the fast claim, ``now`` a time)."""
        if limit <= 0:
            return []
        if limits is not None:
            return self.claim_limited(owner, owner_pid, now, limits, limit, types=types)
        return self.claim(owner, owner_pid, now, limit)  # type: ignore[arg-type]

    def _batch_tx(
        self,
        finishes: Sequence[Finish],
        owner: str,
        owner_pid: int,
        now: Now,
        limit: int,
        limits: dict | None,
        types: Sequence[str] | None,
    ) -> Callable[[sqlite3.Connection], tuple[list[bool], list[Any]]]:
        """The transaction of :meth:`finish_and_claim` with outcomes: record them, then claim.
        The fast claim's outcomes are prepared before the write lock is taken; a limited claim
        reads a clock's ``now`` once the lock is held."""
        stamp = iso(now) if limits is None else ""  # type: ignore[arg-type]
        claim = {"owner": owner, "pid": owner_pid, "now": stamp, "limit": limit}
        ready = (
            completions(finishes, owner, stamp, counted=True) if limits is None else None
        )  # lock-free

        def tx(c: sqlite3.Connection) -> tuple[list[bool], list[Any]]:
            if limits is not None:
                t = read_now(now)  # with the write lock held
                done = record_finishes(c, finishes, owner, iso(t), counted=True)
                return done, self.claim_limited_in(
                    c, owner, owner_pid, t, limits, limit, types=types
                )
            done = record_finishes(c, finishes, owner, stamp, counted=True, prepared=ready)
            return done, (self._claim_rows(c, claim, counted=True) if limit > 0 else [])

        return tx

    def release_unstarted(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        """Give back jobs that ``owner`` claimed but never started: pending again, due now, and
        the attempt the claim counted is returned. Returns how many were released."""
        if not job_ids:
            return 0
        stamp = iso(now)

        def tx(c: sqlite3.Connection) -> int:
            return sum(
                c.execute(_UNCLAIM, (stamp, stamp, job_id, owner)).rowcount for job_id in job_ids
            )

        return self._immediate(tx)


def _insert_plain(c: sqlite3.Connection, jobs: Sequence[NewJob], stamp: str, now: float) -> None:
    """Insert jobs without an idempotency key (the caller holds a transaction): CHUNK rows per
    statement, the rest one by one; their counts added once for all (``.tally``)."""
    params = [_insert_params(j, stamp, now) for j in jobs]
    full = len(params) - len(params) % CHUNK
    if full:
        c.executemany(
            _INSERT_CHUNK,
            [list(chain.from_iterable(params[k : k + CHUNK])) for k in range(0, full, CHUNK)],
        )
    if full < len(params):
        c.executemany(_INSERT_COUNTED, params[full:])
    tally.add(c, tally.inserted(params))


def _insert_params(j: NewJob, stamp: str, now: float) -> tuple:
    # ``now`` is what most jobs are due at: reuse its text instead of formatting it again
    run_at = stamp if j.run_at == now else iso(j.run_at)
    return (
        j.id,
        j.type,
        j.payload,
        j.max_attempts,
        j.priority,
        run_at,
        stamp,
        stamp,
        j.key,
        j.trace,
        j.queue,
        j.limit_key,
    )
