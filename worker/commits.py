"""The worker's commits of outcomes: with its next claim (``commit``), by the heartbeat thread
when the job in hand runs long (``flush_outcomes``), and waiting out a database that refuses
(``retry_write``). A mixin of :class:`worker.loop.Worker`, whose state (``held``, ``store``,
``heartbeat``, ``signals``) it uses."""

from __future__ import annotations

import logging

from shared.model.bounds import safe_text
from shared.engines.contract import WorkerStore
from shared.model.errors import StoreError
from shared.model.job import Job
from shared.model.limits import type_limits
from shared.runtime.logs import event, get_logger
from shared.execution.outcomes import Done, after_commit_all, unrecordable

log = get_logger("worker")

RETRY_WRITE = 0.5  # seconds between attempts to commit outcomes when the database refuses
WRITE_FAILED_EVERY = 120  # refused attempts per worker.write_failed line (about a minute)


class Commits:
    """Committing outcomes (see the module docstring)."""

    def flush_outcomes(self, store: WorkerStore) -> None:
        """(Heartbeat thread, FLUSH_AFTER after the oldest outcome began.) Commit the outcomes
        waiting while the main thread runs a job, on the heartbeat's own connection: a job that
        turns out slow (or is killed for its timeout) never holds back the outcomes of the jobs
        before it. Raises on a database error (the outcomes then stay for the main thread)."""

        def commit(dones: list[Done]) -> list[bool]:
            ok, _ = store.finish_and_claim(
                [d.finish for d in dones], self.owner, self.pid, self.clock.now(), 0
            )
            return ok

        self.held.flush(commit)

    def after_flushed(self) -> bool:
        """Log and run the hooks of the outcomes the heartbeat thread committed; whether any were."""
        flushed = self.held.take_flushed()
        for dones, ok in flushed:
            after_commit_all(dones, ok, self.registry, self.slot, self.pid)
        return bool(flushed)

    def commit(self, limit: int, must: bool = False) -> list[Job]:
        """Write the pending outcomes (and claim up to ``limit``). If the database refuses
        (disk full, read-only, locked past every retry) keep the outcomes, log, wait and retry:
        nothing is reported done before it is committed. Anything else raised while recording
        (a bug: outcomes are made recordable in ``outcomes.storable``) fails those jobs with the
        error instead, once; if even that cannot be written the worker exits with the error."""
        self.after_flushed()
        if self.heartbeat is not None:
            self.heartbeat.flush_at = None
        held, salvaged, failures = self.held, False, 0
        while True:
            try:
                ok, jobs = self.write_outcomes(limit)
                break
            except StoreError as exc:
                # one line as the streak starts and one a minute after: a retry every
                # RETRY_WRITE would write two error lines a second for as long as it lasts
                if failures % WRITE_FAILED_EVERY == 0:
                    event(
                        log,
                        "worker.write_failed",
                        logging.ERROR,
                        slot=self.slot,
                        pid=self.pid,
                        outcomes=len(held.done),
                        error=str(exc),
                        tries=failures + 1,
                    )
                failures += 1
                if not self.retry_write(must):
                    return []
            except Exception as exc:  # noqa: BLE001 - see the docstring
                if salvaged or not held.done:
                    raise
                self.salvage(exc)
                salvaged = True
        after_commit_all(held.done, ok, self.registry, self.slot, self.pid)
        held.done = []
        return jobs

    def write_outcomes(self, limit: int) -> tuple[list[bool], list[Job]]:
        """One attempt: the pending outcomes and a claim of up to ``limit`` in one transaction;
        which outcomes were recorded, and the jobs claimed. Raises what the store raises."""
        sent = self.clock.monotonic()
        # the clock itself: a limited claim reads it once it holds its lock
        ok, jobs = self.store.finish_and_claim(
            [d.finish for d in self.held.done],
            self.owner,
            self.pid,
            self.clock.now,
            limit,
            type_limits(self.config),
        )
        self.renewed(sent, jobs)
        return ok, jobs

    def salvage(self, exc: Exception) -> None:
        """Recording the pending outcomes raised ``exc`` (not a database refusal: a bug): log
        it, and make each outcome a failure carrying the error, for the one retry."""
        held = self.held
        event(
            log,
            "worker.commit_failed",
            logging.ERROR,
            slot=self.slot,
            pid=self.pid,
            outcomes=len(held.done),
            error=safe_text(repr(exc)),
        )
        held.done = [unrecordable(d, exc) for d in held.done]

    def retry_write(self, must: bool) -> bool:
        """After a refused commit: wait RETRY_WRITE (a signal ends the wait). False to give up:
        stopping (unless ``must``), or orphaned (the next supervisor re-queues our jobs)."""
        self.signals.wait(RETRY_WRITE)
        self.handle_signals()
        if self.stopping and not must:
            return False
        return not (
            self.stopping and self.heartbeat is not None and self.heartbeat.orphaned.is_set()
        )
