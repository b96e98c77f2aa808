"""The async runner's watch on its event loop (``worker.aio``): the loop's lag, and the handler
that blocks it.

A callback the loop runs every TICK seconds measures how late it ran: that lateness is the
loop-lag gauge (``lag``: the last measure; ``worst``: the largest since it was last read; an
OpenTelemetry gauge ``jobq.worker.loop_lag`` where the application imported the metrics API).
A thread of its own looks every TICK seconds at when the callback last ran: once that is
BLOCKED seconds ago, the loop is blocked (a handler called ``time.sleep``, or computes without
awaiting). The task the loop is in then names the job and its handler in one warning
(``worker.loop_blocked``), and ``on_block`` is told the job: the runner writes it into the
progress file as the job in hand, so that if the supervisor kills the worker for it (its timeout
plus ``kill_grace``) only that job is charged an attempt. ``worker.loop_unblocked`` says how
long the block lasted.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
import time
from typing import Any, Callable

from shared.model.job import Job
from shared.runtime.logs import event, get_logger
from shared.telemetry.tracing import observe_gauge

log = get_logger("worker")

TICK = 0.1  # seconds between the loop's lag measures (and the watch thread's looks)
BLOCKED = 1.0  # seconds without a measure: the loop is blocked (warned within about 1.1 s)


class LoopWatch:
    """Watches ``loop`` while :meth:`active` says the runner drives it. ``job_of(task)``: the
    job a task runs (None: not a job's task); ``on_block(job)``: the job blocking the loop
    (called from the watch thread), then ``on_block(None)`` when the block ends (loop thread)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        job_of: Callable[[Any], Job | None],
        on_block: Callable[[Job | None], None],
        owner: str,
    ) -> None:
        self.loop = loop
        self.job_of = job_of
        self.on_block = on_block  # the job blocking the loop; None: the block ended
        self.owner = owner
        self.lag = 0.0
        self.worst = 0.0
        self.beat = time.monotonic()  # when the loop last ran the callback
        self.due = self.beat + TICK  # when it should run it next
        self.running = False  # the loop is driven (between runs nothing is late)
        self.blocked_by: Job | None = None
        self.blocked_since = 0.0
        self.thread: int | None = None  # the loop's thread (set as it starts being driven)
        self.timer: asyncio.Handle | None = (
            None  # the next tick: one chain of ticks, however many drives
        )
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="jobq-loop-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()
        observe_gauge(
            "jobq.worker.loop_lag",
            "s",
            "How late the worker's event loop ran a timer.",
            self.read_worst,
        )

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def active(self, on: bool) -> None:
        """(Loop thread.) The runner starts (True) or stops (False) driving the loop; a block
        ends when the runner gets the loop back, even if the loop stops before its next tick."""
        now = time.monotonic()
        if not on and (self.blocked_by is not None or self.blocked_since):
            self._unblocked(now)
        self.beat, self.due, self.running = now, now + TICK, on
        self.thread = threading.get_ident()
        if self.timer is not None:
            self.timer.cancel()  # else each drive would leave a chain of ticks on the loop
        self.timer = self.loop.call_soon(self._tick) if on else None

    def read_worst(self) -> float:
        """The largest lag since the last read (the gauge's value)."""
        worst, self.worst = self.worst, self.lag
        return worst

    def _tick(self) -> None:
        if not self.running:
            return
        now = time.monotonic()
        self.lag = max(now - self.due, 0.0)
        self.worst = max(self.worst, self.lag)
        self.beat, self.due = now, now + TICK
        if self.blocked_by is not None or self.blocked_since:
            self._unblocked(now)
        self.timer = self.loop.call_later(TICK, self._tick)

    def _unblocked(self, now: float) -> None:
        job, self.blocked_by = self.blocked_by, None
        if job is not None:
            self.on_block(None)
        event(
            log,
            "worker.loop_unblocked",
            logging.WARNING,
            owner=self.owner,
            id=job.id if job else None,
            type=job.type if job else None,
            blocked_for=round(now - self.blocked_since, 3),
        )
        self.blocked_since = 0.0

    def _watch(self) -> None:
        while not self._halt.wait(TICK):
            if not self.running or self.blocked_since:
                continue
            since = self.beat
            if time.monotonic() - since < BLOCKED:
                continue
            task = asyncio.current_task(self.loop)  # the task the blocked loop is in, if any
            job = self.job_of(task) if task is not None else None
            if not self.running or self.beat != since:
                continue  # it moved on meanwhile
            self.blocked_since, self.blocked_by = since, job
            event(
                log,
                "worker.loop_blocked",
                logging.WARNING,
                owner=self.owner,
                id=job.id if job else None,
                type=job.type if job else None,
                handler=_handler_name(self.thread),
                blocked_for=round(time.monotonic() - since, 3),
                note="a handler blocks the event loop (time.sleep? CPU work without await?): "
                "every job of this worker waits; past its timeout + kill_grace the "
                "supervisor kills the worker",
            )
            if job is not None:
                self.on_block(job)


def _handler_name(thread: int | None) -> str | None:
    """The innermost coroutine function running on thread ``thread`` (the loop's): the blocking
    handler itself, or the coroutine of its own it called. (A running coroutine's callers are
    not suspended on it, so only the thread's stack shows them.)"""
    frame = sys._current_frames().get(thread) if thread is not None else None
    while frame is not None:
        code = frame.f_code
        if code.co_flags & inspect.CO_COROUTINE:
            return f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}"
        frame = frame.f_back
    return None
