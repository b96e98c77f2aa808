"""shared.execution.runner: what a handler's run becomes, for every way it can end, in this
process (whole runs on a worker: tests/behaviour/test_worker.py)."""

from __future__ import annotations

import sys

import pytest

from shared.execution.handlers import HandlerSpec, PermanentError, Registry, RetryAfter
from shared.execution.runner import JobContext, execute
from shared.execution.stopping import JobCancelled
from shared.model.job import Job


def job(jtype="t", payload='{"n": 2}'):
    return Job.from_row(
        dict(
            id="j1",
            type=jtype,
            status="running",
            payload=payload,
            result=None,
            error=None,
            attempts=1,
            max_attempts=3,
            priority=0,
            run_at="x",
            started_at=None,
            completed_at=None,
            created_at="x",
            updated_at="x",
        )
    )


def run(fn, j=None, is_async=False):
    j = j or job()
    ctx = JobContext(j.id, j.type, 1, 3)
    return execute(Registry([HandlerSpec("t", fn, is_async=is_async)]), j, ctx), ctx


def raising(exc):
    def handler(payload, ctx):
        raise exc

    return handler


def test_a_result_is_stored_as_json_and_none_as_nothing():
    out, ctx = run(lambda p, ctx: {"double": p["n"] * 2})
    assert (out.kind, out.result) == ("completed", '{"double":4}') and not ctx.in_handler
    assert run(lambda p, ctx: None)[0].result is None


@pytest.mark.parametrize(
    "exc, kind",
    [
        (PermanentError("bad input"), "failed"),
        (JobCancelled("asked"), "cancelled"),
        (ValueError("bad address"), "error"),
        (KeyboardInterrupt(), "error"),
    ],
)
def test_each_ending_of_a_handler(exc, kind):
    out, ctx = run(raising(exc))
    assert out.kind == kind and type(exc).__name__ in out.error
    assert out.exc is None and not ctx.in_handler  # no handler frames kept past the run


def test_retry_after_carries_its_delay():
    out, _ = run(raising(RetryAfter(30)))
    assert (out.kind, out.delay) == ("retry_after", 30.0)


def test_sys_exit_is_a_failure_of_the_job_not_the_worker():
    out, _ = run(lambda p, ctx: sys.exit(3))
    assert out.kind == "error" and out.error.startswith("handler of job j1 called sys.exit(3)")


def test_a_result_that_is_not_json_fails_the_job_naming_it():
    out, _ = run(lambda p, ctx: {"when": object()})
    assert out.kind == "failed" and out.error.startswith("result of job j1 ('t') is not JSON")


def test_no_handler_and_an_undecodable_payload_fail_without_running():
    out, _ = run(lambda p, ctx: pytest.fail("ran"), j=job(jtype="other"))
    assert out.kind == "failed" and "no handler for job type 'other' (job j1)" in out.error
    assert "registered types: t" in out.error
    out, _ = run(lambda p, ctx: pytest.fail("ran"), j=job(payload="{nope"))
    assert out.kind == "failed"
    assert "cannot be decoded, so the job failed without running" in out.error


def test_an_async_handlers_awaitable_runs_to_its_end():
    async def handler(payload, ctx):
        return payload["n"] + 1

    out, _ = run(handler, is_async=True)
    assert (out.kind, out.result) == ("completed", "3")
