"""The testing helpers (shared.producer.inline): ``JobQueue(immediate=True)`` and
``JobQueue.drain()`` run jobs in the calling process through the worker's runner and outcome code,
on each engine."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest

from shared import FakeClock, JobQueue, ops
from shared.producer.handles import JobFailed
from shared.producer.cancels import CancelResult
from shared.settings.config import Config, RetryConfig, TypeConfig
from shared.execution.handlers import (
    HandlerImportError,
    PermanentError,
    RetryAfter,
    handler,
    on_cancelled,
    on_completed,
    on_failed,
    on_retry,
)
from shared.execution.stopping import JobCancelled
from supervisor.views import render as viewrender

from tests.engines import raw

pytestmark = pytest.mark.engines  # the tests that use database run on each engine
REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
seen: list[tuple] = []


@handler("t:ok")
def ok(payload, job):
    seen.append(("run", job.type, job.attempt))
    return {"echo": payload}


@handler("t:flaky", max_attempts=2)
def flaky(payload, job):
    raise ValueError(f"attempt {job.attempt} broke")


@handler("t:permanent")
def permanent(payload, job):
    raise PermanentError("bad input")


@handler("t:later")
def later(payload, job):
    if job.attempt == 1:
        raise RetryAfter(30)
    return "second time"


@handler("t:async")
async def async_handler(payload, job):
    await asyncio.sleep(0)
    return payload * 2


@handler("t:parent")
def parent(payload, job):
    """Enqueues a child through the same immediate queue while it runs."""
    child = payload_queue[0].enqueue("t:ok", "child")
    return child


@handler("t:stops")
def stops(payload, job):
    raise JobCancelled("the handler gave up")


payload_queue: list[JobQueue] = []


@on_completed
def hook_done(job, result):
    seen.append(("completed", job.type, result))


@on_failed
def hook_failed(job, error):
    seen.append(("failed", job.type, error.splitlines()[-1]))


@on_retry
def hook_retry(job, error):
    seen.append(("retry", job.type, job.attempt))


@on_cancelled
def hook_cancelled(job, error):
    seen.append(("cancelled", job.type, error.splitlines()[-1]))


HANDLERS = [
    ok,
    flaky,
    permanent,
    later,
    async_handler,
    parent,
    stops,
    hook_done,
    hook_failed,
    hook_retry,
    hook_cancelled,
]


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture(autouse=True)
def _clear():
    seen.clear()
    payload_queue.clear()


def queue(database, tmp_path, clock, **kw) -> JobQueue:
    config = kw.pop("config", Config(retry=RetryConfig(backoff_base=0)))
    return JobQueue(config=database.config(tmp_path, config), clock=clock, handlers=HANDLERS, **kw)


def test_immediate_runs_at_enqueue_and_stores_the_outcome(database, tmp_path, clock):
    with queue(database, tmp_path, clock, immediate=True) as q:
        job = q.get(q.enqueue("t:ok", {"a": 1}))
        assert (job.status, job.result, job.attempts) == ("completed", {"echo": {"a": 1}}, 1)
        assert seen == [("run", "t:ok", 1), ("completed", "t:ok", '{"echo":{"a":1}}')]
        assert q.get(q.enqueue("t:async", 21)).result == 42


def test_immediate_honours_retries_permanent_errors_and_hooks(database, tmp_path, clock):
    with queue(database, tmp_path, clock, immediate=True) as q:
        flaky_job = q.get(q.enqueue("t:flaky"))
        assert flaky_job.status == "failed" and flaky_job.attempts == 2  # max_attempts=2, both ran
        assert "attempt 2 broke" in flaky_job.error
        perm = q.get(q.enqueue("t:permanent"))
        assert perm.status == "failed" and perm.attempts == 1
    assert seen == [
        ("retry", "t:flaky", 1),
        ("failed", "t:flaky", "ValueError: attempt 2 broke"),
        ("failed", "t:permanent", "shared.handlers.PermanentError: bad input"),
    ]


def test_a_handler_that_raises_job_cancelled_ends_cancelled_inline(database, tmp_path, clock):
    with queue(database, tmp_path, clock, immediate=True) as q:
        job = q.get(q.enqueue("t:stops"))
        assert (job.status, job.attempts) == ("cancelled", 1) and "the handler gave up" in job.error
    with queue(database, tmp_path, clock) as q:
        q.enqueue("t:stops")
        never = q.enqueue("t:ok", 1)
        assert q.cancel(never) is CancelResult.CANCELLED  # pending: cancelled, drain never runs it
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0, "cancelled": 1}
        assert q.get(never).status == "cancelled"
    assert [s for s in seen if s[0] != "cancelled"] == []
    assert [s[:2] for s in seen] == [("cancelled", "t:stops")] * 2


def test_immediate_leaves_jobs_that_are_not_due_for_drain(database, tmp_path, clock):
    with queue(database, tmp_path, clock, immediate=True) as q:
        delayed = q.enqueue("t:ok", 1, delay=60)
        retried = q.enqueue("t:later")  # RetryAfter(30): due again in 30 s
        assert q.get(delayed).status == "pending" and q.get(retried).status == "pending"
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0}
        clock.advance(30)
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}
        assert q.get(retried).result == "second time"
        clock.advance(30)
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}


def test_immediate_enqueue_many_and_nested_enqueue(database, tmp_path, clock):
    with queue(database, tmp_path, clock, immediate=True) as q:
        payload_queue.append(q)
        ids = q.enqueue_many([("t:ok", 1), ("t:ok", 2)])
        assert [q.get(i).status for i in ids] == ["completed", "completed"]
        child = q.get(q.enqueue("t:parent")).result
        assert q.get(child).status == "completed" and q.get(child).result == {"echo": "child"}


def test_immediate_does_not_run_a_job_enqueued_in_an_open_transaction(database, tmp_path, clock):
    """Through ``conn=`` the job is not committed yet (and might roll back): it waits for drain."""
    with queue(database, tmp_path, clock, immediate=True) as q:
        conn = raw(q.config)  # autocommit: the test opens and ends the transactions
        native = getattr(conn, "conn", conn)  # what conn= takes: sqlite3's or psycopg's connection
        conn.execute("BEGIN")
        kept = q.enqueue("t:ok", "kept", conn=native)
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        q.enqueue("t:ok", "rolled back", conn=native)
        conn.execute("ROLLBACK")
        conn.close()
        assert q.get(kept).status == "pending" and seen == []
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}
        assert q.counts() == {"completed": 1}


def test_drain_counts_filters_and_stops(database, tmp_path, clock):
    with queue(database, tmp_path, clock) as q:
        for _ in range(3):
            q.enqueue("t:ok", 1)
        q.enqueue("t:flaky")
        q.enqueue("t:permanent")
        unknown = q.enqueue("t:unknown")
        assert seen == []  # not immediate: nothing ran yet
        assert q.drain(types="t:ok", max_jobs=2) == {"completed": 2, "retried": 0, "failed": 0}
        assert q.drain(types=["t:ok"]) == {"completed": 1, "retried": 0, "failed": 0}
        assert q.drain() == {"completed": 0, "retried": 1, "failed": 3}
        assert "no handler for job type 't:unknown'" in q.get(unknown).error
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0}
        with pytest.raises(ValueError, match="max_jobs must be an integer >= 0"):
            q.drain(max_jobs=-1)


def test_drain_respects_pause_and_type_limits(database, tmp_path, clock):
    config = Config(types={"t:ok": TypeConfig(rate="2/min")})
    with queue(database, tmp_path, clock, config=config) as q:
        for _ in range(3):
            q.enqueue("t:ok", 1)
        q.pause()
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0}
        q.resume()
        assert q.drain() == {"completed": 2, "retried": 0, "failed": 0}  # the rate's window is full
        clock.advance(61)
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}


def test_handlers_default_to_the_configs_modules(database, tmp_path, clock, monkeypatch):
    (tmp_path / "mine.py").write_text(
        "from worker import handler\n\n@handler('m:x')\ndef x(p, job):\n"
        "    return 'from the config'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with JobQueue(
        config=database.config(tmp_path, Config(handlers=("mine",))), immediate=True
    ) as q:
        assert q.get(q.enqueue("m:x")).result == "from the config"
    with JobQueue(
        config=database.config(tmp_path, Config(handlers=("no_such_module_here",))), immediate=True
    ) as q:
        with pytest.raises(HandlerImportError, match="no_such_module_here"):
            q.enqueue("m:x")
    with pytest.raises(TypeError, match="handlers: expected module names"):
        JobQueue(config=database.config(tmp_path), handlers=[42]).drain()


def test_drain_keeps_the_lease_guard(database, tmp_path, clock):
    """A job taken back while it ran (a supervisor's lease check) keeps the newer state."""

    @handler("t:stolen")
    def stolen(payload, job):
        with raw(q.config) as c:
            c.execute("UPDATE jobs SET owner = 'someone-else' WHERE id = ?", (job.id,))
        return "dropped"

    with JobQueue(config=database.config(tmp_path), clock=clock, handlers=[stolen]) as q:
        job_id = q.enqueue("t:stolen")
        assert q.drain() == {"completed": 0, "retried": 0, "failed": 0, "lease_lost": 1}
        assert q.get(job_id).status == "running" and q.get(job_id).result is None


def test_drain_and_immediate_mode_keep_the_last_progress_report(database, tmp_path, clock):
    """The report made just before the handler ended stays with the job, whatever the outcome."""

    @handler("t:report", max_attempts=2)
    def report(payload, job):
        job.progress(0.5, note="half")
        job.progress(1.0, note=f"last of {payload}")
        if payload == "raise":
            raise ValueError("broke after reporting")
        if payload == "permanent":
            raise PermanentError("refused after reporting")
        return payload

    @handler("t:report_async")
    async def report_async(payload, job):
        job.progress(1.0, note="last of async")
        await asyncio.sleep(0)
        return payload

    def note(q, job_id):
        return (q.get(job_id).progress or {}).get("note")

    config = database.config(tmp_path, Config(retry=RetryConfig(backoff_base=0)))
    with JobQueue(config=config, clock=clock, handlers=[report, report_async]) as q:
        ids = {p: q.enqueue("t:report", p) for p in ("ok", "raise", "permanent")}
        assert q.drain() == {"completed": 1, "retried": 1, "failed": 2}  # retried, then failed
        assert {p: note(q, i) for p, i in ids.items()} == {p: f"last of {p}" for p in ids}
        async_id = q.enqueue("t:report_async", 1)
        assert q.drain() == {"completed": 1, "retried": 0, "failed": 0}
        assert note(q, async_id) == "last of async"
    with JobQueue(
        config=database.config(tmp_path),
        clock=clock,
        handlers=[report, report_async],
        immediate=True,
    ) as q:
        assert note(q, q.enqueue("t:report", "now")) == "last of now"
        assert note(q, q.enqueue("t:report_async", 2)) == "last of async"


class HTTPStatusError(Exception):
    """httpx's: a message of two lines, the second a pointer to the docs."""


def test_an_errors_line_is_its_exception_and_first_line_and_the_whole_text_is_kept(
    database, tmp_path, clock, caplog
):
    """Where one line stands for the error (log lines, ``jobq jobs``, ``show``'s history, the
    dashboard's rows, JobFailed) it is the exception's type and first line, not the message's
    last line; the job and every attempt keep the whole text."""

    @handler("t:http", max_attempts=2)
    def http(payload, job):
        raise HTTPStatusError(
            "Server error '503 Service Unavailable' for url "
            "'https://api.test/x'\nFor more information check: "
            "https://developer.mozilla.org/503"
        )

    line = "HTTPStatusError: Server error '503 Service Unavailable' for url 'https://api.test/x'"
    config = database.config(tmp_path, Config(retry=RetryConfig(backoff_base=0)))
    with (
        JobQueue(config=config, clock=clock, handlers=[http]) as q,
        caplog.at_level(logging.INFO, logger="jobq"),
    ):
        job_id = q.enqueue("t:http")
        assert q.drain() == {"completed": 0, "retried": 1, "failed": 1}
        logged = [
            r.jobq_fields["error"]
            for r in caplog.records
            if r.getMessage() in ("job.retry", "job.failed")
        ]
        assert [e.endswith(line) for e in logged] == [True, True]
        job = q.get(job_id)
        history = [dict(h, run_s=None) for h in ops.attempt_history(q.store, job_id)]
        assert [h["error"] == job.error for h in history] == [True, True]
        assert "Traceback" in job.error and job.error.endswith(
            "For more information check: https://developer.mozilla.org/503"
        )
        listed = viewrender.jobs_text(ops.list_jobs(q.store))
        shown = viewrender.job_text(dataclasses.asdict(job), history)
        assert "HTTPStatusError: Server error '503" in listed
        assert "For more information" not in listed
        assert shown.count("HTTPStatusError: Server error '503") == 3  # traceback, 2 attempts
        assert viewrender.error_line(job.error, 200).endswith(line)
        with pytest.raises(JobFailed) as failed:
            q.handle(job_id).wait(timeout=1)
        assert failed.value.error.endswith(line)
        assert "For more information" in failed.value.traceback


def test_shared_never_imports_worker_or_supervisor():
    """The in-process runner lives in shared/ so the producer API can use it (layering)."""
    bad = []
    for path in (REPO / "shared").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            bad += [
                f"{path.name}: {n}" for n in names if n.split(".")[0] in ("worker", "supervisor")
            ]
    assert bad == []
