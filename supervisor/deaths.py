"""Reaping the supervisor's children. A template's exit goes to the spawner; a worker's death
sets its slot's back-off (``supervisor.slots``), asks for its replacement, re-queues its jobs
(``job.reaped``) and is logged (``worker.exited``, with why).

The replacement is asked for before the re-queue (a respawn within 50 ms), which the
old rule "re-queue a dead child's jobs before respawning it" forbade; what that rule protected
holds by the owner ids instead: see :meth:`Deaths.on_exit`.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from typing import Any, Protocol

from shared.model.exitcodes import ExitCode
from shared.model.job import Job, Released
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy
from shared.execution.progress import not_in_hand

from .maintenance import log_reaped
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
    def respawn(self) -> None: ...


class Deaths:
    """``reap`` collects exited children; each worker's death goes through ``on_exit``."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        # Dead workers whose jobs may not all be re-queued yet, by owner id: see release_again.
        self.unsettled: dict[str, Dead] = {}

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
        """A worker died: read what its progress file says, settle its slot and ask for its
        replacement at once (the fork runs while we re-queue), then re-queue its jobs
        and log why it died. The replacement cannot run the dead worker's jobs before they are
        re-queued: they stay ``running`` under the dead worker's owner id until
        ``release_owner`` (guarded by that id) commits, and a claim takes ``pending`` jobs only;
        the replacement has an owner id of its own (its pid). Its progress file is read and
        removed before the fork, so the replacement's cannot be mistaken for it."""
        sup = self.sup
        described, code, sig = describe_status(status)
        now_m = sup.clock.monotonic()
        how = _how(slot, described, sig)
        dead = self.dead(slot, how, now_m)
        self.settle(slot, code, sig, now_m)
        if code == ExitCode.RECYCLED and sup.running() and sup.watch.changed():
            # It may have left because the file names other handler modules (see the worker's
            # stale_handlers): apply the file now, so its replacement has them.
            sup.reload("file changed")
        sup.respawn()
        released = self.release(dead)
        _log_exit(dead, how, code, released)
        log_reaped(released, dead.reason)
        if dead.owner:
            self.unsettled[dead.owner] = dead

    def dead(self, slot: Slot, how: str, now_m: float) -> "Dead":
        """What the re-queue needs of the worker that was in ``slot``, read before the slot is
        settled; its progress file says which jobs of its batch it never started."""
        return Dead(
            slot.index,
            slot.pid,
            slot.owner,
            slot.count_attempt,
            round(now_m - slot.started, 3),
            slot.kill_reason or f"worker {slot.pid} {how} while running the job",
            not_in_hand(progress_path(self.sup.snapshot, slot)),
        )

    def settle(self, slot: Slot, code: int | None, sig: int | None, now_m: float) -> None:
        """Empty the slot and set its back-off (``supervisor.slots``), counting a crash; remove
        the worker's progress file before its replacement can write one."""
        sup = self.sup
        if sup.slots.settle(
            slot,
            code,
            sig,
            now_m,
            sup.snapshot,
            sup.config.supervisor.restart_backoff_max,
            sup.target,
        ):
            sup.counters["worker_crashes"] += 1
        forget_progress(sup.snapshot, slot)

    def release_again(self, running: list[Job]) -> set[str]:
        """Re-queue what a dead worker's release left (``running``: the round's running jobs):
        a release skips a row another session has locked at that moment (on PostgreSQL, the
        dead worker's own session, still ending its last statement), and a failed release took
        none. They go with the dead worker's own reason and attempt accounting, not as a
        stranger's ("gone, found by the supervisor"). Returns the owners still pending, for
        :func:`supervisor.maintenance.recover_foreign` to leave alone; an owner is forgotten
        once none of its jobs is running."""
        owners = {j.owner for j in running}
        for owner, dead in list(self.unsettled.items()):
            if owner not in owners:
                del self.unsettled[owner]
            else:
                log_reaped(self.release(dead), dead.reason)
        return set(self.unsettled)

    def release(self, dead: "Dead") -> list[Released]:
        """Re-queue a dead worker's jobs and drop its `processes` row. Only the job it was
        running is charged an attempt: the rest of its batch (jobs that had returned but whose
        outcomes were not committed, and jobs never started) keep theirs. A database failure
        here is logged: maintenance re-queues the jobs of dead owners later."""
        sup = self.sup
        released: list[Released] = []
        if sup.check_health():
            return released  # the jobs are in the database that is gone
        try:
            released = sup.db().release_owner(
                dead.owner,
                dead.reason,
                sup.clock.now(),
                max_attempts_for=sup.policy.max_attempts,
                count_attempt=dead.count_attempt,
                unstarted=dead.unstarted,
            )
            sup.db().remove_process(dead.owner)  # a dead worker cannot delete its own row
        except Exception as exc:  # noqa: BLE001
            event(
                log,
                "worker.release_failed",
                logging.ERROR,
                slot=dead.slot,
                pid=dead.pid,
                error=repr(exc),
            )
            sup.close_db()
        sup.counters["jobs_reaped"] += len(released)
        return released


def _how(slot: Slot, described: str, sig: int | None) -> str:
    """How the worker died (``described`` by ``describe_status``), with what we know of why."""
    how = described
    if sig == signal.SIGKILL and not slot.killed:
        how += ": perhaps out of memory"
    if slot.kill_reason:
        how += f" (supervisor: {slot.kill_reason})"
    return how


def _log_exit(dead: "Dead", how: str, code: int | None, released: list[Released]) -> None:
    """``worker.exited``: a warning unless it left cleanly with no job to re-queue."""
    level = logging.INFO if code in CLEAN_EXITS and not released else logging.WARNING
    event(
        log,
        "worker.exited",
        level,
        slot=dead.slot,
        pid=dead.pid,
        how=how,
        lived=dead.lived,
        jobs_requeued=len(released),
    )


@dataclass(frozen=True)
class Dead:
    """What the re-queue needs of a dead worker once its slot is emptied (and maybe refilled)."""

    slot: int
    pid: int | None
    owner: str | None
    count_attempt: bool
    lived: float
    reason: str
    unstarted: list[str]
