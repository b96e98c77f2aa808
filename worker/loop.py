"""The worker loop: claim a due job, run its handler, record the outcome with a guarded update.

Stops claiming on SIGTERM/SIGINT and exits 0 after the job in hand; reloads its config on SIGHUP;
exits when its supervisor dies; honours the pause flag (the claim itself checks it).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from shared import config as config_mod
from shared.clock import SystemClock
from shared.config import Config, ConfigError
from shared.exitcodes import ExitCode
from shared.handlers import Registry
from shared.job import Job
from shared.logs import event, get_logger
from shared.policy import JobPolicy
from shared.procs import owner_token, rss_mb
from shared.signals import SignalQueue
from shared.store import SqliteStore, StoreError

from .heartbeat import Heartbeat
from .runner import JobContext, JobLogger, Outcome, execute

log = get_logger("worker")


class Worker:
    """One worker process's loop. ``run()`` returns the process exit code."""

    def __init__(self, config: Config, registry: Registry, *, slot: int | None = None,
                 parent_pid: int | None = None, clock: Any = None, supervisor: str | None = None,
                 snapshot: str | None = None) -> None:
        self.config = config
        self.registry = registry
        self.slot = slot
        self.parent_pid = parent_pid
        self.supervisor = supervisor
        self.snapshot = snapshot  # the supervisor's validated config; reloaded on SIGHUP
        self.clock = clock or SystemClock()
        self.policy = JobPolicy(config, registry)
        self.pid = os.getpid()
        self.owner = owner_token(self.pid)
        self.signals = SignalQueue([signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
        self.store: SqliteStore | None = None
        self.heartbeat: Heartbeat | None = None
        self.stopping = False
        self.jobs_done = 0
        self.exit_code = ExitCode.OK

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self) -> int:
        if threading.current_thread() is threading.main_thread():
            self.signals.install()
        try:
            self.store = SqliteStore.from_config(self.config, migrate=True)
        except StoreError as exc:
            event(log, "worker.boot_failed", logging.ERROR, slot=self.slot, pid=self.pid, error=str(exc))
            self.signals.close()
            return ExitCode.DATABASE_UNAVAILABLE
        self.store.register_process(self.owner, "worker", self.pid, self.owner.split(":")[0],
                                    self.clock.now(), slot=self.slot, parent=self.supervisor)
        self.heartbeat = Heartbeat(self.config, self.owner, self.clock, self.parent_pid, self._orphaned)
        self.heartbeat.start()
        event(log, "worker.started", slot=self.slot, pid=self.pid, types=len(self.registry))
        try:
            self.loop()
        finally:
            self.heartbeat.stop()
            try:
                self.store.remove_process(self.owner)
            except Exception:  # noqa: BLE001 - best effort; the supervisor prunes stale rows
                pass
            self.store.close()
            self.signals.close()
        event(log, "worker.stopped", slot=self.slot, pid=self.pid, jobs=self.jobs_done,
              code=ExitCode.describe(self.exit_code))
        return int(self.exit_code)

    def loop(self) -> None:
        while True:
            self.handle_signals()
            if self.stopping:
                return
            jobs = self.store.claim(self.owner, self.pid, self.clock.now(), 1)
            if not jobs:
                self.idle_wait()
                continue
            for job in jobs:
                self.process(job)
            if self.should_recycle():
                self.stopping = True
                self.exit_code = ExitCode.RECYCLED

    def idle_wait(self) -> None:
        self.signals.wait(self.config.worker.poll_interval)

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
                    event(log, "worker.stopping", slot=self.slot, pid=self.pid, signal=signal.Signals(signum).name)
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
            new = config_mod.load_snapshot(self.snapshot) if self.snapshot else config_mod.load(self.config.path)
        except ConfigError as exc:
            event(log, "config.rejected", logging.ERROR, slot=self.slot, pid=self.pid, error=str(exc))
            return
        if new.database != self.config.database:
            event(log, "config.ignored", logging.WARNING, key="database", reason="needs a restart")
            new = new.replace(database=self.config.database)
        self.config = new
        self.policy = JobPolicy(new, self.registry)
        if self.heartbeat is not None:
            self.heartbeat.config = new
        event(log, "config.reloaded", slot=self.slot, pid=self.pid)

    def should_recycle(self) -> bool:
        w = self.config.worker
        if w.max_jobs and self.jobs_done >= w.max_jobs:
            event(log, "worker.recycle", slot=self.slot, pid=self.pid, reason="max_jobs", jobs=self.jobs_done)
            return True
        if w.max_memory_mb:
            rss = rss_mb(self.pid)
            if rss > w.max_memory_mb:
                event(log, "worker.recycle", slot=self.slot, pid=self.pid, reason="max_memory_mb",
                      rss_mb=round(rss, 1))
                return True
        return False

    # -- one job --------------------------------------------------------------------------------

    def process(self, job: Job) -> None:
        max_attempts = self.policy.max_attempts(job)
        adapter = JobLogger(get_logger("job"), {"id": job.id, "type": job.type, "attempt": job.attempts})
        ctx = JobContext(job.id, job.type, job.attempts, max_attempts, adapter)
        event(log, "job.started", logging.DEBUG, id=job.id, type=job.type, attempt=job.attempts,
              slot=self.slot, pid=self.pid)
        t0 = time.perf_counter()
        outcome = execute(self.registry, job, ctx)
        self.record(job, outcome, max_attempts, time.perf_counter() - t0)
        self.jobs_done += 1

    def record(self, job: Job, outcome: Outcome, max_attempts: int, duration: float) -> None:
        """Write the outcome with a guarded update; a lost lease drops it (and says so)."""
        now = self.clock.now()
        s, fields = self.store, dict(id=job.id, type=job.type, attempt=job.attempts,
                                     duration=round(duration, 6), slot=self.slot, pid=self.pid)
        if outcome.kind == "completed":
            ok, name, level = s.complete(job.id, job.attempts, self.owner, outcome.result, now), \
                "job.completed", logging.INFO
        elif outcome.kind == "failed" or job.attempts >= max_attempts:
            ok, name, level = s.fail(job.id, job.attempts, self.owner, outcome.error or "", now,
                                     max_attempts), "job.failed", logging.WARNING
        else:
            delay = outcome.delay if outcome.kind == "retry_after" else self.policy.backoff(job.attempts)
            ok = s.retry(job.id, job.attempts, self.owner, outcome.error or "", now + delay, now, max_attempts)
            name, level = "job.retry", logging.INFO
            fields["delay"] = round(delay, 3)
        if not ok:
            event(log, "job.lease_lost", logging.WARNING, outcome=outcome.kind, **fields)
            return
        if outcome.kind != "completed":
            lines = (outcome.error or "").strip().splitlines()
            fields["error"] = lines[-1] if lines else ""
        event(log, name, level, **fields)
