"""The worker slots of one supervisor: which are filled, the back-off after a death, the
signals that stop a worker (SIGTERM, then SIGKILL after ``kill_grace``), scale-down and the roll
onto a new handler generation.

Everything here acts on our own children and their ``Slot`` records only: no database, no
config file. The arbiter decides when (its loop), the spawner how a slot is filled
(``supervisor.spawner``), and ``supervisor.children`` holds the per-process helpers.
"""

from __future__ import annotations

import logging
import signal
from typing import Iterator

from shared.model.exitcodes import ExitCode
from shared.runtime.logs import event, get_logger
from shared.runtime.processes import send_signal

from .children import Slot, kill_group, lingering, restart_delay, worker_got_going

log = get_logger("supervisor")

HEALTHY_AFTER = 10.0  # a worker that lived this long (or ran jobs) resets its slot's back-off
EARLY_KILLS = 3  # SIGKILLs before ready in a row that are not yet a crash loop
CLEAN_EXITS = (ExitCode.OK, ExitCode.RECYCLED)


class Slots:
    """The slots by index. ``live()`` are those a worker process fills."""

    def __init__(self) -> None:
        self.by_index: dict[int, Slot] = {}

    def __iter__(self) -> Iterator[Slot]:
        return iter(list(self.by_index.values()))

    def fill(self, target: int) -> None:
        """Boot: ``target`` empty slots, started at once."""
        self.by_index = {i: Slot(i) for i in range(target)}

    def live(self) -> list[Slot]:
        return [s for s in self.by_index.values() if s.pid is not None]

    def find(self, pid: int) -> Slot | None:
        """The slot our child ``pid`` fills (None: not a worker of ours)."""
        return next((s for s in self.by_index.values() if s.pid == pid), None)

    # -- stopping workers -------------------------------------------------------------------

    def signal_live(self, sig: int) -> None:
        for slot in self.live():
            send_signal(slot.pid, sig)

    def kill(self, slot: Slot, reason: str, *, count_attempt: bool) -> None:
        """SIGKILL the worker's process group now; ``count_attempt``: its job loses an attempt
        (once any kill says it does not, it does not)."""
        slot.kill_reason = slot.kill_reason or reason
        slot.count_attempt = slot.count_attempt and count_attempt
        slot.killed = True
        kill_group(slot.pid, signal.SIGKILL)

    def kill_all(self, reason: str) -> None:
        for slot in self.live():
            self.kill(slot, reason, count_attempt=False)

    def escalate(self, now: float, snapshot: str, grace: float, deadline: float | None) -> None:
        """SIGKILL workers past their kill_grace (after saying they stopped),
        or everyone past the shutdown ``deadline`` (None: not stopping)."""
        for slot in self.live():
            if lingering(slot, snapshot, now, grace):
                event(
                    log,
                    "worker.exit_timeout",
                    logging.WARNING,
                    slot=slot.index,
                    pid=slot.pid,
                    kill_grace=grace,
                )
                self.kill(slot, "stopped but did not exit within kill_grace", count_attempt=False)
        if deadline is not None and now >= deadline:
            for slot in self.live():
                if not slot.killed:
                    event(
                        log, "worker.drain_timeout", logging.WARNING, slot=slot.index, pid=slot.pid
                    )
                    self.kill(slot, "shutdown_timeout passed", count_attempt=False)

    def roll(self, generation: int) -> None:
        """Replace the workers of an older handler generation (a reload changed ``handlers``):
        SIGTERM, so each finishes its job in hand and exits 0; respawn fills its slot at once."""
        for slot in self.live():
            if slot.generation < generation and not (slot.retiring or slot.rolling):
                slot.rolling = True
                event(log, "worker.rolling", slot=slot.index, pid=slot.pid, generation=generation)
                send_signal(slot.pid, signal.SIGTERM)

    # -- filling slots ----------------------------------------------------------------------

    def due(self, target: int, now: float) -> list[Slot]:
        """Bring the slots to ``target``: add missing ones, retire the surplus (SIGTERM: each
        finishes the job in hand, then exits; its slot goes with it). Returns the empty slots
        whose back-off has passed, to be filled now."""
        for i in range(target):
            self.by_index.setdefault(i, Slot(i))
        due: list[Slot] = []
        for slot in self:
            if slot.index >= target:
                if slot.pid is None:
                    del self.by_index[slot.index]
                elif not slot.retiring:
                    slot.retiring = True
                    send_signal(slot.pid, signal.SIGTERM)
            elif slot.pid is None and now >= slot.next_start:
                due.append(slot)
        return due

    def settle(
        self,
        slot: Slot,
        code: int | None,
        sig: int | None,
        now: float,
        snapshot: str,
        backoff_max: float,
        target: int,
    ) -> bool:
        """The worker of ``slot`` was reaped (``code``/``sig``: its end): set the slot's back-off,
        empty it (drop it if it was retiring or is beyond ``target``). True if it crashed."""
        crashed = code not in CLEAN_EXITS and slot.kill_reason is None
        if crashed:
            # Back off only for a crash loop: a worker that died of its own doing before it was
            # ready or before completing a job. One that had run jobs (or lived long), or was
            # SIGKILLed from outside (the OOM killer, an operator: the job's attempts guard
            # against a poison job) is replaced at once; SIGKILLs during boot only up to
            # EARLY_KILLS in a row (an OOM kill of every boot is a crash loop too).
            ready, ran = worker_got_going(snapshot, slot)
            slot.early_kills = slot.early_kills + 1 if sig == signal.SIGKILL and not ready else 0
            external = sig == signal.SIGKILL and (ready or slot.early_kills <= EARLY_KILLS)
            healthy = now - slot.started >= HEALTHY_AFTER or ran or external
            slot.failures = 1 if healthy else slot.failures + 1
        else:
            slot.failures = slot.early_kills = 0
        slot.next_start = now + restart_delay(slot.failures, backoff_max)
        slot.pid = slot.owner = None
        if slot.retiring or slot.index >= target:
            del self.by_index[slot.index]
        return crashed

    def wake_times(self, respawning: bool) -> list[float]:
        """Monotonic times the loop must wake at: respawns (if ``respawning``) and kills due."""
        out = [s.next_start for s in self.by_index.values() if s.pid is None and respawning]
        return out + [t for s in self.live() if (t := s.exit_by) is not None]
