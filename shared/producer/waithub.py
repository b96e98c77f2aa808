"""One watcher per queue (:class:`shared.producer.api.JobQueue`) for every job its waiters wait on
(:mod:`shared.producer.handles`).

A :class:`Hub` is a daemon thread with a store of its own (opened in that thread, closed when
nobody waits). It reads the statuses of every awaited job in one query, then sleeps until the
engine says something committed or its back-off ends:

- SQLite: the WAL watch (``shared.engines.commit_watch``) wakes it on every commit by any
  process; after a wake the back-off restarts at ``SETTLE`` (the watch fires just before the
  commit completes, so that read may be early), and grows to ``WATCHED_CAP`` while nothing
  commits.
- PostgreSQL: LISTEN on the schema's done channel, which every statement that ends jobs
  notifies while a watch waits there (the engine's watch says so after its LISTEN); the same
  back-off as SQLite's bounds what a lost notification could cost.
- No watch (no inotify, or the server unreachable): the back-off grows from ``FIRST`` by
  ``POLL_GROWTH`` to ``POLL_CAP``.

A new waiter restarts the back-off at once (a self-pipe), so a job that ended between the
waiter's own read and its registration is seen. A :class:`Ticket` fires (its ``fire``
callback, from the hub's thread) when all its jobs have ended or are gone, or when the hub
could not read (``error`` set): the waiter then reads for itself. So 100 waiters cost one query
per wake, and one inotify instance per process, not one each.

Nothing crosses ``fork()``: a hub belongs to the process that made it (:class:`Hubs`); in a
forked child the queue makes a new one on first use and leaves the parent's alone (its thread did
not cross, and its lock and connection are the parent's).
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any, Callable

from shared.engines import commit_watch, open_store
from shared.model.job import TERMINAL
from shared.ops.jobs import statuses

FIRST = 0.001  # seconds: the back-off's first pause (and after a new waiter came)
SETTLE = 0.001  # the pause after a wake by a commit (this read may have come just too early)
WATCHED_CAP = 5.0  # longest pause while the commit watch works (every commit wakes the hub; the
# same as idle workers' shared.engines.sqlite.wakeup.WATCHED_SLEEP)
POLL_CAP = 0.25  # longest pause without a watch (PostgreSQL): bounds latency and idle reads
POLL_GROWTH = 1.5  # each quiet pause without a watch is this much longer than the last (gentler
# than doubling: a job's end is seen within a third of its run time)
LINGER = 10.0  # seconds the hub keeps its store and watch after the last waiter left
ERROR_PAUSE = 0.5  # after a failed read (the database down): before the next attempt


class Ticket:
    """One waiter's jobs; ``fire()`` is called once, from the hub's thread."""

    __slots__ = ("ids", "fire", "error")

    def __init__(self, ids: list[str], fire: Callable[[], object]) -> None:
        self.ids, self.fire = ids, fire
        self.error: BaseException | None = None


class Hub:
    """The watcher of one database in this process (see the module's docstring)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.cond = threading.Condition()
        self.tickets: list[Ticket] = []
        self.fresh = False
        self.closed = False
        self.pid = os.getpid()
        self.pipe_r, self.pipe_w = os.pipe()
        os.set_blocking(self.pipe_r, False)
        threading.Thread(target=self._run, name="jobq-wait-hub", daemon=True).start()

    def add(self, ids: list[str], fire: Callable[[], object]) -> Ticket:
        ticket = Ticket(ids, fire)
        with self.cond:
            if self.closed:
                raise RuntimeError("the queue was closed")
            self.tickets.append(ticket)
            self.fresh = True
            self.cond.notify()
            os.write(self.pipe_w, b".")
        return ticket

    def remove(self, ticket: Ticket) -> None:
        with self.cond:
            if ticket in self.tickets:
                self.tickets.remove(ticket)

    def close(self) -> None:
        """Stop the thread (it closes its store); waiters still registered are fired with an
        error so that they read for themselves."""
        with self.cond:  # the thread closes the pipe under this lock, once it saw ``closed``
            if not self.closed:
                self.closed = True
                os.write(self.pipe_w, b".")
                self.cond.notify()

    def _run(self) -> None:
        store = watch = None
        pause = FIRST
        while True:
            with self.cond:
                if not self.tickets or self.closed:
                    # nobody waits: no reads; after LINGER, no connection and no watch either (a
                    # producer that waits for one job after another keeps them: opening them is
                    # most of a wait's latency on PostgreSQL)
                    if not self.closed and not self.cond.wait_for(
                        lambda: self.tickets or self.closed, LINGER
                    ):
                        store, watch = _close(store, watch)
                    while not self.tickets and not self.closed:
                        self.cond.wait()
                    if self.closed:
                        _close(store, watch)
                        self._fire(list(self.tickets), RuntimeError("the queue was closed"))
                        for fd in (self.pipe_r, self.pipe_w):
                            os.close(fd)
                        return
                if self.fresh:
                    pause, self.fresh = FIRST, False
                tickets = list(self.tickets)
            try:
                if store is None:
                    store, watch = open_store(self.config, migrate=False), commit_watch(self.config)
                self._check(store, tickets)
            except Exception as exc:  # noqa: BLE001 - a StoreError: the waiters read and report it
                store, watch = _close(store, watch)
                self._fire(tickets, exc)
                time.sleep(ERROR_PAUSE)  # the waiters that read fine come back: not at once
            pause = self._sleep(watch, pause)

    def _check(self, store: Any, tickets: list[Ticket]) -> None:
        """One read of every awaited job; fire the tickets whose jobs all ended (or are gone)."""
        ids = list({i for t in tickets for i in t.ids})
        states = statuses(store, ids)
        ended = [t for t in tickets if all(states.get(i, "completed") in TERMINAL for i in t.ids)]
        self._fire(ended, None)

    def _fire(self, tickets: list[Ticket], error: BaseException | None) -> None:
        with self.cond:
            for t in tickets:
                if t in self.tickets:
                    self.tickets.remove(t)
                    t.error = error
                    t.fire()

    def _sleep(self, watch: Any, pause: float) -> float:
        """Wait for a commit, a new waiter or the pause; the next pause."""
        fd = watch.fileno() if watch is not None else None
        ready, _, _ = select.select([self.pipe_r] + ([fd] if fd is not None else []), [], [], pause)
        if self.pipe_r in ready:
            while _read(self.pipe_r):
                pass
        if fd is not None and fd in ready and watch.drain():
            return SETTLE
        if fd is not None:
            return min(pause * 2, WATCHED_CAP)
        return min(pause * POLL_GROWTH, POLL_CAP)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


def _close(store: Any, watch: Any) -> tuple[None, None]:
    for thing in (watch, store):
        if thing is not None:
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - closing a connection that already failed
                pass
    return None, None


class Hubs:
    """A queue's hub, made on first use in the process that uses it (see the module's docstring)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.current: Hub | None = None
        self.lock = threading.Lock()  # waiters in several threads make one hub

    def get(self) -> Hub:
        found = self.current
        if found is None or found.pid != os.getpid():  # none yet, or the parent's: not ours
            with self.lock:
                found = self.current
                if found is None or found.pid != os.getpid():
                    found = self.current = Hub(self.config)
        return found

    def close(self) -> None:
        if self.current is not None and self.current.pid == os.getpid():
            self.current.close()
        self.current = None
