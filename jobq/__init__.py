"""jobq for applications: one import for producers, handler modules and tests.

    from jobq import task

    @task(max_attempts=5)
    def send_invoice(invoice_id: int, email: str) -> dict:
        ...

    handle = send_invoice.enqueue(42, email="a@b.c")   # a JobHandle[dict]
    receipt = handle.wait(timeout=30)

The string-and-dict API is here too (``JobQueue``, ``@handler``). This package only re-exports
(the machinery lives in ``shared``, which workers import without this package);
``python -m jobq`` is the ``jobq`` command.
"""
from shared.producer.api import JobQueue
from shared.producer.cancels import CancelResult
from shared.producer.canvas import Flow, Signature, chain, chord, group
from shared.runtime.clock import FakeClock, SystemClock
from shared.settings.config import Config, ConfigError
from shared.model.errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
from shared.model.exitcodes import ExitCode
from shared.model.flows import FlowError
from shared.execution.handlers import (PermanentError, RetryAfter, handler, on_cancelled,
                                       on_completed, on_failed, on_retry)
from shared.producer.handles import JobCancelled, JobFailed, JobHandle, JobNotFound
from shared.model.job import Job
from shared.execution.stopping import JobTimeout
from shared.producer.tasks import AsyncTask, BaseTask, Task, configure, default_queue, task

__all__ = ["JobQueue", "Job", "JobHandle", "JobFailed", "JobCancelled", "JobNotFound", "task", "Task",
           "AsyncTask", "BaseTask", "configure", "default_queue", "handler", "PermanentError", "RetryAfter",
           "on_completed", "on_failed", "on_retry", "on_cancelled", "JobTimeout", "Config", "ConfigError", "ExitCode", "FakeClock",
           "SystemClock", "StoreError", "StoreBusy", "StoreUnavailable", "StoreQueryError",
           "chain", "group", "chord", "Flow",
           "Signature", "FlowError", "CancelResult"]
