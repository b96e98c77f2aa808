"""shared.producer.asyncqueue on SQLite (no asyncio calls in the engine: the sync call in a
worker thread): the same ids, checks and keys as the sync calls; immediate mode runs them."""

from __future__ import annotations

import asyncio

import pytest

from jobq import JobQueue, handler


@handler("unit:double")
def double(payload, job):
    return payload["n"] * 2


@pytest.fixture
def q(tmp_path):
    queue = JobQueue(str(tmp_path / "q.db"), handlers=[double], immediate=True)
    yield queue
    queue.close()


def test_enqueue_async_writes_in_a_worker_thread_and_runs_immediately(q):
    async def main():
        job_id = await q.enqueue_async("unit:double", {"n": 21})
        return job_id, await q.handle(job_id).wait_async(timeout=5)

    job_id, result = asyncio.run(main())
    assert result == 42 and q.get(job_id).status == "completed"


def test_enqueue_many_async_keeps_keys_and_refuses_bad_items(q):
    async def main():
        first = await q.enqueue_many_async([("unit:double", {"n": 1}, {"key": "k"})])
        again = await q.enqueue_async("unit:double", {"n": 2}, key="k")
        with pytest.raises(ValueError, match="priority"):
            await q.enqueue_async("unit:double", {"n": 3}, priority=2**40)
        return first[0], again, await q.get_async(again)

    first, again, job = asyncio.run(main())
    assert first == again and job.payload == {"n": 1}
