"""Cancel and progress of the async runner's jobs (the check-in on the async runner).

The heartbeat thread's check-in (``worker.checkin``) sees the job the main thread runs one at a
time (``worker.deadline.InHand``) and, through :class:`Flight`, every job that runs on the
worker's event loop (``worker.aio``: many at once as tasks, or one at a time through
``AsyncRunner.run_one``). Their progress rows go into the same check-in; for each one with a
cancel request the check-in sets its ``cancel_requested`` and asks :meth:`Flight.cancel` to
cancel its task, which happens on the loop (``loop.call_soon_threadsafe``: a task is not
thread-safe). ``worker.aiojob.run_async`` turns the ``CancelledError`` of a job whose cancel was
requested into :class:`shared.execution.stopping.JobCancelled`: the job ends ``cancelled`` (never
retried, ``@on_cancelled`` hooks run), as a one-at-a-time job that raised it does; its siblings go
on.

A handler that catches the cancellation and awaits on is killed with its worker at
``cancel_grace``: from ``DEFIANT_AFTER`` after its task was cancelled, the progress file names
it alone as in hand (``worker.inflight``), so its siblings go back to the queue uncharged.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable

from shared.execution.runner import JobContext

DEFIANT_AFTER = 1.0  # seconds after its task was cancelled: a job still running ignores its cancel


class Flight:
    """The jobs running on ``loop`` now: id -> (context, task). Added and removed on the loop
    (``run_async``), read and cancelled from the heartbeat thread, under one lock."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_defiant: Callable[[str | None], bool] | None = None,
    ) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.running: dict[str, tuple[JobContext, asyncio.Task]] = {}
        # told the id of a job that ignores its cancel (None: it ended); True: it took note
        self.on_defiant = on_defiant
        self.defiant: str | None = None

    def add(self, ctx: JobContext, task: asyncio.Task | None) -> None:
        """(Loop.) ``ctx``'s job runs in ``task`` (None: not in a task; it cannot be cancelled)."""
        if task is not None:
            with self.lock:
                self.running[ctx.id] = (ctx, task)

    def discard(self, ctx: JobContext) -> None:
        """(Loop.) ``ctx``'s run ended: a cancel asked from now on leaves its task alone."""
        with self.lock:
            if self.running.get(ctx.id, (None,))[0] is ctx:
                del self.running[ctx.id]
        if self.defiant == ctx.id and self.on_defiant is not None:
            self.defiant = None
            self.on_defiant(None)

    def contexts(self) -> list[JobContext]:
        """(Any thread.) The contexts of the jobs running now."""
        with self.lock:
            return [ctx for ctx, _ in self.running.values()]

    def cancel(self, ctx: JobContext) -> None:
        """(Any thread.) Cancel ``ctx``'s task on the loop, if it still runs there; the caller has
        set ``ctx.cancel_requested`` first (``run_async`` reads it when the task is cancelled)."""
        with self.lock:
            if self.running.get(ctx.id, (None,))[0] is not ctx:
                return
        try:
            self.loop.call_soon_threadsafe(self._cancel, ctx)
        except RuntimeError:  # the loop closed meanwhile (the worker exits): nothing runs on it
            pass

    def _cancel(self, ctx: JobContext) -> None:
        # on the loop, so the task cannot be between its end and discard(): it is still its run
        entry = self.running.get(ctx.id)
        if entry is not None and entry[0] is ctx and not entry[1].done():
            entry[1].cancel()
            self.loop.call_later(DEFIANT_AFTER, self._runs_on, ctx)

    def _runs_on(self, ctx: JobContext) -> None:
        # on the loop: the job still runs DEFIANT_AFTER after its task was cancelled
        if self.running.get(ctx.id, (None,))[0] is ctx and self.on_defiant is not None:
            if self.on_defiant(ctx.id):
                self.defiant = ctx.id


def cancelled_by_request(exc: BaseException, ctx: JobContext) -> bool:
    """Is ``exc``, raised out of an async handler, its task cancelled for a cancel request? Then
    the cancellation is consumed (``uncancel``: the task goes on to record the outcome)."""
    if not isinstance(exc, asyncio.CancelledError) or not ctx.cancel_requested:
        return False
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()
    return True
