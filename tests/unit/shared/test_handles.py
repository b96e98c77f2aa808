"""shared.producer.handles: handles, what an ended job's wait returns or raises, and the wait's
deadline, with a store of the test's own (waiting on real jobs: tests/behaviour/test_tasks.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shared.producer import handles
from shared.producer.handles import JobFailed, JobHandle, JobNotFound, outcome, wait_jobs


def job(jid="a" * 32, status="completed", result=None, error=None, attempts=1):
    return SimpleNamespace(
        id=jid, type="send", status=status, result=result, error=error, attempts=attempts
    )


class Store:
    location = "/tmp/jobs.db"

    def __init__(self, *jobs):
        self.jobs = {j.id: j for j in jobs}
        self.gets = []

    def get(self, job_id):
        self.gets.append(job_id)
        return self.jobs.get(job_id)


def queue(*jobs):
    return SimpleNamespace(store=Store(*jobs), hubs=None)


def test_handles_are_equal_by_id_and_queue():
    q1, q2 = queue(), queue()
    assert JobHandle(q1, "x") == JobHandle(q1, "x") != JobHandle(q2, "x")
    assert JobHandle(q1, "x") != "x" and len({JobHandle(q1, "x"), JobHandle(q1, "x")}) == 1
    assert repr(JobHandle(q1, "x")) == "JobHandle('x')"


def test_outcome_of_each_ending():
    assert outcome(job(result={"n": 1})) == {"n": 1}
    failed = job(
        status="failed",
        attempts=3,
        error="Traceback (most recent call last):\n  ...\nValueError: bad address",
    )
    with pytest.raises(JobFailed) as err:
        outcome(failed)
    assert err.value.error == "ValueError: bad address" and err.value.job is failed
    assert str(err.value) == (
        f"job {'a' * 32} (send) failed after 3 attempt(s): ValueError: bad address"
    )
    with pytest.raises(handles.JobCancelled):
        outcome(job(status="cancelled"))


def test_a_missing_job_names_its_id_and_database():
    with pytest.raises(JobNotFound, match=r"job nope not found on /tmp/jobs\.db: never enqueued"):
        JobHandle(queue(), "nope").get()


def test_an_ended_job_is_read_once_and_results_keep_the_order_given(monkeypatch):
    a, b = job("a", result=1), job("b", result=2)
    q = queue(a, b)
    assert wait_jobs(q, ["a"], timeout=0) == [1]
    assert q.store.gets == ["a"]
    monkeypatch.setattr(handles, "statuses", lambda store, ids: {"a": "completed", "b": "failed"})
    b.status = "completed"  # as read whole after the statuses
    assert wait_jobs(q, ["b", JobHandle(q, "a"), "b"], timeout=0) == [2, 1, 2]
    monkeypatch.setattr(handles, "statuses", lambda store, ids: {"a": "completed"})
    with pytest.raises(JobNotFound, match="job b not found"):
        wait_jobs(q, ["a", "b"], timeout=0)


def test_the_wait_times_out_naming_the_jobs_still_open():
    with pytest.raises(TimeoutError, match=r"job x still not ended after 0 s"):
        wait_jobs(queue(job("x", status="running")), [JobHandle(None, "x")], timeout=0)
    with pytest.raises(TimeoutError, match=r"jobs x, y still not ended after 0.5 s"):
        handles._left(0.0, 0.5, ["x", "y"])
    assert handles._left(None, None, ["x"]) is None
