"""The supervisor's listening connection: the wake-ups of this host's idle workers, taken in
turns among the hosts (:mod:`.turns`) and passed on through a file, and the controls for this
supervisor.

In pooled mode a worker cannot listen (a notification goes to the session that ``LISTEN``\\ed,
which a transaction pooler lends to other clients); in direct mode every host's idle lead
listening meant every host woke, and claimed, for every job. So the supervisor holds one
direct connection (``[postgres] listen``, or the database URL itself in direct mode) that
listens on the schema's channel (:class:`PgRelay`, served by the supervisor's loop: its socket
is one of the descriptors the loop waits on, and reading it never blocks). On this host's turn
it writes a file of the host's temporary folder (:func:`relay_path`); the idle lead of each pool
(:mod:`shared.engines.idlelead`) watches that file (:class:`RelayedWakeup`, inotify) and claims;
the other idle workers wait for the lead. Without a relay, pooled workers poll
(:class:`.wakeup.PolledWakeup`) and direct ones listen themselves (:class:`.wakeup.PgWakeup`):
the relay marks its presence, and each idle lead its own (:mod:`.marks`).

Controls (a cancel of a running job, a ``jobq scale`` request: ``OpsAccess.notify_controls``)
are notified on the schema's control channel, on which only supervisors listen: the same
connection listens on it, and the supervisor acts at once (``supervisor.controls``); its reads of
controls are then only a slow backstop. Through a transaction pooler without ``listen`` there is
no relay, and the supervisor reads controls every round.

A relay that lost its connection tries again every :data:`RETRY` seconds, and wakes the leads
and the supervisor each time it connects (what was notified meanwhile reached no one). A lead
waits at most :data:`.wakeup.RELAYED_SLEEP` seconds (or until the next delayed job), then reads
whether a job is due and when the next delayed one is, in one statement, so a relay that is down
or a notification missed costs latency, never a job; the followers, waiting for the lead, read
nothing (a lead that dies hands the lead lock on with its process).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from typing import Any

import psycopg

from shared.model.errors import StoreError
from shared.runtime.logs import event, get_logger
from ..filewatch import FileWatch
from ..idlelead import IdleLead
from .connection import control_channel
from .donewatch import PgDoneWatch
from .marks import IDLE, RELAY, Marks
from .turns import JOINED, SLOTS, TAKE_SLOT, VIEW, Turns, lane_channel, lock_key, passed
from .wakeup import (
    DOWN_RETRY,
    RELAYED_SLEEP,
    WATCHED_SLEEP,
    Following,
    PolledWakeup,
    lead_base,
    lead_slot,
    lead_wait,
)

log = get_logger("supervisor")

RETRY = 5.0  # seconds between attempts to connect the relay again


def relay_path(url: str, schema: str) -> str:
    """The file the relay writes for ``schema`` of the database at ``url`` (the workers' URL),
    in a folder of its own (a watch on the temporary folder itself would wake for every file)."""
    name = hashlib.sha256(schema.encode()).hexdigest()[:16]
    return os.path.join(lead_base(url) + ".relay", name)


def marks_path(url: str, schema: str) -> str:
    """The marks file (:mod:`.marks`) beside the relay's file (another name: writes to it, or
    to this, wake nobody else)."""
    return relay_path(url, schema) + ".marks"


def poke(path: str) -> None:
    """Write ``path`` (its watchers wake); the folder is made if need be."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, b"\n")
    finally:
        os.close(fd)


class PgRelay:
    """The supervisor's listening connection of a host (see the module). ``mode``: the
    connection's; ``auto`` on a URL that turns out to be a pooler's gives no relay at all."""

    def __init__(
        self, listen_url: str, url: str, schema: str, connect_timeout: float, mode: str = "direct"
    ) -> None:
        self.listen_url = listen_url
        self.schema = schema
        self.mode = mode
        self.path = relay_path(url, schema)
        self.marks = Marks(marks_path(url, schema))
        self.turns = Turns()
        self.key = lock_key(schema)
        self.control = control_channel(schema)
        self.heard: list[tuple[str, str]] = []  # (channel, payload) read by a statement of ours
        self.lanes: set[int] = set()  # the lanes the session listens on (.turns)
        self.connect_timeout = min(connect_timeout, 2.0)  # on the supervisor's loop: short
        self.watch: Any = None
        self.fd: int | None = None
        self.next_try = 0.0
        self.failed = False  # the last attempt failed (logged once until one succeeds)
        self.off = False  # the server is a pooler's: nothing heard there, no relay
        self.missed = False  # (re)connected: controls notified meanwhile reached no one

    def fds(self) -> list[int]:
        """The socket to wait on (connecting again at most every RETRY seconds)."""
        if self.off or time.monotonic() < self.next_try:
            return []
        try:
            if self.watch is None:
                self.watch = PgDoneWatch(
                    self.listen_url,
                    schema=self.schema,
                    connect_timeout=self.connect_timeout,
                    channels=(f"jobq_{self.schema}", self.control),
                    mode=self.mode,
                )
                if self.watch.pooled:  # (auto, no listen URL: the workers poll)
                    self.close()
                    self.off = True
                    return []
                self.watch.conn.on_connect(self._joined)
            self.fd = self.watch.fileno()
        except StoreError as exc:
            self.fd = None
            self._failed(str(exc))
        if self.fd is None:
            self._failed("the server was not reached")
            return []
        self.marks.hold(RELAY)  # listening: this host's workers wait for our file
        if self.failed:
            event(log, "relay.connected")
            self.failed = False
        return [self.fd]

    def _joined(self, conn: Any) -> None:
        """(A new session, listening already.) Take a slot, read the others', wake the leads:
        what was notified while no session listened reached no one."""
        conn.add_notify_handler(lambda n: self.heard.append((n.channel, n.payload)))
        self.lanes = set()
        self.missed = True
        try:
            row = conn.execute(TAKE_SLOT, {"n": SLOTS - 1, "key": self.key}).fetchone()
            view = [r["slot"] for r in conn.execute(VIEW, {"key": self.key}).fetchall()]
            self.turns.joined(row["s"] if row else None, view, time.monotonic())
            if change := self._relisten():
                conn.execute(change)
            conn.execute("SELECT pg_notify(%s, %s)", (f"jobq_{self.schema}", JOINED))  # read again
        except psycopg.Error:  # (the socket's next read fails too: the relay connects again)
            self.turns.joined(None, [], time.monotonic())  # no slot: wake on everything
        poke(self.path)

    def wait_for(self) -> float | None:
        """Seconds until a fallback this relay owes is due (the loop's wait ends by then)."""
        due = self.turns.next_due()
        return None if due is None else max(due - time.monotonic(), 0.0)

    @property
    def live(self) -> bool:
        """Does the connection listen now (as of the last :meth:`fds`)?"""
        return self.fd is not None and not self.off

    def serve(self, ready: Any) -> bool:
        """After the loop's wait (``ready``: the readable descriptors): act on what came and
        on the fallbacks due; whether a control came (or may have been missed: a new or lost
        connection)."""
        now = time.monotonic()
        wake = False
        if self.fd is not None and self.fd in ready:
            got = self.watch.notifies()
            wake = got is None  # a lost connection: the leads look while it reconnects
            self.missed = self.missed or got is None
            self.heard.extend(got or [])
        heard, self.heard = self.heard, []
        control, self.missed = self.missed or any(c == self.control for c, _ in heard), False
        heard_jobs = [text for c, text in heard if c != self.control]
        changed = JOINED in heard_jobs  # a relay came or went: every relay reads the list again
        mine: list[tuple[int, int]] = []
        for text in heard_jobs:
            if text == JOINED:
                continue
            what = self.turns.hear(text, now)
            if what is True:
                wake = True
            elif what:
                mine.append(what)  # type: ignore[arg-type]
        mine += self.turns.due(now)
        if mine and not wake and self.marks.elsewhere(IDLE) is False:
            wake = self._pass_on(mine)  # nobody idle here: the next host's turn
        elif mine:
            wake = True
        if wake:
            poke(self.path)
        if changed or heard_jobs and self.turns.stale(now):
            self._read_turns(now)
        return control

    def _read_turns(self, now: float) -> None:
        """Read the relays' slots again, and listen on this relay's lanes as they now are."""
        view = self._run(VIEW, {"key": self.key})
        if view is not None:
            self.turns.seen([r["slot"] for r in view], now)
            change = self._relisten()
            if change and self._run(change, None) is None:
                self.lanes = set()  # (unknown: a new session starts from none)

    def _relisten(self) -> str:
        """The statements that make the session listen on this relay's lanes now ("" if it
        does), as one query string; ``lanes`` is updated."""
        want, main = self.turns.lanes(), f"jobq_{self.schema}"
        change = [f'LISTEN "{lane_channel(main, n)}"' for n in sorted(want - self.lanes)]
        change += [f'UNLISTEN "{lane_channel(main, n)}"' for n in sorted(self.lanes - want)]
        self.lanes = want
        return "; ".join(change)

    def _pass_on(self, mine: list[tuple[int, int]]) -> bool:
        """Send this host's turns on (one notification: several turns at once wake every host);
        True if this host should be woken anyway (a turn every host had, or the send failed)."""
        going = [(b, h) for b, h in mine if self.turns.may_pass(h)]
        if going:
            text = passed(going[0][0], going[0][1] + 1) if len(going) == 1 else ""
            if self._run("SELECT pg_notify(%s, %s)", (f"jobq_{self.schema}", text)) is None:
                return True
        return len(going) < len(mine)

    def _run(self, sql: str, params: Any) -> list[Any] | None:
        """One short statement on the relay's session; None if it failed (the loop goes on)."""
        if self.watch is None:
            return None
        try:
            with self.watch.conn.lock:
                cur = self.watch.conn.conn.execute(sql, params)
                return list(cur.fetchall()) if cur.description else []
        except (StoreError, psycopg.Error):
            return None

    def _failed(self, why: str) -> None:
        """Not listening: this host's leads stop waiting for the relay (they listen or poll
        for themselves, with their shorter backstop) until it listens again."""
        self.marks.release(RELAY)
        self.next_try = time.monotonic() + RETRY
        if not self.failed:
            event(log, "relay.unavailable", logging.WARNING, error=why, retry=RETRY)
        self.failed = True

    def close(self) -> None:
        """Leave the turns first (the others read the list again) and stop listening."""
        self.marks.close()
        if self.watch is not None and self.turns.slot is not None:
            self._run(
                "SELECT pg_advisory_unlock(%s::int4, %s::int4), pg_notify(%s, %s)",
                (self.key, self.turns.slot, f"jobq_{self.schema}", JOINED),
            )
        if self.watch is not None:
            self.watch.close()
            self.watch = None


class RelayedWakeup(PolledWakeup):
    """An idle worker's wait on the relay's file: the pool's lead watches it (and marks itself
    idle, :mod:`.marks`), the others wait for the lead (the same roles as
    :class:`.wakeup.PgWakeup`). ``lead``: the pool's lead, when a direct-mode wake-up shares it."""

    def __init__(self, store: Any, lead: IdleLead | None = None) -> None:
        self.store = store
        path = relay_path(store.url, store.schema)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)  # a folder to watch
        self.watch = FileWatch(path)
        self.marks = Marks(marks_path(store.url, store.schema))
        self.lead = lead or IdleLead(
            lead_base(store.url), lead_slot(store.schema + store.serving_tag())
        )
        self.polled = PolledWakeup(store) if not self.watch.available else None
        self.following = False
        self.backstop = Following()
        self.timed_out = False  # the lead's last wait ended by its timeout (see lead_wait)
        self.claim_now = False  # the lead's read found a job due after a timeout

    def serves(self) -> bool:
        """Whether a relay listens for this host now (its supervisor's)."""
        return self.polled is None and self.marks.elsewhere(RELAY) is True

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        if self.polled is not None:
            return self.polled.prepare(now, poll_interval)
        self.following = not self.lead.take()
        if self.following:
            self.marks.release(IDLE)
            return self.lead.fileno(), WATCHED_SLEEP
        self.marks.hold(IDLE)
        try:
            claim, timeout = lead_wait(
                self.store, now, max(poll_interval, RELAYED_SLEEP), self.timed_out
            )
        except StoreError:
            self.claim_now = True  # the claim meets the error and the worker logs it
            return None, min(poll_interval, DOWN_RETRY)
        self.timed_out, self.claim_now = False, claim
        return (None, 0.0) if claim else (self.watch.fileno(), timeout)

    def woke(self, ready: bool) -> bool | None:
        """Claim at once on a notification, on becoming the lead, or when the lead's read
        found a job due after a timeout; otherwise None: no claim and no read (the lead's next
        ``prepare`` reads, once per ``RELAYED_SLEEP`` at most; a follower only when its
        :class:`.wakeup.Following` backstop is due, then False: read first)."""
        if self.polled is not None:
            return False
        if self.following:
            if ready and self.lead.take():
                return True
            return False if self.backstop.due() else None
        if self.claim_now or (ready and self.watch.drain()):
            self.claim_now = False
            return True
        self.timed_out = True
        return None

    def before_claim(self) -> None:
        self.watch.drain()

    def claimed(self) -> None:
        self.marks.release(IDLE)  # busy: a turn of this host now goes on to the next
        self.lead.resign()

    def close(self) -> None:
        self.marks.close()
        self.lead.close()
        self.watch.close()
