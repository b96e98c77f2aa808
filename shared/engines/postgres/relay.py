"""The supervisor's listening connection: controls in every mode, and in pooled mode
(:mod:`.pooling`) the wake-ups of the host's idle workers, passed on through a file.

Controls (a cancel of a running job, a ``jobq scale`` request: ``OpsAccess.notify_controls``)
are notified on the schema's control channel, on which only supervisors listen. The supervisor
holds one connection that listens on it (:class:`PgRelay`, served by the supervisor's loop: its
socket is one of the descriptors the loop waits on, and reading it never blocks) and acts at once
(``supervisor.controls``); its reads of controls are then only a slow backstop. The connection
goes to ``[postgres] listen`` when set, else to the database itself; through a transaction
pooler (``listen`` unset, pooled) there is none and the supervisor reads controls every round.

A notification goes to the session that ``LISTEN``\\ed; through a transaction pooler that session
serves other clients between their transactions, so a worker cannot listen through it. With
``[postgres] listen`` (a URL that reaches the server directly), the same connection also listens
on the schema's job channel and writes a file of the host's temporary folder (:func:`relay_path`)
when notifications come. The idle lead of each pool (:mod:`shared.engines.idlelead`, as with
LISTEN) watches that file (:class:`RelayedWakeup`, inotify) and claims; the other idle workers
wait for the lead. Without ``listen``, idle workers poll (:class:`.wakeup.PolledWakeup`).

A relay that lost its connection tries again every :data:`RETRY` seconds, and wakes the leads
and the supervisor each time it connects (what was notified meanwhile reached no one). The leads
wait at most :data:`.wakeup.WATCHED_SLEEP` seconds, so a relay that is down costs latency, never
a job.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from typing import Any

from shared.model.errors import StoreError
from shared.runtime.logs import event, get_logger
from ..filewatch import FileWatch
from ..idlelead import IdleLead
from .connection import control_channel
from .donewatch import PgDoneWatch
from .wakeup import WATCHED_SLEEP, PolledWakeup, lead_base, lead_slot

log = get_logger("supervisor")

RETRY = 5.0  # seconds between attempts to connect the relay again


def relay_path(url: str, schema: str) -> str:
    """The file the relay writes for ``schema`` of the database at ``url`` (the workers' URL),
    in a folder of its own (a watch on the temporary folder itself would wake for every file)."""
    name = hashlib.sha256(schema.encode()).hexdigest()[:16]
    return os.path.join(lead_base(url) + ".relay", name)


def poke(path: str) -> None:
    """Write ``path`` (its watchers wake); the folder is made if need be."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, b"\n")
    finally:
        os.close(fd)


class PgRelay:
    """The supervisor's listening connection (see the module): on the control channel, and on
    the job channel too when ``jobs`` (pooled mode with ``listen``)."""

    def __init__(
        self,
        listen_url: str,
        url: str,
        schema: str,
        connect_timeout: float,
        *,
        jobs: bool = True,
        mode: str = "direct",
    ) -> None:
        self.listen_url = listen_url
        self.schema = schema
        self.path = relay_path(url, schema) if jobs else None
        self.control = control_channel(schema)
        self.channels = (self.control,) + ((f"jobq_{schema}",) if jobs else ())
        self.mode = mode
        self.connect_timeout = min(connect_timeout, 2.0)  # on the supervisor's loop: short
        self.watch: Any = None
        self.fd: int | None = None
        self.next_try = 0.0
        self.failed = False  # the last attempt failed (logged once until one succeeds)
        self.missed = False  # (re)connected: controls notified meanwhile reached no one
        self.deaf = False  # the connection went through a pooler: it hears nothing

    def fds(self) -> list[int]:
        """The socket to wait on (connecting again at most every RETRY seconds); [] while there
        is none (:attr:`live` is then False)."""
        if self.deaf or time.monotonic() < self.next_try:
            return []
        try:
            if self.watch is None:
                self.watch = self._open()
                if self.watch is None:
                    return []
            self.fd = self.watch.fileno()
        except StoreError as exc:
            self.fd = None
            self._failed(str(exc))
        if self.fd is None:
            self._failed("the server was not reached")
            return []
        if self.failed:
            event(log, "relay.connected")
            self.failed = False
        return [self.fd]

    def _open(self) -> Any:
        watch = PgDoneWatch(
            self.listen_url,
            schema=self.schema,
            connect_timeout=self.connect_timeout,
            channels=self.channels,
            mode=self.mode,
        )
        if watch.pooled:  # (auto mode, through a pooler: no LISTEN is heard there)
            watch.close()
            self.deaf = True
            return None
        watch.conn.on_connect(self._connected)
        self._connected(None)  # (the first connect ran before the hook was added)
        return watch

    def _connected(self, _conn: Any) -> None:
        self.missed = True
        if self.path is not None:
            poke(self.path)

    @property
    def live(self) -> bool:
        """Does the connection listen now (as of the last :meth:`fds`)?"""
        return self.fd is not None and not self.deaf

    def serve(self, ready: Any) -> bool:
        """After the loop's wait (``ready``: the readable descriptors): pass on what came; whether
        a control came (or may have been missed: a new or lost connection)."""
        missed, self.missed = self.missed, False
        if self.fd is None or self.fd not in ready:
            return missed
        got = self.watch.drain_channels()
        if got - {self.control} and self.path is not None:
            poke(self.path)  # (also on a lost connection: the leads look while it reconnects)
        return missed or self.control in got

    def _failed(self, why: str) -> None:
        self.next_try = time.monotonic() + RETRY
        if not self.failed:
            event(log, "relay.unavailable", logging.WARNING, error=why, retry=RETRY)
        self.failed = True

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None


class RelayedWakeup(PolledWakeup):
    """An idle worker's wait in pooled mode with a relay: the pool's lead watches the relay's
    file, the others wait for the lead (the same roles as :class:`.wakeup.PgWakeup`)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        path = relay_path(store.url, store.schema)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)  # a folder to watch
        self.watch = FileWatch(path)
        self.lead = IdleLead(lead_base(store.url), lead_slot(store.schema + store.serving_tag()))
        self.polled = PolledWakeup(store) if not self.watch.available else None
        self.following = False

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        if self.polled is not None:
            return self.polled.prepare(now, poll_interval)
        self.following = not self.lead.take()
        if self.following:
            return self.lead.fileno(), WATCHED_SLEEP
        timeout = max(poll_interval, WATCHED_SLEEP)
        try:
            due = self.store.next_due()
        except StoreError:
            return None, poll_interval
        if due is not None:
            timeout = min(timeout, max(due - now, 0.0))
        return self.watch.fileno(), timeout

    def woke(self, ready: bool) -> bool:
        """Claim at once on a notification, or on becoming the lead."""
        if self.polled is not None:
            return False
        if self.following:
            return ready and self.lead.take()
        return ready and self.watch.drain()

    def before_claim(self) -> None:
        self.watch.drain()

    def claimed(self) -> None:
        self.lead.resign()

    def close(self) -> None:
        self.lead.close()
        self.watch.close()
