"""What a cancel did: :class:`CancelResult`, returned by ``JobQueue.cancel`` and
``JobHandle.cancel``, and the wait for a running job's outcome after its cancel request.

A pending or waiting job ends ``cancelled`` at once. A running job is only asked to stop: its
handler sees the request within a fraction of a second and the job ends ``cancelled``, unless
the handler returns (or fails) first, which a job of a few milliseconds usually does. The two
are told apart; the result is truthy exactly when the cancel was applied (ended or asked), as
the ``True``/``False`` that ``cancel()`` used to return, so ``if q.cancel(job_id):`` keeps its
meaning. ``wait=True`` waits for the asked job's outcome (docs/cancellation.md).
"""

from __future__ import annotations

import enum
from typing import Any

from shared.producer.handles import JobCancelled, JobFailed, wait_jobs
from shared.ops.bulk import cancel_each


class CancelResult(str, enum.Enum):
    """The outcome of ``cancel()``; truthy for ``CANCELLED`` and ``REQUESTED``.

    - ``CANCELLED``: the job ended ``cancelled`` (at once, or, waited for, when its handler
      stopped).
    - ``REQUESTED``: the job was running and is asked to stop; it has not ended yet (no wait, or
      the wait's timeout passed). It may still complete.
    - ``FINISHED_FIRST``: asked to stop and waited for, it ended otherwise first (its handler
      returned or failed before it saw the request): see its status.
    - ``UNCHANGED``: nothing was done: no such job, or it had ended already.
    """

    CANCELLED = "cancelled"
    REQUESTED = "requested"
    FINISHED_FIRST = "finished_first"
    UNCHANGED = "unchanged"

    def __bool__(self) -> bool:
        return self in (CancelResult.CANCELLED, CancelResult.REQUESTED)

    def __str__(self) -> str:
        return self.value


def cancel(
    queue: Any, job_id: str, *, wait: bool = False, timeout: float | None = None
) -> CancelResult:
    """Cancel ``job_id`` on ``queue`` (a ``JobQueue``); with ``wait``, a running job's outcome
    is waited for, at most ``timeout`` seconds (None: no limit; then ``REQUESTED``)."""
    how = cancel_each(queue.store, [job_id], queue.clock.now()).get(job_id)
    if how is None:
        return CancelResult.UNCHANGED
    if how == "cancelled":
        return CancelResult.CANCELLED
    if not wait:
        return CancelResult.REQUESTED
    try:
        wait_jobs(queue, [job_id], timeout)
    except JobCancelled:
        return CancelResult.CANCELLED
    except JobFailed:
        return CancelResult.FINISHED_FIRST
    except TimeoutError:
        return CancelResult.REQUESTED
    return CancelResult.FINISHED_FIRST
