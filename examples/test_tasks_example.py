"""How a jobq user tests their tasks (docs/tasks.md, docs/testing.md): immediate mode runs a
task inside ``.enqueue()``, ``drain()`` when the test says so; handles return the results.
Run with: ``pytest examples/test_tasks_example.py``."""

from __future__ import annotations

import pytest

from jobq import JobFailed, JobQueue, configure
from examples.tasks import fetch_rate, send_invoice


@pytest.fixture
def q(tmp_path):
    with JobQueue(str(tmp_path / "q.db"), handlers=["examples.tasks"], immediate=True) as queue:
        configure(queue)  # the default queue of .enqueue()
        yield queue
        configure(None)


def test_an_invoice_is_sent(q):
    assert send_invoice.enqueue(42, email="a@b.c").wait() == {
        "invoice": 42,
        "sent_to": "a@b.c",
        "lines": 0,
    }


def test_a_bad_address_fails_with_the_reason(q):
    with pytest.raises(JobFailed) as failed:
        send_invoice.enqueue(43, email="nowhere").wait()
    assert "PermanentError" in failed.value.traceback and "'nowhere'" in failed.value.error


def test_async_tasks_and_drain(tmp_path):
    with JobQueue(str(tmp_path / "q.db"), handlers=["examples.tasks"]) as q:
        handles = [fetch_rate.using(queue=q).enqueue(c) for c in ("EUR", "USD")]
        assert q.drain() == {"completed": 2, "retried": 0, "failed": 0}
        assert q.wait_many(handles) == [1.0, 1.08]
