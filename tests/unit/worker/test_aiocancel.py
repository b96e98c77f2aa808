"""The check-in on the async runner's jobs (worker.aiocancel, worker.checkin) on their own, with a
recording store: the progress of every job in flight is written once per report, a cancel
request cancels that job's task only (from the heartbeat's thread), and its outcome is
``cancelled`` whatever the handler does with the cancellation, unless it returns first."""

from __future__ import annotations

import asyncio
import threading

from shared.runtime.clock import iso
from shared.settings.config import Config
from shared.execution.handlers import HandlerSpec, Registry
from shared.model.job import Job
from shared.execution.outcomes import decide
from shared.execution.policy import JobPolicy
from shared.execution.runner import JobContext
from worker.aiocancel import Flight
from worker.aiojob import run_async
from worker.checkin import CheckIn, InHand


class Store:
    """check_in records the progress rows and answers the ids in ``asked``."""

    def __init__(self) -> None:
        self.rows: list[list[tuple[str, int, str]]] = []
        self.asked: set[str] = set()

    def check_in(self, owner, progress=()):
        self.rows.append(list(progress))
        return set(self.asked)


def _job(jid: str, kind: str) -> Job:
    return Job(
        id=jid,
        type="t",
        payload=kind,
        status="running",
        attempts=1,
        max_attempts=None,
        priority=0,
        run_at=iso(0),
        created_at=iso(0),
        updated_at=iso(0),
        started_at=iso(0),
        owner="o",
        result=None,
        error=None,
        completed_at=None,
    )


async def handler(payload, job):
    job.progress(0.5, note=payload)
    try:
        await asyncio.sleep(1 if payload == "short" else 30)
    except asyncio.CancelledError:
        if payload == "returns":
            return "returned anyway"
        if payload == "raises":
            raise ValueError("cleanup failed")
        raise
    return payload


def test_a_cancel_request_cancels_one_task_and_progress_is_written_once():
    loop = asyncio.new_event_loop()
    flight, in_hand, store = Flight(loop), InHand(None, 0), Store()
    in_hand.flight = flight
    check = CheckIn("o", in_hand)
    registry = Registry([HandlerSpec("t", handler, is_async=True)])
    kinds = ["plain", "returns", "raises", "short"]
    ctxs = {k: JobContext(k, "t", 1, 3) for k in kinds}
    started = threading.Event()

    def heartbeat():  # the check-in runs on the heartbeat's thread, as in a worker
        started.wait(5)
        check.tick(store)  # writes the four progress rows
        check.next_at = 0.0
        check.tick(store)  # nothing new: a read only
        store.asked = {"plain", "returns", "raises"}
        check.next_at = 0.0
        check.tick(store)

    async def main():
        tasks = [
            asyncio.ensure_future(run_async(registry, _job(k, k), ctxs[k], 10, flight))
            for k in kinds
        ]
        await asyncio.sleep(0.05)
        started.set()
        return await asyncio.gather(*tasks)

    beat = threading.Thread(target=heartbeat)
    beat.start()
    outs = dict(zip(kinds, loop.run_until_complete(asyncio.wait_for(main(), 10))))
    beat.join()
    loop.close()
    assert sorted(r[0] for r in store.rows[0]) == sorted(kinds) and store.rows[1] == []
    assert '"note":"plain"' in dict((r[0], r[2]) for r in store.rows[0])["plain"]
    assert outs["plain"].kind == "cancelled" and "JobCancelled" in outs["plain"].error
    assert outs["returns"].kind == "completed" and outs["returns"].result == '"returned anyway"'
    assert outs["raises"].kind == "error" and "cleanup failed" in outs["raises"].error
    assert outs["short"].kind == "completed" and outs["short"].result == '"short"'
    policy = JobPolicy(Config(), registry)
    finish = {k: decide(_job(k, k), ctxs[k], outs[k], policy, 1.0, 0.1).finish.kind for k in kinds}
    assert finish == {
        "plain": "cancelled",
        "returns": "completed",
        "raises": "cancelled",
        "short": "completed",
    }
    assert flight.contexts() == []


def test_the_job_in_hand_and_in_flight_is_checked_in_once():
    """An async job run one at a time (AsyncRunner.run_one) is both in hand and in flight."""
    in_hand, store = InHand(None, 0), Store()
    in_hand.flight = flight = Flight(asyncio.new_event_loop())
    ctx = JobContext("j", "t", 1, 3)
    ctx.progress(0.25)
    in_hand.ctx = ctx
    flight.add(ctx, object())  # a stand-in task: the loop never runs here
    CheckIn("o", in_hand).tick(store)
    assert [r[0] for r in store.rows[0]] == ["j"]
    flight.loop.close()


def test_a_job_that_runs_on_after_its_cancel_is_alone_to_blame(tmp_path):
    """The progress file (worker.inflight): a kill at cancel_grace charges that job only; a
    block of the loop meanwhile names the blocking job instead."""
    from shared.execution.progress import ProgressWriter, not_in_hand
    from worker.inflight import InflightProgress

    path = str(tmp_path / "progress")
    p = InflightProgress(ProgressWriter(path), lambda: ["a", "b", "c"], lambda: 0)
    p.committed()
    assert not_in_hand(path) == []
    p.defied("b")
    assert sorted(not_in_hand(path)) == ["a", "c"]
    p.blame("c")
    assert sorted(not_in_hand(path)) == ["a", "b"]
    p.blame(None)
    p.committed()
    assert sorted(not_in_hand(path)) == ["a", "c"]
    p.defied(None)
    assert not_in_hand(path) == []
