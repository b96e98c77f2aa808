"""Cancel and progress of the async runner's jobs (the check-in on the async runner), with a real
supervisor on each engine: ``jobq cancel`` of one of several async jobs in flight on one worker
cancels its task (it ends ``cancelled`` within about a second, its ``finally`` and the
``@on_cancelled`` hook run) while its siblings run on and complete on the same worker; the
progress an async handler reports is stored. The handlers are tests/fixtures/canceljobs.py's
``cancel:aio`` (``async_concurrency = 10``)."""

from __future__ import annotations

import time

import pytest

from shared import JobQueue, ops
from shared.settings.config import load
from tests.behaviour.test_cancel import config, jobq, seen
from tests.proc import events, log_events, wait_until

pytestmark = pytest.mark.engines

SIBLINGS = 4
SIBLING_S = 5  # long enough to be in flight when the cancel lands, short enough to wait for


def start(sup_factory, cfg):
    """The supervisor of one worker, started once the jobs are enqueued: its worker's first claim
    is the async runner's, which takes them all (an idle worker's one-at-a-time batch claim,
    racing the enqueues, could take the long job and hold the others behind it)."""
    sup = sup_factory(cfg)
    wait_until(lambda: len(sup.workers()) == 1, what="the worker up")
    return sup


def test_jobq_cancel_of_one_async_job_in_flight_cancels_its_task_only(
    tmp_path, sup_factory, monkeypatch
):
    """cancel_grace is 30 s: only the task's cancellation, not the supervisor's kill, can end the
    job within the bound, and no worker may be replaced."""
    hooks = tmp_path / "hooks.log"
    monkeypatch.setenv("JOBQ_TEST_HOOK_LOG", str(hooks))
    cfg = config(tmp_path, supervisor={"workers": 1}, worker={"cancel_grace": 30})
    log = tmp_path / "events.log"
    with JobQueue(config=load(cfg)) as q:
        long, *sibs = q.enqueue_many(
            [("cancel:aio", {"log": str(log), "s": s}, {}) for s in [60] + [SIBLING_S] * SIBLINGS]
        )
        sup = start(sup_factory, cfg)
        before = sup.workers()
        wait_until(
            lambda: all(seen(log, j, "start") for j in [long, *sibs]),
            timeout=10,
            what="all in flight",
        )
        assert len({e["pid"] for e in events(log)}) == 1  # many at once on one worker
        wait_until(
            lambda: q.get(long).progress is not None,
            timeout=5,
            what="the async job's progress stored",
        )
        assert q.get(long).progress == {"fraction": 0.5, "note": "halfway", "s": 60}
        out = jobq(cfg, "cancel", long)
        asked = time.monotonic()
        assert out.returncode == 0, out.stderr
        wait_until(
            lambda: q.get(long).status == "cancelled", timeout=10, what="the async job cancelled"
        )
        took = time.monotonic() - asked
        assert took < 1.5, f"cancelled {took:.2f} s after jobq cancel (cancel_grace 30 s)"
        job = q.get(long)
        assert "JobCancelled" in job.error and job.attempts == 1
        assert [r["outcome"] for r in ops.attempt_history(q.store, long)] == ["cancelled"]
        wait_until(
            lambda: all(q.get(j).status == "completed" for j in sibs),
            timeout=SIBLING_S + 15,
            what="the siblings completed",
        )
        assert {q.get(j).result for j in sibs} == set(before) and {
            q.get(j).attempts for j in sibs
        } == {1}
        assert all(
            q.get(j).progress == {"fraction": 0.5, "note": "halfway", "s": SIBLING_S} for j in sibs
        )
        assert q.get(long).progress["s"] == 60  # kept after the job ended
    ended = seen(log, long, "finally")[0]["t"]
    assert all(seen(log, j, "finally")[0]["t"] > ended for j in sibs)  # they ran on past the cancel
    assert len(seen(log, long, "start")) == 1  # never retried
    wait_until(
        lambda: hooks.exists() and long in hooks.read_text(),
        timeout=5,
        what="the on_cancelled hook",
    )
    assert [e["id"] for e in log_events(sup, "job.cancelled")] == [long]
    assert [e["id"] for e in log_events(sup, "job.cancel_requested")] == [long]
    assert sup.workers() == before
    assert not log_events(sup, "worker.exited") and not log_events(sup, "job.cancel_killed")


def test_an_async_job_that_ignores_its_cancel_is_killed_alone_to_blame(tmp_path, sup_factory):
    """It catches the CancelledError and awaits on: at cancel_grace its worker is killed and it
    ends cancelled; its siblings, killed with it, go back uncharged and complete (attempt 1)."""
    cfg = config(tmp_path, supervisor={"workers": 1}, worker={"cancel_grace": 2})
    log = tmp_path / "events.log"
    with JobQueue(config=load(cfg)) as q:
        deaf, *sibs = q.enqueue_many(
            [("cancel:aio_deaf", {"log": str(log)}, {})]
            + [("cancel:aio", {"log": str(log), "s": 6}, {})] * SIBLINGS
        )
        sup = start(sup_factory, cfg)
        first = sup.workers()
        wait_until(
            lambda: all(seen(log, j, "start") for j in [deaf, *sibs]),
            timeout=10,
            what="all in flight",
        )
        assert q.cancel(deaf)
        wait_until(lambda: seen(log, deaf, "ignored"), timeout=5, what="its task cancelled")
        wait_until(lambda: q.get(deaf).status == "cancelled", timeout=15, what="the job killed")
        assert "cancel_grace" in q.get(deaf).error
        wait_until(
            lambda: all(q.get(j).status == "completed" for j in sibs),
            timeout=40,
            what="the siblings done",
        )
        assert {q.get(j).attempts for j in sibs} == {1}  # killed for another's doing: not charged
        assert all(len(seen(log, j, "start")) == 2 for j in sibs)
        assert [r["outcome"] for r in ops.attempt_history(q.store, deaf)] == ["cancelled"]
    assert len(log_events(sup, "job.cancel_killed")) == 1
    assert first[0] not in sup.workers()
