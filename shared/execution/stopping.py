"""Stopping a running job from outside its handler: the exceptions a handler sees, what
its :class:`shared.execution.runner.JobContext` carries for it (the cancel flag, the deadline, the
last progress reported), and an ``async def`` handler's task cancelled at its deadline or on a
cancel request.

Who sets what: the worker arms the deadline around the handler call (``worker.deadline``: a
``SIGALRM`` whose handler raises :class:`JobTimeout` in the main thread while the handler runs);
its heartbeat thread sets ``cancel_requested`` when the job's row carries a cancel request and
writes the progress the handler reported (``worker.checkin``). Nothing here touches a database.
"""

from __future__ import annotations

import time
from typing import Any

from shared.model.bounds import MAX_DEPTH
from shared.model.job import encode_json

MAX_PROGRESS_BYTES = 4096  # a progress is a small JSON object: a bar and a line, not a result
WATCH_EVERY = 0.05  # seconds: how often an async handler's watcher looks at the flags


class JobTimeout(Exception):
    """Raised inside a handler when its job's ``timeout`` passes (in its thread; an ``async def``
    handler's task is cancelled and this raised in its place), so ``finally`` blocks and context
    managers run. The run is an ordinary failure: retried, or failed "timed out after N s" once
    attempts are used up. A handler that swallows it is killed ``kill_grace`` later."""


class JobCancelled(Exception):
    """The job was cancelled. Inside a handler, ``job.check_cancelled()`` raises it once a cancel
    was requested (``job`` is then None): raised out of the handler, the job ends ``cancelled``
    and is never retried. From ``JobHandle.wait``: the job ended cancelled (``job``: as stored)."""

    def __init__(self, job: Any = None, message: str | None = None) -> None:
        if isinstance(job, str):
            job, message = None, job
        self.job = job
        if message is None:
            message = (
                f"job {job.id} ({job.type}) was cancelled" if job is not None else "job cancelled"
            )
        super().__init__(message)


JobTimeout.__module__ = JobCancelled.__module__ = "jobq"  # how tracebacks and users name them


def timeout_text(ctx: Any) -> str:
    return f"job {ctx.id} ({ctx.type!r}) timed out after {ctx.timeout:g} s"


def cancel_text(ctx: Any) -> str:
    return f"job {ctx.id} ({ctx.type!r}) was cancelled while running"


def check_cancelled(ctx: Any) -> None:
    """Raise :class:`JobCancelled` if a cancel of the job was requested."""
    if ctx.cancel_requested:
        raise JobCancelled(cancel_text(ctx))


def progress_json(ctx: Any, fraction: Any, note: Any, fields: dict[str, Any]) -> str:
    """The progress a handler reports as compact JSON ({"fraction", "note", ...fields}); bad input
    raises ValueError/TypeError naming the job, and nothing is kept."""
    where = f"progress of job {ctx.id} ({ctx.type!r})"
    value: dict[str, Any] = {}
    if fraction is not None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not 0 <= fraction <= 1
        ):
            raise ValueError(f"{where}: fraction must be a number from 0 to 1, got {fraction!r}")
        value["fraction"] = float(fraction)
    if note is not None:
        if not isinstance(note, str):
            raise TypeError(f"{where}: note must be text, got {type(note).__name__}")
        value["note"] = note
    value.update(fields)
    text = encode_json(value, where)
    if len(text.encode("utf-8")) > MAX_PROGRESS_BYTES:
        raise ValueError(
            f"{where}: {len(text.encode('utf-8'))} bytes of JSON exceeds the "
            f"{MAX_PROGRESS_BYTES}-byte limit (at most {MAX_DEPTH} levels deep)"
        )
    return text


def run_awaitable(value: Any, ctx: Any) -> Any:
    """Run an async handler's awaitable to its end in a new event loop. Its task is cancelled
    when the deadline passes (then :class:`JobTimeout` is raised in its place) or a cancel is
    requested (:class:`JobCancelled`); a handler that catches the cancellation and returns has
    returned."""
    import asyncio  # here: only async handlers need it, and it costs a process start ~30 ms

    async def main() -> Any:
        task = asyncio.ensure_future(value)
        why = None
        while not task.done():
            await asyncio.wait({task}, timeout=WATCH_EVERY)
            if task.done():
                break
            deadline = getattr(ctx, "deadline", None)
            if getattr(ctx, "cancel_requested", False):
                why = "cancel"
            elif deadline is not None and time.monotonic() >= deadline:
                why = "timeout"
            if why is not None:
                task.cancel()
                break
        try:
            return await task
        except asyncio.CancelledError:
            if why == "timeout":
                ctx.timed_out = True
                raise JobTimeout(timeout_text(ctx)) from None
            if why == "cancel":
                raise JobCancelled(cancel_text(ctx)) from None
            raise

    return asyncio.run(main())
