"""A busy worker's check-in (issue 27), run by its heartbeat thread a few times a second while a
job runs: the progress the handler reported since the last one is written (the latest only:
at most 1 / ``CHECK_EVERY`` writes a second per job), and a cancel request for the job in hand
sets its ``cancel_requested`` (``check_cancelled()`` then raises; an async handler's task is
cancelled). The supervisor kills the worker when the handler has not stopped ``cancel_grace``
after the request.
"""
from __future__ import annotations

import logging
import time
from shared.contract import WorkerStore
from shared.logs import event, get_logger

from .deadline import InHand  # noqa: F401 - the loop imports both from here

log = get_logger("worker")

CHECK_EVERY = 0.25  # seconds between two check-ins of a busy worker


class CheckIn:
    """Called by the heartbeat thread at each tick while busy (``tick``)."""

    def __init__(self, owner: str, in_hand: InHand) -> None:
        self.owner = owner
        self.in_hand = in_hand
        self.next_at = 0.0
        self.written: tuple[str, int] | None = None  # (job id, report count) last stored

    def tick(self, store: WorkerStore) -> None:
        """Check in if it is time (raises the store's errors: the heartbeat logs and reopens)."""
        now = time.monotonic()
        ctx = self.in_hand.ctx
        if ctx is None or now < self.next_at:
            return
        self.next_at = now + CHECK_EVERY
        mark = (ctx.id, ctx.reports)
        fresh = ctx.reported is not None and mark != self.written
        asked = store.check_in(self.owner, [(ctx.id, ctx.attempt, ctx.reported)] if fresh else [])
        if fresh:
            self.written = mark
        if ctx.id in asked and not ctx.cancel_requested:
            ctx.cancel_requested = True
            event(log, "job.cancel_requested", logging.INFO, id=ctx.id, type=ctx.type, attempt=ctx.attempt,
                  slot=self.in_hand.slot, pid=self.in_hand.pid)

    @staticmethod
    def interval(busy: bool) -> float | None:
        """How long the heartbeat may sleep at most, for the check-in (None: no limit)."""
        return CHECK_EVERY if busy else None
