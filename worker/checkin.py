"""A busy worker's check-in, run by its heartbeat thread a few times a second while a
job runs: the progress each running job's handler reported since the last one is written (the
latest only: at most 1 / ``CHECK_EVERY`` writes a second per job), and a cancel request for a
running job sets its ``cancel_requested`` (``check_cancelled()`` then raises; an async handler's
task is cancelled). The cancel requests are read at each check-in, unless the supervisor listens
for controls (``shared.runtime.controlfile``): then only when it says one came, or every
``[supervisor] control_poll_interval``. The supervisor kills the worker when the handler has
not stopped ``cancel_grace`` after the request.

The running jobs are the one in hand (``InHand.ctx``, one at a time) and those of the async
runner's event loop (``InHand.flight``: ``worker.aiocancel``), all in one check-in.
"""

from __future__ import annotations

import logging
import time
from shared.engines.contract import WorkerStore
from shared.runtime.controlfile import ControlMark
from shared.runtime.logs import event, get_logger
from shared.execution.runner import JobContext

from .deadline import InHand  # noqa: F401 - the loop imports both from here

log = get_logger("worker")

CHECK_EVERY = 0.25  # seconds between two check-ins of a busy worker


class CheckIn:
    """Called by the heartbeat thread at each tick while busy (``tick``)."""

    def __init__(self, owner: str, in_hand: InHand, mark: ControlMark | None = None) -> None:
        self.owner = owner
        self.in_hand = in_hand
        self.mark = mark or ControlMark(None, lambda: 0.0)  # when to read cancel requests
        self.next_at = 0.0
        self.written: dict[
            tuple[str, int], int
        ] = {}  # (job id, attempt) -> report count last stored

    def running(self) -> dict[str, JobContext]:
        """Job id -> context of every job the worker runs now (an async job run one at a time is
        both in hand and in flight: one context)."""
        flight = self.in_hand.flight
        out = {ctx.id: ctx for ctx in flight.contexts()} if flight is not None else {}
        ctx = self.in_hand.ctx
        if ctx is not None:
            out.setdefault(ctx.id, ctx)
        return out

    def tick(self, store: WorkerStore) -> None:
        """Check in if it is time (raises the store's errors: the heartbeat logs and reopens)."""
        now = time.monotonic()
        if now < self.next_at:
            return
        running = self.running()
        if not running:
            return
        self.next_at = now + CHECK_EVERY
        rows, marks = [], {}
        for ctx in running.values():
            key = (ctx.id, ctx.attempt)
            marks[key] = ctx.reports  # read before the report: a newer one is written next time
            reported = ctx.reported
            if reported is not None and marks[key] != self.written.get(key):
                rows.append((ctx.id, ctx.attempt, reported))
        look = self.mark.look(now)  # (a progress write reads the requests too: it counts)
        if not rows and not look:
            return  # no progress to write, no word of a control: nothing to ask the database
        asked = store.check_in(self.owner, rows)
        written = {k: n for k, n in self.written.items() if k in marks}  # forget the ended runs
        self.written = {**written, **{(i, a): marks[(i, a)] for i, a, _ in rows}}
        for job_id in asked & running.keys():
            self.ask(running[job_id])

    def ask(self, ctx: JobContext) -> None:
        """A cancel of ``ctx``'s job was requested: its flag set (once) and, on the event loop,
        its task cancelled."""
        if ctx.cancel_requested:
            return
        ctx.cancel_requested = True
        flight = self.in_hand.flight
        if flight is not None:
            flight.cancel(ctx)
        event(
            log,
            "job.cancel_requested",
            logging.INFO,
            id=ctx.id,
            type=ctx.type,
            attempt=ctx.attempt,
            slot=self.in_hand.slot,
            pid=self.in_hand.pid,
        )

    @staticmethod
    def interval(busy: bool) -> float | None:
        """How long the heartbeat may sleep at most, for the check-in (None: no limit)."""
        return CHECK_EVERY if busy else None
