"""The job in hand (shared.execution.current): set and reset around a task's call, its own in
each thread and asyncio task, a clear error outside."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shared.execution.current import NoCurrentJob, current_job, done, running


def test_set_and_reset_around_a_run():
    with pytest.raises(NoCurrentJob, match="outside a job"):
        current_job()
    token = running("job-a")
    try:
        assert current_job() == "job-a"
        seen: list[object] = []

        def other_thread() -> None:
            try:
                seen.append(current_job())
            except NoCurrentJob:
                seen.append(None)

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert seen == [None]  # another thread has no job in hand
    finally:
        done(token)
    with pytest.raises(NoCurrentJob):
        current_job()


def test_each_asyncio_task_sees_its_own_job():
    async def one(name: str) -> str:
        token = running(name)
        try:
            await asyncio.sleep(0.01)
            return current_job()  # type: ignore[return-value]
        finally:
            done(token)

    async def main() -> list[str]:
        return await asyncio.gather(one("a"), one("b"), one("c"))

    assert asyncio.run(main()) == ["a", "b", "c"]
