"""The worker (worker.loop.Worker and ``python -m worker``): running handlers, retries with
backoff, failure classification, guarded recording, and a graceful stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

from shared.runtime.clock import iso, parse_iso
from shared.settings.config import load
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import PermanentError, Registry, RetryAfter, handler
from shared.engines import open_store
from tests.engines import raw
from worker.loop import Worker

pytestmark = (
    pytest.mark.engines
)  # the tests that use database (or make_config, queue) run on each engine

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def wait_for(cond, timeout=20.0, what="condition"):
    """Poll ``cond`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def registry_of(*fns) -> Registry:
    mod = types.ModuleType("jobq_test_handlers")
    for fn in fns:
        setattr(mod, fn.__name__, fn)
    reg = Registry()
    reg.add_module(mod)
    return reg


@pytest.fixture
def make_worker(tmp_path, make_config, clock):
    """Build an in-process Worker on the test's database with the given handler functions."""
    made = []

    def build(*fns, **overrides):
        cfg = load(make_config(tmp_path, **overrides))
        w = Worker(cfg, registry_of(*fns), clock=clock)
        w.store = open_store(cfg)
        made.append(w)
        return w

    yield build
    for w in made:
        w.store.close()
        w.signals.close()


def step(w):
    """Claim one due job, process it and record its outcome; return the claimed job (or None).

    A worker whose ``process`` returns the finished run (outcomes batched with the next claim)
    gets it committed through its own ``commit`` path here."""
    jobs = w.store.claim(w.owner, w.pid, w.clock.now(), 1)
    for job in jobs:
        done = w.process(job)
        if done is not None:
            w.held.done.append(done)
            w.commit(limit=0, must=True)
    return jobs[0] if jobs else None


def advance_to_run_at(clock, job):
    clock.set(parse_iso(job.run_at))


@handler("t:echo")
def echo(payload, job):
    return {"echo": payload, "attempt": job.attempt}


@handler("t:boom")
def boom(payload, job):
    raise ValueError(f"boom {payload}")


# -- processing ------------------------------------------------------------------------------------


def test_processes_all_jobs(make_worker, queue):
    calls = []

    @handler("t:count")
    def count(payload, job):
        calls.append(payload)

    w = make_worker(echo, count)
    ids = [queue.enqueue("t:echo", {"i": i}) for i in range(5)] + [
        queue.enqueue("t:count", i) for i in range(5)
    ]
    while step(w):
        pass
    assert queue.counts() == {"completed": 10}
    assert sorted(calls) == list(range(5))
    for i, job_id in enumerate(ids[:5]):
        job = queue.get(job_id)
        assert job.result == {"echo": {"i": i}, "attempt": 1}
        assert job.attempts == 1 and job.error is None and job.owner is None
    assert queue.get(ids[5]).result is None
    assert w.jobs_done == 10


def test_run_loop_in_process_processes_all_jobs(tmp_path, make_config, clock, queue):
    """The real loop: with max_jobs = N the worker stops (recycles) after exactly N jobs."""
    cfg = load(make_config(tmp_path, worker={"poll_interval": 0.01, "max_jobs": 6}))
    for i in range(6):
        queue.enqueue("t:echo", i, priority=i % 3)
    w = Worker(cfg, registry_of(echo), clock=clock)
    out = []
    t = threading.Thread(target=lambda: out.append(w.run()), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # unblock the loop before failing
        w.stopping = True
        w.signals.wake()
        t.join(10)
        pytest.fail(f"the worker did not stop after 6 jobs: {queue.counts()}")
    assert out == [ExitCode.RECYCLED]
    assert queue.counts() == {"completed": 6}
    assert queue.store.processes() == []  # its process row was removed


def test_handler_gets_the_job_context(make_worker, queue):
    seen = []

    @handler("t:ctx", max_attempts=4)
    def ctx(payload, job):
        seen.append((job.id, job.type, job.attempt, job.max_attempts))
        job.logger.info("hello from %s", job.id)

    w = make_worker(ctx)
    job_id = queue.enqueue("t:ctx", {})
    step(w)
    assert seen == [(job_id, "t:ctx", 1, 4)]


def test_async_handler(make_worker, queue):
    import asyncio

    @handler("t:async")
    async def run_async(payload, job):
        await asyncio.sleep(0)
        return {"doubled": payload * 2}

    w = make_worker(run_async)
    job_id = queue.enqueue("t:async", 21)
    step(w)
    job = queue.get(job_id)
    assert job.status == "completed"
    assert job.result == {"doubled": 42}


# -- retries and backoff ----------------------------------------------------------------------------


def test_flaky_job_succeeds_on_third_attempt(make_worker, queue, clock):
    failures = {"left": 2}

    @handler("t:flaky")
    def flaky(payload, job):
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError(f"flaky, attempt {job.attempt}")
        return {"ok": job.attempt}

    w = make_worker(flaky)
    job_id = queue.enqueue("t:flaky", {})
    for attempt in (1, 2):
        assert step(w).attempts == attempt
        job = queue.get(job_id)
        assert job.status == "pending" and job.attempts == attempt
        assert f"flaky, attempt {attempt}" in job.error
        assert parse_iso(job.run_at) > clock.now()
        assert step(w) is None  # not due until the backoff has passed
        advance_to_run_at(clock, job)
    step(w)
    job = queue.get(job_id)
    assert job.status == "completed"
    assert job.attempts == 3
    assert job.result == {"ok": 3}


def test_backoff_schedule_then_failed_with_traceback(make_worker, queue, clock):
    base, cap, attempts = 1.0, 8.0, 6
    w = make_worker(
        boom, retry={"max_attempts": attempts, "backoff_base": base, "backoff_max": cap}
    )
    job_id = queue.enqueue("t:boom", 42)
    for n in range(1, attempts):
        assert step(w).attempts == n
        job = queue.get(job_id)
        assert job.status == "pending" and job.attempts == n
        d = min(base * 2**n, cap)
        delay = parse_iso(job.run_at) - clock.now()
        assert 0.75 * d - 0.001 <= delay <= d + 0.001, (n, delay, d)
        assert step(w) is None
        advance_to_run_at(clock, job)
    assert step(w).attempts == attempts
    job = queue.get(job_id)
    assert job.status == "failed"
    assert job.attempts == attempts
    assert job.completed_at == iso(clock.now())
    assert job.owner is None
    assert "Traceback (most recent call last)" in job.error
    assert "ValueError: boom 42" in job.error
    assert "in boom" in job.error  # the frame of the handler
    assert step(w) is None


def test_backoff_is_jittered_but_bounded(make_worker, queue, clock):
    w = make_worker(boom, retry={"max_attempts": 2, "backoff_base": 10, "backoff_max": 1000})
    ids = [queue.enqueue("t:boom", i) for i in range(40)]
    for _ in ids:
        step(w)
    delays = [parse_iso(queue.get(i).run_at) - clock.now() for i in ids]
    assert all(15 - 0.001 <= d <= 20 + 0.001 for d in delays), delays
    assert len({round(d, 3) for d in delays}) > 1  # not all retry at the same moment


def test_max_attempts_precedence(make_worker, queue, clock):
    @handler("t:boom2", max_attempts=2)
    def boom2(payload, job):
        raise RuntimeError("nope")

    w = make_worker(boom, boom2, retry={"max_attempts": 5, "backoff_base": 0})
    from_handler = queue.enqueue("t:boom2", {})
    from_job = queue.enqueue("t:boom2", {}, max_attempts=1)
    from_config = queue.enqueue("t:boom", {})
    while step(w):
        pass
    assert (queue.get(from_job).status, queue.get(from_job).attempts) == ("failed", 1)
    assert (queue.get(from_handler).status, queue.get(from_handler).attempts) == ("failed", 2)
    assert (queue.get(from_config).status, queue.get(from_config).attempts) == ("failed", 5)


# -- failure classification ------------------------------------------------------------------------------


def test_permanent_error_fails_at_once(make_worker, queue):
    @handler("t:perm")
    def perm(payload, job):
        raise PermanentError("bad reportId")

    w = make_worker(perm)
    job_id = queue.enqueue("t:perm", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "failed"
    assert job.attempts == 1
    assert "PermanentError: bad reportId" in job.error


def test_retry_after_reschedules_and_counts_an_attempt(make_worker, queue, clock):
    @handler("t:later", max_attempts=2)
    def later(payload, job):
        raise RetryAfter(42, "rate limited")

    w = make_worker(later)
    job_id = queue.enqueue("t:later", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "pending"
    assert job.attempts == 1
    assert job.run_at == iso(clock.now() + 42)
    assert "rate limited" in job.error
    clock.advance(41.999)
    assert step(w) is None
    clock.advance(0.001)
    assert step(w).attempts == 2
    job = queue.get(job_id)  # attempts used up: RetryAfter fails it
    assert job.status == "failed" and job.attempts == 2
    assert "RetryAfter" in job.error


def test_unknown_job_type_fails_at_once(make_worker, queue):
    w = make_worker(echo, boom)
    job_id = queue.enqueue("t:missing", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "failed"
    assert job.attempts == 1
    assert "'t:missing'" in job.error
    assert "t:boom" in job.error and "t:echo" in job.error


def test_invalid_json_payload_fails_at_once(make_worker, queue, database):
    """A payload written around enqueue that is not JSON fails its job at once. (PostgreSQL's
    payload column is jsonb: the server refuses such a payload.)"""
    called = []

    @handler("t:json")
    def js(payload, job):
        called.append(payload)

    w = make_worker(js)
    job_id = queue.enqueue("t:json", {})
    with raw(queue.config) as c:
        if database.name == "postgresql":
            with pytest.raises(Exception, match="invalid input syntax for type json"):
                c.execute("UPDATE jobs SET payload = ? WHERE id = ?", ("{'not': json", job_id))
            return
        c.execute("UPDATE jobs SET payload = ? WHERE id = ?", ("{'not': json", job_id))
    step(w)
    job = queue.get(job_id)
    assert called == []
    assert job.status == "failed"
    assert job.attempts == 1
    assert job_id in job.error
    assert "not valid JSON" in job.error


@pytest.mark.parametrize("code", [0, 1, None, "bye"])
def test_sys_exit_in_handler_is_a_failure(make_worker, queue, code):
    @handler("t:exit")
    def leave(payload, job):
        sys.exit(code)

    w = make_worker(leave, retry={"max_attempts": 2, "backoff_base": 0})
    job_id = queue.enqueue("t:exit", {})
    step(w)  # the test process is still here: SystemExit did not escape
    job = queue.get(job_id)
    assert job.status == "pending" and job.attempts == 1  # an ordinary, retryable failure
    assert "sys.exit" in job.error
    step(w)
    job = queue.get(job_id)
    assert job.status == "failed" and job.attempts == 2
    assert job.result is None


@pytest.mark.parametrize(
    "result, word", [({"when": object()}, "object"), ({1, 2}, "set"), ({"x": float("nan")}, "JSON")]
)
def test_result_not_json_serialisable_fails(make_worker, queue, result, word):
    @handler("t:badresult")
    def bad(payload, job):
        return result

    w = make_worker(bad)
    job_id = queue.enqueue("t:badresult", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "failed"
    assert job.attempts == 1
    assert job.result is None
    assert word in job.error and job_id in job.error


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf")])
def test_retry_after_with_a_bad_delay_is_an_ordinary_failure(make_worker, queue, clock, seconds):
    """RetryAfter(nan/inf) used to reach store.retry() and crash the worker in record()."""

    @handler("t:weird")
    def weird(payload, job):
        raise RetryAfter(seconds)

    w = make_worker(weird, retry={"max_attempts": 2, "backoff_base": 1})
    job_id = queue.enqueue("t:weird", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "pending" and job.attempts == 1
    assert "RetryAfter seconds" in job.error
    assert clock.now() < parse_iso(job.run_at) <= clock.now() + 2


def test_handler_exception_does_not_stop_the_worker(make_worker, queue):
    w = make_worker(echo, boom, retry={"max_attempts": 1})
    bad = queue.enqueue("t:boom", 1, priority=1)
    good = queue.enqueue("t:echo", 2)
    while step(w):
        pass
    assert queue.get(bad).status == "failed"
    assert queue.get(good).status == "completed"


def test_lost_lease_outcome_is_dropped(make_worker, queue, clock):
    """While the handler runs, the supervisor re-queues the job and another worker claims it:
    the first worker's result must not overwrite the new run."""
    other = "otherhost:9:9"

    @handler("t:slowpoke")
    def slowpoke(payload, job):
        with open_store(queue.config) as s:
            s.release_owner(w.owner, "lease expired", clock.now(), max_attempts_for=lambda j: 3)
            assert s.claim(other, 9, clock.now(), 1)[0].id == job.id
        return {"late": True}

    w = make_worker(slowpoke)
    job_id = queue.enqueue("t:slowpoke", {})
    step(w)
    job = queue.get(job_id)
    assert job.status == "running"
    assert job.owner == other
    assert job.attempts == 2
    assert job.result is None


# -- python -m worker ------------------------------------------------------------------------------

HANDLERS_MODULE = """
import os, time
from pathlib import Path
from worker import handler


@handler("sub:echo")
def echo(payload, job):
    return {"echo": payload, "pid": os.getpid()}


@handler("sub:wait")
def wait(payload, job):
    Path(payload["started"]).write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not os.path.exists(payload["release"]):
        if time.monotonic() > deadline:
            raise RuntimeError("the release file never appeared")
        time.sleep(0.01)
    return {"released": True}
"""


@pytest.fixture
def worker_proc(tmp_path, make_config):
    """Start ``python -m worker --config ...`` with a handlers module written into tmp_path."""
    (tmp_path / "jobq_sub_handlers.py").write_text(textwrap.dedent(HANDLERS_MODULE))
    cfg_path = make_config(tmp_path, handlers=["jobq_sub_handlers"], worker={"poll_interval": 0.05})
    procs = []

    def start():
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO), env.get("PYTHONPATH", "")])
        env.pop("JOBQ_CONFIG", None)
        log = open(tmp_path / f"worker{len(procs)}.log", "wb")
        p = subprocess.Popen(
            [sys.executable, "-m", "worker", "--config", str(cfg_path)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        p.log_path = log.name
        log.close()
        procs.append(p)
        return p

    start.config = cfg_path
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def _log(p) -> str:
    return Path(p.log_path).read_text(errors="replace")


@pytest.fixture
def real_queue(worker_proc):
    """A producer on the real clock (the worker subprocess uses the real clock too), on the
    worker's database."""
    from shared.producer.api import JobQueue

    q = JobQueue(config=load(worker_proc.config))
    yield q
    q.close()


def test_worker_process_runs_all_jobs_and_stops_on_sigterm(worker_proc, real_queue):
    ids = [real_queue.enqueue("sub:echo", {"i": i}) for i in range(20)]
    p = worker_proc()
    wait_for(
        lambda: (
            "pending" not in real_queue.counts()
            and "running" not in real_queue.counts()
            or p.poll() is not None
        ),
        what="all jobs to finish",
    )
    assert p.poll() is None, _log(p)
    assert real_queue.counts() == {"completed": 20}
    assert real_queue.get(ids[7]).result == {"echo": {"i": 7}, "pid": p.pid}
    p.send_signal(signal.SIGTERM)  # idle: it stops at once
    assert p.wait(20) == 0, _log(p)
    assert real_queue.store.processes() == []


def test_sigterm_lets_the_current_job_finish(worker_proc, real_queue, tmp_path):
    started, release = tmp_path / "started", tmp_path / "release"
    slow = real_queue.enqueue(
        "sub:wait", {"started": str(started), "release": str(release)}, priority=10
    )
    waiting = real_queue.enqueue("sub:echo", {"i": 1}, priority=0)
    p = worker_proc()
    wait_for(lambda: started.exists() or p.poll() is not None, what="the job to start")
    assert p.poll() is None, _log(p)
    assert real_queue.get(slow).status == "running"
    p.send_signal(signal.SIGTERM)
    release.write_text("go")  # created after the signal was sent
    assert p.wait(30) == 0, _log(p)
    job = real_queue.get(slow)
    assert job.status == "completed", (job, _log(p))
    assert job.result == {"released": True}
    assert job.attempts == 1
    other = real_queue.get(waiting)
    assert other.status == "pending" and other.attempts == 0 and other.owner is None
    assert real_queue.counts() == {"completed": 1, "pending": 1}


def test_worker_exits_with_config_invalid(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[worker]\npoll_interval = "fast"\n')
    r = subprocess.run(
        [sys.executable, "-m", "worker", "--config", str(bad)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == ExitCode.CONFIG_INVALID
    assert "worker.poll_interval" in r.stderr


def test_worker_exits_with_boot_failed_on_handler_import_error(tmp_path, make_config):
    (tmp_path / "broken_handlers.py").write_text("raise ImportError('missing dependency xyz')\n")
    cfg = make_config(tmp_path, handlers=["broken_handlers"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    r = subprocess.run(
        [sys.executable, "-m", "worker", "--config", str(cfg)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == ExitCode.WORKER_BOOT_FAILED
    assert "broken_handlers" in r.stderr and "missing dependency xyz" in r.stderr
