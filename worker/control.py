"""The worker's control path, apart from the job loop (``worker.loop.Worker`` inherits it):
signals (stop, reload), the supervisor's death, recycling, and a handler set gone stale.

Everything here runs on the worker's main thread between two jobs, except ``_orphaned`` (the
heartbeat thread), which only records and wakes.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from shared.settings import config as config_mod
from shared.settings.config import ConfigError
from shared.model.exitcodes import ExitCode
from shared.model.job import Job
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy
from shared.runtime.processes import rss_mb

from .queues import serve_queues

log = get_logger("worker")


class Control:
    """Mixed into ``worker.loop.Worker`` (its attributes: ``config``, ``registry``, ``signals``,
    ``heartbeat``, ``fence``, ``held``, ``stopping``, ``exit_code`` ...)."""

    def check_process(self, job: Job | None = None) -> None:
        """Go on only if this is still the worker's own process, with its own descriptors (called
        at the top of every turn of the loop, and as soon as a job's handler returns):

        - a process forked by a handler or hook that came back here instead of ending with
          ``os._exit`` (``shared.execution.runner`` ends a handler's own; this catches the rest)
          ends at once, ERROR, running nothing of the worker's;
        - a handler that closed the worker's descriptors (``os.closerange``; the signal pipe
          stands for them all) makes the worker exit DESCRIPTORS_CLOSED at once, touching
          nothing: their numbers may name other files by now (a reused signal pipe number read
          as signals, a database write into someone's file). The supervisor re-queues ``job``
          as for any dead worker.

        It is on every job's path (twice): a ``getpid`` and one ``fstat`` of the pipe's read end
        at the top of a turn, and of both ends after a handler (``job`` given)."""
        if os.getpid() != self.pid:
            os._exit(ExitCode.ERROR)
        if self.signals.intact(both=job is not None):
            return
        event(
            log,
            "worker.descriptors_closed",
            logging.ERROR,
            slot=self.slot,
            pid=self.pid,
            id=job.id if job else None,
            type=job.type if job else None,
            attempt=job.attempts if job else None,
            note="a handler closed the worker's file descriptors; exiting without touching the "
            "database; the job runs again as for a dead worker",
        )
        try:
            logging.shutdown()
            sys.stderr.flush()
        finally:
            os._exit(ExitCode.DESCRIPTORS_CLOSED)

    def stale_handlers(self) -> bool:
        """Does the config name other handler modules than the ones this worker imported? Our
        current config (a reload changed ``handlers``), or the config file itself: read here,
        on the rare job we have no handler for, because the reload that will serve its type
        may be on its way (the supervisor has not read the file yet)."""
        loaded = self.registry.modules
        if loaded is None:
            return False
        if tuple(self.config.handlers) != loaded:
            return True
        if not self.config.path:
            return False
        try:
            return tuple(config_mod.load(self.config.path).handlers) != loaded
        except ConfigError:
            return False  # an invalid edit changes nothing

    def unserved(self, job: Job) -> bool:
        """A job of a type this worker has no handler for, while the current config may serve it
        (it names other handler modules than ours): give it back without charging an attempt,
        and stop so that a worker with the new handlers replaces us (exit RECYCLED). A type no
        configured module serves still fails ("no handler") when its job runs."""
        if self.registry.get(job.type) is not None or not self.stale_handlers():
            return False
        self.held.give_back(job)  # wind_down gives back the whole unstarted rest
        if not self.stopping:
            event(
                log,
                "worker.handlers_changed",
                logging.WARNING,
                slot=self.slot,
                pid=self.pid,
                id=job.id,
                type=job.type,
                handlers=",".join(self.config.handlers),
                note="job given back; replacing this worker",
            )
        self.stopping = True
        self.exit_code = ExitCode.RECYCLED
        return True

    def _orphaned(self) -> None:
        """Called from the heartbeat thread when the supervisor is gone."""
        event(log, "worker.orphaned", logging.WARNING, slot=self.slot, pid=self.pid)
        self.signals.wake()
        grace = self.config.supervisor.shutdown_timeout

        def abandon() -> None:
            # Still busy after the grace period: abandon the job. It stays 'running' under this
            # dead owner and the next supervisor re-queues it.
            os._exit(ExitCode.ORPHANED)

        t = threading.Timer(grace, abandon)
        t.daemon = True
        t.start()

    def handle_signals(self) -> None:
        for signum in self.signals.drain():
            if signum in (signal.SIGTERM, signal.SIGINT):
                if not self.stopping:
                    event(
                        log,
                        "worker.stopping",
                        slot=self.slot,
                        pid=self.pid,
                        signal=signal.Signals(signum).name,
                    )
                self.stopping = True
            elif signum == signal.SIGHUP:
                self.reload()
        if self.heartbeat is not None and self.heartbeat.orphaned.is_set():
            self.stopping = True
            self.exit_code = ExitCode.ORPHANED

    def reload(self) -> None:
        if not self.snapshot and not self.config.path:
            return
        try:
            new = (
                config_mod.load_snapshot(self.snapshot)
                if self.snapshot
                else config_mod.load(self.config.path)
            )
        except ConfigError as exc:
            event(
                log, "config.rejected", logging.ERROR, slot=self.slot, pid=self.pid, error=str(exc)
            )
            return
        if new.database != self.config.database:
            event(log, "config.ignored", logging.WARNING, key="database", reason="needs a restart")
            new = new.replace(database=self.config.database)
        self.config = new
        self.policy = JobPolicy(new, self.registry)
        if self.heartbeat is not None:
            self.heartbeat.config = new
        if self.fence is not None:
            self.fence.config = new
        serve_queues(self)
        event(log, "config.reloaded", slot=self.slot, pid=self.pid)

    def should_recycle(self) -> bool:
        w = self.config.worker
        if w.max_jobs and self.jobs_done >= w.max_jobs:
            event(
                log,
                "worker.recycle",
                slot=self.slot,
                pid=self.pid,
                reason="max_jobs",
                jobs=self.jobs_done,
            )
            return True
        if w.max_memory_mb:
            rss = rss_mb(self.pid)
            if rss > w.max_memory_mb:
                event(
                    log,
                    "worker.recycle",
                    slot=self.slot,
                    pid=self.pid,
                    reason="max_memory_mb",
                    rss_mb=round(rss, 1),
                )
                return True
        return False
