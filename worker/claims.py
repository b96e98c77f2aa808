"""The worker's idle/claim path: claiming the next batch (with the outcomes to commit, in one
transaction, or the engine's own quick claim), the lease check after a claim (``renewed``),
waiting while there is nothing to claim (``idle_wait``), and waiting out a database that fails
on that path (``guarded``: never fatal). A mixin of :class:`worker.loop.Worker`, whose state
(``held``, ``store``, ``wakeup``, ``heartbeat``, ``fence``, ``health``, ``signals``,
``read_first``, ``wait_again``, ``store_down``) it uses; the loop that calls it is ``worker.loop``."""

from __future__ import annotations

import logging
from typing import Callable

from shared.engines.contract import WorkerStore
from shared.model.errors import StoreError, StoreQueryError
from shared.model.exitcodes import ExitCode
from shared.model.job import Job
from shared.model.limits import type_limits
from shared.runtime.logs import event, get_logger

from .commits import RETRY_WRITE
from .heartbeat import after_claim

log = get_logger("worker")


class Claims:
    """Claiming and the idle wait (see the module docstring)."""

    def claim(self) -> bool:
        """Commit finished outcomes and claim the next batch in one transaction.

        After an idle wait that no commit ended (a delayed job's time came, or the poll timer),
        read first and take the write lock only if a job is due: eight workers waking at a
        delayed job's ``run_at`` would otherwise queue for the lock, some of them early and
        finding nothing, while the one that would claim it sleeps in SQLite's busy handler
        (1, 2, then 5 ms). A wake by a commit claims at once: that commit may still be
        finishing, and a read could miss the job it adds. The engine's wake-up is told just
        before the write lock is asked for, and may claim its own quicker way (the idle lead)."""
        if self.wait_again:  # the engine's wait says nothing came and nothing is due: no read
            self.wait_again = False
            if not self.held.done:
                return False
        if self.read_first:
            self.read_first = False
            if not self.held.done and not self.store.has_due(self.clock.now()):
                return False
        slow = self.heartbeat.beat_soon if self.heartbeat is not None else None
        with self.held.claiming(slow) as got:  # the jobs join the batch as the claim ends
            jobs = self.fast_claim()
            if jobs is None:
                jobs = self.commit(limit=self.held.size)
            got.extend(jobs)
        if not jobs:
            return False
        self.held.claimed_now(len(jobs))
        if self.progress is not None:
            self.progress.batch([j.id for j in jobs], completed=self.jobs_done)
        return True

    def fast_claim(self) -> list[Job] | None:
        """The engine's own claim (the idle lead's), when there are no outcomes to commit with
        it and no per-type limits; None: claim with the commit."""
        if self.wakeup is None:  # (None: a test drives claim() without run())
            return None
        self.wakeup.before_claim()
        if self.held.done or type_limits(self.config):
            return None
        sent = self.clock.monotonic()
        jobs = self.wakeup.fast_claim(self.owner, self.pid, self.clock.now, self.held.size)
        self.renewed(sent, jobs or [])
        return jobs

    def renewed(
        self,
        sent: float,
        jobs: list[Job],
        store: WorkerStore | None = None,
        running: int | None = None,
    ) -> None:
        """A claim sent at monotonic ``sent`` on ``store`` returned ``jobs``, all the leases we
        hold (see aio; ``running``: with those it gives back); a slow one is renewed at once."""
        if jobs and self.fence is not None:
            at = after_claim(
                store or self.store,
                self.owner,
                self.clock,
                sent,
                len(jobs) if running is None else running,
                self.config.worker.heartbeat_interval,
            )
            if at is not None:
                self.fence.renewed(at)
            else:
                self.fence.doubt(sent)

    def guarded(self, step: Callable[[], bool | None], proves: bool = True) -> bool | None:
        """Run ``step`` of the idle/claim/wake-up path (``claim``, ``idle_wait``). The database
        failing there (a dropped connection, a server's ``idle_session_timeout``, a file locked
        or unreadable) never ends the worker: it is logged (once per outage), waited out for
        RETRY_WRITE (a signal ends the wait) and the loop goes on; the store reconnects at its
        next statement. Returns ``step``'s result, False after a failure. ``proves``: a success
        of ``step`` shows the database is back (an idle wait's does not: it may swallow errors)."""
        try:
            result = step()
        except StoreError as exc:
            if not self.store_down:
                # a statement that fails on a working connection is not an outage: its name
                # sends the reader to the schema or the SQL, not to the network
                query = isinstance(exc, StoreQueryError)
                event(
                    log,
                    "worker.query_failed" if query else "worker.database_unavailable",
                    logging.ERROR if query else logging.WARNING,
                    slot=self.slot,
                    pid=self.pid,
                    error=str(exc),
                    note=f"waiting; retrying every {RETRY_WRITE:g} s",
                )
            self.store_down = True
            self.signals.wait(RETRY_WRITE)
            return False
        if self.store_down and proves:
            self.store_down = False
            event(log, "worker.database_back", slot=self.slot, pid=self.pid)
        return result

    def idle_wait(self) -> None:
        """Wait as the engine says (a descriptor to watch, a timeout), or for a signal. Only the
        engine's "claim now" lets the next claim skip its read. Stops, to exit
        DATABASE_UNAVAILABLE, if the database is no longer the one opened (the engine's health
        check: SQLite's file deleted or replaced)."""
        problem = self.health.problem() if self.health is not None else None
        if problem is not None:
            event(
                log,
                "worker.database_replaced",
                logging.ERROR,
                slot=self.slot,
                pid=self.pid,
                error=problem,
            )
            self.stopping = True
            self.exit_code = ExitCode.DATABASE_UNAVAILABLE
            return
        fd, timeout = self.wakeup.prepare(self.clock.now(), self.config.worker.poll_interval)
        extra = [fd] if fd is not None else []
        ready = self.signals.wait(timeout, extra)
        got = self.wakeup.woke(bool(extra) and fd in ready)
        self.read_first, self.wait_again = got is False, got is None
