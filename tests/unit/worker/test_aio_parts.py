"""Parts of the async runner on their own: what the progress file tells the
supervisor about the jobs in flight, the loop watch's warning naming a blocking handler, and
the supervisor's verdict on an async job past its timeout."""

from __future__ import annotations

import asyncio
import logging
import time

from shared.settings.config import Config, SupervisorConfig, TypeConfig
from shared.execution.handlers import Registry
from shared.model.job import Job
from shared.execution.policy import JobPolicy
from shared.execution.progress import ProgressWriter, counts, not_in_hand
from supervisor.maintenance import judge_running
from worker.inflight import InflightProgress
from worker.looplag import LoopWatch


def test_in_flight_jobs_are_all_charged_but_a_blocker_alone(tmp_path):
    path = str(tmp_path / "progress")
    held = ["a", "b", "c"]
    p = InflightProgress(ProgressWriter(path), lambda: list(held), lambda: 7)
    p.committed()
    assert not_in_hand(path) == [] and counts(path) == (0, 7)  # a death charges every job in flight
    p.blame("b")
    assert sorted(not_in_hand(path)) == ["a", "c"]  # a kill for the block: only b
    held.append("d")
    p.committed()  # still blocked: b still blamed
    assert sorted(not_in_hand(path)) == ["a", "c", "d"]
    p.blame(None)
    assert not_in_hand(path) == []


def _job(job_type: str, started: float) -> Job:
    from shared.runtime.clock import iso

    return Job(
        id="j1",
        type=job_type,
        payload=None,
        status="running",
        attempts=1,
        max_attempts=None,
        priority=0,
        run_at=iso(started),
        created_at=iso(started),
        updated_at=iso(started),
        started_at=iso(started),
        owner="h:1:2",
        result=None,
        error=None,
        completed_at=None,
    )


def test_the_supervisor_gives_an_async_job_kill_grace_past_its_timeout():
    config = Config(
        supervisor=SupervisorConfig(kill_grace=5),
        types={"a": TypeConfig(timeout=10, async_concurrency=10), "s": TypeConfig(timeout=10)},
    )
    policy = JobPolicy(config, Registry())
    for job_type, age, verdict in [
        ("s", 11, None),
        ("s", 16, "timeout"),
        ("a", 11, None),
        ("a", 16, "blocked"),
    ]:
        got = judge_running([_job(job_type, 1000.0)], {}, policy, 1000.0 + age, "h")
        assert [v.action for v in got] == ([verdict] if verdict else []), (job_type, age)


def test_the_watch_names_the_handler_that_blocks_the_loop(caplog):
    loop = asyncio.new_event_loop()
    jobs: dict = {}
    blamed: list = []
    watch = LoopWatch(loop, jobs.get, blamed.append, "owner")

    async def blocker():
        time.sleep(1.5)  # what the watch is for

    async def main():
        task = asyncio.ensure_future(blocker())
        jobs[task] = _job("t:block", 0.0)
        await task

    watch.start()
    try:
        with caplog.at_level(logging.WARNING, logger="jobq"):
            watch.active(True)
            loop.run_until_complete(main())
            loop.run_until_complete(asyncio.sleep(0.3))  # the loop runs again: the block ends
            watch.active(False)
    finally:
        watch.stop()
        loop.close()
    blocked = [r for r in caplog.records if r.getMessage() == "worker.loop_blocked"]
    assert len(blocked) == 1
    fields = blocked[0].jobq_fields
    assert fields["type"] == "t:block" and fields["handler"].endswith("<locals>.blocker")
    assert [getattr(j, "id", j) for j in blamed] == ["j1", None]
    assert any(r.getMessage() == "worker.loop_unblocked" for r in caplog.records)


def test_the_template_preloads_the_async_runner_only_for_async_types():
    """The template imports the async runner (and asyncio, half the worker loop's imports)
    before the first job only when the workers will run async types: an ``async def``
    handler alone is not one unless the config (or the handler) gives it ``async_concurrency``."""
    import types as pytypes

    from shared.execution.handlers import handler
    from worker.forkserver import _preload_async_runner

    def registry(**kwargs):
        @handler("t:a", **kwargs)
        async def a(payload, job):
            return None

        @handler("t:s")
        def s(payload, job):
            return None

        reg = Registry()
        reg.add_module(pytypes.SimpleNamespace(__name__="tjobs", a=a, s=s))
        return reg

    assert _preload_async_runner(registry(), None) is True  # the config not known: any async def
    assert _preload_async_runner(registry(), False) is False  # the config gives none: not needed
    assert _preload_async_runner(registry(), True) is True  # the config gives one
    assert (
        _preload_async_runner(registry(async_concurrency=4), False) is True
    )  # the handler gives one


def test_the_watch_keeps_one_chain_of_ticks_however_often_the_loop_is_driven():
    """Each drive of the loop (a batch of tasks, or one async job run one at a time) turns the
    watch on and off: the ticks of an earlier drive are cancelled, not left to run beside the
    new ones, so the loop's timers do not grow with the number of drives."""
    loop = asyncio.new_event_loop()
    watch = LoopWatch(loop, lambda task: None, lambda job: None, "owner")
    try:
        for _ in range(20):
            watch.active(True)
            loop.run_until_complete(asyncio.sleep(0.25))  # two ticks or so
            watch.active(False)
        live = [h for h in loop._scheduled + list(loop._ready) if not h.cancelled()]
        assert live == []
        watch.active(True)
        loop.run_until_complete(asyncio.sleep(0.25))
        assert len([h for h in loop._scheduled if not h.cancelled()]) == 1
        watch.active(False)
    finally:
        loop.close()
