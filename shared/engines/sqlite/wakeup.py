"""An idle worker's wait on a SQLite file (``shared.engines.contract.Wakeup``).

Of the idle workers on one file one at a time, the lead (:mod:`.lead`), waits on the WAL watch
(:mod:`.walwatch`: every commit by any process writes the WAL) and on the next delayed job's
time; the others wait on the lead lock. The lead claims without SQLite's busy handler: while
another connection holds the write lock it waits for that commit or ``LEAD_POLL``, since a
sleep of 1, 2, then 5 ms in the handler is the whole latency budget of an idle job's start.
Where inotify is missing every worker polls every ``poll_interval``.
"""

from __future__ import annotations

import select
import time
from typing import Any, Callable

from shared.model.job import Job
from ..idlelead import IdleLead
from .walwatch import WalWatch

LEAD_POLL = 0.0005  # seconds: how often the idle lead retries a busy write lock (see fast_claim)
WATCHED_SLEEP = 5.0  # longest idle sleep while the WAL watch works: every commit wakes us anyway,
# and the next delayed job's due time bounds the sleep; this only catches
# what changes with time alone (a rate-limit window passing)


class SqliteWakeup:
    """The WAL watch and the idle lead of one worker process on ``store``'s file."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.watch = WalWatch(store.path)
        self.lead = (
            IdleLead(store.path, store.serving_slot()) if self.watch.available else None
        )  # a lead per pool
        self.following = False  # the last prepare() waits for the lead, not for commits

    def prepare(self, now: float, poll_interval: float) -> tuple[int | None, float]:
        """A follower waits for the lead (or WATCHED_SLEEP); the lead for a commit, the next
        delayed job's time, or at most ``poll_interval`` (WATCHED_SLEEP, if longer, while the
        WAL watch works)."""
        self.following = self.lead is not None and not self.lead.take()
        if self.following:
            return self.lead.fileno(), WATCHED_SLEEP
        watched = self.watch.available
        timeout = max(poll_interval, WATCHED_SLEEP) if watched else poll_interval
        due = self.store.next_due()
        if due is not None and due - now > 0:
            timeout = min(timeout, due - now)
        return (self.watch.fileno() if watched else None), timeout

    def woke(self, ready: bool) -> bool:
        """Claim at once only after a commit (the lead), or on becoming the lead (the last lead
        just took a job; others may be due behind it, or have come during the hand-over)."""
        if self.following:
            return ready and self.lead.take()
        return ready and self.watch.drain()

    def before_claim(self) -> None:
        """Drain the WAL watch just before the write lock is asked for: every commit it reported
        has then either finished or holds the lock the claim waits for, so the claim sees its
        jobs, and the next idle wait sleeps until a newer commit."""
        self.watch.drain()

    def fast_claim(
        self, owner: str, owner_pid: int, now: Callable[[], float], limit: int
    ) -> list[Job] | None:
        """The lead's claim (None if this worker does not lead): while another connection holds
        the write lock, wait for its commit (the WAL watch) or LEAD_POLL, not in SQLite's busy
        handler. Gives up (None) after ``busy_timeout`` or on an error, for the ordinary claim
        to handle."""
        if self.lead is None or not self.lead.held:
            return None
        deadline = time.monotonic() + self.store.busy_timeout
        while time.monotonic() < deadline:
            try:
                jobs = self.store.try_claim(owner, owner_pid, now(), limit)
            except Exception:  # noqa: BLE001 - a StoreError: the ordinary claim reports it
                return None
            if jobs is not None:
                return jobs
            select.select([self.watch.fileno()], [], [], LEAD_POLL)
            self.watch.drain()  # safe: the next try starts after it (see before_claim)
        return None

    def claimed(self) -> None:
        """This worker got jobs: hand the lead on."""
        if self.lead is not None:
            self.lead.resign()

    def close(self) -> None:
        self.watch.close()
        if self.lead is not None:
            self.lead.close()
