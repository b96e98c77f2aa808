"""An idle worker's wait on PostgreSQL (``shared.contract.Wakeup``): ``LISTEN``.

The worker's own connection listens on the schema's channel (no connection more per worker:
8 hosts of 8 workers stay within the server's default 100 connections). Every enqueue sends one
notification with its insert. Of a host's idle workers one at a time, the lead
(:mod:`shared.engines.idlelead`, a byte of a lock file in this host's temporary folder), selects on its
connection's socket and claims when a notification arrived; the others wait for the lead lock,
so a notification wakes one process per host instead of every idle worker (which then all
competed for the 2 cores to find the one job). A lead that claims hands the lead on.

Notifications that arrived while the connection ran other statements are kept by a handler and
end the next wait at once. The next delayed job's due time bounds the lead's wait, and
``WATCHED_SLEEP`` catches what changes with time alone (a rate-limit window). A lost connection
is made again by the store; the LISTEN is repeated on every new one.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Callable

from ...errors import StoreError
from ...job import Job
from ...procs import host_id
from ..idlelead import IdleLead

WATCHED_SLEEP = 5.0   # longest idle wait while LISTEN works (notifications wake us anyway)
DOWN_RETRY = 1.0      # wait between attempts while the server cannot be reached


class PgWakeup:
    """LISTEN on ``store``'s connection; ``prepare``/``woke`` as the worker loop asks."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.notified = False
        self.lead = IdleLead(lead_base(store.url), lead_slot(store.schema + store.serving_tag()))  # a lead per pool
        self.following = False  # the last prepare() waits for the lead, not for notifications
        store.on_connect(self._listen)

    def _listen(self, conn: Any) -> None:
        conn.add_notify_handler(self._note)
        conn.execute(f'LISTEN "{self.store.channel}"')

    def _note(self, _notify: Any) -> None:
        self.notified = True

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        """The connection's socket and how long to wait: until the next delayed job, at most
        ``WATCHED_SLEEP`` (no wait at all when a notification is already in)."""
        self.following = not self.lead.take()
        if self.following:
            return self.lead.fileno(), WATCHED_SLEEP
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
        """Claim at once if a notification came, or on becoming the lead (the last lead just
        took a job; others may be due behind it); after a timeout, read first."""
        if self.following:
            return ready and self.lead.take()
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
        """This worker got jobs: hand the lead on."""
        self.lead.resign()

    def close(self) -> None:
        self.lead.close()


def lead_base(url: str) -> str:
    """Where this host's workers on one server and database keep their lead lock (the lock file
    is this path + ``-lead``): one file, whatever the schemas (see :func:`lead_slot`), so the
    temporary folder holds one per database used, however many queues come and go."""
    ident = "\0".join((url, host_id(), str(os.getuid())))
    name = "jobq-pg-" + hashlib.sha256(ident.encode()).hexdigest()[:20]
    return os.path.join(tempfile.gettempdir(), name)


def lead_slot(schema: str) -> int:
    """The byte of the lead file that one queue (schema) locks: 62 bits of its name's hash, so
    two schemas' leads do not exclude each other."""
    return int.from_bytes(hashlib.sha256(schema.encode()).digest()[:8], "big") >> 2
