"""An idle worker's wait on PostgreSQL (``shared.contract.Wakeup``): ``LISTEN``.

The worker's own connection listens on the schema's channel (no connection more per worker:
8 hosts of 8 workers stay within the server's default 100 connections). Every enqueue sends one
notification with its insert; an idle worker selects on the connection's socket and claims when
a notification arrived. Notifications that arrived while the connection ran other statements
are kept by a handler and end the next wait at once. The next delayed job's due time bounds
the wait, and ``WATCHED_SLEEP`` catches what changes with time alone (a rate-limit window).
A lost connection is made again by the store; the LISTEN is repeated on every new one.
"""
from __future__ import annotations

from typing import Any, Callable

from ...errors import StoreError
from ...job import Job

WATCHED_SLEEP = 5.0   # longest idle wait while LISTEN works (notifications wake us anyway)
DOWN_RETRY = 1.0      # wait between attempts while the server cannot be reached


class PgWakeup:
    """LISTEN on ``store``'s connection; ``prepare``/``woke`` as the worker loop asks."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.notified = False
        self.listening = False
        store.on_connect(self._listen)

    def _listen(self, conn: Any) -> None:
        conn.add_notify_handler(self._note)
        conn.execute(f'LISTEN "{self.store.channel}"')
        self.listening = True

    def _note(self, _notify: Any) -> None:
        self.notified = True

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        """The connection's socket and how long to wait: until the next delayed job, at most
        ``WATCHED_SLEEP`` (no wait at all when a notification is already in)."""
        if self.notified:
            return None, 0.0
        try:
            fd = self.store.fileno()
            due = self.store.next_due()
        except StoreError:
            return None, min(poll_interval, DOWN_RETRY)
        timeout = max(poll_interval, WATCHED_SLEEP)
        if due is not None:
            timeout = min(timeout, max(due - now, 0.0))
        return fd, timeout

    def woke(self, ready: bool) -> bool:
        """Claim at once if a notification came; after a timeout, read first."""
        if ready:
            self._drain()
        got, self.notified = self.notified, False
        return got

    def _drain(self) -> None:
        """Read what the socket holds; each notification calls ``_note``. A dead connection
        counts as a wake: the claim then meets the error and the store reconnects."""
        try:
            with self.store.lock:  # the heartbeat thread may be using the connection
                conn = self.store.conn
                conn.pgconn.consume_input()
                while (n := conn.pgconn.notifies()) is not None:
                    self._note(n)
        except Exception:  # noqa: BLE001 - psycopg's or ours: the next statement reports it
            self.notified = True

    def before_claim(self) -> None:
        pass

    def fast_claim(self, owner: str, owner_pid: int, now: Callable[[], float], limit: int) -> list[Job] | None:
        return None

    def claimed(self) -> None:
        pass

    def close(self) -> None:
        pass
