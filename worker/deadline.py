"""The job in hand, as the worker's other thread sees it, and its timeout reaching the handler.

At the job's ``timeout`` the worker itself raises :class:`shared.execution.stopping.JobTimeout` in
the handler: a ``SIGALRM`` timer (``setitimer``) is armed around the call, and its Python handler,
which runs in the main thread between two bytecodes (a blocking ``time.sleep`` or ``select`` is
interrupted), raises while the handler's own code runs (``JobContext.in_handler``): the
handler's ``finally`` blocks and context managers run, and the run is an ordinary failure
(retried, or failed "timed out after N s"). An ``async def`` handler's task is cancelled instead
(:func:`shared.execution.stopping.run_awaitable`, which reads the same deadline). The supervisor
kills a worker whose handler is still running ``kill_grace`` after the timeout (one that swallowed
the exception, or blocks in C code): the backstop.

The worker's own signals (SIGTERM: finish the job in hand, then exit) are unchanged: SIGALRM is
not one of them, and its number, written to the worker's wake-up pipe, is ignored there.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any, Callable, TypeVar

from shared.runtime.logs import event, get_logger
from shared.execution.runner import JobContext
from shared.execution.stopping import JobTimeout, timeout_text

log = get_logger("worker")
T = TypeVar("T")


class InHand:
    """The context of the job the main thread runs (None between jobs): the heartbeat thread's
    check-in reads its progress and sets its cancel flag (``worker.checkin``).

    The timer is re-armed only when none is pending or the pending one would fire after this
    job's deadline: a stream of short jobs sets it about once per timeout, not twice per job
    (an early alarm re-arms itself for the job then running; one between jobs does nothing)."""

    def __init__(self, slot: int | None, pid: int) -> None:
        self.slot, self.pid = slot, pid
        self.ctx: JobContext | None = None
        self.main: bool | None = None  # in the main thread, with our SIGALRM handler installed
        self.alarm_at: float | None = None  # monotonic time the pending alarm fires (None: none)
        self.flight: Any = None  # the async runner's jobs (worker.aiocancel.Flight), checked in too

    def run(self, ctx: JobContext, timeout: float, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` (the handler's run) with the deadline armed and the context visible to the
        check-in; after it, ``job.timeout`` logged once if the timeout raised into the handler.
        Off the main thread (a test that runs a worker in a thread) only an async handler's
        deadline applies. (No context manager: this is on every job's path.)"""
        deadline = ctx.deadline = time.monotonic() + timeout
        ctx.timeout = timeout
        self.ctx = ctx
        timer = self.main if self.main is not None else self.install()
        if timer and (self.alarm_at is None or self.alarm_at > deadline):
            self.arm(deadline)
        try:
            return call(*args)
        finally:
            self.ctx = None
            if ctx.timed_out:
                event(
                    log,
                    "job.timeout",
                    logging.WARNING,
                    id=ctx.id,
                    type=ctx.type,
                    attempt=ctx.attempt,
                    slot=self.slot,
                    pid=self.pid,
                    reason=f"timed out after {timeout:g} s",
                )

    def install(self) -> bool:
        """Install the SIGALRM handler, once (main thread only); whether the timer can be used."""
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            signal.signal(signal.SIGALRM, self.on_alarm)
        return self.main

    def arm(self, at: float) -> None:
        self.alarm_at = at
        signal.setitimer(signal.ITIMER_REAL, max(at - time.monotonic(), 1e-3))

    def on_alarm(self, signum: int, frame: Any) -> None:
        """The timer fired: before the running job's deadline, wait on for it; at or after it,
        raise into the handler's own code, never into the worker's."""
        self.alarm_at = None
        ctx = self.ctx
        if ctx is None or ctx.deadline is None:
            return
        if time.monotonic() < ctx.deadline:
            self.arm(ctx.deadline)
        elif ctx.in_handler and not ctx.timed_out:
            ctx.timed_out = True
            raise JobTimeout(timeout_text(ctx))
