"""The worker loop.

    claim (with the previous outcomes, in one transaction) -> run each job -> repeat

Claims are guarded ``UPDATE ... RETURNING`` statements. On a deep queue of fast jobs a worker
claims several jobs per transaction and commits their outcomes together with the next claim
(one commit per batch instead of two per job); a slow job drops the batch size back to 1, and
the heartbeat thread gives back the unstarted rest of a batch once the job ahead of them has run
``batch_wait`` seconds, so jobs are never hoarded behind a slow one. Outcomes are logged and hooks
run only after they commit. Jobs of a batch that were never started go back without losing an
attempt: the worker releases them when it stops, and the supervisor (reading the progress file)
when the worker dies.

Stops claiming on SIGTERM/SIGINT and exits 0 after the job in hand; reloads its config on SIGHUP;
exits when its supervisor dies; honours the pause flag (the claim itself checks it). When idle it
waits as its store's engine arranges (``shared.engines.contract.Wakeup``; SQLite: until a commit,
the next delayed job's time, or ``poll_interval``), not knowing which engine it runs on. The
database failing on the idle/claim path is waited out, never fatal (``guarded``; the claim, the
idle wait and their guard are ``worker.claims``, the commits of outcomes ``worker.commits``). At
every turn, and as soon as each handler returns, it checks that it is still the worker's own process with its own
descriptors (``Control.check_process``, in worker.control with signals, reloads and recycling).
Async types run many at once in ``worker.aio``, entered whenever the loop holds nothing claimed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from shared.execution.asyncjobs import async_limits_of
from shared.runtime.clock import SystemClock
from shared.settings.config import Config
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import Registry
from shared.model.job import Job
from shared.runtime.logs import event, get_logger
from shared.execution.outcomes import Done, decide
from shared.execution.policy import JobPolicy
from shared.runtime.processes import host_id, owner_token
from shared.execution.progress import ProgressWriter, mark_stopped
from shared.execution.runner import JobContext, execute
from shared.telemetry.tracing import Tracing, worker_tracing
from shared.runtime.controlfile import ControlMark, control_path
from shared.runtime.signals import SignalQueue
from shared.engines.contract import Wakeup, WorkerStore
from shared.engines import database_missing, health_check, open_store
from shared.engines.health import HealthCheck
from shared.model.errors import StoreError

if TYPE_CHECKING:
    from .aio import AsyncRunner
from .batch import BATCH_BUDGET, FAST_JOB, Batch  # noqa: F401 - FAST_JOB, BATCH_BUDGET: named here too
from .claims import Claims
from .commits import Commits
from .checkin import CheckIn, InHand
from .control import Control
from .queues import serve_queues
from .fence import Fence
from .heartbeat import Heartbeat

log = get_logger("worker")

FLUSH_AFTER = 0.05  # seconds: outcomes never wait longer than this for their commit


class Worker(Control, Claims, Commits):
    """One worker process's loop; ``run()`` returns its exit code. What it holds: ``held``."""

    def __init__(
        self,
        config: Config,
        registry: Registry,
        *,
        slot: int | None = None,
        parent_pid: int | None = None,
        clock: Any = None,
        supervisor: str | None = None,
        snapshot: str | None = None,
        progress: str | None = None,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.slot = slot
        self.parent_pid = parent_pid
        self.supervisor = supervisor
        self.snapshot = snapshot  # the supervisor's validated config; reloaded on SIGHUP
        self.progress_path = progress
        # called between open() and the threads' start: a worker forked by the template waits
        # there until it is the supervisor's child (its go-between's exit overlaps the connect)
        self.settle = settle
        self.clock = clock or SystemClock()
        self.policy = JobPolicy(config, registry)
        self.pid = os.getpid()
        self.host = host_id()
        self.owner = owner_token(self.pid, self.host)
        self.signals = SignalQueue([signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
        self._unopened()
        self._nothing_held()

    def _unopened(self) -> None:
        """What ``open()`` and ``start_threads()`` make: None until then."""
        self.store: WorkerStore | None = None
        self.health: HealthCheck | None = None  # is the database the one opened? (see idle_wait)
        self.heartbeat: Heartbeat | None = None
        self.fence: Fence | None = None  # stops this process if its lease cannot be renewed in time
        self.wakeup: Wakeup | None = None
        self.progress: ProgressWriter | None = None
        self.aio: AsyncRunner | None = None  # the async runner, when it serves async types

    def _nothing_held(self) -> None:
        """The loop's state at the start: nothing claimed, run or committed yet."""
        self.stopping = False
        self.jobs_done = 0
        self.exit_code = ExitCode.OK
        self.held = Batch()  # claimed jobs, the job in hand, uncommitted outcomes
        self.read_first = False  # see claim()
        self.wait_again = False  # (the same)
        self.store_down = False  # the idle/claim path's last statement failed (guarded)
        self.tracing: Tracing = worker_tracing(
            self.config, self.slot
        )  # spans and meters of runs (docs/tracing.md)
        # the running job's deadline, cancel flag, progress
        self.in_hand = InHand(self.slot, self.pid)
        self.per_type: tuple[JobPolicy, dict[str, tuple[int, float]]] = (
            self.policy,
            {},
        )  # see settings()

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self) -> int:
        if threading.current_thread() is threading.main_thread():
            self.signals.install()
        code = self.open()
        if code != ExitCode.OK:
            return code
        if self.settle is not None:
            self.settle()
        self.start_threads()
        event(log, "worker.started", slot=self.slot, pid=self.pid, types=len(self.registry))
        try:
            self.loop()
            self.wind_down()
        finally:
            if self.aio is not None:
                self.aio.close()
            self.heartbeat.stop()
            self.fence.stop()
            self.close()
            self.tracing.flush()  # the SDK's queued spans: os._exit at the end runs no atexit flush
        if self.progress_path:
            mark_stopped(self.progress_path)  # the supervisor kills us if we linger after this
        event(
            log,
            "worker.stopped",
            slot=self.slot,
            pid=self.pid,
            jobs=self.jobs_done,
            code=ExitCode.describe(self.exit_code),
        )
        return int(self.exit_code)

    def open(self) -> int:
        """Open the database and register; an exit code (OK to go on)."""
        try:
            missing = database_missing(self.config) if self.supervisor else None
            if missing is not None:
                # The supervisor created it at boot: it was deleted since; never make a new one.
                raise StoreError(missing)
            self.store = open_store(self.config, migrate=True)
            self.store.register_process(
                self.owner,
                "worker",
                self.pid,
                self.host,
                self.clock.now(),
                slot=self.slot,
                parent=self.supervisor,
            )
        except StoreError as exc:
            event(
                log,
                "worker.boot_failed",
                logging.ERROR,
                slot=self.slot,
                pid=self.pid,
                error=str(exc),
            )
            if self.store is not None:
                self.store.close()
            self.signals.close()
            return ExitCode.DATABASE_UNAVAILABLE
        self.health = health_check(self.config)
        serve_queues(self)  # before the wake-up: idle workers of one pool share a lead
        self.wakeup = self.store.wakeup()
        self.progress = ProgressWriter(self.progress_path) if self.progress_path else None
        return ExitCode.OK

    def start_threads(self) -> None:
        """The fence, then the heartbeat that tells it of each renewal."""
        assert self.store is not None
        self.fence = Fence(self.config, self.owner, self.clock)
        self.fence.start()
        self.heartbeat = Heartbeat(
            self.config,
            self.owner,
            self.clock,
            self.parent_pid,
            self._orphaned,
            shed=self.shed,
            flush=self.flush_outcomes,
            store=self.store.for_thread,
            renewed=self.fence.renewed,
            held=self.held.held_ids,
            checkin=CheckIn(self.owner, self.in_hand, self.control_mark()).tick,
            supervised=self.supervisor is not None,
        )
        self.heartbeat.start()
        if async_limits_of(self.config, self.registry):
            # here: the runner and asyncio are half of this module's imports, which the template
            # makes before the first job; it preloads them only when a type is async
            from .aio import AsyncRunner

            self.aio = AsyncRunner(self)

    def control_mark(self) -> ControlMark:
        """When the check-in reads cancel requests: on the supervisor's word (its folder holds
        our config snapshot), or at each check-in (no supervisor)."""
        folder = os.path.dirname(self.snapshot) if self.snapshot else None
        path = control_path(folder) if folder else None
        return ControlMark(path, lambda: self.config.supervisor.control_poll_interval)

    def close(self) -> None:
        try:
            self.store.remove_process(self.owner)
        except Exception:  # noqa: BLE001 - best effort; the supervisor prunes stale rows
            pass
        self.store.close()
        self.wakeup.close()
        if self.progress is not None:
            self.progress.close()
        self.signals.close()

    def wind_down(self) -> None:
        """On the way out: commit what ran, give back what never started."""
        self.commit(limit=0, must=True)
        ids = self.held.take_unstarted()
        if ids:
            try:
                self.store.release_unstarted(self.owner, ids, self.clock.now())
            except StoreError as exc:
                event(log, "worker.release_failed", logging.ERROR, jobs=len(ids), error=str(exc))

    # -- the loop -------------------------------------------------------------------------------

    def loop(self) -> None:
        vouched = False  # the last turn ran only our own code since its job's check (turn_end)
        while True:
            if not vouched:
                self.check_process()
            self.handle_signals()
            if self.stopping:
                return
            vouched = self.turn()

    def turn(self) -> bool:
        """One turn of the loop: when nothing is held, claim (or run async jobs, or wait idle:
        the turn ends there); then run the batch's next job and end the turn (``turn_end``).
        Whether the next turn may skip its process check: only ``turn_end`` says it may."""
        if not self.held.queue and not self.refill():
            return False
        if not self.heartbeat.busy:  # (set once a batch: no call on every job's path)
            self.holding(True)
        job = self.take()
        if job is not None and self.unserved(job):
            return False  # given back; we stop, and the supervisor starts a worker that has it
        if job is not None:
            done = self.process(job)
            self.check_process(job)  # before anything touches the database again
            self.held.ran(done)
        vouched = self.turn_end(ran=job is not None)
        if self.should_recycle():
            self.stopping = True
            self.exit_code = ExitCode.RECYCLED
        return vouched

    def refill(self) -> bool:
        """Nothing held: run async jobs until none is in flight, or claim a batch, or else wait
        idle. Whether a batch was claimed (False ends the turn)."""
        if self.aio is not None and self.guarded(self.aio.run):
            return False  # ran async jobs (worker.aio) until none was in flight
        if not self.guarded(self.claim):
            self.holding(False)
            self.tracing.settle()  # the runs counted per batch, before an idle wait
            self.guarded(self.idle_wait, proves=False)
            return False
        self.wakeup.claimed()
        return True

    def turn_end(self, ran: bool) -> bool:
        """The end of a turn that took the batch's next job (``ran``: False if the heartbeat
        thread gave the rest back first): report the outcomes the heartbeat committed, then
        resize the next claim at the batch's end, or commit outcomes that waited FLUSH_AFTER.
        Returns whether the next turn's check may be skipped (a getpid and an fstat, ~5% of a
        no-op job's CPU): only when a job ran and nothing but the worker's own code runs until
        that check: no hook or log line of an outcome, no claim, no batch's end."""
        vouched = ran and not (self.held.flushed and self.after_flushed())  # (most turns: none)
        if not self.held.queue:
            self.resize()
            return False
        if time.perf_counter() - self.held.done_since >= FLUSH_AFTER:
            self.commit(limit=0)
            return False
        return vouched

    def holding(self, busy: bool) -> None:
        """Whether we hold claimed jobs: the heartbeat beats often and the fence watches."""
        self.heartbeat.busy = busy
        if self.fence is not None:
            self.fence.hold(busy)

    def take(self) -> Job | None:
        """The next job of the batch (None if the heartbeat thread gave the rest back)."""
        job, started = self.held.take()
        if job is None:
            return None
        if self.progress is not None:
            self.progress.started(started)
        if self.held.done and self.heartbeat is not None:
            self.heartbeat.flush_by(self.held.done_since + FLUSH_AFTER)
        return job

    def shed(self) -> list[Job]:
        """(Heartbeat thread.) The unstarted rest of the batch once the job in hand has run
        ``batch_wait`` seconds (see :meth:`worker.batch.Batch.shed`)."""
        return self.held.shed(self.config.worker.batch_wait)

    def process(self, job: Job) -> Done:
        max_attempts, timeout = self.settings(job)
        ctx = JobContext(job.id, job.type, job.attempts, max_attempts, job.queue)
        ctx.config, ctx.store = self.config, self.store
        if log.isEnabledFor(
            logging.DEBUG
        ):  # (the fields' dict is built only then: every job's path)
            event(
                log,
                "job.started",
                logging.DEBUG,
                id=job.id,
                type=job.type,
                attempt=job.attempts,
                slot=self.slot,
                pid=self.pid,
            )
        t0 = self.held.job_t0 or time.perf_counter()
        if not self.held.done:
            self.held.done_since = t0
        if self.aio is None:  # (the call and its arguments: no closure per job)
            outcome = self.in_hand.run(ctx, timeout, execute, self.registry, job, ctx, self.tracing)
        else:
            outcome = self.in_hand.run(ctx, timeout, self.aio.run_one, job, ctx)
        duration = time.perf_counter() - t0
        self.jobs_done += 1
        return decide(job, ctx, outcome, self.policy, self.clock.now(), duration)

    def settings(self, job: Job) -> tuple[int, float]:
        """``job``'s max attempts and timeout (``policy``), its type's looked up once per policy:
        a reload replaces the policy, and with it what is remembered here."""
        policy, known = self.per_type
        if policy is not self.policy:
            policy, known = self.per_type = (self.policy, {})
        got = known.get(job.type)
        if got is None:
            got = known[job.type] = (
                policy.max_attempts(dataclasses.replace(job, max_attempts=None)),
                policy.timeout(job.type),
            )
        return (got[0] if job.max_attempts is None else job.max_attempts), got[1]

    def resize(self) -> None:
        """Grow or shrink the next claim (see :meth:`worker.batch.Batch.resize`)."""
        self.held.resize(self.config.worker.max_batch)
        self.tracing.settle()  # the batch's runs to the OpenTelemetry counter (one add per type)
