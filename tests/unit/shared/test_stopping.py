"""Stopping a running job, one module at a time: progress validation, the outcome of
a cancelled or timed-out run (``shared.execution.outcomes.decide``), the async handler's task
cancelled at its deadline or on a request (``shared.execution.stopping.run_awaitable``), and the
worker's alarm (``worker.deadline``) raising only into the handler's own code."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from jobq import JobCancelled, JobTimeout
from shared.runtime.clock import FakeClock
from shared.settings.config import Config
from shared.execution.handlers import HandlerSpec, Registry
from shared.model.job import Job
from shared.execution.outcomes import decide
from shared.execution.policy import JobPolicy
from shared.execution.runner import JobContext, Outcome, execute
from shared.execution.stopping import MAX_PROGRESS_BYTES, run_awaitable
from worker.deadline import InHand


def ctx(**kw) -> JobContext:
    c = JobContext("j1", "t", 1, 3)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def job(jtype: str = "t") -> Job:
    return Job(
        "j1",
        jtype,
        "running",
        {},
        None,
        None,
        1,
        3,
        0,
        "2026-01-01T00:00:00.000Z",
        None,
        None,
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:00:00.000Z",
    )


def test_progress_keeps_small_json_and_refuses_bad_input_naming_the_job():
    c = ctx()
    c.progress(0.25, note="a quarter", rows=10)
    assert (
        json.loads(c.reported) == {"fraction": 0.25, "note": "a quarter", "rows": 10}
        and c.reports == 1
    )
    for bad, error in (
        ((1.5,), ValueError),
        ((True,), ValueError),
        (("half",), ValueError),
        ((None, 3), TypeError),
    ):
        with pytest.raises(error, match="progress of job j1"):
            c.progress(*bad)
    with pytest.raises(TypeError, match="progress of job j1"):
        c.progress(blob=object())
    with pytest.raises(ValueError, match=f"{MAX_PROGRESS_BYTES}-byte limit"):
        c.progress(note="x" * MAX_PROGRESS_BYTES)
    assert json.loads(c.reported)["note"] == "a quarter" and c.reports == 1  # the previous one kept


def test_check_cancelled_raises_only_once_asked():
    c = ctx()
    c.check_cancelled()
    c.cancel_requested = True
    with pytest.raises(JobCancelled, match="j1"):
        c.check_cancelled()
    assert JobCancelled("why").job is None and str(JobCancelled("why")) == "why"
    assert "was cancelled" in str(JobCancelled(job())) and JobCancelled(job()).job.id == "j1"


def policy() -> JobPolicy:
    return JobPolicy(Config(), Registry())


def test_a_cancelled_run_ends_cancelled_and_never_retries():
    now = FakeClock().now()
    assert (
        decide(job(), ctx(), Outcome("cancelled", error="stop"), policy(), now, 1.0).finish.kind
        == "cancelled"
    )
    asked = ctx(cancel_requested=True)
    for outcome in (
        Outcome("error", error="boom"),
        Outcome("retry_after", error="x", delay=5.0),
        Outcome("failed", error="bad"),
    ):
        assert decide(job(), asked, outcome, policy(), now, 1.0).finish.kind == "cancelled"
    assert decide(job(), asked, Outcome("completed"), policy(), now, 1.0).finish.kind == "completed"
    timed_out = Outcome("error", error="jobq.JobTimeout: job j1 ('t') timed out after 2 s")
    assert decide(job(), ctx(), timed_out, policy(), now, 2.0).finish.kind == "retry"


def test_a_handler_raising_jobcancelled_is_a_cancelled_outcome():
    def handler(payload, c):
        raise JobCancelled("stopped on request")

    out = execute(Registry([HandlerSpec("t", handler)]), job(), ctx())
    assert out.kind == "cancelled" and "stopped on request" in out.error


def test_an_async_handlers_task_is_cancelled_at_its_deadline_and_on_a_request():
    ran: list[str] = []

    async def sleeper():
        try:
            await asyncio.sleep(30)
        finally:
            ran.append("finally")

    c = ctx(timeout=0.2, deadline=time.monotonic() + 0.2)
    with pytest.raises(JobTimeout, match="timed out after 0.2 s"):
        run_awaitable(sleeper(), c)
    assert ran == ["finally"] and c.timed_out
    c = ctx()
    c.cancel_requested = True
    with pytest.raises(JobCancelled):
        run_awaitable(sleeper(), c)
    assert ran == ["finally", "finally"]

    async def quick():
        return 42

    assert run_awaitable(quick(), ctx(timeout=5, deadline=time.monotonic() + 5)) == 42


def test_the_alarm_raises_jobtimeout_into_the_handler_and_its_finally_runs():
    seen: list[str] = []

    def handler(payload, c):
        try:
            time.sleep(5)
        finally:
            seen.append("finally")

    c = ctx()
    t0 = time.monotonic()
    out = InHand(None, 0).run(
        c, 0.2, lambda: execute(Registry([HandlerSpec("t", handler)]), job(), c)
    )
    assert time.monotonic() - t0 < 2 and seen == ["finally"]
    assert out.kind == "error" and "JobTimeout: job j1 ('t') timed out after 0.2 s" in out.error


def test_the_alarm_never_raises_outside_the_handlers_own_code():
    """A timer that fires after the handler returned (the worker's own code) raises nothing."""
    c = ctx()

    def then_wait():
        out = execute(Registry([HandlerSpec("t", lambda p, j: "quick")]), job(), c)
        time.sleep(0.2)  # the alarm fires here, outside the handler
        return out

    out = InHand(None, 0).run(c, 0.05, then_wait)
    assert out.kind == "completed" and not c.timed_out
