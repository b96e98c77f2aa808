"""The supervisor's main loop (the "arbiter", after gunicorn's).

    boot:  fork the template process (before anything else), import handler modules, recover
           jobs of dead owners
    loop:  handle queued signals -> reap exited children -> maintain -> respawn -> wait

``maintain`` runs the upkeep tasks (``supervisor.upkeep``) each on its interval.

Signal handlers only record signals (shared.signals); everything happens in the loop. The
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

from shared import config as config_mod
from shared import logs, ops, database as database_mod
from shared.clock import SystemClock
from shared.config import Config, ConfigError
from shared.dbfile import DatabaseFile
from shared.exitcodes import ExitCode
from shared.handlers import HandlerImportError, Registry, load_registry
from shared.job import Job
from shared.logs import event, get_logger
from shared.policy import JobPolicy
from shared.procs import host_id, owner_token, send_signal
from shared.signals import SignalQueue
from shared.progress import not_in_hand
from shared.contract import Round, Store, UpkeepTask
from shared.engines import database_file, open_store, upkeep_tasks
from shared.errors import StoreError, StoreUnavailable
from shared.job import Released

from . import maintenance, scheduler, statedir
from .upkeep import PROCESS_STALE_AFTER, PROCESS_TOUCH_EVERY, Upkeep
from .metrics import MetricsServer
from .children import (Slot, describe_status, forget_progress, kill_group, lingering, progress_path,
                       restart_delay, worker_got_going)
from .forkserver import TemplateFailed
from .spawner import Spawner

log = get_logger("supervisor")

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGTTIN, signal.SIGTTOU, signal.SIGCHLD)
HEALTHY_AFTER = 10.0      # a worker that lived this long (or ran jobs) resets its slot's back-off
EARLY_KILLS = 3           # SIGKILLs before ready in a row that are not yet a crash loop
DB_BACKOFF_MAX = 5.0      # seconds: the longest wait between tries to reach an unavailable database

RUNNING, STOPPING, HALTING = "running", "stopping", "halting"
COUNTERS = ("worker_starts", "worker_restarts", "worker_crashes", "jobs_reaped")


class Arbiter:
    def __init__(self, config: Config, *, workers: int | None = None, clock: Any = None,
                 ready_fd: int | None = None) -> None:
        if not config.path:
            raise ValueError("the supervisor needs a config file (workers read it); Config.path is None")
        self.file_config = config
        self.override = workers
        self.config = config if workers is None else config.with_workers(workers)
        self.clock = clock or SystemClock()
        self.ready_fd = ready_fd
        self.signals = SignalQueue(HANDLED)
        self.slots: dict[int, Slot] = {}
        self.state = RUNNING
        self.stop_deadline: float | None = None
        self.store: Store | None = None
        self.registry = Registry()
        self.policy = JobPolicy(self.config, self.registry)
        self.token = ""
        self.host = host_id()  # this host in tokens and process rows (see shared.procs.host_id)
        self.exit_code = ExitCode.OK
        self.next_maintain = 0.0
        self.db_backoff = 0.0  # seconds added between rounds while the database is out of reach
        self.upkeep = Upkeep([])
        self.next_config_check = 0.0
        self.config_stat = _stat(config.path)
        self.snapshot_dir = ""
        self.counters = dict.fromkeys(COUNTERS, 0)  # published for `jobq status`, exported as metrics
        self.published: dict[str, int] = {}
        self.metrics = MetricsServer()
        self.db_file: DatabaseFile | None = None  # the file opened at boot (see check_db_file)
        self.db_problem: str | None = None        # set once that file is gone: no reopening
        self.spawner = Spawner()
        self.timeout_log = maintenance.TimeoutLog()  # job.timeout once per attempt

    @property
    def snapshot(self) -> str:
        return os.path.join(self.snapshot_dir, "config.json")

    @property
    def target(self) -> int:
        return self.config.supervisor.workers

    # -- table of contents ----------------------------------------------------------------------

    def run(self) -> int:
        code = self.boot()
        if code != ExitCode.OK:
            return int(code)
        try:
            while not self.finished():
                self.handle_signals()
                self.reap_children()
                self.maintain()
                self.respawn()
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
        """Import handlers, open the database, recover dead owners' jobs, write the workers'
        config snapshot. Signals are recorded from the first moment, so a SIGTERM during boot
        stops the supervisor cleanly right after it. Returns an exit code (OK to go on)."""
        logs.setup(self.config.log_level, self.config.log_format)
        self.spawner.begin(tuple(self.config.handlers), self.config.database)  # before the db, threads
        self.signals.install()
        code = self.load()
        if code != ExitCode.OK:
            self.close_db()
            self.signals.close()
            self.spawner.stop()
        return code

    def load(self) -> int:
        try:
            self.registry = load_registry(self.config.handlers, self.config.path)
        except HandlerImportError as exc:
            event(log, "supervisor.boot_failed", logging.CRITICAL, error=exc.summary, traceback=exc.traceback)
            return ExitCode.BOOT_FAILED
        self.policy = JobPolicy(self.config, self.registry)
        self.token = owner_token(os.getpid(), self.host)
        try:
            self.upkeep = Upkeep(self.upkeep_tasks())
            store = self.db()
            path = database_file(self.config)
            self.db_file = DatabaseFile(path) if path is not None else None
            store.register_process(self.token, "supervisor", os.getpid(), self.host,
                                   self.clock.now())
            rnd = self.round()
            for name in ("timeouts", "recovery", "processes"):
                self.upkeep.run_now(name, rnd)  # at boot a failure is a boot failure
        except (StoreError, OSError) as exc:
            event(log, "supervisor.boot_failed", logging.CRITICAL, error=str(exc))
            return ExitCode.DATABASE_UNAVAILABLE
        for path in statedir.remove_leftovers():
            event(log, "supervisor.leftover_removed", path=path, note="its supervisor is gone")
        self.snapshot_dir = statedir.create()
        config_mod.write_snapshot(self.config, self.snapshot)
        self.spawner.after_boot(self.snapshot)
        self.slots = {i: Slot(i) for i in range(self.target)}
        event(log, "supervisor.started", pid=os.getpid(), workers=self.target,
              config=self.config.path, database=database_mod.redacted(self.config.database), types=len(self.registry))
        return ExitCode.OK

    # -- signals --------------------------------------------------------------------------------

    def handle_signals(self) -> None:
        for signum in self.signals.drain():
            if signum in (signal.SIGTERM, signal.SIGINT):
                name = signal.Signals(signum).name
                if self.state == RUNNING:
                    self.begin_stop(name)
                else:
                    self.begin_halt(name)
            elif signum == signal.SIGUSR1:
                self.set_paused(True)
            elif signum == signal.SIGUSR2:
                self.set_paused(False)
            elif signum == signal.SIGHUP:
                self.reload("SIGHUP")
            elif signum == signal.SIGTTIN:
                self.scale(self.target + 1, "SIGTTIN")
            elif signum == signal.SIGTTOU:
                self.scale(max(self.target - 1, 0), "SIGTTOU")

    def begin_stop(self, why: str) -> None:
        """Graceful: workers finish their job (within shutdown_timeout) and exit."""
        self.state = STOPPING
        self.stop_deadline = self.clock.monotonic() + self.config.supervisor.shutdown_timeout
        for slot in self.live():
            send_signal(slot.pid, signal.SIGTERM)
        event(log, "supervisor.stopping", signal=why, timeout=self.config.supervisor.shutdown_timeout,
              workers=len(self.live()))

    def begin_halt(self, why: str) -> None:
        """Immediate: kill every worker and its process group now."""
        self.state = HALTING
        event(log, "supervisor.halting", logging.WARNING, signal=why, workers=len(self.live()))
        self.halt_all()

    def halt_all(self) -> None:
        for slot in self.live():
            self.kill(slot, "supervisor shutdown", count_attempt=False)

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
        self.config_stat = _stat(self.config.path)
        try:
            new = config_mod.load(self.config.path)
        except ConfigError as exc:
            event(log, "config.rejected", logging.ERROR, reason=why, error=str(exc),
                  note="keeping the running config")
            return
        if new.database != self.config.database:
            event(log, "config.ignored", logging.WARNING, key="database", note="needs a restart")
            new = new.replace(database=self.config.database)
        renew = False
        if new.handlers != self.config.handlers:
            try:
                self.registry = load_registry(new.handlers, new.path)
                renew = True
            except HandlerImportError as exc:
                event(log, "config.rejected", logging.ERROR, reason=why, key="handlers", error=exc.summary,
                      note="keeping the running handler modules", traceback=exc.traceback)
                new = new.replace(handlers=self.config.handlers)
        workers = new.supervisor.workers
        if self.override is not None and workers == self.file_config.supervisor.workers:
            workers = self.override  # the file did not touch workers: keep --workers / scaling
        else:
            self.override = None
        changed = _diff(self.config.to_dict(), new.with_workers(workers).to_dict())
        self.file_config = new
        self.config = new.with_workers(workers)
        self.policy = JobPolicy(self.config, self.registry)
        logs.setup(self.config.log_level, self.config.log_format)
        config_mod.write_snapshot(self.config, self.snapshot)
        if renew:
            self.spawner.renew()  # a new template; workers roll onto it once it is ready (roll)
        for slot in self.live():
            send_signal(slot.pid, signal.SIGHUP)
        event(log, "config.reloaded", reason=why, changed=",".join(changed) or "nothing",
              workers=self.target)

    # -- children -------------------------------------------------------------------------------

    def live(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.pid is not None]

    def reap_children(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spawner.owns(pid):
                self.spawner.on_exit(pid, describe_status(status)[0])
                continue
            slot = next((s for s in self.slots.values() if s.pid == pid), None)
            if slot is not None:
                self.on_exit(slot, status)

    def on_exit(self, slot: Slot, status: int) -> None:
        """A worker died: log why, re-queue its jobs, then schedule its replacement."""
        how, code, sig = describe_status(status)
        now_m = self.clock.monotonic()
        lived = now_m - slot.started
        if sig == signal.SIGKILL and not slot.killed:
            how += ": perhaps out of memory"
        if slot.kill_reason:
            how += f" (supervisor: {slot.kill_reason})"
        reason = slot.kill_reason or f"worker {slot.pid} {how} while running the job"
        released = self.release(slot, reason)
        level = logging.INFO if code in (ExitCode.OK, ExitCode.RECYCLED) and not released else logging.WARNING
        event(log, "worker.exited", level, slot=slot.index, pid=slot.pid, how=how,
              lived=round(lived, 3), jobs_requeued=len(released))
        for r in released:
            event(log, "job.reaped", logging.WARNING, id=r.id, type=r.type, attempt=r.attempts,
                  status=r.status, reason=reason)
        abnormal = (code not in (ExitCode.OK, ExitCode.RECYCLED)) and slot.kill_reason is None
        if abnormal:
            # Back off only for a crash loop: a worker that died of its own doing before it was
            # ready or before completing a job. One that had run jobs (or lived long), or was
            # SIGKILLed from outside (the OOM killer, an operator: the job's attempts guard
            # against a poison job) is replaced at once; SIGKILLs during boot only up to
            # EARLY_KILLS in a row (an OOM kill of every boot is a crash loop too).
            self.counters["worker_crashes"] += 1
            ready, ran = worker_got_going(self.snapshot, slot)
            slot.early_kills = slot.early_kills + 1 if sig == signal.SIGKILL and not ready else 0
            external = sig == signal.SIGKILL and (ready or slot.early_kills <= EARLY_KILLS)
            healthy = lived >= HEALTHY_AFTER or ran or external
            slot.failures = 1 if healthy else slot.failures + 1
        else:
            slot.failures = slot.early_kills = 0
        forget_progress(self.snapshot, slot)
        slot.next_start = now_m + restart_delay(slot.failures, self.config.supervisor.restart_backoff_max)
        slot.pid = slot.owner = None
        if slot.retiring or slot.index >= self.target:
            del self.slots[slot.index]
        if code == ExitCode.RECYCLED and self.state == RUNNING and _stat(self.config.path) != self.config_stat:
            # It may have left because the file names other handler modules (see the worker's
            # stale_handlers): apply the file now, so its replacement has them.
            self.reload("file changed")

    def release(self, slot: Slot, reason: str) -> list[Released]:
        """Re-queue a dead worker's jobs and drop its `processes` row. Only the job it was
        running is charged an attempt: the rest of its batch (jobs that had returned but whose
        outcomes were not committed, and jobs never started) keep theirs. A database failure
        here is logged: maintenance re-queues the jobs of dead owners later."""
        released: list[Released] = []
        if self.db_problem is not None:
            return released  # the jobs are in the file that is gone
        try:
            released = self.db().release_owner(slot.owner, reason, self.clock.now(),
                                               max_attempts_for=self.policy.max_attempts,
                                               count_attempt=slot.count_attempt,
                                               unstarted=not_in_hand(progress_path(self.snapshot, slot)))
            self.db().remove_process(slot.owner)  # a dead worker cannot delete its own row
        except Exception as exc:  # noqa: BLE001
            event(log, "worker.release_failed", logging.ERROR, slot=slot.index, pid=slot.pid, error=repr(exc))
            self.close_db()
        self.counters["jobs_reaped"] += len(released)
        return released

    def kill(self, slot: Slot, reason: str, *, count_attempt: bool) -> None:
        slot.kill_reason = slot.kill_reason or reason
        slot.count_attempt = slot.count_attempt and count_attempt
        slot.killed = True
        kill_group(slot.pid, signal.SIGKILL)

    def terminate(self, slot: Slot, reason: str) -> None:
        """SIGTERM now, SIGKILL after kill_grace (checked in maintain)."""
        if slot.kill_reason:
            return
        slot.kill_reason = reason
        slot.kill_at = self.clock.monotonic() + self.config.supervisor.kill_grace
        send_signal(slot.pid, signal.SIGTERM)

    def respawn(self) -> None:
        if self.state != RUNNING or self.check_db_file():
            return  # (a new worker would open, or create, whatever file the path names now)
        try:
            self.spawner.check()
        except TemplateFailed as exc:  # a handler module failed to import: halt, no crash loop
            event(log, "supervisor.boot_failed", logging.CRITICAL, error=str(exc), where="template", traceback=exc.traceback)
            self.exit_code = ExitCode.BOOT_FAILED
            self.begin_halt("boot failed")
            return
        if self.spawner.waiting():
            return  # the template is importing the handler modules; its reply wakes the loop
        self.roll()
        now_m = self.clock.monotonic()
        for i in range(self.target):
            self.slots.setdefault(i, Slot(i))
        due: list[Slot] = []
        for slot in list(self.slots.values()):
            if slot.index >= self.target:
                if slot.pid is None:
                    del self.slots[slot.index]
                elif not slot.retiring:
                    slot.retiring = True
                    send_signal(slot.pid, signal.SIGTERM)  # finish the job in hand, then exit
            elif slot.pid is None and now_m >= slot.next_start:
                due.append(slot)
        if due:
            self.close_db()  # nothing crosses fork()
            for slot in due:
                self.counters["worker_restarts" if slot.started else "worker_starts"] += 1
            self.spawner.start(due, self.token, now_m, HANDLED)
            for slot in due:
                event(log, "worker.spawned", slot=slot.index, pid=slot.pid, restarts=slot.failures,
                      forked=slot.forked)
        self.notify_ready()

    def roll(self) -> None:
        """Replace the workers of an older handler generation (a reload changed ``handlers``):
        SIGTERM, so each finishes its job in hand and exits 0; respawn fills its slot at once."""
        for slot in self.live():
            if slot.generation < self.spawner.generation and not (slot.retiring or slot.rolling):
                slot.rolling = True
                event(log, "worker.rolling", slot=slot.index, pid=slot.pid, generation=self.spawner.generation)
                send_signal(slot.pid, signal.SIGTERM)

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
        now_m = self.clock.monotonic()
        self.escalate(now_m)
        if now_m >= self.next_config_check and self.config.supervisor.config_poll_interval > 0:
            self.next_config_check = now_m + self.config.supervisor.config_poll_interval
            if self.state == RUNNING and _stat(self.config.path) != self.config_stat:
                self.reload("file changed")
        if now_m < self.next_maintain:
            return
        self.next_maintain = now_m + self.config.supervisor.maintenance_interval
        if self.check_db_file():
            return
        try:
            rnd = self.round()
        except StoreUnavailable as exc:
            # The server is restarting or out of reach: skip this round, never crash on it (the
            # workers keep their own connections and leases). Each try to connect may block for
            # connect_timeout, so back off (up to DB_BACKOFF_MAX) to keep reaping in between.
            self.db_backoff = min(max(2 * self.db_backoff, self.config.supervisor.maintenance_interval),
                                  DB_BACKOFF_MAX)
            self.next_maintain = now_m + self.db_backoff
            event(log, "supervisor.database_unavailable", logging.WARNING, error=str(exc),
                  retry_in=round(self.db_backoff, 2))
            return
        self.db_backoff = 0.0
        failed = self.upkeep.run(rnd)
        for name, exc in failed:
            event(log, "supervisor.maintenance_failed", logging.ERROR, task=name, error=repr(exc))
        if failed:
            self.close_db()  # the next round opens a fresh connection

    def upkeep_tasks(self) -> list[UpkeepTask]:
        """The upkeep table of contents (see ``supervisor.upkeep``). Each task is isolated: one
        that raises is logged and tried again next round, and never stops the others."""
        return [UpkeepTask("timeouts", 0.0, self.timeouts),
                UpkeepTask("recovery", 0.0, self.recovery),
                UpkeepTask("processes", PROCESS_TOUCH_EVERY, self.touch_processes),
                *upkeep_tasks(self.config),
                UpkeepTask("schedules", 0.0, lambda r: scheduler.run_due(r.store, self.config, r.now)),
                UpkeepTask("ops_requests", 0.0, lambda r: self.ops_requests())]

    def round(self) -> Round:
        return Round(self.db(), self.config, self.clock.now(), self.clock.monotonic())

    def check_db_file(self) -> bool:
        """The database path no longer names the file opened at boot (deleted, or replaced):
        say so loudly and stop (workers finish the job in hand), exiting DATABASE_UNAVAILABLE.
        True once that is under way."""
        problem = self.db_file.problem() if self.db_file is not None else None
        if problem is None:
            return False
        if self.db_problem is None:
            event(log, "supervisor.database_replaced", logging.CRITICAL, database=database_mod.redacted(self.config.database),
                  error=problem)
            self.db_problem = problem  # from now on db() refuses: reopening would use (or create) the new file
            self.exit_code = ExitCode.DATABASE_UNAVAILABLE
            self.close_db()
            if self.state == RUNNING:
                self.begin_stop("database replaced")
        return True

    def ops_requests(self) -> None:
        """Take a `jobq scale N` request; publish our counters for `jobq status` when they changed."""
        store = self.db()
        wanted = ops.take_scale_request(store, self.token)
        if wanted is not None:
            self.scale(wanted, "jobq scale")
        if self.counters != self.published:
            ops.save_counters(store, self.token, self.counters)
            self.published = dict(self.counters)

    def escalate(self, now_m: float) -> None:
        """SIGKILL workers past their kill_grace (after a SIGTERM, or after saying they stopped),
        or everyone past the shutdown deadline."""
        for slot in self.live():
            if lingering(slot, self.snapshot, now_m, self.config.supervisor.kill_grace):
                event(log, "worker.exit_timeout", logging.WARNING, slot=slot.index, pid=slot.pid,
                      kill_grace=self.config.supervisor.kill_grace)
                self.kill(slot, "stopped but did not exit within kill_grace", count_attempt=False)
            if slot.kill_at is not None and now_m >= slot.kill_at and not slot.killed:
                self.kill(slot, slot.kill_reason or "did not exit after SIGTERM", count_attempt=True)
        if self.state == STOPPING and self.stop_deadline is not None and now_m >= self.stop_deadline:
            for slot in self.live():
                if not slot.killed:
                    event(log, "worker.drain_timeout", logging.WARNING, slot=slot.index, pid=slot.pid)
                    self.kill(slot, "shutdown_timeout passed", count_attempt=False)

    def timeouts(self, rnd: Round) -> None:
        """Police our children's running jobs: hard timeouts and expired leases. Leaves the
        running jobs and the foreign owners whose lease expired on the round, for ``recovery``."""
        rnd.running = rnd.store.running()
        rnd.busy = bool(rnd.running)
        ages = rnd.store.lease_ages(rnd.now) if rnd.running else {}
        rnd.expired = self.police(rnd.running, ages, rnd.now)

    def recovery(self, rnd: Round) -> None:
        """Dead or silent foreign owners: their jobs re-queued (or failed) directly."""
        if rnd.running is None:  # the timeouts task could not read them this round
            return
        mine = {s.owner for s in self.live()}
        self.counters["jobs_reaped"] += maintenance.recover_foreign(rnd.store, rnd.running, mine, self.policy,
                                                                    rnd.now, rnd.expired, self.host)

    def police(self, running: list[Job], ages: dict[str, float], now: float) -> set[str]:
        """Act on our children's timeouts and expired leases (``ages``: the store's
        ``lease_ages``); the foreign owners whose every lease expired (for ``recover_foreign``)."""
        verdicts = maintenance.judge_running(running, ages, self.policy, now, self.host)
        unlogged = self.timeout_log.unlogged(verdicts, running)
        by_owner = {s.owner: s for s in self.live()}
        for v in verdicts:
            slot = by_owner.get(v.owner)
            if slot is None:
                continue
            if v.action == "timeout":
                if v in unlogged:
                    event(log, "job.timeout", logging.WARNING, id=v.job.id, type=v.job.type,
                          attempt=v.job.attempts, slot=slot.index, pid=slot.pid, reason=v.reason)
                self.terminate(slot, v.reason)
            elif not slot.killed:
                event(log, "worker.lease_expired", logging.WARNING, id=v.job.id, slot=slot.index,
                      pid=slot.pid, reason=v.reason)
                self.kill(slot, v.reason, count_attempt=True)
        lease = self.config.worker.lease_timeout
        return maintenance.expired_owners(running, ages, lease) - set(by_owner)

    def touch_processes(self, rnd: Round) -> None:
        """Prune the process rows of dead processes; refresh ours."""
        stale = max(self.config.worker.lease_timeout, PROCESS_STALE_AFTER)
        maintenance.prune_processes(rnd.store, rnd.now, stale, self.host)
        rnd.store.touch_process(self.token, rnd.now)

    # -- waiting and ending ---------------------------------------------------------------------

    def wait(self) -> None:
        now_m = self.clock.monotonic()
        wake = [self.next_maintain, now_m + 1.0]
        wake += [s.next_start for s in self.slots.values() if s.pid is None and self.state == RUNNING]
        wake += [t for s in self.live() for t in (s.kill_at, s.exit_by) if t is not None]
        if self.stop_deadline is not None:
            wake.append(self.stop_deadline)
        extra = [*self.metrics.fds(self.config), *self.spawner.fds()]
        ready = self.signals.wait(max(min(wake) - now_m, 0.0), extra=extra)
        self.metrics.serve(ready, self.db, self.counters, workers=len(self.live()), workers_target=self.target)

    def finished(self) -> bool:
        return self.state != RUNNING and not self.live()

    def shutdown(self) -> None:
        for slot in self.live():  # only after a crash of this loop: never leave workers behind
            kill_group(slot.pid, signal.SIGKILL)
        self.reap_blocking()
        self.spawner.stop()
        try:
            store = self.db()
            store.remove_process(self.token)
        except Exception:  # noqa: BLE001
            pass
        self.close_db()
        self.signals.close()
        self.metrics.close()
        if self.snapshot_dir:
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
        event(log, "supervisor.stopped", code=ExitCode.describe(self.exit_code))

    def reap_blocking(self) -> None:
        while self.live():
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            slot = next((s for s in self.slots.values() if s.pid == pid), None)
            if slot is not None:
                self.on_exit(slot, status)

    # -- database -------------------------------------------------------------------------------

    def db(self) -> Store:
        if self.db_problem is not None:
            raise StoreError(self.db_problem)
        if self.store is None:
            self.store = open_store(self.config, upkeep=True)
        return self.store

    def close_db(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None



def _stat(path: str | None) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return None
    return st.st_mtime_ns, st.st_size


def _diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}")
    return out
