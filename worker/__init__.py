"""The jobq worker: claims jobs from the store and runs their handlers.

Handler modules use::

    from worker import handler, PermanentError, RetryAfter

    @handler("report:generate", max_attempts=5, timeout=120)
    def generate(payload, job):
        return {"url": "..."}
"""

from shared.execution.handlers import (
    HandlerSpec,
    PermanentError,
    RetryAfter,
    handler,
    on_cancelled,
    on_completed,
    on_failed,
    on_retry,
)

__all__ = [
    "handler",
    "PermanentError",
    "RetryAfter",
    "HandlerSpec",
    "on_completed",
    "on_failed",
    "on_retry",
    "on_cancelled",
]
