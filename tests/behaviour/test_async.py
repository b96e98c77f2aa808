"""Many async jobs in one worker process, with real supervisors, on both engines.

The handlers are tests/fixtures/asyncjobs.py. One-at-a-time, each test here would take minutes
(a second per job per worker); the bounds below are generous for a loaded machine, never timings
(those are bench/asyncbench.py's).
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from shared import JobQueue
from shared.settings.config import load
from shared.engines import open_store
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import Registry, handler
from shared.execution.progress import ProgressWriter, not_in_hand
from tests.proc import log_events, wait_until, write_config
from worker.aio import AsyncRunner
from worker.loop import Worker

pytestmark = pytest.mark.engines


def _start(tmp_path, sup_factory, workers=1, **sections):
    cfg = write_config(
        tmp_path,
        handlers=["asyncjobs", "testjobs"],
        supervisor={"workers": workers},
        log_format="json",
        **sections,
    )
    q = JobQueue(config=load(cfg))
    sup = sup_factory(cfg)
    wait_until(lambda: len(sup.workers()) == workers, what="workers up")
    return q, sup


def _done(q, ids, status="completed"):
    return all(q.get(i).status == status for i in ids)


def test_a_thousand_one_second_jobs_on_two_workers(tmp_path, sup_factory):
    """The target case: 1,000 jobs of ``await asyncio.sleep(1)`` on 2 workers, 100 at once
    each. One at a time they take 500 s; here about 5 (bench/asyncbench.py times it); the bound
    is only generous."""
    q, sup = _start(tmp_path, sup_factory, workers=2)
    ids = q.enqueue_many([("aio:sleep", {"s": 1}, {}) for _ in range(1000)])
    wait_until(
        lambda: q.counts().get("completed", 0) == 1000,
        timeout=60,
        interval=0.1,
        what="1,000 jobs done",
    )
    assert {q.get(i).result for i in ids[::50]} <= set(sup.workers())
    assert {q.get(i).attempts for i in ids[::50]} == {1}


def test_config_gives_a_type_async_concurrency_and_sync_jobs_share_the_worker(
    tmp_path, sup_factory
):
    q, sup = _start(tmp_path, sup_factory, types={"aio:typed": {"async_concurrency": 50}})
    ids = q.enqueue_many([("aio:typed", {"s": 1}, {}) for _ in range(50)])
    sync = [q.enqueue("test:noop", {}) for _ in range(3)]
    wait_until(lambda: _done(q, ids + sync), timeout=30, what="async and sync jobs done")


def test_a_timeout_or_an_error_is_its_jobs_own(tmp_path, sup_factory):
    """aio:hang times out after 0.5 s (its ordinary failure) and aio:boom raises, while their
    siblings go on: the worker is not replaced."""
    q, sup = _start(tmp_path, sup_factory)
    before = sup.workers()
    hang = q.enqueue("aio:hang", {}, max_attempts=1)
    boom = q.enqueue_many([("aio:boom", {"n": n}, {"max_attempts": 2}) for n in range(10)])
    ids = q.enqueue_many([("aio:sleep", {"s": 1.5}, {}) for _ in range(20)])
    wait_until(
        lambda: _done(q, ids) and _done(q, boom + [hang], "failed"), timeout=30, what="jobs settled"
    )
    assert q.get(hang).error == "timed out after 0.5 s"
    assert all(
        q.get(i).attempts == 2 and f"ValueError: boom {n}" in q.get(i).error
        for n, i in enumerate(boom)
    )
    assert sup.workers() == before
    assert not log_events(sup, "worker.exited")


def test_a_handler_that_blocks_the_loop_is_named_and_only_its_worker_replaced(
    tmp_path, sup_factory
):
    """aio:block calls time.sleep(60) (timeout 2 s, kill_grace 1 s): a warning names it within
    2 s; past 3 s its worker is killed; the jobs in flight beside it run again on a worker, their
    attempts not charged; the blocking job is charged (and fails: one attempt)."""
    q, sup = _start(tmp_path, sup_factory, workers=2, types={"aio:block": {"max_attempts": 1}})
    first = sup.workers()
    ids = q.enqueue_many([("aio:sleep", {"s": 3}, {}) for _ in range(40)])
    block = q.enqueue("aio:block", {"s": 60})
    wait_until(
        lambda: q.get(block).status == "failed" and _done(q, ids), timeout=40, what="jobs settled"
    )
    warned = log_events(sup, "worker.loop_blocked")
    assert len(warned) == 1 and warned[0]["id"] == block
    assert warned[0]["handler"] == "asyncjobs.block" and float(warned[0]["blocked_for"]) <= 2
    assert "blocked its worker's event loop" in q.get(block).error
    exited = log_events(sup, "worker.exited")
    assert len(exited) == 1
    now = sup.workers()
    assert len(set(first) & set(now)) == 1  # the other worker is still the same process
    assert {q.get(i).attempts for i in ids} == {1}


def test_async_concurrency_on_a_plain_handler_stops_the_boot(tmp_path, sup_factory):
    cfg = write_config(
        tmp_path, handlers=["testjobs"], types={"test:noop": {"async_concurrency": 5}}
    )
    sup = sup_factory(cfg)
    assert sup.wait() == ExitCode.CONFIG_INVALID
    assert "'test:noop'" in sup.output() and "is not an async def function" in sup.output()


LOOPS: list = []


@handler("t:loop", async_concurrency=5, timeout=0.3)
async def which_loop(payload, job):
    LOOPS.append(asyncio.get_running_loop())
    await asyncio.sleep(payload)


def test_an_async_job_claimed_one_at_a_time_runs_on_the_workers_loop(tmp_path, make_config, queue):
    """The worker's one-at-a-time path (a claim of any type, when no async job was due a moment
    before) runs an async type's job on the runner's loop too, under its timeout: a client the
    handler's module keeps stays on one loop."""
    LOOPS.clear()
    cfg = load(make_config(tmp_path))
    w = Worker(cfg, Registry([which_loop.__jobq_handler__]))
    w.store = open_store(cfg)
    w.aio = AsyncRunner(w)
    try:
        ids = [queue.enqueue("t:loop", 0), queue.enqueue("t:loop", 0), queue.enqueue("t:loop", 5)]
        for job in w.store.claim(w.owner, w.pid, w.clock.now(), 3):
            w.held.done.append(w.process(job))
        w.commit(limit=0, must=True)
    finally:
        w.aio.close()
        w.store.close()
        w.signals.close()
    assert [queue.get(i).status for i in ids[:2]] == ["completed", "completed"]
    assert queue.get(ids[2]).error == "timed out after 0.3 s"
    assert len(LOOPS) == 3 and len(set(map(id, LOOPS))) == 1


@handler("t:stall", async_concurrency=5, timeout=30)
async def stall(payload, job):
    time.sleep(payload)  # blocks the loop


def test_a_job_claimed_one_at_a_time_that_blocks_the_loop_is_named_too(
    tmp_path, make_config, queue, caplog
):
    """A job of an async type that the worker's loop claimed with others, one at a time (its
    runner found nothing due a moment before: the race that made the block test above flaky),
    is watched on the runner's loop as a task is: the warning names it and its handler. The
    progress file stays the worker loop's: its batch, the blocking job the one in hand."""
    cfg = load(make_config(tmp_path))
    w = Worker(cfg, Registry([stall.__jobq_handler__]))
    w.store = open_store(cfg)
    w.progress = ProgressWriter(str(tmp_path / "progress"))
    w.aio = AsyncRunner(w)
    try:
        ids = [queue.enqueue("t:stall", 0), queue.enqueue("t:stall", 1.5)]
        jobs = w.store.claim(w.owner, w.pid, w.clock.now(), 2)
        w.progress.batch([j.id for j in jobs], completed=0)
        with caplog.at_level(logging.WARNING, logger="jobq"):
            for n, job in enumerate(jobs, 1):
                w.progress.started(n)
                w.held.done.append(w.process(job))
        assert not_in_hand(str(tmp_path / "progress")) == [
            ids[0]
        ]  # not rewritten by the block's end
        w.commit(limit=0, must=True)
    finally:
        w.aio.close()
        w.store.close()
        w.signals.close()
        w.progress.close()
    blocked = [r.jobq_fields for r in caplog.records if r.getMessage() == "worker.loop_blocked"]
    assert [(f["id"], f["handler"]) for f in blocked] == [(ids[1], f"{__name__}.stall")]
    assert any(r.getMessage() == "worker.loop_unblocked" for r in caplog.records)
    assert [queue.get(i).status for i in ids] == ["completed", "completed"]
