"""One psycopg 3 connection set up for jobq: the schema on the search path, migrated on opening
(:mod:`.migration`), the helpers the store's SQL uses and reconnection (driver errors become
jobq's own, of :mod:`shared.model.errors`, in :mod:`.errors`).

- The connection is in autocommit: a lone statement commits by itself (one round trip); a
  transaction is :meth:`PgConnection._tx` (``BEGIN`` .. ``COMMIT``, retried on a serialization
  failure or deadlock).
- A lost connection (server restart, network cut) is dropped: the call that saw it raises
  ``StoreUnavailable`` and the next call connects again. Callers back off; nothing here sleeps.
  A transaction whose ``COMMIT`` got no answer may or may not have committed: every write is
  guarded, so its retry matches nothing or does the work once.
- Every public method of a class decorated with :func:`.errors.translate_errors` raises
  jobq's errors naming the server (password hidden) and the cause, never a psycopg exception.
- The server limits every session (:func:`session_limits`): a host cut off in the middle of a
  transaction must not leave its session holding row locks until the server's TCP keepalive
  gives up (hours): ``idle_in_transaction_session_timeout`` is below the lease, and the
  server's keepalives and ``tcp_user_timeout`` drop a dead client within about the lease. The
  supervisor's session (``upkeep``) also has ``lock_timeout`` and ``statement_timeout``, so no
  upkeep call waits long on another session or on a slow server, and a client-side bound
  (:data:`CALL_MARGIN` past its ``statement_timeout``): a call the server does not answer by
  then (the server or the path to it hangs) has its socket shut down and fails at once, so the
  supervisor's loop gets back to reaping and signals.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import socket
import threading
from typing import Any, Callable, Iterator, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from shared.engines.location import redacted, scrub
from .. import forkaware
from ..sql.connection import ConnectionBase, set_up
from shared.model.errors import StoreUnavailable
from .errors import error_for
from .migration import migrate_schema
from .libpq import LibpqCalls
from .loaders import register_native
from .pooling import connect_pooled, local_limits, refuses_options

T = TypeVar("T")

TX_RETRIES = 8  # serialization failures and deadlocks: the transaction is simply run again
DRIVER_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
DEFAULT_LEASE = 30.0  # worker.lease_timeout's default, for stores opened without a config
CALL_MARGIN = 2.0  # seconds past an upkeep session's statement_timeout before a call is cut


def session_limits(lease_timeout: float, upkeep: bool = False) -> dict[str, str]:
    """The server-side limits of a jobq session, derived from the lease (seconds).

    - ``idle_in_transaction_session_timeout``: half the lease (at least 1 s). jobq's
      transactions only run SQL, back to back; a session idle inside one belongs to a client
      that is gone or cut off, and the server ends it (its locks released, its work rolled
      back) before the lease expires, so the jobs it held can be re-run elsewhere.
    - ``tcp_keepalives_idle/interval/count`` and ``tcp_user_timeout``: the server drops a
      silent client within about half the lease (at least 4 s), idle or with an answer the
      client never acknowledges (stock: over two hours).
    - ``upkeep`` (the supervisor): ``lock_timeout`` (a quarter of the lease, 0.5 to 5 s) and
      ``statement_timeout`` (half the lease, at least 5 s): an upkeep call never waits long on
      another session's locks nor on a slow server; it fails (``StoreBusy``) and is tried
      again next round.
    A URL's own ``options`` (``?options=-c%20lock_timeout%3D...``) win over these.
    """
    half_ms = max(1000, int(lease_timeout * 500))
    limits = {
        "idle_in_transaction_session_timeout": str(half_ms),
        "tcp_keepalives_idle": str(max(1, half_ms // 1000 - 3)),
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": str(half_ms),
    }
    if upkeep:
        limits["lock_timeout"] = str(int(min(5000, max(500, lease_timeout * 250))))
        limits["statement_timeout"] = str(max(5000, half_ms))
    return limits


def done_channel(schema: str) -> str:
    """The channel of ``schema``'s ended jobs (shared.engines.postgres.donewatch): short whatever
    the schema's name (a channel is an identifier of at most 63 bytes)."""
    return "jobq_done_" + hashlib.sha256(schema.encode()).hexdigest()[:20]


# Who waits on the done channel: each watch (.donewatch) holds shared session locks on
# (WAITERS, the channel's key + g) for every g < SPREAD from its LISTEN on. A statement that
# ends jobs notifies only if it cannot take one of them (its backend's: pid % SPREAD)
# exclusively for its transaction (a waiter holds it, or another such statement of a backend
# with the same g does): every NOTIFY costs one transaction on every listening backend of the
# database, whatever the channel (PostgreSQL signals them all; each reads the queue), and a
# notifying transaction's commit waits for the others' (PostgreSQL serialises them under one
# lock): a completion nobody waits for cost one per host's relay, and a burst's completions
# queued for that lock. Spread over SPREAD keys, concurrent completions seldom meet (each
# waiting process holds SPREAD entries of the server's lock table: 64 per connection by
# default, shared). A waiter that locks after the try waits for the statement's commit, and
# then reads the job.
WAITERS = 1785688676  # the first key of the waiters' locks ("jobd"), apart from the relays' slots
SPREAD = 32
_KEY = "(hashtext({channel}) & ~{last}) | {g}"
WAIT_LOCK = (
    f"SELECT count(pg_advisory_lock_shared({WAITERS}, "
    + _KEY.format(channel="%s", last=SPREAD - 1, g="g")
    + f")) FROM generate_series(0, {SPREAD - 1}) g"
)


def notify_done(channel: str = "%(done)s") -> str:
    """A FROM item (one row) that notifies ``channel`` (SQL: a parameter, by default) if
    anyone waits on it (see :data:`WAITERS`)."""
    key = _KEY.format(channel=channel, last=SPREAD - 1, g=f"(pg_backend_pid() & {SPREAD - 1})")
    return (
        f"(SELECT CASE WHEN pg_try_advisory_xact_lock({WAITERS}, {key}) "
        f"THEN NULL ELSE pg_notify({channel}, '') END) done_n"
    )


def control_channel(schema: str) -> str:
    """The channel of ``schema``'s controls (a cancel of a running job, a ``jobq scale``
    request): only supervisors listen on it (``.relay``), so a control wakes no idle worker and
    a new job no supervisor. Short whatever the schema's name, as :func:`done_channel`."""
    return "jobq_ctl_" + hashlib.sha256(schema.encode()).hexdigest()[:20]


class PgConnection(LibpqCalls, ConnectionBase):
    """The connection of a PostgreSQL store: opening, reconnecting, closing, write helpers."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = "jobq",
        connect_timeout: float = 5.0,
        migrate: bool = True,
        lease_timeout: float = DEFAULT_LEASE,
        upkeep: bool = False,
        mode: str = "auto",
        listen: str = "",
    ) -> None:
        self.url = url
        self.location = redacted(url)
        self._bound_calls(session_limits(lease_timeout, upkeep), upkeep)
        self._name_schema(schema)
        # through a transaction pooler (.pooling): set per transaction, not per session
        self.mode, self.pooled = mode, mode == "pooled"
        self.listen_url = listen  # pooled mode: the supervisor relays notifications (.relay)
        self.local_limits = local_limits(self.limits)
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection | None = None
        self._closed = False
        self._on_connect: list[Callable[[psycopg.Connection], None]] = []
        # _run_prepared's statements, the connection they are prepared on and its text codec
        self._prepared_on: psycopg.Connection | None = None
        self._prepared: set[bytes] = set()
        self._codec = "utf-8"
        # Held by every public call (translate_errors): the worker's threads share this one
        # connection (see for_thread), and a transaction must not interleave with another call.
        self.lock = threading.RLock()
        self._conn = set_up(
            self._connect(),
            lambda c: migrate_schema(c, schema) if migrate else None,
            (psycopg.Error,),
            lambda exc: error_for(self.location, exc),
        )
        forkaware.track(self)

    def _bound_calls(self, limits: dict[str, str], upkeep: bool) -> None:
        """The session's server-side ``limits`` (:func:`session_limits`), and for ``upkeep`` the
        client-side bound of a call (``call_limit``, see :meth:`_bounded`)."""
        self.limits = limits
        # upkeep: a call not answered by then is cut on the client side (see _bounded)
        self.call_limit = (
            int(self.limits["statement_timeout"]) / 1000 + CALL_MARGIN if upkeep else None
        )
        self._watch: threading.Timer | None = None
        self.severed = False  # the last call was cut by the bound

    def _name_schema(self, schema: str) -> None:
        """The names the store's SQL uses for ``schema``: its channels, its qualifier and its
        jobs table."""
        self.schema = schema
        self.channel = f"jobq_{schema}"
        self.done_channel = done_channel(schema)
        self.control_channel = control_channel(schema)
        self.qualifier = f'"{schema}".'  # an application's connection has its own search_path
        self.table = f"{self.qualifier}jobs"

    def _connect(self) -> psycopg.Connection:
        try:
            conn = self._open()
        except psycopg.ProgrammingError as exc:  # the URL itself did not parse
            raise StoreUnavailable(
                f"database {self.location}: {scrub(' '.join(str(exc).split()), self.url)} (is the URL "
                "well formed? postgresql://user[:password]@host[:port]/database)",
                database=self.location,
                cause=exc,
            ) from exc
        except psycopg.Error as exc:  # libpq may quote the URL (or a piece of it) in its message
            raise error_for(self.location, exc, url=self.url) from exc
        register_native(conn.adapters)  # the native types read as jobq's text (.loaders)
        for hook in self._on_connect:
            hook(conn)
        return conn

    def _open(self) -> psycopg.Connection:
        """A new connection: direct (the schema and the limits as startup options) or pooled
        (:mod:`.pooling`); ``auto`` turns pooled for good when the server refuses the options."""
        given = conninfo_to_dict(self.url)
        # what pg_stat_activity shows: the URL's, libpq's PGAPPNAME, or jobq
        name = given.get("application_name") or os.environ.get("PGAPPNAME") or "jobq"
        # TCP keepalives and tcp_user_timeout: a connection to a host cut off by the network
        # fails within about connect_timeout instead of hanging for the kernel's minutes.
        wait = max(1, math.ceil(self.connect_timeout))
        common: dict[str, Any] = dict(
            autocommit=True,
            row_factory=dict_row,
            connect_timeout=wait,
            keepalives=1,
            keepalives_idle=wait,
            keepalives_interval=1,
            keepalives_count=3,
            tcp_user_timeout=wait * 1000,
            application_name=name,
        )
        if not self.pooled:
            # ours first: a setting the URL's own options give wins (the server keeps the last)
            options = " ".join(
                [*(f"-c {k}={v}" for k, v in self.limits.items()), given.get("options") or ""]
            )
            try:
                return psycopg.connect(
                    self.url, options=f"{options} -c search_path={self.schema}".strip(), **common
                )
            except psycopg.OperationalError as exc:
                if self.mode != "auto" or not refuses_options(exc):
                    raise
                self.pooled = True
        return connect_pooled(self.url, self.schema, **common)

    @property
    def conn(self) -> psycopg.Connection:
        """The live connection, connecting again if the last one was lost."""
        if self._closed:
            raise StoreUnavailable(
                f"database {self.location}: store is closed", database=self.location
            )
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self._connect()
        return self._conn

    def on_connect(self, hook: Callable[[psycopg.Connection], None]) -> None:
        """Run ``hook(conn)`` on the current connection now and on every new one (LISTEN)."""
        self._on_connect.append(hook)
        if self._conn is not None and not self._conn.closed:
            hook(self._conn)

    def _after_fork(self) -> None:
        """In a child after fork: let go of the parent's connection without ending its session
        (the terminate message that closing sends goes to a dead socket instead of the shared
        one); the next call connects again. The lock may have been held by a thread that did
        not cross the fork: a new one."""
        self.lock = threading.RLock()
        conn, self._conn = self._conn, None
        if conn is None or conn.closed:
            return
        try:
            forkaware.disown_socket(conn.pgconn.socket)
        except Exception:  # noqa: BLE001 - never closed here, then: that would end the parent's session
            forkaware.keep_forever(conn)
            return
        conn.close()

    def for_thread(self) -> Any:
        """This store, for another thread of this process: one connection per worker process
        (its calls take turns on ``lock``); closing the borrowed store leaves this one open."""
        return Borrowed(self)

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close cleanly
                pass
            self._conn = None

    def _bounded(self) -> Any:
        """Around a public call (the outermost one): with ``call_limit``, a timer that cuts the
        call if the server has not answered by then."""
        if self.call_limit is None or self._watch is not None:
            return contextlib.nullcontext()
        return self._watched()

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        timer = threading.Timer(self.call_limit, self._sever, args=(None,))
        timer.args = (timer,)
        timer.daemon = True
        self._watch, self.severed = timer, False
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            timer.join()  # gone before the call returns: no thread may cross the next fork()
            self._watch = None

    def _sever(self, timer: threading.Timer) -> None:
        """(The timer's thread.) The call outlived ``call_limit``: shut its socket down, so the
        blocked read returns now (the call raises; the next one connects again)."""
        conn = self._conn
        if conn is None or self._watch is not timer:
            return
        try:
            fd = os.dup(conn.pgconn.socket)
        except (OSError, psycopg.Error):
            return
        self.severed = True
        with socket.socket(fileno=fd) as sock:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _write(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run one autocommit statement (``fn(conn)``)."""
        return fn(self.conn)

    def _tx(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn(conn)`` in one transaction; run it again after a serialization failure or
        deadlock (``fn`` must be safe to repeat: it is, when it only runs SQL)."""
        for attempt in range(TX_RETRIES + 1):
            conn = self.conn
            try:
                with conn.transaction():
                    if self.pooled and self.local_limits:
                        conn.execute(self.local_limits)
                    return fn(conn)
            except _RETRYABLE:
                if attempt == TX_RETRIES:
                    raise
        raise AssertionError("unreachable")

    def fileno(self) -> int:
        """The socket of the connection (notifications make it readable)."""
        return self.conn.fileno()


class Borrowed(ConnectionBase):
    """A store lent to another thread: every attribute is the owner's, but ``close`` only
    stops this borrower from using it."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        if self._closed:
            raise StoreUnavailable(
                f"database {self._owner.location}: store is closed", database=self._owner.location
            )
        return getattr(self._owner, name)

    def _drop(self) -> None:
        pass  # the connection is the owner's

    @property
    def closed(self) -> bool:
        return self._closed or self._owner.closed
