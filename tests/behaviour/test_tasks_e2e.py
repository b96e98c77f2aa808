"""Tasks end to end, on each engine: a real supervisor serves tests/fixtures/taskjobs.py
(``handlers = ["taskjobs"]``); this test process enqueues with ``.enqueue()`` and waits for the
results as a user's test file would (docs/tasks.md)."""

from __future__ import annotations

import sys

import pytest

import jobq
import shared.producer.tasks
from jobq import JobFailed, JobQueue
from tests.proc import FIXTURES, REPO, Running, write_config

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import richjobs  # noqa: E402
import taskjobs  # noqa: E402


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory):
    """One supervisor serving taskjobs on the engine for the module's tests (each enqueues and
    waits for jobs of its own), and its config file's path."""
    folder = tmp_path_factory.mktemp(f"tasks-{request.param}")
    extra = {}
    if request.param == "postgresql":
        from tests.engines import PostgresEngine

        pg = PostgresEngine(folder)
        request.addfinalizer(pg.drop)
        extra = {"database": pg.database, "postgres": {"schema": pg.schema}}
    path = write_config(folder, handlers=["taskjobs", "richjobs"], **extra)
    sup = Running(path)
    request.addfinalizer(sup.close)
    return path


@pytest.fixture
def served(server, monkeypatch):
    """The module's supervisor; the test process's default queue is unset (``.enqueue()`` then
    opens the config file's database) and closed after the test."""
    monkeypatch.setattr(shared.producer.tasks, "_configured", None)
    monkeypatch.setattr(shared.producer.tasks, "_opened", shared.producer.tasks._Default())
    monkeypatch.setenv("JOBQ_CONFIG", str(server))
    yield server
    shared.producer.tasks.default_queue().close()


def test_a_task_runs_in_a_worker_and_its_result_comes_back(served):
    handle = taskjobs.add.enqueue(2, b=40)
    assert handle.wait(timeout=60) == 42
    assert taskjobs.double.enqueue(8).wait(timeout=60) == 16
    many = taskjobs.send_invoice.enqueue_many([((n,), {"email": f"{n}@x"}) for n in range(3)])
    assert [r["email"] for r in handle.queue.wait_many(many, timeout=60)] == ["0@x", "1@x", "2@x"]


def test_a_failing_task_raises_job_failed_with_its_traceback(served):
    with pytest.raises(JobFailed) as info:
        taskjobs.explode.enqueue("no address").wait(timeout=60)
    assert info.value.error == "ValueError: cannot send: no address"
    assert "taskjobs.py" in info.value.traceback and "raise ValueError" in info.value.traceback


def test_rich_arguments_and_results_round_trip_through_a_worker(served):
    import datetime as dt
    import decimal
    import uuid

    placed = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.timezone.utc)
    order = richjobs.Order(uuid.uuid4(), decimal.Decimal("9.99"), placed, richjobs.Tier.GOLD)
    assert richjobs.echo_order.enqueue(order).wait(timeout=60).total == decimal.Decimal("10.99")
    assert richjobs.next_day.enqueue(placed).wait(timeout=60) == placed + dt.timedelta(days=1)
    customer = richjobs.Customer(id=order.id, name="Ada", since=placed.date())
    pair = richjobs.welcome.enqueue(customer, richjobs.Money(5, "EUR")).wait(timeout=60)
    assert pair == (customer, richjobs.Money(10, "EUR"))
    with JobQueue.from_config(str(served)) as q:  # a payload that does not decode: no retry
        bad = q.handle(q.enqueue("richjobs.on_day", {"args": ["someday"]}))
        with pytest.raises(JobFailed) as info:
            bad.wait(timeout=60)
        assert info.value.job.attempts == 1 and "argument 'day'" in info.value.traceback


def test_tasks_in_a_worker_have_their_job_in_hand_and_honour_a_cancel(served):
    handle = richjobs.in_hand.enqueue(3)
    got = handle.wait(timeout=60)
    assert got["id"] == handle.id and got["attempt"] == 1 and got["cancel"] is False
    assert handle.progress()["note"] == "half way"
    assert richjobs.in_hand_async.enqueue(1).wait(timeout=60)["type"] == "richjobs.in_hand_async"
    long = richjobs.long_run.enqueue(3000, pause=0.01)
    from tests.proc import wait_until

    wait_until(lambda: (long.progress() or {}).get("fraction", 0) > 0, 60)
    assert long.cancel()
    with pytest.raises(jobq.JobCancelled):
        long.wait(timeout=60)


def test_a_slow_task_times_out_the_wait_and_is_left_to_finish(served):
    handle = taskjobs.slow.enqueue(1.5)
    with pytest.raises(TimeoutError):
        handle.wait(timeout=0.2)
    assert handle.status() in ("pending", "running")
    assert handle.wait(timeout=60) == "done"


def test_a_task_enqueued_from_the_command_line_runs_the_same_function(served):
    import subprocess

    from tests.proc import env

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobq",
            "--config",
            str(served),
            "enqueue",
            "taskjobs.add",
            '{"args": [7], "kwargs": {"b": 1}}',
        ],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().split()[-1]
    with JobQueue.from_config(str(served)) as q:
        assert q.handle(job_id).wait(timeout=60) == 8


def test_another_producer_waits_for_a_job_after_the_first_one_closed(served):
    with JobQueue.from_config(str(served)) as first:
        job_id = taskjobs.add.using(queue=first).enqueue(1, 2).id
    with JobQueue.from_config(str(served)) as second:
        assert second.handle(job_id).wait(timeout=60) == 3
    jobq.configure(None)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_wait_bench_prints_the_wait_latency_and_the_waiters_cpu(engine):
    """``python -m bench.waits --smoke`` runs end to end (figures are not judged here)."""
    import json
    import subprocess

    from tests.engines import postgres_url, require_postgres
    from tests.proc import env

    args = []
    if engine == "postgresql":
        require_postgres()
        args = ["--database", postgres_url()]
    out = subprocess.run(
        [sys.executable, "-m", "bench.waits", "--smoke", *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(REPO),
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for row in (
        "wait latency p50 (ms)",
        "100 idle waiters (% of a core)",
        "task.enqueue() extra cost (%)",
    ):
        assert row in out.stdout
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["engine"] == engine and figures["wait_latency_ms"]["missing"] == 0
