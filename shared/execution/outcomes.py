"""From a handler's :class:`Outcome` to the guarded write that records it, and what follows
the commit: the log line and the on_completed/on_failed/on_retry hooks."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from shared.model import bounds
from shared.model.errortext import headline
from shared.execution.handlers import Registry
from shared.model.job import Finish, Job
from shared.runtime.logs import event, events, get_logger
from shared.execution.policy import JobPolicy
from shared.execution.runner import JobContext, Outcome
from shared.telemetry.tracing import retried, span_ids

log = get_logger("worker")
_EVENTS = {
    "completed": ("job.completed", logging.INFO),
    "failed": ("job.failed", logging.WARNING),
    "retry": ("job.retry", logging.INFO),
    "cancelled": ("job.cancelled", logging.INFO),
}


@dataclass
class Done:
    """A finished run waiting to be committed."""

    job: Job
    ctx: JobContext
    outcome: Outcome
    finish: Finish
    duration: float
    delay: float | None = None


def decide(
    job: Job, ctx: JobContext, outcome: Outcome, policy: JobPolicy, now: float, duration: float
) -> Done:
    """Completed, retried (after RetryAfter's delay or the backoff) or failed for good; cancelled
    when the handler raised JobCancelled or failed after a cancel was requested.

    ``now`` is when the run ended and ``duration`` how long it took: the Finish carries the
    run's own start and end (a batch's jobs each their own, see :class:`shared.model.job.Finish`).
    Whatever the handler produced, the Finish can be recorded (see :func:`storable`): a result
    above ``max_result_bytes`` fails the job, error text that is not valid Unicode is kept with
    backslash escapes, and a RetryAfter that would be due after the latest storable time is an
    ordinary failure."""
    outcome = storable(job, outcome, policy.config.max_result_bytes, now)
    if outcome.kind == "completed":  # most runs: the Finish made here, with no dict of times
        started, progress = now - max(duration, 0.0), getattr(ctx, "reported", None)
        finish = Finish(
            "completed", job.id, job.attempts, outcome.result, 0.0, None, started, now, progress
        )
        return Done(job, ctx, outcome, finish, duration)
    finish, delay = _finish(job, ctx, outcome, policy, now, _run_times(ctx, now, duration))
    return Done(job, ctx, outcome, finish, duration, delay)


def _run_times(ctx: JobContext, now: float, duration: float) -> dict[str, Any]:
    """The run's own times, and its last progress report (the check-in's may be older)."""
    return {
        "started": now - max(duration, 0.0),
        "ended": now,
        "progress": getattr(ctx, "reported", None),
    }


def _finish(
    job: Job,
    ctx: JobContext,
    outcome: Outcome,
    policy: JobPolicy,
    now: float,
    times: dict[str, Any],
) -> tuple[Finish, float | None]:
    """The Finish recording the (storable) ``outcome``, and the retry's delay (None unless
    the job is retried)."""
    if outcome.kind == "completed":
        return Finish("completed", job.id, job.attempts, outcome.result, **times), None
    if outcome.kind == "cancelled" or getattr(ctx, "cancel_requested", False):
        # asked to stop: whatever else went wrong meanwhile, never retried
        return (
            Finish("cancelled", job.id, job.attempts, outcome.error or "cancelled", **times),
            None,
        )
    if outcome.kind == "failed" or job.attempts >= ctx.max_attempts:
        return (
            Finish(
                "failed", job.id, job.attempts, outcome.error or "", 0.0, ctx.max_attempts, **times
            ),
            None,
        )
    delay = _delay(job, outcome, policy)
    return (
        Finish(
            "retry",
            job.id,
            job.attempts,
            outcome.error or "",
            now + delay,
            ctx.max_attempts,
            **times,
            trace=retried(job.trace, outcome.span),  # the next attempt links to this one
        ),
        delay,
    )


def _delay(job: Job, outcome: Outcome, policy: JobPolicy) -> float:
    """How long the retry of ``job`` waits: RetryAfter's delay, else the back-off (the job's
    payload may carry its own retry rule: shared.execution.policy)."""
    if outcome.kind == "retry_after":
        return outcome.delay or 0.0
    return policy.backoff(job.attempts, job.type, job.payload)


def storable(job: Job, outcome: Outcome, max_result_bytes: int, now: float) -> Outcome:
    """``outcome`` as it can be committed (the commit path must never raise on handler output)."""
    if outcome.kind == "completed":
        text = outcome.result
        if text is not None and len(text) * 4 > max_result_bytes:  # else it fits: <= 4 bytes a char
            size = len(text.encode("utf-8"))
            if size > max_result_bytes:
                return Outcome(
                    "failed",
                    error=f"job {job.id} ({job.type!r}): result of {size} bytes exceeds "
                    f"max_result_bytes={max_result_bytes}",
                    span=outcome.span,
                )
        return outcome
    error = bounds.safe_text(outcome.error or "")
    if (
        outcome.kind == "retry_after"
        and bounds.time_error(now + (outcome.delay or 0.0)) is not None
    ):
        return Outcome(
            "error",
            error=f"RetryAfter({outcome.delay:g} s) would make job {job.id} due after "
            f"{bounds.MAX_TIME_TEXT}, the latest time jobq stores: treated as an "
            f"ordinary failure\n{error}",
            span=outcome.span,
        )
    return outcome if error == outcome.error else dataclasses.replace(outcome, error=error)


def unrecordable(done: Done, exc: BaseException) -> Done:
    """``done`` turned into a failure that can be recorded, after recording it raised ``exc``
    (a last resort: :func:`storable` should have made every outcome recordable)."""
    f = done.finish
    error = bounds.safe_text(
        f"the outcome {f.kind!r} of job {f.job_id} could not be recorded "
        f"({type(exc).__name__}: {exc}); the job failed instead"
    )
    return Done(
        done.job,
        done.ctx,
        Outcome("failed", error=error),
        Finish(
            "failed",
            f.job_id,
            f.attempt,
            error,
            0.0,
            done.ctx.max_attempts,
            f.started,
            f.ended,
            f.progress,
        ),
        done.duration,
    )


def after_commit_all(
    dones: list[Done], committed: list[bool], registry: Registry, slot: int | None, pid: int
) -> None:
    """What follows one commit: the completions' log lines (one record for the whole batch),
    then, job by job, the other outcomes' lines and every hook."""
    name, level = _EVENTS["completed"]
    if log.isEnabledFor(level):
        events(
            log,
            name,
            level,
            [
                _fields(d, slot, pid)
                for d, ok in zip(dones, committed)
                if ok and d.finish.kind == "completed"
            ],
        )
    plain = not registry.hooks["completed"]  # a completion then has nothing left to do here
    for d, ok in zip(dones, committed):
        done = ok and d.finish.kind == "completed"
        if not (done and plain):  # (the call skipped on the hot path)
            after_commit(d, ok, registry, slot, pid, logged=done)


def _fields(done: Done, slot: int | None, pid: int) -> dict[str, Any]:
    job = done.job
    fields = dict(
        id=job.id,
        type=job.type,
        attempt=job.attempts,
        duration=round(done.duration, 6),
        slot=slot,
        pid=pid,
    )
    if done.outcome.span is not None:  # logged after the commit, outside the run's span: its ids
        fields["trace_id"], fields["span_id"] = span_ids(done.outcome.span)
    return fields


def after_commit(
    done: Done,
    committed: bool,
    registry: Registry,
    slot: int | None,
    pid: int,
    logged: bool = False,
) -> None:
    """Log the recorded outcome (unless ``logged`` already) and run its hooks; a lost lease is
    logged and nothing else."""
    kind = done.finish.kind
    hooks = registry.hooks[kind] if committed else ()
    if logged and not hooks:
        return  # the hot path: a completion already logged with its batch, and no hook
    fields = _fields(done, slot, pid)
    if not committed:
        event(log, "job.lease_lost", logging.WARNING, outcome=kind, **fields)
        return
    if not logged:
        name, level = _EVENTS[kind]
        if kind != "completed":
            fields["error"] = headline(done.outcome.error)  # the whole text is stored
            if done.delay is not None:
                fields["delay"] = round(done.delay, 3)
        event(log, name, level, **fields)
    arg = done.outcome.result if kind == "completed" else done.outcome.error
    for hook in hooks:
        try:
            hook(done.ctx, arg)
        except Exception as exc:  # noqa: BLE001 - a failing hook never fails the job
            event(
                log,
                "hook.failed",
                logging.ERROR,
                hook=getattr(hook, "__qualname__", repr(hook)),
                error=f"{type(exc).__name__}: {exc}",
                **fields,
            )
