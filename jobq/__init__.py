"""jobq for applications: the one import for producers, handler modules and tests.

    from jobq import task

    @task(max_attempts=5)
    def send_invoice(invoice_id: int, email: str) -> dict:
        ...

    handle = send_invoice.enqueue(42, email="a@b.c")   # a JobHandle[dict]
    receipt = handle.wait(timeout=30)

The string-and-dict API is here too (``JobQueue``, ``@handler``), with the hooks, the errors,
workflows (``chain``, ``group``, ``chord``), the job and its context, and what tests need
(``JobQueue(..., immediate=True)``, ``drain``, ``FakeClock``, ``Config``, ``RetryConfig``).
This package only re-exports (the machinery lives in ``shared``, which workers import without
this package), each name on first use: ``import jobq`` loads nothing else, and
``from jobq import handler`` only what a handler needs. ``python -m jobq`` is the ``jobq``
command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.execution.handlers import (
        PermanentError,
        RetryAfter,
        handler,
        on_cancelled,
        on_completed,
        on_failed,
        on_retry,
    )
    from shared.execution.current import NoCurrentJob, current_job
    from shared.execution.runner import JobContext
    from shared.execution.stopping import JobTimeout
    from shared.model.errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
    from shared.model.exitcodes import ExitCode
    from shared.model.flows import FlowError
    from shared.model.codecbook import codec
    from shared.model.job import Job
    from shared.model.unserved import UnservedQueueWarning
    from shared.producer.api import JobQueue
    from shared.producer.cancels import CancelResult
    from shared.producer.duplicates import DuplicateJobWarning
    from shared.producer.canvas import Flow, Signature, chain, chord, group
    from shared.producer.handles import JobCancelled, JobFailed, JobHandle, JobNotFound
    from shared.producer.tasks import AsyncTask, BaseTask, Task, configure, default_queue, task
    from shared.producer.typecheck import UnservedTypeWarning
    from shared.runtime.clock import FakeClock, SystemClock
    from shared.settings.config import Config, ConfigError, RetryConfig
    from shared.settings.config import load as load_config
    from supervisor.api import Supervisor

__all__ = [
    # the queue, its jobs and their handles
    "CancelResult",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobHandle",
    "JobNotFound",
    "JobQueue",
    # tasks
    "AsyncTask",
    "BaseTask",
    "NoCurrentJob",
    "Task",
    "codec",
    "configure",
    "current_job",
    "default_queue",
    "task",
    # handlers, their hooks, and what a handler raises or is given
    "JobContext",
    "JobTimeout",
    "PermanentError",
    "RetryAfter",
    "handler",
    "on_cancelled",
    "on_completed",
    "on_failed",
    "on_retry",
    # workflows
    "Flow",
    "FlowError",
    "Signature",
    "chain",
    "chord",
    "group",
    # configuration and time
    "Config",
    "ConfigError",
    "FakeClock",
    "RetryConfig",
    "SystemClock",
    "load_config",
    # errors and warnings
    "DuplicateJobWarning",
    "StoreBusy",
    "StoreError",
    "StoreQueryError",
    "StoreUnavailable",
    "UnservedQueueWarning",
    "UnservedTypeWarning",
    # embedding the supervisor, and its exit codes
    "ExitCode",
    "Supervisor",
]


# where each name lives (module, and its name there when it differs)
_WHERE: dict[str, tuple[str, str]] = {
    **{
        n: ("shared.execution.handlers", n)
        for n in (
            "PermanentError",
            "RetryAfter",
            "handler",
            "on_cancelled",
            "on_completed",
            "on_failed",
            "on_retry",
        )
    },
    "JobContext": ("shared.execution.runner", "JobContext"),
    **{n: ("shared.execution.current", n) for n in ("NoCurrentJob", "current_job")},
    "codec": ("shared.model.codecbook", "codec"),
    "JobTimeout": ("shared.execution.stopping", "JobTimeout"),
    **{
        n: ("shared.model.errors", n)
        for n in ("StoreBusy", "StoreError", "StoreQueryError", "StoreUnavailable")
    },
    "ExitCode": ("shared.model.exitcodes", "ExitCode"),
    "FlowError": ("shared.model.flows", "FlowError"),
    "Job": ("shared.model.job", "Job"),
    "UnservedQueueWarning": ("shared.model.unserved", "UnservedQueueWarning"),
    "JobQueue": ("shared.producer.api", "JobQueue"),
    "CancelResult": ("shared.producer.cancels", "CancelResult"),
    "DuplicateJobWarning": ("shared.producer.duplicates", "DuplicateJobWarning"),
    **{n: ("shared.producer.canvas", n) for n in ("Flow", "Signature", "chain", "chord", "group")},
    **{
        n: ("shared.producer.handles", n)
        for n in ("JobCancelled", "JobFailed", "JobHandle", "JobNotFound")
    },
    **{
        n: ("shared.producer.tasks", n)
        for n in ("AsyncTask", "BaseTask", "Task", "configure", "default_queue", "task")
    },
    "UnservedTypeWarning": ("shared.producer.typecheck", "UnservedTypeWarning"),
    **{n: ("shared.runtime.clock", n) for n in ("FakeClock", "SystemClock")},
    **{n: ("shared.settings.config", n) for n in ("Config", "ConfigError", "RetryConfig")},
    "load_config": ("shared.settings.config", "load"),
    "Supervisor": ("supervisor.api", "Supervisor"),
}


def __getattr__(name: str) -> object:
    """A public name, imported from its module when first asked for (PEP 562): a handler
    module's ``from jobq import handler`` loads the handlers' module, not the producer API or
    the supervisor."""
    if name in _WHERE:
        module, attr = _WHERE[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
