"""The Django task class of the jobq backend, and how a jobq worker runs one.

A ``JobqTask`` is a Django ``Task`` that a worker also sees as a jobq handler: it carries the
``HandlerSpec`` attribute that ``shared.execution.handlers`` collects from a handler module, so
listing the tasks' module in ``handlers`` (after ``jobq.django.worker``, which sets Django up) is
all a worker needs. The job type is the task's module path (``shop.tasks.send_invoice``): its
``[types."shop.tasks.send_invoice"]`` table sets retries, timeouts and limits.

Around each call the worker sends ``task_started`` and, once the task has finished for good
(success, a permanent failure, or its last attempt failed), ``task_finished``, as Django's own
workers do; a failed attempt that will be retried sends no ``task_finished``. Django's database
connections are closed before and after a run when unusable or too old, as after a request.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import traceback
from typing import Any, Callable

from django.db import close_old_connections
from django.utils import timezone

from shared.execution.handlers import ATTR, HandlerSpec, PermanentError

from . import compat
from .results import arguments

_RUNNER = "_jobq_runner"  # where a task function keeps its runner: one per function, whatever Task wraps it


class JobqTask(compat.Task):  # type: ignore[misc, valid-type]
    """A Django task run by jobq workers (``JobqBackend.task_class``)."""


def handler_spec(task: Any) -> HandlerSpec:
    """The jobq handler of ``task``: job type = the task's module path. The runner is made once
    per function, so two Task objects of one function (``.using(...)``) are one handler."""
    fn = task.func
    runner = fn.__dict__.get(_RUNNER)
    if runner is None:
        runner = fn.__dict__.setdefault(_RUNNER, _runner(task))
    return HandlerSpec(task.module_path, runner, is_async=inspect.iscoroutinefunction(fn))


setattr(JobqTask, ATTR, property(handler_spec))


def worker_id() -> str:
    """This worker process, as a Django task result names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _runner(task: Any) -> Callable[[Any, Any], Any]:
    def run(payload: Any, job: Any) -> Any:
        try:
            args, kwargs = arguments(payload)
        except ValueError as exc:
            raise PermanentError(f"job {job.id}: {exc}") from None
        return run_task(task, job, args, kwargs)

    run.__name__ = run.__qualname__ = task.func.__qualname__
    run.__module__ = task.func.__module__
    return run


def run_task(task: Any, job: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """One attempt of ``task`` as job ``job`` (a ``JobContext``): the signals around the call;
    returns the JSON-ready return value, or raises what the task raised."""
    now = timezone.now()
    result = compat.TaskResult(
        task=task,
        id=job.id,
        status=compat.TaskResultStatus.RUNNING,
        enqueued_at=None,
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=[""] * (job.attempt - 1) + [worker_id()],
    )  # earlier attempts' workers: get_result has them
    sender = type(task.get_backend())
    close_old_connections()
    compat.task_started.send(sender=sender, task_result=result)
    if task.takes_context:
        args = [compat.TaskContext(task_result=result), *args]
    try:
        value = compat.normalize_json(_call(task.func, args, kwargs))
    except BaseException as exc:
        _failed(
            result, exc, final=isinstance(exc, PermanentError) or job.attempt >= job.max_attempts
        )
        if result.status == compat.TaskResultStatus.FAILED:
            compat.task_finished.send(sender=sender, task_result=result)
        raise
    finally:
        close_old_connections()
    object.__setattr__(result, "_return_value", value)
    object.__setattr__(result, "status", compat.TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    compat.task_finished.send(sender=sender, task_result=result)
    return value


def _call(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Call the task function; an ``async def`` one runs in an event loop of its own, as jobq
    runs async handlers."""
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(fn(*args, **kwargs))
    return fn(*args, **kwargs)


def _failed(result: Any, exc: BaseException, final: bool) -> None:
    """Record the attempt's error on ``result``: FAILED if it was the last, else READY again."""
    path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    result.errors.append(compat.TaskError(exception_class_path=path, traceback=text))
    object.__setattr__(
        result, "status", compat.TaskResultStatus.FAILED if final else compat.TaskResultStatus.READY
    )
    if final:
        object.__setattr__(result, "finished_at", timezone.now())
