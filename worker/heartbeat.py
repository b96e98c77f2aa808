"""The heartbeat thread: keeps the leases of the jobs the worker holds fresh and gives back its
running jobs it does not hold (a claim whose answer was lost: ``worker.batch``), tells the
fence, ``worker.fence``, of each renewal that succeeded, notices when the supervisor that
started the worker has died, gives back the unstarted rest of a batch that waits behind a slow
job, and commits the outcomes that would otherwise wait behind it (the
worker's main thread is busy running that job).

It opens its own store (a connection is not shared between threads).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, ContextManager, Sequence

from shared.settings.config import Config
from shared.runtime.logs import event, get_logger
from shared.engines.contract import WorkerStore
from shared.engines import open_store

from .checkin import CHECK_EVERY

log = get_logger("worker")

ORPHAN_CHECK = 0.5  # seconds between checks that the parent is alive
RETRY_FLUSH = 0.5  # seconds before trying again to commit outcomes the database refused
IDLE_BEAT = 15.0  # seconds between beats while no job runs: only the process row is refreshed,
# and every write wakes every idle worker (they watch the WAL)
SUPERVISED_IDLE_BEAT = 4  # x IDLE_BEAT: a supervisor's worker, whose row the supervisor refreshes
# with its own every 15 s (touch_process), beats while idle only to give back strays (a claim whose
# answer was lost, which beat_soon already handles at once): one statement a minute, not four


def after_claim(
    store: WorkerStore, owner: str, clock: Any, sent: float, running: int, every: float
) -> float | None:
    """The monotonic time the fence may count the leases of a claim from, sent at ``sent`` and
    answered with jobs (``running``: how many of the worker's jobs are running now, those
    included). A claim answered within ``every`` (the heartbeat interval): ``sent``. A slower one
    (it waited on a lock: a table locked, the write lock held) may have stamped its leases as
    early as its send (PostgreSQL stamps with the statement's start), so counting from its
    answer would be unsafe and counting from its send fences a worker that just claimed: a
    beat renews every running job of the worker at once, and its send time is the answer when
    it renewed all ``running``; None when it failed or renewed fewer (a job of the claim was
    taken back meanwhile): the fence then counts from ``sent``."""
    if clock.monotonic() - sent <= every:
        return sent
    beat = clock.monotonic()
    try:
        renewed = store.heartbeat(owner, clock.now)
    except Exception as exc:  # noqa: BLE001 - the fence counts from the claim's send
        event(log, "worker.heartbeat_failed", logging.WARNING, owner=owner, error=str(exc))
        return None
    return beat if renewed >= running else None


class Heartbeat(threading.Thread):
    def __init__(
        self,
        config: Config,
        owner: str,
        clock: Any,
        parent_pid: int | None,
        on_orphaned: Callable[[], None],
        shed: Callable[[], Sequence[Any]] | None = None,
        flush: Callable[[WorkerStore], None] | None = None,
        store: Callable[[], WorkerStore] | None = None,
        renewed: Callable[[float], None] | None = None,
        held: Callable[[], ContextManager[Sequence[str] | None]] | None = None,
        checkin: Callable[[WorkerStore], None] | None = None,
        supervised: bool = False,
    ) -> None:
        super().__init__(name="jobq-heartbeat", daemon=True)
        self.config = config
        self.owner = owner
        self.clock = clock
        self.parent_pid = parent_pid
        self.on_orphaned = on_orphaned
        self._halt = threading.Event()
        self.orphaned = threading.Event()
        self.busy = False  # set by the worker while it holds claimed jobs
        self.shed = shed  # returns the jobs of the batch to give back (see Worker.shed)
        self.unreleased: list[str] = []  # shed jobs whose release failed; retried every tick
        self.flush = (
            flush  # commits the outcomes waiting while a job runs (see Worker.flush_outcomes)
        )
        self.flush_at: float | None = None  # perf_counter() time to call it
        self._wake = threading.Event()
        # how this thread gets its store (the worker's for_thread); by default a new one
        self.open_store = store or (lambda: open_store(config, migrate=False))
        self.renewed = renewed  # told the monotonic time each successful beat was sent (the fence)
        self.held = held  # the ids of the jobs the worker holds, for one beat (None: renew all)
        self.soon = False  # beat at the next tick (see beat_soon)
        self.looked = False  # the last beat gave back the running jobs not held (none in flight)
        self.checkin = checkin  # while busy: progress and cancel requests (worker.checkin)
        self.supervised = supervised  # our supervisor refreshes our process row while we idle

    def flush_by(self, deadline: float) -> None:
        """(Main thread.) Outcomes wait for their commit: call ``flush`` at ``deadline``
        (perf_counter) unless the main thread commits them first (``flush_at = None``)."""
        if self.flush_at is None:
            self.flush_at = deadline
            self._wake.set()

    def beat_soon(self) -> None:
        """(Main thread.) Beat at once, and every tick until a beat gets through that gives
        back what the worker does not hold (not one while a claim is in flight: that one renews
        every job): a claim was slow or failed, perhaps after the server committed it; the beat
        gives back what it claimed that the worker never saw."""
        self.soon = True
        self._wake.set()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        """The thread's loop; each tick its duties in turn, then a wait for the next (or a
        wake). ``store`` is the thread's own connection, opened by the first duty that needs it
        (each returns it, None after a failure: the next tick opens it again)."""
        store = None
        last_beat = self.clock.monotonic()
        try:
            while not self._halt.is_set():
                self._check_parent()
                store, last_beat = self._beat_if_due(store, last_beat)
                store = self._hand_back(store)
                if self.busy and self.checkin is not None:
                    store = self._checkin(store)
                store = self._flush_if_due(store)
                self._wake.wait(self._tick())
                self._wake.clear()
            if self.unreleased:
                store = self._release(store)
        finally:
            if store is not None:
                store.close()

    def _check_parent(self) -> None:
        """The supervisor gone (we were re-parented): say so once."""
        if (
            self.parent_pid is not None
            and not self.orphaned.is_set()
            and os.getppid() != self.parent_pid
        ):
            self.orphaned.set()
            self.on_orphaned()

    def _beat_if_due(self, store: Any, last_beat: float) -> tuple[Any, float]:
        """Renew the leases every heartbeat interval (busy) or while idle every IDLE_BEAT (4 x
        that under a supervisor, which refreshes our row), or at once when asked."""
        now = self.clock.monotonic()
        idle = IDLE_BEAT * (SUPERVISED_IDLE_BEAT if self.supervised else 1)
        every = self.config.worker.heartbeat_interval if self.busy else idle
        if now - last_beat >= every or self.soon:
            last_beat, soon, self.soon = now, self.soon, False
            store = self._beat(store)
            # Failed, or a claim was in flight (it renews all, gives nothing back): the
            # strangers beat_soon asked for are still there: again next tick.
            self.soon = self.soon or (soon and (store is None or not self.looked))
        return store, last_beat

    def _hand_back(self, store: Any) -> Any:
        """Jobs of a batch stuck behind a slow job (``shed``) go back to pending."""
        if self.busy and self.shed is not None:
            self.unreleased += [j.id for j in self.shed()]
        if self.unreleased:
            store = self._release(store)
        return store

    def _flush_if_due(self, store: Any) -> Any:
        """The batch's outcomes, once their commit deadline passed."""
        flush_at = self.flush_at
        if flush_at is not None and time.perf_counter() >= flush_at:
            self.flush_at = None  # before the flush: a deadline set meanwhile is kept
            store = self._flush(store)
        return store

    def _tick(self) -> float:
        w = self.config.worker
        tick = min(ORPHAN_CHECK, w.heartbeat_interval)
        if self.busy and self.shed is not None:  # look for a batch stuck behind a slow job
            tick = min(tick, max(0.05, w.batch_wait / 4))
        if self.busy and self.checkin is not None:
            tick = min(tick, CHECK_EVERY)
        flush_at = self.flush_at
        if flush_at is not None:
            tick = min(tick, max(flush_at - time.perf_counter(), 0.0))
        return tick

    def _checkin(self, store: WorkerStore | None) -> WorkerStore | None:
        """The busy worker's check-in (``worker.checkin``); a failure is logged and retried at
        its next time (the lease does not depend on it)."""
        try:
            if store is None:
                store = self.open_store()
            self.checkin(store)
        except Exception as exc:  # noqa: BLE001 - progress and cancel requests wait for the next one
            event(log, "worker.checkin_failed", logging.WARNING, owner=self.owner, error=str(exc))
            if store is not None:
                store.close()
            return None
        return store

    def _flush(self, store: WorkerStore | None) -> WorkerStore | None:
        """Commit the outcomes waiting behind the job in hand; on failure try again later (the
        main thread commits them itself when the job returns)."""
        try:
            if store is None:
                store = self.open_store()
            self.flush(store)
        except Exception as exc:  # noqa: BLE001 - the outcomes stay with the main thread
            event(log, "worker.flush_failed", logging.ERROR, owner=self.owner, error=repr(exc))
            self.flush_at = time.perf_counter() + RETRY_FLUSH
            if store is not None:
                store.close()
            return None
        return store

    def _release(self, store: WorkerStore | None) -> WorkerStore | None:
        """Give the shed jobs back: pending again, without losing an attempt."""
        ids = self.unreleased
        try:
            if store is None:
                store = self.open_store()
            n = store.release_unstarted(self.owner, ids, self.clock.now())
        except Exception as exc:  # noqa: BLE001 - retried at the next tick
            event(
                log,
                "worker.release_failed",
                logging.ERROR,
                owner=self.owner,
                jobs=len(ids),
                error=str(exc),
            )
            if store is not None:
                store.close()
            return None
        self.unreleased = []
        event(
            log,
            "worker.batch_released",
            owner=self.owner,
            jobs=n,
            batch_wait=self.config.worker.batch_wait,
        )
        return store

    def _beat(self, store: WorkerStore | None) -> WorkerStore | None:
        """Renew the leases; on success tell the fence when the renewal was sent (before the
        statement: the database stamps the lease no earlier than that)."""
        sent = self.clock.monotonic()
        try:
            if store is None:
                store = self.open_store()
            self.looked = False
            if self.held is None:
                store.heartbeat(self.owner, self.clock.now)
                self.looked = True  # (nothing is ever given back: there is nothing to look for)
            else:
                with self.held() as ids:  # no claim can start before the statement is done
                    # shed jobs are still held: _release gives them back (and counts them)
                    store.heartbeat(
                        self.owner,
                        self.clock.now,
                        None if ids is None else [*ids, *self.unreleased],
                    )
                    self.looked = ids is not None
            if self.renewed is not None:
                self.renewed(sent)
        except Exception as exc:  # noqa: BLE001 - a failed beat is logged; the lease may lapse
            event(log, "worker.heartbeat_failed", 30, owner=self.owner, error=str(exc))
            if store is not None:
                store.close()
            return None
        return store
