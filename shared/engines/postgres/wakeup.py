"""An idle worker's wait on PostgreSQL (``shared.engines.contract.Wakeup``): ``LISTEN``.

Under a supervisor, its relay (:mod:`.relay`) listens for the whole host and wakes the host's
idle lead only on the host's turn (:mod:`.turns`); :class:`PgWakeup` then waits on the relay's
file instead (``via_relay``, checked at each wait: the relay marks its presence, :mod:`.marks`).
What follows is the wait where no relay listens (a worker without a supervisor, or before the
relay's first connection): the worker listens itself, and every host wakes for every job.

The worker's own connection listens on the schema's channel (no connection more per worker:
8 hosts of 8 workers stay within the server's default 100 connections). Every enqueue sends one
notification with its insert. Of a host's idle workers one at a time, the lead
(:mod:`shared.engines.idlelead`, a byte of a lock file in this host's temporary folder), selects on its
connection's socket and claims when a notification arrived; the others wait for the lead lock,
so a notification wakes one process per host instead of every idle worker (which then all
competed for the 2 cores to find the one job). A lead that claims hands the lead on.

Only a lead's connection listens: every ``NOTIFY`` signals every listening backend of the
database, so eight listening workers meant eight backends woken per enqueue, competing with the
producer and the lead for the cores, while one acted on it. A worker that becomes the
lead runs ``LISTEN`` and then claims at once (a job committed before its ``LISTEN`` took effect
sent it no notification, but the claim after it sees the job); one that waits as a follower runs
``UNLISTEN`` first if it still listens. A lead that claims keeps listening while it is busy (it
sends no statement more per job for this): the round trips are one per change of role, on the
idle path, never on a job's. Where the lead lock is unavailable every idle worker leads and
listens, as before.

Notifications that arrived while the connection ran other statements are kept by a handler and
end the next wait at once, or the wait in progress: the heartbeat thread shares the connection
(one per worker), and a statement of its own reads a notification off the socket while the main
thread waits on that socket, which then stays quiet until the next beat or ``WATCHED_SLEEP``
(an idle job started up to 5 s late). So the lead does not wait on the socket itself but on an
epoll descriptor (:class:`Waker`) that watches the socket and a pipe the handler writes to,
whichever thread runs it. The next delayed job's due time bounds the lead's wait, and
``WATCHED_SLEEP`` catches what changes with time alone (a rate-limit window). A lost connection
is made again by the store; a lead's ``LISTEN`` is repeated on the new one, and the lead claims
at once (what was notified to the lost one is not lost).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import tempfile
import time
from typing import Any, Callable

from shared.model.errors import StoreError
from shared.model.job import Job
from shared.runtime.processes import host_id
from ..idlelead import IdleLead
from .libpq import listen_all
from .marks import IDLE

WATCHED_SLEEP = 5.0  # longest idle wait while LISTEN works (notifications wake us anyway)
RELAYED_SLEEP = 15.0  # longest wait of an idle lead the relay wakes (:mod:`.relay`): its
# backstop for a notification no relay passed on; the next delayed job's time bounds it
DOWN_RETRY = 1.0  # wait between attempts while the server cannot be reached
FOLLOWER_READ = 60.0  # a follower reads for itself once this long: its lead may be stopped


def lead_wait(store: Any, now: float, longest: float, timed_out: bool) -> tuple[bool, float]:
    """The idle lead's one read per wait (whether a job is due, and when the next delayed one
    is): ``(True, 0.0)``, claim now, if a job is due and the last wait ended by its timeout
    (``timed_out``: no wake-up came, so this read stands for the claim's; after a claim that
    found nothing, a due job is one this pool cannot take, and claiming again would spin);
    else ``(False, timeout)``: until the next delayed job, at most ``longest``, and at most
    ``WATCHED_SLEEP`` while a due job waits that the last claim could not take (a rate window
    opens with time alone: no notification comes for it)."""
    due, nxt = store.idle_read(now)
    if due and timed_out:
        return True, 0.0
    if due:
        longest = min(longest, WATCHED_SLEEP)
    return False, longest if nxt is None else min(longest, max(nxt - now, 0.0))


class Following:
    """A follower's backstop: it reads nothing while the pool's lead waits (the lead reads for
    the pool), but a lead that holds the lock and is stopped (SIGSTOP, a debugger) would leave
    the pool's due jobs to other hosts alone, or to none on one host. ``due()`` is True once
    every ``FOLLOWER_READ`` seconds (``clock``: monotonic seconds): then the follower reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since = clock()

    def due(self) -> bool:
        now = self.clock()
        if now - self.since < FOLLOWER_READ:
            return False
        self.since = now
        return True


class PolledWakeup:
    """An idle worker's wait where no notification reaches it (pooled mode, :mod:`.pooling`):
    every ``poll_interval`` seconds, or at the next delayed job if sooner, it reads whether a
    job is due. Costs one statement per idle worker per ``poll_interval``."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        return None, poll_interval

    def woke(self, ready: bool) -> bool | None:
        return False  # read first: claim only if a job is due

    def before_claim(self) -> None:
        pass

    def fast_claim(
        self, owner: str, owner_pid: int, now: Callable[[], float], limit: int
    ) -> list[Job] | None:
        return None

    def claimed(self) -> None:
        pass

    def close(self) -> None:
        pass


class PgWakeup(PolledWakeup):
    """LISTEN on ``store``'s connection while this worker leads; ``prepare``/``woke`` as the
    worker loop asks (nothing to do before a claim, no quicker claim: :class:`PolledWakeup`'s)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.notified = False
        self.lead = IdleLead(
            lead_base(store.url), lead_slot(store.schema + store.serving_tag())
        )  # a lead per pool
        self.following = False  # the last prepare() waits for the lead, not for notifications
        self.backstop = Following()
        self.listening = False  # the connection LISTENs (set by a lead, cleared by a follower)
        self.waker = Waker()
        from .relay import RelayedWakeup  # (it builds on this module)

        # while the supervisor's relay listens for this host, the lead waits on its file
        self.relayed = RelayedWakeup(store, lead=self.lead)
        self.via_relay = False
        self.timed_out = False  # the lead's last wait ended by its timeout (see lead_wait)
        store.on_connect(self._connected)

    def _connected(self, conn: Any) -> None:
        """(Inside the store's connect, under its lock.) A new connection listens only if this
        worker leads, and the lead then claims at once: notifications sent to the lost
        connection never arrived."""
        conn.add_notify_handler(self._note)
        self.waker.watch(conn.fileno())
        self.listening = False
        if (self.lead.held or not self.lead.available) and not self.via_relay:
            # (lead unavailable: every idle worker leads)
            conn.execute(listen_all(self.store.channel))
            self.listening = True
            self._note(None)

    def _note(self, _notify: Any) -> None:
        """(Any thread that ran a statement on the connection.) A notification came: the next
        wait, or the one in progress, ends at once."""
        if not self.notified:
            self.notified = True
            self.waker.poke()

    def _listen(self, on: bool) -> None:
        """LISTEN (``on``) or UNLISTEN, one round trip; a failure is left for the next call
        (a lost connection is made again without LISTEN, unless this worker leads)."""
        if self.listening != on:
            self.store.listen(on)
            self.listening = on

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        """The connection's socket and how long to wait: until the next delayed job, at most
        ``WATCHED_SLEEP`` (no wait at all when a notification is already in, or this worker has
        just become the lead and LISTENed: it claims first). While the supervisor's relay
        listens for this host (:mod:`.relay`), the relay's file instead, and no LISTEN."""
        self.via_relay = self.relayed.serves()
        if self.via_relay:
            if self.listening:
                with contextlib.suppress(StoreError):  # (failed: again next time)
                    self._listen(False)
            return self.relayed.prepare(now, poll_interval)
        self.relayed.marks.release(IDLE)  # (no relay now: it asks no one)
        self.following = not self.lead.take()
        try:
            if self.following:  # (UNLISTEN failed: again next time; a new connection won't)
                with contextlib.suppress(StoreError):
                    self._listen(False)
                return self.lead.fileno(), WATCHED_SLEEP
            if not self.listening:
                self._listen(True)
                # what was committed before the LISTEN sent no notification: the claim finds it
                # (a read here would judge "due" by the time prepare() was given, before the
                # LISTEN, and miss a job enqueued in between)
                self.notified = True
            if self.notified:
                return None, 0.0
            fd = self.store.fileno()  # (connects again if need be: _connected watches it)
            claim, timeout = lead_wait(
                self.store, now, max(poll_interval, WATCHED_SLEEP), self.timed_out
            )
        except StoreError:
            # the claim after this wait meets the error too, and the worker logs it (a read
            # that failed quietly would wait here for ever on a schema it cannot read)
            self.notified = True
            return None, min(poll_interval, DOWN_RETRY)
        self.timed_out = False
        if claim:
            self.notified = True  # (woke() says claim)
            return None, 0.0
        return self.waker.fileno(fd), timeout

    def woke(self, ready: bool) -> bool | None:
        """Claim at once if a notification came, or on becoming the lead (the last lead just
        took a job; others may be due behind it; LISTEN first, so that nothing committed after
        the claim goes unnoticed), or if the lead's read found a job due after a timeout;
        otherwise None: no claim and no read (the lead's next ``prepare`` reads; a follower
        reads only when its :class:`Following` backstop is due, then False: read first)."""
        if self.via_relay:
            return self.relayed.woke(ready)
        if self.following:
            if not (ready and self.lead.take()):
                return False if self.backstop.due() else None
            with contextlib.suppress(
                StoreError
            ):  # (the claim meets the error; a new connection LISTENs)
                self._listen(True)
            # notifications read before the claim (UNLISTEN's, the lead lost before): it sees their jobs
            self.notified = False
            self.waker.drain()
            return True
        poked = (
            self.waker.drain()
        )  # (also a poke left by a statement of our own: no wait needed it)
        if ready:
            self._drain()
        got, self.notified = self.notified or poked, False
        self.timed_out = not got
        return True if got else None

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
        if self.via_relay:
            self.relayed.before_claim()

    def claimed(self) -> None:
        """This worker got jobs: hand the lead on (and no longer count as this host's idle)."""
        self.relayed.claimed()

    def close(self) -> None:
        self.relayed.close()  # (the lead with it)
        self.waker.close()


class Waker:
    """One descriptor that becomes readable when the connection's socket or a pipe does: the
    lead's wait ends whether the notification is still on the socket or another thread's
    statement read it (:meth:`poke`). Linux's epoll; where there is none, the socket alone."""

    def __init__(self) -> None:
        self.epoll: Any = select.epoll() if hasattr(select, "epoll") else None  # (CLOEXEC)
        self.sock = -1
        self.r, self.w = (
            os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC) if self.epoll is not None else (-1, -1)
        )
        if self.epoll is not None:
            self.epoll.register(self.r, select.EPOLLIN)

    def watch(self, sock: int) -> None:
        """Watch ``sock``, the socket of a (new) connection, instead of the last one (which may
        have had the same number: closing it took it out of the set)."""
        if self.epoll is None:
            return
        for fd in {self.sock, sock} - {-1}:
            try:
                self.epoll.unregister(fd)
            except OSError:  # not in the set: closed, or never watched
                pass
        self.epoll.register(sock, select.EPOLLIN)
        self.sock = sock

    def fileno(self, sock: int) -> int:
        """What to wait on for ``sock``, the connection's socket (watched since it connected)."""
        return sock if self.epoll is None else self.epoll.fileno()

    def poke(self) -> None:
        if self.w >= 0:
            try:
                os.write(self.w, b"\0")
            except OSError:  # full (it holds a poke already) or closed
                pass

    def drain(self) -> bool:
        """Whether a poke was waiting (it is read)."""
        got = False
        try:
            while os.read(self.r, 64):
                got = True
        except OSError:
            pass
        return got

    def close(self) -> None:
        if self.epoll is not None:
            self.epoll.close()
            os.close(self.r)
            os.close(self.w)
            self.epoll, self.r, self.w = None, -1, -1


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
