"""A jobq job as a Django ``TaskResult``: status, times, arguments, the stored result, and the
errors and workers of its attempt history.

jobq keeps one row per ended attempt (outcome ``retry``, ``failed`` or ``completed``, with the
error text and the owner); a Django task result lists one ``TaskError`` per failed attempt and
one worker id per attempt. The attempt history is read through the operators' read layer, in
:func:`history` only.

The result's ``task`` is the task rebuilt with the job's own options (:func:`task_of`), and a
``TaskError.traceback`` is what Django's contract says, ``"".join(format_exception(exc))``,
while jobq's error field keeps jobq's own text (:func:`django_traceback`).
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from shared.ops import attempt_history  # the read layer
from shared.model.job import Job

from . import compat

STATUS = {
    "waiting": "READY",
    "pending": "READY",
    "running": "RUNNING",
    "completed": "SUCCESSFUL",
    "failed": "FAILED",
    "cancelled": "FAILED",
}  # Django has no "cancelled": a cancelled task never ran, it failed
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*")
UNKNOWN_EXCEPTION = "builtins.Exception"  # an error jobq wrote itself (a timeout, a lost worker)
# The sentence jobq's runner (shared.execution.runner) puts before the traceback of a handler that
# called sys.exit(): jobq's wording, for jobq's error field; Django's traceback has none.
_SYS_EXIT_NOTE = re.compile(r"handler of job \S+ called sys\.exit\(.*\): treated as a failure\n")
_TRACEBACK = "Traceback (most recent call last):\n"
PAYLOAD_RUN_AFTER = "run_after"  # the payload key of the run_after a task was enqueued with


def history(store: Any, job_id: str) -> list[dict[str, Any]]:
    """The ended attempts of one job, oldest first."""
    return list(attempt_history(store, job_id))


def when(text: str | None) -> datetime | None:
    """A stored ISO time as Django shows times: aware (UTC) with ``USE_TZ``, else naive local."""
    if not text:
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def exception_path(error: str) -> str:
    """The exception class of a stored traceback: its last line names it (``module.Class: msg``;
    a builtin has no module part). An error that is not a traceback gives ``Exception``."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    name = lines[-1].split(":", 1)[0] if lines else ""
    if not _EXCEPTION.fullmatch(name):
        return UNKNOWN_EXCEPTION
    return name if "." in name else f"builtins.{name}"


def django_traceback(error: str) -> str:
    """A stored error as Django's ``TaskError.traceback``: for an exception the task raised,
    ``"".join(traceback.format_exception(exc))`` (jobq stores it without its final newline, and
    after a sentence of its own for a ``sys.exit()``); any other error (a timeout, a lost
    worker: jobq's words) as stored."""
    note = _SYS_EXIT_NOTE.match(error)
    text = error[note.end() :] if note and error[note.end() :].startswith(_TRACEBACK) else error
    return text + "\n" if text.startswith(_TRACEBACK) else text


def task_error(error: str) -> Any:
    """The Django ``TaskError`` of one stored error."""
    return compat.TaskError(
        exception_class_path=exception_path(error), traceback=django_traceback(error)
    )


def errors_of(job: Job, attempts: list[dict[str, Any]]) -> list[Any]:
    """One TaskError per failed attempt; a job failed without an attempt (never ran) gets one
    for its own error."""
    out = [task_error(a["error"]) for a in attempts if a["outcome"] != "completed" and a["error"]]
    if not out and job.status == "failed" and job.error:
        out.append(task_error(job.error))
    return out


def task_of(task: Any, job: Job, backend: str) -> Any:
    """``task`` as the job was enqueued: its priority (Django's range: a ``[types]`` priority
    beyond it is cut to it), its queue, the ``run_after`` it was given (kept in the payload:
    the job's ``run_at`` moves with each retry) and the backend reading it. Built without
    the backend's checks: what is stored is shown, even after ``QUEUES`` changed."""
    run_after = job.payload.get(PAYLOAD_RUN_AFTER) if isinstance(job.payload, dict) else None
    moment = datetime.fromisoformat(run_after) if isinstance(run_after, str) else None
    if moment is not None and not settings.USE_TZ:
        moment = timezone.make_naive(moment)
    low, high = compat.TASK_MIN_PRIORITY, compat.TASK_MAX_PRIORITY
    rebuilt = copy.copy(task)
    for name, value in (
        ("priority", min(max(job.priority, low), high)),
        ("queue_name", job.queue),
        ("run_after", moment),
        ("backend", backend),
    ):
        object.__setattr__(rebuilt, name, value)
    return rebuilt


def arguments(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """A task's ``(args, kwargs)`` from its payload ``{"args": [...], "kwargs": {...}}``;
    ValueError for anything else."""
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("args", []), list)
        or not isinstance(payload.get("kwargs", {}), dict)
    ):
        raise ValueError(f"not a task payload ({{'args': [...], 'kwargs': {{...}}}}): {payload!r}")
    return list(payload.get("args", [])), dict(payload.get("kwargs", {}))


def task_result(task: Any, job: Job, attempts: list[dict[str, Any]], backend: str) -> Any:
    """The TaskResult of ``job`` (a run of ``task``) as stored now: ``enqueue`` and
    ``get_result`` both build theirs here, from the stored row."""
    args, kwargs = arguments(job.payload)
    workers = [a["owner"] or "" for a in attempts]
    if job.status == "running":
        workers.append(job.owner or "")
    first = attempts[0]["started_at"] if attempts else job.started_at
    result = compat.TaskResult(
        task=task_of(task, job, backend),
        id=job.id,
        status=compat.TaskResultStatus[STATUS[job.status]],
        enqueued_at=when(job.created_at),
        started_at=when(first),
        last_attempted_at=when(job.started_at),
        finished_at=when(job.completed_at)
        if job.status in ("completed", "failed", "cancelled")
        else None,
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=errors_of(job, attempts),
        worker_ids=workers,
    )
    if job.status == "completed":
        object.__setattr__(result, "_return_value", job.result)
    return result
