"""Run one handler call and turn whatever happened into an :class:`Outcome`.

No database access here: the worker loop (or, in a user's tests, :mod:`shared.producer.inline`)
records the outcome.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from shared.execution.handlers import HandlerSpec, PermanentError, Registry, RetryAfter
from shared.model.job import Job, encode_json
from shared.model.retryrules import rule_of_payload
from shared.runtime.logs import event, get_logger
from shared.telemetry.tracing import Tracing
from shared.execution.stopping import JobCancelled, check_cancelled, progress_json, run_awaitable

log = get_logger("job")
_PLAIN = frozenset(
    {type(None), dict, list, str, int, float, bool}
)  # a handler's usual values: never awaitable


class JobLogger(logging.LoggerAdapter):
    """A handler's logger: every line carries the job's id, type and attempt as fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {"jobq_fields": self.extra}
        return msg, kwargs


class JobContext:
    """What a handler gets as its second argument: ``id``, ``type``, ``attempt`` (1-based),
    ``max_attempts``, ``queue`` (the named queue it was enqueued on), ``logger`` (its lines carry the job's id, type and attempt), and for a
    job that waited for others ``parent_results`` / ``parent_errors`` (read on first use);
    ``cancel_requested`` (true once a cancel of the running job was asked), ``check_cancelled()``
    and ``progress(...)`` (see :mod:`shared.execution.stopping`)."""

    __slots__ = (
        "id",
        "type",
        "attempt",
        "max_attempts",
        "queue",
        "_logger",
        "config",
        "store",
        "_parents",
        "cancel_requested",
        "timeout",
        "deadline",
        "in_handler",
        "timed_out",
        "reported",
        "reports",
        "check_in",
    )

    def __init__(
        self, id: str, type: str, attempt: int, max_attempts: int, queue: str = "default"
    ) -> None:
        self.id, self.type, self.attempt, self.max_attempts = id, type, attempt, max_attempts
        self.queue = queue
        self._logger: logging.LoggerAdapter | None = None
        self.config: Any = None  # the worker's current Config (built-in jobs need its database)
        self.store: Any = None  # the runner's store: where parent_results are read from
        self._parents: list[dict[str, Any]] | None = None
        self.cancel_requested = False  # set by the worker's heartbeat thread
        self.timeout: float | None = None  # seconds, and the monotonic deadline, when armed
        self.deadline: float | None = None
        self.in_handler = False  # the handler's own code runs (a timeout may raise into it)
        self.timed_out = False
        self.reported: str | None = None  # the last progress as JSON, and how many were reported
        self.reports = 0
        # run inline (drain, immediate mode): stores the progress and reads a cancel request
        # when a handler reports or checks, as a worker's heartbeat does (None in a worker)
        self.check_in: Any = None

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if a cancel of this job was requested (``jobq cancel``,
        ``JobQueue.cancel``, the dashboard): the job then ends ``cancelled``, never retried."""
        if self.check_in is not None:
            self.check_in()
        check_cancelled(self)

    def progress(
        self, fraction: float | None = None, note: str | None = None, **fields: Any
    ) -> None:
        """Report progress: ``fraction`` (0 to 1), a ``note`` and JSON ``fields``. Kept in memory;
        the worker writes the latest one a few times a second at most (``JobQueue.get(id).progress``,
        ``jobq show``). Bad input raises ValueError/TypeError and keeps the previous one."""
        self.reported = progress_json(self, fraction, note, fields)
        self.reports += 1
        if self.check_in is not None:
            self.check_in()

    @property
    def logger(self) -> logging.LoggerAdapter:
        if self._logger is None:  # built on first use: most handlers never log
            self._logger = JobLogger(
                logging.getLogger("jobq.job"),
                {"id": self.id, "type": self.type, "attempt": self.attempt},
            )
        return self._logger

    @property
    def parent_results(self) -> dict[str, Any]:
        """The results of the jobs this one waited for (``after=``): parent id -> decoded result
        (None for a parent that did not complete), in the order given; {} for a job without."""
        return {p["id"]: _decoded(p["result"]) for p in self._read_parents()}

    @property
    def parent_errors(self) -> dict[str, str]:
        """The parents that failed or were cancelled (a child with ``after_failure="run"`` runs
        anyway): parent id -> their error text."""
        return {
            p["id"]: p["error"] or p["status"] or "deleted"
            for p in self._read_parents()
            if p["status"] != "completed"
        }

    def _read_parents(self) -> list[dict[str, Any]]:
        if self._parents is None:
            self._parents = [] if self.store is None else self.store.parents(self.id)
        return self._parents

    def __repr__(self) -> str:
        return f"JobContext(id={self.id!r}, type={self.type!r}, attempt={self.attempt})"


@dataclass(frozen=True)
class Outcome:
    """``kind`` is 'completed' (``result`` is JSON text or None), 'failed' (permanent: no retry),
    'cancelled' (the handler raised JobCancelled),
    'error' (retry or fail by attempts) or 'retry_after' (retry after ``delay``); ``exc``: the
    exception the handler raised (for the trace span), if any; ``span``: the run's trace span
    context (OpenTelemetry's SpanContext), when it ran in one (its log line carries the ids)."""

    kind: str
    result: str | None = None
    error: str | None = None
    delay: float | None = None
    exc: BaseException | None = field(default=None, compare=False, repr=False)
    span: Any = field(default=None, compare=False, repr=False)


def _decoded(text: str | None) -> Any:
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return text


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()


def execute(
    registry: Registry, job: Job, ctx: JobContext, tracing: Tracing | None = None
) -> Outcome:
    """Call the job's handler and classify the result, in the job's trace span where the
    application traces (:mod:`shared.telemetry.tracing`; ``tracing``: the caller's, kept per
    process; None for spans only, no meters). Never raises."""
    out = (tracing or Tracing(metered=False)).consume(job, _execute, registry, job, ctx)
    return (
        out if out.exc is None else replace(out, exc=None)
    )  # keep no handler frames past the span


def _execute(registry: Registry, job: Job, ctx: JobContext) -> Outcome:
    spec = registry.get(job.type)
    if spec is None:
        known = ", ".join(registry.types()) or "none"
        return Outcome(
            "failed",
            error=f"no handler for job type {job.type!r} (job {job.id}); registered types: {known}",
        )
    if job.payload_error is not None:
        return Outcome(
            "failed",
            error=f"payload of job {job.id} (type {job.type!r}) cannot be decoded, "
            f"so the job failed without running: {job.payload_error}",
        )
    try:
        value = _own_call(spec, job, ctx)
    except PermanentError as exc:
        return Outcome("failed", error=_format(exc), exc=exc)
    except JobCancelled as exc:
        return Outcome("cancelled", error=_format(exc), exc=exc)
    except RetryAfter as exc:
        return Outcome("retry_after", error=_format(exc), delay=exc.seconds, exc=exc)
    except SystemExit as exc:
        return Outcome(
            "error",
            error=f"handler of job {job.id} called sys.exit({exc.code!r}): "
            f"treated as a failure\n{_format(exc)}",
            exc=exc,
        )
    except BaseException as exc:  # noqa: BLE001 - any handler failure is the job's, not the worker's
        return _failure(spec, job, exc)
    if value is None:
        return Outcome("completed")
    try:
        return Outcome(
            "completed", result=encode_json(value, f"result of job {job.id} ({job.type!r})")
        )
    except (TypeError, ValueError) as exc:
        return Outcome("failed", error=str(exc))


def _failure(spec: HandlerSpec, job: Job, exc: BaseException) -> Outcome:
    """An exception of the handler: retried by attempts ('error'), or failed for good when the
    job's retry rule (its payload's over its task's: shared.model.retryrules) refuses it."""
    rule = rule_of_payload(job.payload) if spec.params is not None else None
    rule = spec.retry if rule is None else rule.over(spec.retry)
    why = None if rule is None else rule.refuses(exc)
    if why is None:
        return Outcome("error", error=_format(exc), exc=exc)
    return Outcome("failed", error=f"{_format(exc)}\n({why})", exc=exc)


def _own_call(spec: HandlerSpec, job: Job, ctx: JobContext) -> Any:
    """Call the handler in this process. A process the handler forked that comes back here,
    returning or raising instead of ending with ``os._exit``, is not the caller (a worker's loop
    would commit and claim under the worker's identity while the worker still runs the job): it
    ends at once, with the status Python would give it (0, 1 after printing its traceback, or
    its ``sys.exit`` code), and nothing of the caller's runs in it."""
    pid = os.getpid()
    try:
        value = _call(spec, job.payload, ctx)
    except SystemExit as exc:
        if os.getpid() != pid:
            _end_stray(
                job, pid, exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            )
        raise
    except BaseException as exc:
        if os.getpid() != pid:
            _end_stray(job, pid, 1, exc)
        raise
    if os.getpid() != pid:
        _end_stray(job, pid, 0)
    return value


def _end_stray(job: Job, parent: int, code: int, exc: BaseException | None = None) -> None:
    """End a process forked by ``job``'s handler (in process ``parent``) that came back to its
    caller: one ``job.stray_process`` line (with the traceback, when it raised), then
    ``os._exit``: other buffers may hold the parent's output, and no cleanup the parent owns
    runs here."""
    try:
        event(
            log,
            "job.stray_process",
            logging.WARNING,
            id=job.id,
            type=job.type,
            pid=os.getpid(),
            parent=parent,
            code=code,
            error=_format(exc) if exc is not None else None,
            note="a process the handler forked returned or raised instead of ending with "
            "os._exit; it ends here",
        )
        for handler in logging.getLogger("jobq").handlers + logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _call(spec: HandlerSpec, payload: Any, ctx: JobContext) -> Any:
    """The handler's own call (a timeout may raise into it only meanwhile: ``in_handler``); an
    awaitable it returns runs to its end, its task cancelled at the deadline or on a cancel."""
    ctx.in_handler = True
    try:
        value = spec.fn(payload, ctx)
    finally:
        ctx.in_handler = False
    if type(value) in _PLAIN or not inspect.isawaitable(
        value
    ):  # (the ABC checks cost more: every job's path)
        return value
    return run_awaitable(value, ctx)
