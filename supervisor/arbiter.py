"""The supervisor's main loop (the "arbiter", after gunicorn's).

    boot:  fork the template (before anything else), import handlers, reach the database, start
           workers, recover
    loop:  handle queued signals -> reap exited children -> respawn -> maintain -> wait

The arbiter keeps the loop and the state its steps share; the steps' bodies live beside it:
``supervisor.dispatch`` (what each signal asks), ``supervisor.slots`` (worker slots: back-off,
kills, scale-down, the roll), ``supervisor.spawner`` (how a slot is filled), ``supervisor.boot``
(the boot: the template, reaching the database, the first workers and recovery),
``supervisor.reload`` (re-reading and applying jobq.toml), ``supervisor.deaths`` (reaping),
``supervisor.outage`` (the database out of reach or replaced), ``supervisor.upkeep`` and
``supervisor.duties`` (the upkeep tasks).

Signal handlers only record signals (shared.runtime.signals); everything happens in the loop. The
database connection is opened when needed and closed before every fork. Workers are forked by
the template (supervisor.spawner, supervisor.forkserver) and reaped here as our own children.
"""

from __future__ import annotations

import logging
import os
import signal
import shutil
import traceback
from typing import Any

from shared import ExitCode, StoreError, StoreUnavailable  # the core's exports
from shared.runtime.clock import SystemClock
from shared.settings.config import Config
from shared.engines.contract import Round, EngineStore, UpkeepTask
from shared.execution.handlers import Registry
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy
from shared.runtime.processes import host_id
from shared.runtime.signals import SignalQueue

from . import boot as boot_mod, outage, reload as reload_mod
from .children import Slot, kill_group
from .codewatch import CodeWatch
from .deaths import Deaths
from .dispatch import HANDLED, dispatch
from .duties import Duties
from .forkserver import TemplateFailed
from .metrics import MetricsServer
from .pools import total_workers, with_queues
from .relay import Relay
from .slots import Slots
from .spawner import Spawner
from .storeref import StoreRef
from .upkeep import Upkeep

log = get_logger("supervisor")

RUNNING, STOPPING, HALTING = "running", "stopping", "halting"
COUNTERS = ("worker_starts", "worker_restarts", "worker_crashes", "jobs_reaped")


class Arbiter:
    """One supervisor process: ``run()`` boots, loops until stopped and every worker is gone,
    shuts down, and returns the process exit code (``shared.model.exitcodes``)."""

    def __init__(
        self,
        config: Config,
        *,
        workers: int | None = None,
        clock: Any = None,
        ready_fd: int | None = None,
        queues: tuple[str, ...] | None = None,
        spawner: Spawner | None = None,
    ) -> None:
        if not config.path:
            raise ValueError(
                "the supervisor needs a config file (workers read it); Config.path is None"
            )
        self._init_config(config, workers, queues)
        self.clock = clock or SystemClock()
        self.ready_fd = ready_fd
        self.spawner = (
            spawner or Spawner()
        )  # one whose template was forked already (supervisor.launch)
        self._init_loop()
        self._init_database()
        self._init_steps(config.path)

    def _init_config(
        self, config: Config, workers: int | None, queues: tuple[str, ...] | None
    ) -> None:
        """What it runs with, and what a reload keeps of it (``supervisor.reload``)."""
        self.file_config = config  # the file as last read (see reload)
        self.override = workers  # --workers or scaling, while the file keeps its count
        self.queues = queues  # --queues: kept over reloads
        self.config = with_queues(
            config if workers is None else config.with_workers(workers), queues
        )
        self.registry = Registry()
        self.policy = JobPolicy(self.config, self.registry)

    def _init_loop(self) -> None:
        """The loop's own state: the signals recorded, the worker slots, running, stopping or
        halting, the exit code and the counters."""
        self.signals = SignalQueue(HANDLED)
        self.slots = Slots()
        self.state = RUNNING
        self.stop_deadline: float | None = None
        self.exit_code = ExitCode.OK
        self.next_maintain = 0.0
        self.counters = dict.fromkeys(
            COUNTERS, 0
        )  # published for `jobq status`, exported as metrics

    def _init_database(self) -> None:
        """Our store, and who we are in it (set at boot: ``supervisor.boot``)."""
        self.dbref = StoreRef()  # our store, and whether the database is still the one opened
        self.token = ""
        self.host = host_id()  # this host in tokens and process rows (shared.runtime.processes)
        self.db_backoff = 0.0  # seconds added between rounds while the database is out of reach

    def _init_steps(self, path: str) -> None:
        """The parts the loop's steps hand their work to."""
        self.upkeep = Upkeep([])
        self.duties = Duties(self)
        self.deaths = Deaths(self)
        self.watch = reload_mod.ConfigWatch(path)
        self.code = CodeWatch()  # the application's source files as last imported
        self.snapshot_dir = ""
        self.metrics = MetricsServer()
        self.relay = Relay()  # the engine's relay of news to idle workers, if it has one

    @property
    def snapshot(self) -> str:
        return os.path.join(self.snapshot_dir, "config.json")

    @property
    def target(self) -> int:
        return total_workers(self.config)  # every pool's workers (shared.model.queues)

    # -- table of contents ----------------------------------------------------------------------

    def run(self) -> int:
        code = self.boot()
        if code != ExitCode.OK or not self.snapshot_dir:  # (stopped before reaching the database)
            return int(code)
        try:
            while not self.finished():
                self.handle_signals()
                self.reap_children()
                self.respawn()  # before the upkeep round: the first workers do not wait for it
                self.maintain()
                self.wait()
        except BaseException:
            event(log, "supervisor.crashed", logging.CRITICAL, error=traceback.format_exc())
            self.halt_all()
            self.exit_code = ExitCode.ERROR
        finally:
            self.shutdown()
        return int(self.exit_code)

    # -- boot -----------------------------------------------------------------------------------

    def boot(self) -> int:
        """Fork the template, import handlers, open the database, write the workers' snapshot,
        start them, recover dead owners' jobs (``supervisor.boot``: a database that may heal by
        waiting is waited for). Signals are recorded from the start: a SIGTERM during boot stops
        it cleanly right after. Returns an exit code (OK to go on, unless nothing was started:
        see ``supervisor.boot``)."""
        return boot_mod.boot(self)

    def load(self) -> int:
        return boot_mod.load(self)

    # -- signals --------------------------------------------------------------------------------

    def handle_signals(self) -> None:
        dispatch(self.signals.drain(), self)

    def stop(self, why: str) -> None:
        """SIGTERM or SIGINT: stop gracefully; halt if already stopping."""
        if self.state == RUNNING:
            self.begin_stop(why)
        else:
            self.begin_halt(why)

    def begin_stop(self, why: str) -> None:
        """Graceful: workers finish their job (within shutdown_timeout) and exit."""
        self.state = STOPPING
        self.stop_deadline = self.clock.monotonic() + self.config.supervisor.shutdown_timeout
        self.slots.signal_live(signal.SIGTERM)
        event(
            log,
            "supervisor.stopping",
            signal=why,
            timeout=self.config.supervisor.shutdown_timeout,
            workers=len(self.live()),
        )

    def begin_halt(self, why: str) -> None:
        """Immediate: kill every worker and its process group now."""
        self.state = HALTING
        event(log, "supervisor.halting", logging.WARNING, signal=why, workers=len(self.live()))
        self.halt_all()

    def halt_all(self) -> None:
        self.slots.kill_all("supervisor shutdown")

    def set_paused(self, paused: bool) -> None:
        self.db().set_paused(paused)
        event(log, "queue.paused" if paused else "queue.resumed")

    def scale(self, n: int, why: str) -> None:
        if n == self.target:
            return
        event(log, "supervisor.scaled", workers_from=self.target, workers_to=n, reason=why)
        self.config = self.config.with_workers(n)
        self.override = n

    def reload(self, why: str) -> None:
        """Apply jobq.toml again (``supervisor.reload``): policy, logging, the workers' snapshot,
        a new template for new handler modules; each worker gets a SIGHUP."""
        reload_mod.apply(self, why)

    # -- children -------------------------------------------------------------------------------

    def live(self) -> list[Slot]:
        return self.slots.live()

    def reap_children(self) -> None:
        self.deaths.reap()

    def running(self) -> bool:
        return self.state == RUNNING

    def respawn(self, ready: bool = True, wait: float = 0.0) -> None:
        """Fill the empty slots whose back-off has passed (all at once), once the template is
        ready (waiting up to ``wait`` s for it); retire the slots beyond the target; roll workers
        onto a new template. ``ready``: say so (``--ready-fd``) once every slot has its worker."""
        if self.state != RUNNING or self.check_health():
            return  # (a new worker would open, or create, whatever the database names now)
        if not self.template_ready(wait):
            return
        self.slots.roll(self.spawner.generation)
        self.start_due(self.clock.monotonic())
        if ready:
            self.notify_ready()

    def template_ready(self, wait: float) -> bool:
        """Can the template fork workers now (waiting up to ``wait`` s for it)? False while it
        imports the handler modules (its reply wakes the loop), or once one failed to import:
        then the supervisor halts, exiting BOOT_FAILED (no crash loop)."""
        try:
            self.spawner.check(wait)
        except TemplateFailed as exc:
            event(
                log,
                "supervisor.boot_failed",
                logging.CRITICAL,
                error=str(exc),
                where="template",
                traceback=exc.traceback,
            )
            self.exit_code = ExitCode.BOOT_FAILED
            self.begin_halt("boot failed")
            return False
        return not self.spawner.waiting()

    def start_due(self, now_m: float) -> None:
        """Start a worker in every slot whose back-off has passed by ``now_m``, all at once."""
        due = self.slots.due(self.target, now_m)
        if not due:
            return
        for slot in due:
            self.counters["worker_restarts" if slot.started else "worker_starts"] += 1
        # The template forks in its own process; only a worker started by exec is forked
        # here, and nothing crosses fork(): the connection is closed before that.
        self.spawner.start(due, self.token, now_m, HANDLED, before_exec=self.close_db)
        for slot in due:
            event(
                log,
                "worker.spawned",
                slot=slot.index,
                pid=slot.pid,
                restarts=slot.failures,
                forked=slot.forked,
            )

    def notify_ready(self) -> None:
        if self.ready_fd is None or len(self.live()) < self.target:
            return
        try:
            os.write(self.ready_fd, b"ready\n")
            os.close(self.ready_fd)
        except OSError:
            pass
        self.ready_fd = None

    # -- maintenance ----------------------------------------------------------------------------

    def maintain(self) -> None:
        """Kills that are due; a changed config file; then, every maintenance_interval, one
        round of the upkeep tasks (skipped, with a back-off, while the database is out of reach)."""
        now_m = self.clock.monotonic()
        deadline = self.stop_deadline if self.state == STOPPING else None
        self.slots.escalate(now_m, self.snapshot, self.config.supervisor.kill_grace, deadline)
        if (
            self.watch.due(now_m, self.config.supervisor.config_poll_interval)
            and self.state == RUNNING
        ):
            self.reload("file changed")
        if now_m < self.next_maintain:
            return
        self.next_maintain = now_m + self.config.supervisor.maintenance_interval
        if self.check_health():
            return
        try:
            rnd = self.round()
        except StoreUnavailable as exc:
            self.unavailable(now_m, exc)
            return
        self.db_backoff = 0.0
        failed = self.upkeep.run(rnd)
        for name, error in failed:
            event(log, "supervisor.maintenance_failed", logging.ERROR, task=name, error=repr(error))
        if failed:
            self.close_db()  # the next round opens a fresh connection

    def unavailable(self, now_m: float, exc: StoreError) -> None:
        """Skip this round and back off (``supervisor.outage``)."""
        outage.unavailable(self, now_m, exc)

    def upkeep_tasks(self) -> list[UpkeepTask]:
        """The upkeep table of contents (``supervisor.duties``; ``supervisor.upkeep`` runs it)."""
        return self.duties.tasks()

    def round(self) -> Round:
        return Round(self.db(), self.config, self.clock.now(), self.clock.monotonic())

    def check_health(self) -> bool:
        """True once the database was found replaced and the stop is under way
        (``supervisor.outage``)."""
        return outage.check_health(self)

    # -- waiting and ending ---------------------------------------------------------------------

    def wait(self) -> None:
        """Sleep until the next thing due (a round, a respawn, a kill, the stop deadline), a
        signal, a metrics request or the template's reply; then answer the metrics requests."""
        now_m = self.clock.monotonic()
        # While the template starts, empty slots wait for its reply (an fd): not to spin on its CPU
        respawning = self.state == RUNNING and not self.spawner.waiting()
        wake = [self.next_maintain, now_m + 1.0, *self.slots.wake_times(respawning)]
        if self.stop_deadline is not None:
            wake.append(self.stop_deadline)
        relay_due = self.relay.wait_for()
        if relay_due is not None:
            wake.append(now_m + relay_due)
        extra = [
            *self.metrics.fds(self.config),
            *self.spawner.fds(),
            *self.relay.fds(self.config, self.state == RUNNING),
        ]
        ready = self.signals.wait(max(min(wake) - now_m, 0.0), extra=extra)
        if self.relay.serve(ready, self.snapshot_dir):
            self.next_maintain = 0.0  # a control came: the round reads it now
        self.metrics.serve(
            ready, self.db, self.counters, workers=len(self.live()), workers_target=self.target
        )

    def finished(self) -> bool:
        return self.state != RUNNING and not self.live()

    def shutdown(self) -> None:
        for slot in self.live():  # only after a crash of this loop: never leave workers behind
            kill_group(slot.pid, signal.SIGKILL)
        self.reap_blocking()
        self.spawner.stop()
        try:
            self.duties.leave(self.db())  # our process row, the upkeep lead
        except Exception:  # noqa: BLE001
            pass
        self.close_db()
        self.signals.close()
        self.metrics.close()
        self.relay.close(self.snapshot_dir)
        if self.snapshot_dir:
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
        event(log, "supervisor.stopped", code=ExitCode.describe(self.exit_code))

    def reap_blocking(self) -> None:
        self.deaths.reap(block=True)

    # -- database -------------------------------------------------------------------------------

    def db(self) -> EngineStore:
        return self.dbref.get(self.config)

    def close_db(self) -> None:
        self.dbref.close()
