"""The job in hand, as the worker's other thread sees it, and its timeout reaching the handler
(issue 27).

At the job's ``timeout`` the worker itself raises :class:`shared.stopping.JobTimeout` in the
handler: a ``SIGALRM`` timer (``setitimer``) is armed around the call, and its Python handler,
which runs in the main thread between two bytecodes (a blocking ``time.sleep`` or ``select`` is
interrupted), raises while the handler's own code runs (``JobContext.in_handler``): the
handler's ``finally`` blocks and context managers run, and the run is an ordinary failure
(retried, or failed "timed out after N s"). An ``async def`` handler's task is cancelled instead
(:func:`shared.stopping.run_awaitable`, which reads the same deadline). The supervisor kills a
worker whose handler is still running ``kill_grace`` after the timeout (one that swallowed the
exception, or blocks in C code): the backstop.

The worker's own signals (SIGTERM: finish the job in hand, then exit) are unchanged: SIGALRM is
not one of them, and its number, written to the worker's wake-up pipe, is ignored there.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from shared.logs import event, get_logger
from shared.runner import JobContext
from shared.stopping import JobTimeout, timeout_text

log = get_logger("worker")


class InHand:
    """The context of the job the main thread runs (None between jobs): the heartbeat thread's
    check-in reads its progress and sets its cancel flag (``worker.checkin``)."""

    def __init__(self, slot: int | None, pid: int) -> None:
        self.slot, self.pid = slot, pid
        self.ctx: JobContext | None = None

    @contextmanager
    def running(self, ctx: JobContext, timeout: float) -> Iterator[None]:
        """Around one handler call: the deadline armed, the context visible to the check-in;
        after it, ``job.timeout`` logged once if the timeout raised into the handler."""
        ctx.timeout, ctx.deadline = timeout, time.monotonic() + timeout
        self.ctx = ctx
        try:
            with alarm(ctx):
                yield
        finally:
            self.ctx = None
        if ctx.timed_out:
            event(log, "job.timeout", logging.WARNING, id=ctx.id, type=ctx.type, attempt=ctx.attempt,
                  slot=self.slot, pid=self.pid, reason=f"timed out after {timeout:g} s")


@contextmanager
def alarm(ctx: JobContext) -> Iterator[None]:
    """Raise JobTimeout into the handler at ``ctx.deadline`` (main thread only: elsewhere, as in
    a test that runs a worker in a thread, only an async handler's deadline applies)."""
    if threading.current_thread() is not threading.main_thread() or ctx.timeout is None:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        if ctx.in_handler and not ctx.timed_out:  # never into the worker's own code
            ctx.timed_out = True
            raise JobTimeout(timeout_text(ctx))

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(ctx.timeout, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
