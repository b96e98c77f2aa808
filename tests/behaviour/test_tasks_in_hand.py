"""The job in hand for tasks, on both engines, in the calling process (drain, immediate mode):
``jobq.current_job()`` in sync and async tasks (id, attempt, progress, cancel, a logger bound
to the job), and a clear error outside a job. A cancel asked while a task runs inline reaches
its ``check_cancelled()`` (the inline check-in), and its progress is stored as it runs.

The tasks are tests/fixtures/richjobs.py, imported as ``richjobs``."""

from __future__ import annotations

import logging
import sys
import threading

import pytest

import jobq
from jobq import JobCancelled, JobQueue, NoCurrentJob, current_job
from tests.taskqueues import forget_default_queue, queue_maker
from tests.proc import FIXTURES, wait_until

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import richjobs  # noqa: E402


@pytest.fixture
def queue_of(engine):
    """``queue_of(immediate=False, config=NO_BACKOFF)``: a queue serving richjobs; closed after."""
    yield from queue_maker(engine, "richjobs")


@pytest.fixture(autouse=True)
def no_default_queue(monkeypatch):
    forget_default_queue(monkeypatch)


def test_outside_a_job_current_job_raises_a_clear_error():
    with pytest.raises(NoCurrentJob, match="outside a job"):
        current_job()
    assert jobq.current_job is current_job and issubclass(NoCurrentJob, RuntimeError)


def test_a_sync_task_sees_its_job_in_immediate_mode(queue_of, caplog):
    q = queue_of(immediate=True)
    with caplog.at_level(logging.INFO, logger="jobq.job"):
        handle = richjobs.in_hand.using(queue=q).enqueue(7)
    assert handle.wait(5) == {
        "id": handle.id,
        "attempt": 1,
        "type": "richjobs.in_hand",
        "cancel": False,
    }
    assert handle.progress() == {"fraction": 0.5, "note": "half way", "x": 7}
    line = next(r for r in caplog.records if r.getMessage() == "working on 7")
    assert line.jobq_fields["id"] == handle.id and line.jobq_fields["attempt"] == 1
    with pytest.raises(NoCurrentJob):  # the variable is reset after the task
        current_job()


def test_async_tasks_see_their_own_job_under_drain(queue_of):
    q = queue_of()
    handles = [richjobs.in_hand_async.using(queue=q).enqueue(i) for i in range(3)]
    assert q.drain()["completed"] == 3
    for handle in handles:
        assert handle.wait(5) == {"id": handle.id, "attempt": 1, "type": "richjobs.in_hand_async"}
        assert handle.progress() == {"fraction": 1.0, "note": "done"}


def test_a_cancel_asked_while_a_task_runs_inline_reaches_check_cancelled(queue_of):
    q = queue_of()
    handle = richjobs.long_run.using(queue=q).enqueue(2000, pause=0.005)
    asked: list[object] = []

    def cancel_once_started() -> None:  # another thread, with a queue of its own
        with JobQueue(config=q.config) as other:
            wait_until(lambda: (other.get(handle.id).progress or {}).get("fraction", 0) > 0, 10)
            asked.append(other.cancel(handle.id))

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    counts = q.drain()
    canceller.join(10)
    assert asked and asked[0]  # REQUESTED: the job was running
    assert counts.get("cancelled") == 1
    with pytest.raises(JobCancelled):
        handle.wait(5)
    assert 0 < handle.get().progress["fraction"] < 1
