"""Tasks as Python functions: ``@task``, enqueueing with the function's arguments,
handles and waiting, in the calling process (drain, immediate mode) on both engines.

The tasks are tests/fixtures/taskjobs.py, imported as ``taskjobs`` (as a supervisor's workers
import it), so their default names match."""

from __future__ import annotations

import asyncio
import datetime
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import tomli_w

import jobq
import shared.producer.waithub
import shared.producer.tasks
from jobq import JobCancelled, JobFailed, JobHandle, JobNotFound, JobQueue, task
from shared import ops
from shared.execution.handlers import ATTR
from shared.producer.inline import registry_of
from tests.engines import raw
from tests.taskqueues import forget_default_queue, queue_maker
from tests.proc import FIXTURES, wait_until

if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)
import taskjobs  # noqa: E402


@pytest.fixture
def queue_of(engine):
    """``queue_of(immediate=False, config=NO_BACKOFF)``: a queue serving taskjobs; closed after."""
    yield from queue_maker(engine, "taskjobs")


@pytest.fixture(autouse=True)
def no_default_queue(monkeypatch):
    forget_default_queue(monkeypatch)


def test_a_task_called_directly_is_the_function_and_its_type_is_its_import_path():
    assert taskjobs.add(2, b=3) == 5
    assert asyncio.run(taskjobs.double(4)) == 8
    assert taskjobs.add.name == "taskjobs.add" and taskjobs.double.name == "taskjobs.double"
    assert taskjobs.send_invoice.name == "billing.send_invoice"
    registry = registry_of(["taskjobs"])
    assert {"taskjobs.add", "taskjobs.double", "billing.send_invoice"} <= set(registry.types())
    assert registry.get("billing.send_invoice").max_attempts == 2
    assert registry.get("taskjobs.double").is_async


def test_a_task_defined_in_a_function_needs_a_name():
    with pytest.raises(ValueError, match="name="):

        @task
        def local(x: int) -> int:
            return x

    named = task(name="t:local")(lambda x: x)
    assert named.name == "t:local" and named(3) == 3


@pytest.mark.parametrize(
    "options, error, named",
    [
        ({"max_attempts": 0}, ValueError, "max_attempts"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"priority": "high"}, TypeError, "priority"),
        ({"name": ""}, ValueError, "non-empty"),
    ],
)
def test_bad_task_options_raise_naming_the_task(options, error, named):
    def send(x: int) -> int:
        return x

    with pytest.raises(error, match=named) as info:
        task(**{"name": "t:bad", **options})(send)
    assert "t:bad" in str(info.value) or not options.get("name", "t:bad")


def test_enqueue_stores_the_arguments_as_args_and_kwargs(queue_of):
    q = queue_of()
    handle = taskjobs.send_invoice.using(queue=q).enqueue(7, email="x@y", lines=["a"])
    assert isinstance(handle, JobHandle) and handle.status() == "pending"
    job = q.get(handle.id)
    assert job.type == "billing.send_invoice"
    assert job.payload == {"args": [7], "kwargs": {"email": "x@y", "lines": ["a"]}}


@pytest.mark.parametrize(
    "args, kwargs, error, named",
    [
        ((), {"email": "x"}, TypeError, "'invoice_id'"),  # missing
        ((1,), {"email": "x", "mail": "y"}, TypeError, "'mail'"),  # unknown
        ((1, "x"), {}, TypeError, "positional"),  # keyword-only given by position
        ((1,), {"email": "x", "lines": ("a", "b")}, TypeError, "'lines' is a tuple"),
        ((1,), {"email": "x", "lines": {"a"}}, TypeError, "'lines' is a set"),
        ((1,), {"email": b"x"}, TypeError, "'email' is a bytes"),
        ((datetime.datetime(2026, 1, 1),), {"email": "x"}, TypeError, "'invoice_id' is a datetime"),
        ((1,), {"email": "x", "lines": [{1: "a"}]}, TypeError, "'lines'[0] is a dict"),
        ((float("nan"),), {"email": "x"}, TypeError, "'invoice_id' is a float value"),
    ],
)
def test_arguments_that_do_not_bind_or_survive_json_raise_and_write_nothing(
    queue_of, args, kwargs, error, named
):
    q = queue_of()
    with pytest.raises(error) as info:
        taskjobs.send_invoice.using(queue=q).enqueue(*args, **kwargs)
    assert "billing.send_invoice" in str(info.value) and named in str(info.value)
    with pytest.raises(error):
        taskjobs.send_invoice.using(queue=q).enqueue_many([((1,), {"email": "ok"}), (args, kwargs)])
    assert sum(q.counts().values()) == 0


def test_drain_runs_tasks_and_their_handles_return_the_results(queue_of):
    q = queue_of()
    jobq.configure(q)
    h1 = taskjobs.add.enqueue(2, b=5)
    h2 = taskjobs.double.enqueue(21)
    many = taskjobs.send_invoice.enqueue_many(
        [((1,), {"email": "a"}), ((2,), {"email": "b", "lines": ["l"]})]
    )
    assert q.drain()["completed"] == 4
    assert h1.wait() == 7 and h2.wait(timeout=5) == 42
    assert q.wait_many(many) == [
        {"invoice": 1, "email": "a", "lines": []},
        {"invoice": 2, "email": "b", "lines": ["l"]},
    ]
    assert q.wait_many([h1.id, h2.id, h1.id]) == [7, 42, 7]
    assert asyncio.run(h2.wait_async(timeout=5)) == 42
    assert q.handle(h1.id).get().result == 7 and q.handle(h1.id) == h1


def test_immediate_mode_runs_at_enqueue_and_a_failure_raises_job_failed_with_the_traceback(
    queue_of,
):
    q = queue_of(immediate=True)
    jobq.configure(q)
    assert taskjobs.add.enqueue(1, 2).wait() == 3
    handle = taskjobs.explode.enqueue("no address")
    assert handle.status() == "failed"
    with pytest.raises(JobFailed) as info:
        handle.wait()
    failed = info.value
    assert failed.job.id == handle.id and failed.job.status == "failed"
    assert failed.error == "ValueError: cannot send: no address"
    assert (
        "Traceback" in failed.traceback
        and 'raise ValueError(f"cannot send: {message}")' in failed.traceback
    )
    assert failed.traceback == failed.job.error
    with pytest.raises(JobFailed):
        q.wait_many([taskjobs.add.enqueue(1), handle])


def test_a_cancelled_job_raises_job_cancelled(queue_of):
    q = queue_of()
    handle = taskjobs.add.using(queue=q, delay=3600).enqueue(1)
    assert ops.cancel_jobs(q.store, [handle.id], q.clock.now()) == [handle.id]
    with pytest.raises(JobCancelled) as info:
        handle.wait(timeout=5)
    assert info.value.job.status == "cancelled"


def test_a_wait_that_times_out_raises_and_leaves_the_job_alone(queue_of):
    q = queue_of()
    handle = taskjobs.add.using(queue=q).enqueue(1)
    before = q.get(handle.id)
    with pytest.raises(TimeoutError, match=handle.id):
        handle.wait(timeout=0.05)
    with pytest.raises(TimeoutError):
        asyncio.run(handle.wait_async(timeout=0.05))
    with pytest.raises(TimeoutError):
        q.wait_many([handle, taskjobs.add.using(queue=q).enqueue(2)], timeout=0.05)
    assert q.get(handle.id) == before
    assert q.drain()["completed"] == 2 and handle.wait() == 1


def test_an_unknown_job_raises_job_not_found_naming_it(queue_of):
    q = queue_of()
    with pytest.raises(JobNotFound, match="f" * 32):
        q.handle("f" * 32).wait(timeout=5)
    with pytest.raises(LookupError):
        q.wait_many([taskjobs.add.using(queue=q).enqueue(1).id, "e" * 32], timeout=5)


def test_a_result_deleted_by_retention_makes_wait_say_so(queue_of):
    q = queue_of(immediate=True)
    handle = taskjobs.add.using(queue=q).enqueue(1)
    assert handle.wait() == 1  # kept until retention deletes it
    assert ops.purge_jobs(q.store, [handle.id]) == [handle.id]
    with pytest.raises(JobNotFound, match="deleted by retention"):
        handle.wait(timeout=5)


def test_a_string_and_dict_enqueue_runs_the_same_function(queue_of):
    q = queue_of()
    same = q.handle(q.enqueue("billing.send_invoice", {"args": [7], "kwargs": {"email": "x@y"}}))
    bare = q.handle(q.enqueue("taskjobs.add", {"args": [4]}))
    wrong = q.handle(q.enqueue("taskjobs.add", {"args": [1, 2, 3]}))
    odd = q.handle(q.enqueue("taskjobs.add", [1, 2]))
    assert q.drain() == {"completed": 2, "retried": 0, "failed": 2}  # no retry: it cannot fit later
    assert same.wait() == {"invoice": 7, "email": "x@y", "lines": []} and bare.wait() == 4
    for h in (wrong, odd):
        with pytest.raises(JobFailed) as info:
            h.wait()
        assert h.id in info.value.error and "taskjobs.add" in info.value.error
        assert info.value.job.attempts == 1


def test_using_returns_a_copy_with_its_options(queue_of):
    q = queue_of()
    keyed = taskjobs.add.using(queue=q, key="add-1", priority=5)
    first, again = keyed.enqueue(1), keyed.enqueue(2)
    assert first.id == again.id  # the key is taken by the kept job
    job = q.get(first.id)
    assert job.priority == 5 and job.payload == {"args": [1], "kwargs": {}}
    assert taskjobs.add.options == {} and keyed(1, 2) == 3
    later = taskjobs.add.using(queue=q, delay=3600, max_attempts=9).enqueue(3)
    assert q.get(later.id).max_attempts == 9 and q.drain()["completed"] == 1
    assert getattr(keyed, ATTR) is getattr(taskjobs.add, ATTR)  # one handler for both


def test_enqueue_through_conn_joins_the_callers_transaction(tmp_path):
    db = str(tmp_path / "q.db")
    with JobQueue(db, handlers=["taskjobs"]) as q:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN")
        gone = taskjobs.add.using(queue=q, conn=conn).enqueue(1)
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        kept = taskjobs.add.using(queue=q, conn=conn).enqueue_many([((2,), {}), ((3,), {"b": 1})])
        conn.execute("COMMIT")
        conn.close()
        with pytest.raises(JobNotFound):
            gone.wait(timeout=5)
        assert q.drain()["completed"] == 2 and q.wait_many(kept) == [2, 4]


def test_a_threads_first_enqueue_inside_the_applications_transaction_does_not_wait_on_it(
    engine, tmp_path, monkeypatch
):
    """A thread's default queue opens at its first enqueue; when that comes through ``conn=``
    inside the application's transaction (which holds SQLite's write lock), opening the queue
    must not need that lock: a schema already current is only read."""
    config = engine.config()
    JobQueue(
        config=config
    ).close()  # the schema is made (and current) before the application's turn
    extra = {"postgres": {"schema": config.postgres.schema}} if engine.name == "postgresql" else {}
    path = tmp_path / "jobq.toml"
    path.write_text(
        tomli_w.dumps(
            {
                "database": config.database,
                "handlers": ["taskjobs"],
                "sqlite": {"busy_timeout": 1},
                **extra,
            }
        )
    )
    monkeypatch.setenv("JOBQ_CONFIG", str(path))
    done: list = []

    def request() -> None:  # one request of a web app: its own connection, its own transaction
        app = raw(config)
        try:
            app.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
            app.execute("BEGIN")
            app.execute("INSERT INTO orders (id) VALUES (1)")  # the write lock is the app's now
            inside = taskjobs.add.using(conn=getattr(app, "conn", app))
            handle = inside.enqueue(1, b=2)
            more = [*inside.enqueue_many([((3,), {})]), inside.using(key="k").enqueue(4)]
            app.execute("COMMIT")
            done.extend([handle.id, *(h.id for h in more)])
            shared.producer.tasks.default_queue().close()
        except BaseException as exc:  # the main thread reports it
            done.append(exc)
        finally:
            app.close()

    t = threading.Thread(target=request, daemon=True)
    t.start()
    t.join(30)
    assert done and all(isinstance(i, str) for i in done), (
        done or "the enqueue still waits after 30 s"
    )
    with JobQueue(config=config, handlers=["taskjobs"]) as q:
        assert [q.get(i).status for i in done] == ["pending"] * 3
        assert q.drain()["completed"] == 3 and q.wait_many(done, timeout=5) == [3, 3, 4]


def test_the_default_queue_comes_from_the_config_file(tmp_path, monkeypatch, make_config):
    path = make_config(tmp_path, handlers=["taskjobs"], database="default.db")
    monkeypatch.setenv("JOBQ_CONFIG", str(path))
    handle = taskjobs.add.enqueue(5)
    assert handle.queue.config.database == str(tmp_path / "default.db")
    assert shared.producer.tasks.default_queue() is handle.queue  # one per thread, opened once
    other = []

    def in_a_thread() -> None:
        other.append(shared.producer.tasks.default_queue())
        other[0].close()

    t = threading.Thread(target=in_a_thread)
    t.start()
    t.join()
    assert other[0] is not handle.queue
    assert handle.queue.drain()["completed"] == 1 and handle.wait() == 5
    handle.queue.close()


def test_a_waiter_is_woken_by_the_commit_not_the_fallback(engine, monkeypatch):
    """With the back-off's first pause and cap at ten minutes, only the engine's watch can end
    the wait (SQLite: the WAL watch; PostgreSQL: the done channel the ending statement notifies):
    the job completes through another queue, and the waiter returns."""
    monkeypatch.setattr(shared.producer.waithub, "FIRST", 600.0)
    monkeypatch.setattr(shared.producer.waithub, "WATCHED_CAP", 600.0)
    with JobQueue(config=engine.config()) as producer:
        job_id = taskjobs.add.using(queue=producer).enqueue(20, b=22).id
    reads, got = [], []

    def waiter() -> None:
        with JobQueue(config=engine.config()) as q:
            get = q.store.get
            q.store.get = lambda i: (reads.append(i), get(i))[1]
            got.append(q.handle(job_id).wait(timeout=120))

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: reads, what="the waiter's first read")
    with JobQueue(config=engine.config(), handlers=["taskjobs"]) as worker:
        assert worker.drain()["completed"] == 1
    t.join(60)
    assert got == [42]


def test_an_async_waiter_is_woken_by_the_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(shared.producer.waithub, "FIRST", 600.0)
    monkeypatch.setattr(shared.producer.waithub, "WATCHED_CAP", 600.0)
    db = str(tmp_path / "q.db")

    def run_it() -> None:
        with JobQueue(db, handlers=["taskjobs"]) as worker:
            worker.drain()

    async def main() -> int:
        with JobQueue(db) as q:
            handle = taskjobs.double.using(queue=q).enqueue(21)
            waiting = asyncio.ensure_future(handle.wait_async(timeout=120))
            await asyncio.sleep(0)  # the waiter makes its first read and pauses
            await asyncio.to_thread(run_it)
            return await asyncio.wait_for(waiting, 60)

    assert asyncio.run(main()) == 42


def test_the_jobq_package_is_the_user_api_and_the_layout_names_keep_working(tmp_path):
    import shared
    import worker

    for name in (
        "JobQueue",
        "handler",
        "PermanentError",
        "RetryAfter",
        "task",
        "JobHandle",
        "JobFailed",
        "JobCancelled",
        "JobNotFound",
        "configure",
        "Job",
        "FakeClock",
        "on_completed",
    ):
        assert hasattr(jobq, name) and name in jobq.__all__, name
    assert jobq.JobQueue is shared.JobQueue and jobq.handler is worker.handler
    assert (Path(jobq.__file__).parent / "py.typed").exists()
    from tests.proc import env

    out = subprocess.run(
        [sys.executable, "-m", "jobq", "--config", str(tmp_path / "none.toml"), "status"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=60,
    )
    same = subprocess.run(
        [sys.executable, "-m", "supervisor", "--config", str(tmp_path / "none.toml"), "status"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert (out.returncode, out.stdout, out.stderr) == (same.returncode, same.stdout, same.stderr)
    assert out.returncode != 0 and "none.toml" in out.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "jobq", "--help"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert helped.returncode == 0 and "usage: jobq" in helped.stdout


def test_a_forked_child_waits_with_its_own_watcher(tmp_path):
    """Nothing crosses fork(): the parent's watcher thread, its lock and its connection stay
    behind; a wait in the child gets a watcher of its own and times out cleanly."""
    db = str(tmp_path / "q.db")
    with JobQueue(db, handlers=["taskjobs"]) as q:
        done = taskjobs.add.using(queue=q).enqueue(1)
        pending = taskjobs.add.using(queue=q, delay=3600).enqueue(2)
        q.drain()
        with pytest.raises(TimeoutError):
            pending.wait(timeout=0.05)  # the parent's watcher exists now
        parent_hub = q.hubs.current
        assert parent_hub is not None
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if all holds
            code = 1
            try:
                assert q.handle(done.id).wait(timeout=5) == 1  # the parent's queue, in the child
                try:
                    q.handle(pending.id).wait(timeout=0.2)
                except TimeoutError:
                    mine = q.hubs.current
                    code = (
                        0
                        if mine is not None and mine is not parent_hub and mine.pid == os.getpid()
                        else 3
                    )
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert done.wait(timeout=5) == 1
