"""Reaping the supervisor's children. A template's exit goes to the spawner; a worker's death is
logged (``worker.exited``, with why), its jobs re-queued before its slot can be filled again
(``job.reaped``), and its slot's back-off set (``supervisor.slots``).
"""
from __future__ import annotations

import logging
import os
import signal
from typing import Any, Protocol

from shared.exitcodes import ExitCode
from shared.job import Released
from shared.logs import event, get_logger
from shared.policy import JobPolicy
from shared.progress import not_in_hand

from .children import Slot, describe_status, forget_progress, progress_path
from .reload import ConfigWatch
from .slots import CLEAN_EXITS, Slots
from .spawner import Spawner
from .storeref import StoreRef

log = get_logger("supervisor")


class Supervisor(Protocol):
    """What reaping reads and calls of the supervisor (the arbiter)."""
    config: Any
    policy: JobPolicy
    clock: Any
    slots: Slots
    spawner: Spawner
    counters: dict[str, int]
    watch: ConfigWatch
    dbref: StoreRef

    @property
    def snapshot(self) -> str: ...
    @property
    def target(self) -> int: ...
    def running(self) -> bool: ...
    def reload(self, why: str) -> None: ...
    def db(self) -> Any: ...
    def close_db(self) -> None: ...
    def check_health(self) -> bool: ...


class Deaths:
    """``reap`` collects exited children; each worker's death goes through ``on_exit``."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    def reap(self, block: bool = False) -> None:
        """Collect every exited child (``block``: wait until no worker is left)."""
        while not block or self.sup.slots.live():
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if not block and self.sup.spawner.owns(pid):  # (at the end: the spawner stops next)
                self.sup.spawner.on_exit(pid, describe_status(status)[0])
                continue
            slot = self.sup.slots.find(pid)
            if slot is not None:
                self.on_exit(slot, status)

    def on_exit(self, slot: Slot, status: int) -> None:
        """A worker died: log why, re-queue its jobs, then schedule its replacement."""
        sup = self.sup
        how, code, sig = describe_status(status)
        now_m = sup.clock.monotonic()
        if sig == signal.SIGKILL and not slot.killed:
            how += ": perhaps out of memory"
        if slot.kill_reason:
            how += f" (supervisor: {slot.kill_reason})"
        reason = slot.kill_reason or f"worker {slot.pid} {how} while running the job"
        released = self.release(slot, reason)
        level = logging.INFO if code in CLEAN_EXITS and not released else logging.WARNING
        event(log, "worker.exited", level, slot=slot.index, pid=slot.pid, how=how,
              lived=round(now_m - slot.started, 3), jobs_requeued=len(released))
        for r in released:
            event(log, "job.reaped", logging.WARNING, id=r.id, type=r.type, attempt=r.attempts,
                  status=r.status, reason=reason)
        if sup.slots.settle(slot, code, sig, now_m, sup.snapshot,
                            sup.config.supervisor.restart_backoff_max, sup.target):
            sup.counters["worker_crashes"] += 1
        forget_progress(sup.snapshot, slot)
        if code == ExitCode.RECYCLED and sup.running() and sup.watch.changed():
            # It may have left because the file names other handler modules (see the worker's
            # stale_handlers): apply the file now, so its replacement has them.
            sup.reload("file changed")

    def release(self, slot: Slot, reason: str) -> list[Released]:
        """Re-queue a dead worker's jobs and drop its `processes` row. Only the job it was
        running is charged an attempt: the rest of its batch (jobs that had returned but whose
        outcomes were not committed, and jobs never started) keep theirs. A database failure
        here is logged: maintenance re-queues the jobs of dead owners later."""
        sup = self.sup
        released: list[Released] = []
        if sup.check_health():
            return released  # the jobs are in the database that is gone
        try:
            released = sup.db().release_owner(slot.owner, reason, sup.clock.now(),
                                              max_attempts_for=sup.policy.max_attempts,
                                              count_attempt=slot.count_attempt,
                                              unstarted=not_in_hand(progress_path(sup.snapshot, slot)))
            sup.db().remove_process(slot.owner)  # a dead worker cannot delete its own row
        except Exception as exc:  # noqa: BLE001
            event(log, "worker.release_failed", logging.ERROR, slot=slot.index, pid=slot.pid, error=repr(exc))
            sup.close_db()
        sup.counters["jobs_reaped"] += len(released)
        return released
