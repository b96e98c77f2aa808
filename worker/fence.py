"""The fence: a worker that cannot renew its lease stops itself before the lease can expire.

A thread of its own that does no I/O, so that a heartbeat or a claim stuck on an unreachable
database (a cut-off host, a hung connection) cannot hold it up. The worker tells it when a
renewal that succeeded was sent (:meth:`Fence.renewed`: a claim, a heartbeat; a slow claim is
followed by a beat at once, ``worker.heartbeat.after_claim``, or :meth:`Fence.doubt`) and whether it
holds running jobs (:meth:`Fence.hold`); while it does, once ``shared.runtime.fencing.fence_after``
seconds have passed since the last renewal was sent, the fence logs ``worker.fenced`` and ends
the process at once with ``ExitCode.FENCED`` (``os._exit``: the main thread is inside the
handler, and nothing it could still commit would be guarded by a live lease). The supervisor
reaps the exit as a crash and re-queues the job; a supervisor elsewhere re-queues it once the
lease expired on the database's clock. Times are the worker clock's monotonic readings.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable

from shared.runtime import fencing
from shared.settings.config import Config
from shared.model.exitcodes import ExitCode
from shared.runtime.logs import event, get_logger

log = get_logger("worker")

RECHECK = 1.0  # seconds: the longest wait between checks (a reloaded config is seen this soon)


def _exit_fenced() -> None:
    for h in logging.getLogger().handlers:  # os._exit flushes nothing: the log line first
        try:
            h.flush()
        except Exception:  # noqa: BLE001 - exiting regardless
            pass
    os._exit(ExitCode.FENCED)


class Fence(threading.Thread):
    def __init__(
        self, config: Config, owner: str, clock: Any, on_fenced: Callable[[], None] = _exit_fenced
    ) -> None:
        super().__init__(name="jobq-fence", daemon=True)
        self.config = config  # replaced on reload
        self.owner = owner
        self.clock = clock
        self.on_fenced = on_fenced
        self._cond = threading.Condition()
        self._sent = clock.monotonic()  # when the last successful renewal was sent
        self._holding = False
        self._halt = False
        self.fenced = False

    # -- told by the worker ---------------------------------------------------------------------

    def renewed(self, sent: float) -> None:
        """A statement sent at monotonic time ``sent`` renewed the lease (it committed)."""
        with self._cond:
            if sent > self._sent:
                self._sent = sent

    def doubt(self, sent: float) -> None:
        """Leases renewed by a statement sent at ``sent`` could not be confirmed since: count
        from then, even if a later renewal was told (see ``worker.heartbeat.after_claim``)."""
        with self._cond:
            self._sent = min(self._sent, sent)
            self._cond.notify()

    def hold(self, holding: bool) -> None:
        """Whether the worker holds running jobs (claimed, outcome not committed)."""
        if holding != self._holding:
            with self._cond:
                self._holding = holding
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._halt = True
            self._cond.notify()
        if self.is_alive():
            self.join(timeout=5)

    # -- the decision ---------------------------------------------------------------------------

    def overdue(self, now: float) -> float | None:
        """Seconds since the last renewal was sent if the worker must stop now, else None."""
        w = self.config.worker
        silent = now - self._sent
        if self._holding and silent > fencing.fence_after(w.heartbeat_interval, w.lease_timeout):
            return silent
        return None

    def wait_time(self, now: float) -> float | None:
        """How long to sleep before the next check (None: until told something)."""
        if not self._holding:
            return None
        w = self.config.worker
        due = self._sent + fencing.fence_after(w.heartbeat_interval, w.lease_timeout) - now
        return min(max(due, 0.0) + 0.001, RECHECK)

    def run(self) -> None:
        with self._cond:
            while not self._halt:
                now = self.clock.monotonic()
                silent = self.overdue(now)
                if silent is not None:
                    self.fire(silent)
                    return
                self._cond.wait(self.wait_time(now))

    def fire(self, silent: float) -> None:
        w = self.config.worker
        self.fenced = True
        event(
            log,
            "worker.fenced",
            logging.CRITICAL,
            owner=self.owner,
            pid=os.getpid(),
            silent_s=round(silent, 3),
            lease_timeout=w.lease_timeout,
            margin=fencing.margin(w.heartbeat_interval, w.lease_timeout),
            note="could not renew the lease in time: stopping before it can expire",
        )
        self.on_fenced()
