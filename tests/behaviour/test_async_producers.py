"""Async producers on each engine: ``await q.enqueue_async(...)``, ``enqueue_many_async``,
``await task.enqueue_async(...)`` (also after ``.using(...)``) and the handles' ``status_async``,
``get_async`` and ``wait_async``, served by a real supervisor; the same checks as the sync calls
(one path: shared.producer.newjobs); and a queue or a handle used from any thread
(``asyncio.to_thread``, a ``ThreadPoolExecutor``), never ``StoreUnavailable``."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import jobq
from jobq import JobQueue
from shared.settings.config import load
from tests.proc import FIXTURES, write_config

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import taskjobs  # noqa: E402

pytestmark = pytest.mark.engines


@pytest.fixture
def served(tmp_path, database, sup_factory):
    """A supervisor serving taskjobs; a queue on its database, the tasks' default."""
    path = write_config(tmp_path, handlers=["taskjobs", "testjobs"])
    sup_factory(path)
    q = JobQueue(config=load(path))
    jobq.configure(q)
    yield q
    jobq.configure(None)
    q.close()


def test_async_enqueues_run_and_their_results_come_back(served):
    q = served

    async def main():
        handle = await taskjobs.add.enqueue_async(2, b=40)
        assert await handle.wait_async(timeout=60) == 42
        assert await handle.status_async() == "completed"
        assert (await handle.get_async()).result == 42
        other = await taskjobs.add.using(queue=q, priority=5).enqueue_async(1, 1)
        assert (await other.get_async()).priority == 5
        ids = await q.enqueue_many_async([("test:noop", {"n": n}) for n in range(3)])
        one = await q.enqueue_async("test:noop", {"n": 9}, key="once")
        assert await q.enqueue_async("test:noop", {"n": 10}, key="once") == one
        assert await q.wait_many_async(ids + [one], timeout=60) == [None] * 4
        return other

    other = asyncio.run(main())
    assert other.wait(timeout=60) == 2


def test_an_async_enqueue_carries_the_tasks_options_as_the_sync_one(served):
    """``.using(limit_key=..., retry_for=...)`` reaches the stored job through enqueue_async as
    through enqueue: the limit key and the call's retry rule."""

    async def main():
        opts = {"limit_key": "customer-7", "retry_for": (ValueError,)}
        a = await taskjobs.add.using(**opts).enqueue_async(1, 2)
        return (await a.get_async()), taskjobs.add.using(**opts).enqueue(1, 2).get()

    via_async, via_sync = asyncio.run(main())
    assert via_async.limit_key == via_sync.limit_key == "customer-7"
    assert via_async.payload.get("retry") == via_sync.payload.get("retry") is not None


def test_async_enqueue_checks_as_the_sync_one_and_writes_nothing(served):
    q = served

    async def refused(**kwargs):
        with pytest.raises((TypeError, ValueError)) as info:
            await q.enqueue_async("test:noop", {}, **kwargs)
        return str(info.value)

    async def main():
        for bad in ({"priority": "high"}, {"delay": -1}, {"max_attempts": 0}, {"key": ""}):
            with pytest.raises((TypeError, ValueError)) as sync_info:
                q.enqueue("test:noop", {}, **bad)
            assert await refused(**bad) == str(sync_info.value)
        with pytest.raises(TypeError, match="enqueue_many item 1"):
            await q.enqueue_many_async([("test:noop", {}), ("test:noop", {}, {"colour": 1})])
        with pytest.raises(TypeError, match="b"):
            await taskjobs.add.enqueue_async(1, b="x")

    asyncio.run(main())
    assert q.counts().get("pending", 0) == 0


def test_a_workflow_and_batches_enqueue_async(served):
    q = served

    async def main():
        first = await q.enqueue_async("test:noop", {"n": 1})
        child = await q.enqueue_async("test:noop", {"n": 2}, after=[first])
        batch = await q.enqueue_many_async(
            [("test:noop", {"n": n}) for n in range(5)], batch_size=2
        )
        return first, child, batch

    first, child, batch = asyncio.run(main())
    q.wait_many([first, child, *batch], timeout=60)
    assert q.get(child).status == "completed"


def test_a_queue_and_its_handles_work_from_any_thread(served):
    q = served  # made in this thread: used below from others, and the other way round

    async def main():
        made = await asyncio.to_thread(lambda: taskjobs.add.enqueue(20, 1))
        assert await made.wait_async(timeout=60) == 21  # a handle made in another thread
        theirs = await asyncio.to_thread(q.enqueue, "test:noop", {})
        assert await q.handle(theirs).wait_async(timeout=60) is None
        return made

    made = asyncio.run(main())
    with ThreadPoolExecutor(4) as pool:
        handles = list(pool.map(lambda n: taskjobs.add.enqueue(n, 1), range(8)))
        results = list(pool.map(lambda h: h.wait(timeout=60), handles))
        assert pool.submit(made.status).result() == "completed"
        assert pool.submit(lambda: asyncio.run(made.status_async())).result() == "completed"
    assert results == [n + 1 for n in range(8)]


def test_a_queue_made_in_a_worker_thread_serves_the_loop_thread(tmp_path, database):
    q = JobQueue(config=load(write_config(tmp_path)))

    async def main():
        other = await asyncio.to_thread(JobQueue, config=q.config)
        job_id = await other.enqueue_async("test:noop", {})
        assert await other.handle(job_id).status_async() == "pending"
        assert other.get(job_id).status == "pending"
        await asyncio.to_thread(other.close)
        with pytest.raises(jobq.StoreUnavailable, match="closed"):
            other.get(job_id)

    asyncio.run(main())
    q.close()
