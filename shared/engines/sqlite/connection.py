"""One SQLite connection set up for jobq: WAL mode, pragmas, migrations, busy retries, and the
translation of ``sqlite3`` errors into jobq's own (:mod:`shared.model.errors`).

Every public method of a store class decorated with :func:`translate_errors` raises
``StoreBusy`` (locked past the busy timeout and every retry), ``StoreQueryError`` (a statement
that failed on a working connection: :func:`call_error`), ``StoreRefused`` (no wait heals
it: see :func:`error_for`) or ``StoreUnavailable`` (anything else SQLite refuses) naming the
file and the cause, with the ``sqlite3`` error as ``__cause__``.
"""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from .. import forkaware
from ..sql.connection import ConnectionBase, set_up
from ..guard import guard_public_methods
from shared.model.errors import (
    StoreBusy,
    StoreError,
    StoreQueryError,
    StoreRefused,
    StoreUnavailable,
)
from . import schema
from .wants import Wants

T = TypeVar("T")

OPEN_RETRIES = 40  # opening: ~1 s of jittered retries while another process sets the file up
BUSY_RETRIES = 6  # after the busy timeout itself; each retry sleeps a jittered, growing delay
EAGER_WRITES = 3  # a new connection's first writes poll for the write lock (see _eager)
EAGER_POLL = (0.0001, 0.001)  # seconds: the first and the longest sleep between those polls


def _row_factory(cursor: sqlite3.Cursor, row: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row)}


def is_busy(exc: BaseException) -> bool:
    """Is this SQLite's "database is locked/busy"?"""
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def upkeep_busy(busy_timeout: float, lease_timeout: float) -> float:
    """How long the supervisor's store waits for the write lock (seconds), once, with no retry:
    a quarter of the lease, 0.5 to 5 s, and never more than ``busy_timeout``; PostgreSQL's
    upkeep ``lock_timeout``. The supervisor's loop must never wait long on another session's
    lock (a program holding the write lock, a stuck transaction): a write that cannot get it
    fails (``StoreBusy``) and the round is tried again, while reaping, respawns and signals go
    on. A worker keeps the full ``busy_timeout`` and its retries."""
    return min(busy_timeout, max(0.5, min(5.0, lease_timeout / 4)))


class SqliteConnection(ConnectionBase):
    """The connection of a store: opening, closing, and the write helpers its SQL uses."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "normal",
        busy_timeout: float = 5.0,
        migrate: bool = True,
        busy_retries: int = BUSY_RETRIES,
    ) -> None:
        self.path = path
        self.location = path
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.busy_retries = busy_retries  # 0 for the supervisor's store: see upkeep_busy
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self.eager = EAGER_WRITES  # writes left that poll for the lock (see _eager)
        self.wants = Wants(None)  # this connection's stamps for bulk writes (see .wants, .bulk)
        self._open(migrate)
        forkaware.track(self)

    def _open(self, migrate: bool) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise StoreRefused(
                f"database {self.path}: folder {folder} does not exist", database=self.path
            )
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=self.busy_timeout, check_same_thread=True
            )
        except sqlite3.Error as exc:
            raise StoreRefused(
                f"database {self.path}: cannot open: {exc}", database=self.path, cause=exc
            ) from exc
        self._conn = set_up(
            conn,
            lambda c: (self._setup(c, migrate), setattr(c, "row_factory", _row_factory)),
            (sqlite3.Error,),
            lambda exc: error_for(self.path, exc),
        )  # type: ignore[arg-type]
        self.wants = Wants(None if self.path in ("", ":memory:") else self.path)

    def _setup(self, conn: sqlite3.Connection, migrate: bool) -> None:
        """WAL mode, pragmas and migrations. Switching a new file to WAL needs an exclusive lock
        and does not wait in SQLite's busy handler: two processes opening a brand-new database
        at once can get "database is locked" here, so retry with jitter (bounded).

        A schema already current is only read, never migrated: opening a store then writes
        nothing and never waits for the write lock, which another connection of the same thread
        may hold (an application's open transaction, into which a job is about to be enqueued
        through ``conn=``: a task's default queue opens at a thread's first enqueue)."""
        for attempt in range(OPEN_RETRIES + 1):
            waited = False
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode != "wal":
                    raise StoreRefused(
                        f"database {self.path}: cannot switch to WAL mode (got {mode!r})",
                        database=self.path,
                    )
                conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                # A job cancelled because its parent failed ends its own dependants through the
                # same trigger (workflows: schema.FLOWS).
                conn.execute("PRAGMA recursive_triggers = ON")
                if migrate and conn.execute("PRAGMA user_version").fetchone()[0] != schema.VERSION:
                    waited = True  # its write lock is waited for in the busy handler
                    schema.migrate(conn)  # (reads the version again under the write lock)
                return
            except sqlite3.OperationalError as exc:
                # the supervisor's store waits for the lock once (upkeep_busy), never 41 times
                if (
                    not is_busy(exc)
                    or attempt == OPEN_RETRIES
                    or (waited and not self.busy_retries)
                ):
                    raise
                time.sleep(random.uniform(0.01, 0.05))

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection (opened again in a child process after a fork, see ``_after_fork``)."""
        if self._conn is None:
            if self._closed:
                raise StoreUnavailable(f"database {self.path}: store is closed", database=self.path)
            self._open(migrate=False)
        return self._conn  # type: ignore[return-value]

    def _after_fork(self) -> None:
        """In a child after fork: never use the parent's handle, nor close it (SQLite forbids
        the one; the other may checkpoint and remove the WAL file under the parent); the next
        call opens the child's own."""
        if self._conn is not None:
            forkaware.keep_forever(self._conn)
            self._conn = None
        self.wants.close()  # the parent's slot: the child's connection maps its own

    def for_thread(self) -> Any:
        """A store for another thread of this process: a connection of its own on the same
        file (SQLite connections belong to one thread); the caller closes it."""
        return type(self)(
            self.path,
            synchronous=self.synchronous,
            busy_timeout=self.busy_timeout,
            migrate=False,
            busy_retries=self.busy_retries,
        )

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.ProgrammingError:
                # closed from another thread than its own (a JobQueue closed where it was not
                # made: shared.producer.threadstores): let go of it; SQLite closes it when the
                # object is freed, which happens here (nothing else holds it)
                pass
            self._conn = None
        self.wants.close()

    @contextmanager
    def _no_busy_wait(self) -> Iterator[None]:
        """Statements inside return SQLITE_BUSY at once instead of waiting for a lock."""
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")

    def _write(self, fn: Callable[[sqlite3.Connection], T], stamp: bool = True) -> T:
        """Run a write, retrying with jittered back-off if SQLite stays busy past its timeout;
        stamped for bulk writes (``.wants``) unless it is one (``stamp`` False)."""
        conn = self.conn
        if stamp:
            self.wants.want()
        try:
            if self.eager > 0:
                self.eager -= 1
                done, out = self._eager(conn, fn)
                if done:
                    return out
            for attempt in range(self.busy_retries + 1):
                try:
                    return fn(conn)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc) or attempt == self.busy_retries:
                        raise
                    time.sleep(random.uniform(0.5, 1.0) * min(0.01 * 2**attempt, 0.5))
            raise AssertionError("unreachable")
        finally:
            if stamp:
                self.wants.done()

    def _eager(
        self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]
    ) -> tuple[bool, T | None]:
        """One of a new connection's first writes (a worker's registration and first claims):
        ``fn`` tried without SQLite's busy handler, sleeping EAGER_POLL between tries, for up to
        the busy timeout; (True, its result), or (False, None) if the lock stayed busy that long.

        The handler sleeps 1, 2, 5, 10, 15, 20, 25 ... up to 100 ms between its tries, and
        workers that commit back to back take the lock again meanwhile: a worker started beside
        busy ones waited 0.1-0.5 s for its first claim, the eighth worker's start.
        Only the first writes poll: polling every write would cost the busy workers CPU (and
        two statements per write to switch the handler off and on)."""
        deadline = time.monotonic() + self.busy_timeout
        delay = EAGER_POLL[0]
        with self._no_busy_wait():
            while True:
                try:
                    return True, fn(conn)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc):
                        raise
                if time.monotonic() >= deadline:
                    return False, None
                time.sleep(delay)
                delay = min(2 * delay, EAGER_POLL[1])

    def _immediate(self, fn: Callable[[sqlite3.Connection], T], stamp: bool = True) -> T:
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

        return self._write(tx, stamp)

    _tx = _immediate  # the shared SQL's name for a write transaction

    # -- upkeep: the write-ahead log ------------------------------------------------------------

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


def error_for(path: str, exc: sqlite3.Error) -> StoreError:
    """jobq's error for a ``sqlite3`` error on ``path`` (StoreRefused: a read-only file, a
    folder it cannot open or write in, a file that is not a sound database: no wait heals those)."""
    lasting = any(
        w in str(exc) for w in ("readonly", "not a database", "malformed", "unable to open")
    )
    kind = StoreBusy if is_busy(exc) else StoreRefused if lasting else StoreUnavailable
    return kind(f"database {path}: {_explain(exc)}", database=path, cause=exc)


# SQLite's primary result codes of a statement that fails on a working connection: generic
# SQL error (a table not found, a syntax error), constraint, datatype mismatch, string or blob
# too big, bind index out of range, misuse. Waiting does not heal them (see call_error).
_STATEMENT_CODES = frozenset({1, 19, 20, 18, 25, 21})


def call_error(path: str, exc: sqlite3.Error) -> StoreError:
    """jobq's error for a ``sqlite3`` error of a store call: ``StoreQueryError`` for a
    statement that failed on a working connection (:data:`_STATEMENT_CODES`, or an error
    of the call itself: a parameter the module cannot bind, a closed connection), else
    :func:`error_for`'s (locked, I/O, full, read-only, corrupt: the database)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if (
        is_busy(exc)
        or (code is None and isinstance(exc, sqlite3.OperationalError))
        or (code is not None and code & 0xFF not in _STATEMENT_CODES)
    ):
        return error_for(path, exc)
    return StoreQueryError(f"database {path}: {_explain(exc)}", database=path, cause=exc)


def translate_errors(cls: type) -> type:
    """Class decorator: every public method of ``cls`` (and its bases) raises jobq's errors
    instead of ``sqlite3`` errors. Costs one call frame per store call."""
    return guard_public_methods(cls, _guarded)


def _guarded(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise call_error(self.path, exc) from exc

    return method


def _explain(exc: sqlite3.Error) -> str:
    msg = str(exc)
    if "readonly" in msg:
        return f"{msg} (is the file or its folder read-only?)"
    if "not a database" in msg:
        return f"{msg} (the file exists but is not a SQLite database)"
    if "unable to open" in msg:
        return f"{msg} (missing folder or no permission?)"
    return msg


DRIVER_ERRORS = (sqlite3.Error,)
