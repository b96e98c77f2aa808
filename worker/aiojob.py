"""One async job's run on the worker's event loop (``worker.aio``): its handler awaited under
its own timeout, its outcome classified exactly as a one-at-a-time run's
(``shared.execution.runner``).

The timeout cancels this job's task only: its siblings on the loop go on. A timed-out job's
outcome is the ordinary failure ``timed out after N s`` (retried or failed by its attempts),
the text the supervisor gives a one-at-a-time job it kills for its timeout. A cancel request
cancels its task too (``worker.aiocancel``): the job ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import replace
from typing import Any

from shared.execution.handlers import Registry
from shared.model.job import Job
from shared.execution.runner import JobContext, Outcome, execute
from shared.execution.stopping import JobCancelled, cancel_text

from .aiocancel import Flight, cancelled_by_request


async def run_async(
    registry: Registry, job: Job, ctx: JobContext, timeout: float, flight: Flight | None = None
) -> Outcome:
    """Await ``job``'s handler, at most ``timeout`` seconds, its task in ``flight`` meanwhile
    (the check-in cancels it on a cancel request: the outcome is then ``cancelled``); its
    :class:`Outcome`. Never raises (a handler's ``SystemExit`` or ``KeyboardInterrupt`` is its
    job's failure, as in ``shared.execution.runner``, not the loop's end)."""
    spec = registry.get(job.type)
    if spec is None or job.payload_error is not None or not spec.is_async:
        return execute(registry, job, ctx)  # fails it without running (no handler, bad payload)
    value: Any = None
    raised: BaseException | None = None
    scope = asyncio.timeout(timeout)
    if flight is not None:
        flight.add(ctx, asyncio.current_task())
    try:
        async with scope:
            value = spec.fn(job.payload, ctx)
            if inspect.isawaitable(value):
                value = await value
    except BaseException as exc:  # noqa: BLE001 - classified below, as shared.execution.runner does
        if scope.expired():
            return Outcome("error", error=f"timed out after {timeout:g} s")
        raised = JobCancelled(cancel_text(ctx)) if cancelled_by_request(exc, ctx) else exc
    finally:
        if flight is not None:
            flight.discard(ctx)

    def replay(_payload: Any, _ctx: Any) -> Any:
        # shared.execution.runner classifies the result (and traces the run) as for any handler
        if raised is not None:
            raise raised
        return value

    return execute(Registry([replace(spec, fn=replay, is_async=False)]), job, ctx)
