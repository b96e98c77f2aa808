"""A watch of ended jobs on PostgreSQL, for waiters (``shared.engines.commit_watch``).

Every statement that ends jobs (completed, failed, cancelled) sends one notification on the
schema's *done* channel (:func:`done_channel`) with its transaction, if a watch waits
(``connection.WAITERS``: a shared lock this watch takes after its LISTEN); this watch LISTENs
on a connection of its own. ``fileno()`` is that connection's socket, ``drain()`` reads what
arrived and says whether anything did. A lost connection counts as a wake (the waiter re-reads, which
meets the error or the truth) and the next ``fileno()`` connects and LISTENs again.
"""

from __future__ import annotations

from typing import Any

from shared.model.errors import StoreError
from .connection import WAIT_LOCK, PgConnection, done_channel


class PgDoneWatch:
    """LISTEN on the done channel of ``schema`` (see the module's docstring), or on ``channel``,
    or on each of ``channels`` (the supervisor's relay of :mod:`.relay`: the schema's job and
    control channels). ``mode``: the
    connection's (:mod:`.pooling`); a watch must reach the server directly to hear anything."""

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        connect_timeout: float,
        channel: str | None = None,
        mode: str = "auto",
        channels: tuple[str, ...] = (),
    ) -> None:
        self.channels = channels or (channel or done_channel(schema),)
        self.done = done_channel(schema)
        self.conn = PgConnection(
            url, schema=schema, connect_timeout=connect_timeout, migrate=False, mode=mode
        )
        self.conn.on_connect(self._listen)

    def _listen(self, conn: Any) -> None:
        """LISTEN; on the done channel, then say that someone waits (``connection.WAITERS``:
        ended jobs are notified only then; held until the session ends, never through a
        pooler, which hears nothing anyway)."""
        for name in self.channels:
            conn.execute(f'LISTEN "{name}"')
        if self.done in self.channels and not self.conn.pooled:
            conn.execute(WAIT_LOCK, (self.done,))

    @property
    def pooled(self) -> bool:
        """The connection went through a transaction pooler: it hears nothing."""
        return self.conn.pooled

    def fileno(self) -> int | None:
        """The socket to select on; None while the server cannot be reached."""
        try:
            with self.conn.lock:
                return self.conn.conn.pgconn.socket
        except StoreError:
            return None

    def drain(self) -> bool:
        """Read what the socket holds; True if a notification (or an error) came."""
        return bool(self.drain_channels())

    def drain_channels(self) -> set[str]:
        """Read what the socket holds; the channels notified (every one of :attr:`channels`
        after an error: a lost connection may have missed anything)."""
        try:
            with self.conn.lock:
                pg = self.conn.conn.pgconn
                pg.consume_input()
                got = set()
                while (n := pg.notifies()) is not None:
                    got.add(n.relname.decode())
                return got
        except Exception:  # noqa: BLE001 - psycopg's or ours: a wake; the next read reports it
            self.conn._drop()
            return set(self.channels)

    def notifies(self) -> list[tuple[str, str]] | None:
        """Read what the socket holds: the notifications' (channel, payload), in order; None if
        the connection failed (the next call connects again)."""
        try:
            with self.conn.lock:
                pg = self.conn.conn.pgconn
                pg.consume_input()
                got = []
                while (n := pg.notifies()) is not None:
                    got.append((n.relname.decode(), n.extra.decode("utf-8", "replace")))
                return got
        except Exception:  # noqa: BLE001 - psycopg's or ours: the caller wakes its leads
            self.conn._drop()
            return None

    def close(self) -> None:
        self.conn.close()
