"""The hot statements' path: one libpq call each, outside psycopg's cursors (a mixin of
:class:`.connection.PgConnection`). Making a cursor, converting the query and adapting each
parameter cost more client CPU than the round trip of a one-row enqueue; here the statement is
a server-side prepared statement (direct mode) or an unnamed one (pooled mode, :mod:`.pooling`),
its parameters text, and notifications read meanwhile go to the connection's handlers as
psycopg's own calls send them.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

from .turns import channels


class LibpqCalls:
    """``_run_prepared`` and ``listen``; uses the connection's ``conn``, ``pooled``, ``channel``
    and the prepared-statement bookkeeping ``__init__`` sets up."""

    conn: Any
    pooled: bool
    channel: str
    _prepared_on: Any
    _prepared: set[bytes]
    _codec: str

    def _run_prepared(self, name: bytes, sql: str, params: list[str | None]) -> Any:
        """Run ``sql`` (``$n`` placeholders, parameters as text or None) as the server-side
        prepared statement ``name`` in one libpq call, outside psycopg's cursors: the per-call
        path of the hot single statements, where making a cursor, converting the query and
        adapting each parameter cost more client CPU than the round trip. It is
        prepared on first use on each connection (and again if the server lost it). Notifications
        read meanwhile go to the connection's handlers, as psycopg's own calls send them. Returns
        the PGresult; an error result raises psycopg's error for it."""
        conn = self.conn
        pg = conn.pgconn
        if self._prepared_on is not conn:
            self._prepared_on, self._prepared, self._codec = conn, set(), conn.info.encoding
        codec = self._codec
        args = [None if p is None else p.encode(codec) for p in params]
        if self.pooled:  # nothing prepared: the next statement may run on another session
            res = pg.exec_params(conn.qualify(sql).encode(codec), args)
            _dispatch_notifies(pg)
            return _check(conn, res)
        if name not in self._prepared:
            _check(conn, pg.prepare(name, sql.encode(codec)))
            self._prepared.add(name)
        res = pg.exec_prepared(name, args)
        if res.status == _FATAL and res.error_field(_SQLSTATE) == b"26000":  # lost (DISCARD ALL)
            _check(conn, pg.prepare(name, sql.encode(codec)))
            res = pg.exec_prepared(name, args)
        _dispatch_notifies(pg)
        return _check(conn, res)

    def listen(self, on: bool) -> None:
        """``LISTEN`` (``on``) on the schema's channels (its own and its lanes,
        :func:`.turns.channels`) or ``UNLISTEN``, one round trip: the idle lead's
        (:mod:`.wakeup`), sent at every change of lead, so with one libpq call as
        ``_run_prepared`` (no cursor). A connection made again does not listen until told."""
        conn = self.conn
        with conn.lock:  # psycopg's own: the heartbeat thread may be running a statement on it
            res = conn.pgconn.exec_(
                (listen_all(self.channel) if on else "UNLISTEN *").encode(conn.info.encoding)
            )
            _dispatch_notifies(conn.pgconn)
        _check(conn, res)


def listen_all(channel: str) -> str:
    """The statements that listen on every channel new jobs are notified on (``channel``: the
    schema's own), as one query string."""
    return "; ".join(f'LISTEN "{c}"' for c in channels(channel))


_FATAL = pq.ExecStatus.FATAL_ERROR
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


def _dispatch_notifies(pg: Any) -> None:
    """Hand the notifications a libpq call of our own read to the connection's handlers, as
    psycopg's own calls do."""
    while (n := pg.notifies()) is not None:
        if pg.notify_handler is not None:
            pg.notify_handler(n)


def _check(conn: psycopg.Connection, res: Any) -> Any:
    """``res``, or psycopg's error for it (an OperationalError when the connection is gone)."""
    if res.status in _OK:
        return res
    if conn.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(conn.pgconn.get_error_message() or "the connection was lost")
    raise pg_errors.error_from_result(res, encoding=conn.info.encoding)
