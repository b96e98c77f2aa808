"""Uniqueness with a scope, on each engine: ``unique=`` says how long a key dedupes ("pending",
"active", "kept", a period), per call, per ``enqueue_many`` item, per task and per ``.using()``;
a deduplicated enqueue returns the kept job's id and warns (DuplicateJobWarning) naming what it
did not apply; concurrent enqueues of one key, from threads and from processes, make one job
per scope."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

import jobq
from jobq import DuplicateJobWarning, JobQueue, task
from shared.settings.config import load
from tests.engines import raw

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[2]


@task(name="uniq.report", unique="pending")
def report(customer: str, month: int = 1) -> str:
    return f"{customer}-{month}"


def _keyed_rows(q: JobQueue) -> list[tuple]:
    with raw(q.config) as c:
        rows = c.execute("SELECT id, status, key FROM jobs ORDER BY id").fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _start(q: JobQueue) -> str:
    (job,) = q.store.claim("tester", os.getpid(), q.clock.now())
    return job.id


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [w for w in seen if issubclass(w.category, DuplicateJobWarning)]


def test_pending_dedupes_until_the_job_starts_then_a_new_job_takes_the_key(queue):
    first = queue.enqueue("sync", {"n": 1}, key="sync-1", unique="pending")
    assert queue.enqueue("sync", {"n": 1}, key="sync-1", unique="pending") == first
    assert _start(queue) == first
    second = queue.enqueue("sync", {"n": 1}, key="sync-1", unique="pending")
    assert second != first
    assert queue.get(first).key is None  # the running job gave its key up
    assert (queue.get(second).key, queue.get(second).status) == ("sync-1", "pending")
    assert queue.enqueue("sync", {"n": 1}, key="sync-1", unique="pending") == second
    assert len(_keyed_rows(queue)) == 2


def test_active_dedupes_while_running_and_frees_the_key_once_the_job_ended(queue):
    first = queue.enqueue("sync", None, key="a", unique="active")
    _start(queue)
    assert queue.enqueue("sync", None, key="a", unique="active") == first  # running: joined
    queue.enqueue("other", None, key="b", unique="active")
    ended = queue.enqueue("other", None, key="c", unique="active")
    queue.cancel(ended)
    assert queue.get(ended).status == "cancelled"
    again = queue.enqueue("other", None, key="c", unique="active")
    assert again != ended and queue.get(again).key == "c" and queue.get(ended).key is None


def test_kept_is_the_default_and_dedupes_until_the_job_is_deleted(queue):
    first = queue.enqueue("sync", None, key="k")
    queue.cancel(first)
    assert queue.enqueue("sync", None, key="k") == first
    assert queue.enqueue("sync", None, key="k", unique="kept") == first
    assert queue.enqueue("sync", None, key="k", unique="pending") != first  # a scope per call


def test_a_period_dedupes_jobs_created_within_it_whatever_their_state(queue, clock):
    first = queue.enqueue("digest", {"u": 1}, key="d", unique="10m")
    _start(queue)
    clock.advance(599)
    assert queue.enqueue("digest", {"u": 1}, key="d", unique=600) == first
    clock.advance(2)
    later = queue.enqueue("digest", {"u": 1}, key="d", unique="10m")
    assert later != first and queue.get(later).key == "d"


def test_unique_without_a_key_keys_the_job_by_type_and_payload(queue):
    a = queue.enqueue("t", {"x": 1, "y": 2}, unique="pending")
    assert queue.enqueue("t", {"y": 2, "x": 1}, unique="pending") == a  # key order is no matter
    assert queue.enqueue("t", {"x": 2, "y": 2}, unique="pending") != a
    assert queue.enqueue("u", {"x": 1, "y": 2}, unique="pending") != a
    assert queue.enqueue("t", {"x": 1, "y": 2}) != a  # no unique=, no key: a new job


def test_a_deduplicated_enqueue_warns_naming_what_it_did_not_apply(queue, clock):
    first = queue.enqueue("mail", {"to": "a"}, key="m", unique="pending", priority=1)
    same, seen = _quiet(queue.enqueue, "mail", {"to": "a"}, key="m", unique="pending", priority=1)
    assert same == first and seen == []  # a repeat of the same call is silent
    other, seen = _quiet(
        queue.enqueue,
        "mail",
        {"to": "b"},
        key="m",
        unique="pending",
        priority=7,
        delay=60,
        queue="slow",
    )
    assert other == first and len(seen) == 1
    text = str(seen[0].message)
    for part in ("key 'm'", first, "(pending)", "unique='pending'", "payload", "priority=7"):
        assert part in text
    assert "(the job keeps 1)" in text and "queue='slow'" in text and "run_at=" in text
    assert seen[0].filename == __file__  # pointed at the caller's line
    kept = queue.get(first)
    assert (kept.payload, kept.priority, kept.queue) == ({"to": "a"}, 1, "default")


def test_enqueue_many_items_and_transactional_enqueue_take_a_scope(queue):
    ids = queue.enqueue_many(
        [
            ("t", 1, {"key": "k1", "unique": "pending"}),
            {"type": "t", "payload": 1, "key": "k1", "unique": "pending"},
            ("t", 2, {"unique": "active"}),
        ]
    )
    assert ids[0] == ids[1] and ids[2] != ids[0]
    _start(queue)  # the first by claim order (same priority and time: either keyed job)
    again = queue.enqueue_many([("t", 1, {"key": "k1", "unique": "pending"})])
    started = [r for r in _keyed_rows(queue) if r[1] == "running"][0][0]
    assert (again[0] == ids[0]) == (started != ids[0])
    with raw(queue.config) as app:
        conn = getattr(app, "conn", app)
        conn.execute("BEGIN")
        inside = queue.enqueue("t", 3, key="tx", unique="pending", conn=conn)
        assert queue.enqueue("t", 3, key="tx", unique="pending", conn=conn) == inside
        conn.execute("COMMIT")
    assert queue.get(inside).key == "tx"


def test_a_task_unique_while_queued_and_using_overrides_it(queue):
    h1 = report.using(queue=queue).enqueue("acme", month=3)
    h2 = report.using(queue=queue).enqueue(customer="acme", month=3)
    assert h1.id == h2.id  # one job per arguments, however they were passed
    assert report.using(queue=queue).enqueue("acme", 4).id != h1.id
    _start(queue)
    h3 = report.using(queue=queue).enqueue("acme", 3)
    started = queue.get(h1.id).status == "running"
    assert (h3.id != h1.id) == started
    keyed = report.using(queue=queue, key="acme-report", unique="active")
    k1 = keyed.enqueue("acme")
    assert keyed.enqueue("acme").id == k1.id
    with pytest.raises(ValueError, match="task 'uniq.report': unique= must be"):
        report.using(unique="sometimes")
    with pytest.raises(ValueError, match=r"job 't': unique= must be .*got -5"):
        queue.enqueue("t", None, unique=-5)
    with pytest.raises(ValueError, match="task 'bad': unique= must be"):
        jobq.task(name="bad", unique=True)(lambda: None)


def test_a_unique_task_in_a_workflow_is_one_job_while_in_scope(queue):
    first = jobq.chain(report.s("zeta", 2), report.s("omega")).enqueue(queue)
    again = jobq.chain(report.s(customer="zeta", month=2)).enqueue(queue)
    assert again.handles[0].id == first.handles[0].id != first.handles[1].id
    assert queue.get(first.handles[1].id).status == "waiting"


def test_enqueue_async_takes_a_scope(queue):
    async def go() -> tuple[str, str, str]:
        a = await queue.enqueue_async("t", None, key="as", unique="pending")
        b = await queue.enqueue_async("t", None, key="as", unique="pending")
        _start(queue)
        c = await queue.enqueue_async("t", None, key="as", unique="pending")
        return a, b, c

    a, b, c = asyncio.run(go())
    assert a == b != c


def test_threads_racing_on_one_key_make_one_job_per_scope(queue, config_path):
    old = queue.enqueue("race", None, key="r", unique="pending")
    _start(queue)  # the old job runs: every racer is outside its scope
    n = 8
    barrier, got, errors = threading.Barrier(n), [], []

    def racer() -> None:
        q = JobQueue(config=load(config_path), clock=queue.clock)
        try:
            barrier.wait()
            got.append(q.enqueue("race", None, key="r", unique="pending"))
        except Exception as exc:  # reported below, with the others
            errors.append(exc)
        finally:
            q.close()

    threads = [threading.Thread(target=racer) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(got) == n
    assert len(set(got)) == 1 and old not in got
    assert [r[2] for r in _keyed_rows(queue)] == [None, "r"]


_RACER = """
import sys
from shared.producer.api import JobQueue
from shared.settings.config import load
q = JobQueue(config=load(sys.argv[1]))
print(q.enqueue("race", None, key="p", unique="active"))
q.close()
"""


def test_processes_racing_on_one_key_make_one_job_per_scope(queue, config_path):
    old = queue.enqueue("race", None, key="p", unique="active")
    queue.cancel(old)  # ended: outside "active", so the first racer takes the key
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(config_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    ids = {out.strip() for out, _ in outs}
    assert len(ids) == 1 and old not in ids
    assert sorted(r[2] or "" for r in _keyed_rows(queue)) == ["", "p"]
