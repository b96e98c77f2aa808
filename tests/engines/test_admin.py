"""The operators' read layer (shared.ops) and the attempt history the schema's triggers write.

In-process, on every engine (the ``engine`` fixture), with a fake clock: every path that ends an
attempt records it once, an attempt given back records nothing, and deleting a job deletes its
history; the read layer's statements, written once, answer the same on each engine.
"""

from __future__ import annotations

import pytest

from shared import ops
from shared.runtime.clock import FakeClock, iso
from shared.model.job import new_id
from shared.engines.contract import EngineStore
from shared.model.job import Finish, NewJob

OWNER = "testhost:1111:1"


@pytest.fixture
def store(engine):
    with engine.open() as s:
        yield s


def add(store: EngineStore, clock: FakeClock, job_type: str = "t", **kw) -> str:
    job = NewJob(
        new_id(),
        job_type,
        "{}",
        kw.get("priority", 0),
        kw.get("run_at", clock.now()),
        kw.get("max_attempts"),
        None,
    )
    return store.enqueue([job], clock.now())[0]


def claim(store: EngineStore, clock: FakeClock):
    return store.claim(OWNER, 1111, clock.now(), 1)[0]


def history(store: EngineStore, job_id: str) -> list[tuple]:
    return [(h["attempt"], h["outcome"], h["error"]) for h in ops.attempt_history(store, job_id)]


def test_every_ending_of_an_attempt_is_recorded_with_its_times(store, clock):
    jid = add(store, clock)
    clock.advance(2)  # waited 2 s after becoming due
    job = claim(store, clock)
    clock.advance(1)  # ran 1 s
    assert store.finish(
        Finish("retry", jid, job.attempts, "boom", clock.now(), 3), OWNER, clock.now()
    )
    job = claim(store, clock)
    clock.advance(0.5)
    assert store.finish(
        Finish("failed", jid, job.attempts, "boom again", 0.0, 3), OWNER, clock.now()
    )
    rows = ops.attempt_history(store, jid)
    assert [(r["attempt"], r["outcome"], r["error"]) for r in rows] == [
        (1, "retry", "boom"),
        (2, "failed", "boom again"),
    ]
    first = rows[0]
    assert (first["due_at"], first["started_at"], first["ended_at"]) == (
        iso(clock.now() - 3.5),
        iso(clock.now() - 1.5),
        iso(clock.now() - 0.5),
    )
    assert first["owner"] == OWNER

    done = add(store, clock)
    job = claim(store, clock)
    assert store.finish(Finish("completed", done, job.attempts, '"ok"'), OWNER, clock.now())
    assert history(store, done) == [(1, "completed", None)]


def test_a_dead_workers_job_is_recorded_and_a_given_back_attempt_is_recorded_interrupted(
    store, clock
):
    """A run that counts is recorded as its outcome; one given back (a shutdown the supervisor
    ordered) as ``interrupted`` with the reason, its number used again by the next run; a job
    claimed but never started has no row."""
    counted, given_back = add(store, clock), add(store, clock)
    claim(store, clock)
    store.release_owner(
        OWNER, "worker 1111 killed by SIGKILL", clock.now(), max_attempts_for=lambda j: 3
    )
    assert history(store, counted) == [(1, "retry", "worker 1111 killed by SIGKILL")]
    [job] = store.claim(OWNER, 1111, clock.now(), 1)  # the other job, or the re-queued one
    store.release_owner(
        OWNER,
        "shutdown_timeout passed",
        clock.now(),
        max_attempts_for=lambda j: 3,
        count_attempt=False,
    )
    assert history(store, job.id)[-1] == (job.attempts, "interrupted", "shutdown_timeout passed")
    assert store.get(job.id).attempts == job.attempts - 1
    [again] = store.claim(OWNER, 1111, clock.now(), 1)
    before = history(store, again.id)
    store.release_owner(
        OWNER,
        "shutdown_timeout passed",
        clock.now(),
        max_attempts_for=lambda j: 3,
        count_attempt=False,
        unstarted=[again.id],
    )
    assert history(store, again.id) == before
    assert len(history(store, counted)) + len(history(store, given_back)) == 2


def test_feed_aggregates_wait_and_run_buckets(store, clock):
    start = ops.last_attempt_seq(store)
    for run in (0.004, 0.2, 3.0):
        jid = add(store, clock)
        clock.advance(0.01)
        job = claim(store, clock)
        clock.advance(run)
        store.finish(Finish("completed", jid, job.attempts, None), OWNER, clock.now())
    rows = ops.attempt_aggregates(store, start, ops.last_attempt_seq(store), (0.005, 1.0))
    assert len(rows) == 1
    r = rows[0]
    assert (r["type"], r["outcome"], r["n"]) == ("t", "completed", 3)
    assert (r["run_le_0"], r["run_le_1"]) == (1, 2)
    assert (r["wait_le_0"], r["wait_le_1"]) == (0, 3)
    assert r["run_sum"] == pytest.approx(3.204, abs=0.005)


def test_retry_and_cancel_act_only_on_the_states_they_apply_to(store, clock):
    running, failed = add(store, clock, priority=9), add(store, clock, priority=5)
    pending = add(store, clock)
    assert claim(store, clock).id == running
    failed_job = claim(store, clock)
    assert failed_job.id == failed
    store.finish(Finish("failed", failed, failed_job.attempts, "x", 0.0, 3), OWNER, clock.now())
    assert ops.cancel_jobs(store, [pending, running, failed, "nope"], clock.now()) == [
        pending,
        running,
    ]
    assert (
        store.get(running).status == "running" and store.get(running).cancel_requested_at
    )  # asked
    assert ops.retry_jobs(store, [failed, pending, running], clock.now()) == [failed, pending]
    assert ops.statuses(store, [failed, pending, running]) == {
        failed: "pending",
        pending: "pending",
        running: "running",
    }
    assert store.get(failed).attempts == 0


def test_retry_failed_and_purge_go_in_batches(store, clock, monkeypatch):
    monkeypatch.setattr(ops.bulk, "BATCH", 3)
    ids = [add(store, clock, "a" if i % 2 else "b") for i in range(8)]
    for _ in ids:
        job = claim(store, clock)
        store.finish(Finish("failed", job.id, job.attempts, "x", 0.0, 3), OWNER, clock.now())
    assert ops.retry_failed(store, clock.now(), "a") == 4
    assert ops.counts_by_type(store) == [
        {"type": "a", "status": "pending", "n": 4},
        {"type": "b", "status": "failed", "n": 4},
    ]
    clock.advance(10)
    assert ops.purge(store, "failed", clock.now() - 5, dry_run=True) == 4
    assert ops.purge(store, "failed", clock.now() - 20) == 0
    assert ops.purge(store, "failed", clock.now() - 5) == 4
    assert store.read("SELECT count(*) AS n FROM job_attempts")[0]["n"] == 4  # the a's only
    with pytest.raises(ValueError, match="pending"):
        ops.purge(store, "pending", clock.now())


def test_cancel_each_tells_ended_from_asked_and_cancel_pending_goes_in_batches(
    store, clock, monkeypatch
):
    """A pending job ends ``cancelled``, a running one is only asked to stop; ``cancel_pending``
    cancels every pending or waiting job (of a type) in batches and leaves running ones alone."""
    monkeypatch.setattr(ops.bulk, "BATCH", 3)
    running = add(store, clock, priority=9)
    assert claim(store, clock).id == running
    ids = [add(store, clock, "a" if i % 2 else "b") for i in range(8)]
    assert ops.cancel_each(store, [running, ids[0], "nope"], clock.now()) == {
        running: "requested",
        ids[0]: "cancelled",
    }
    assert store.get(running).status == "running" and store.get(running).cancel_requested_at
    assert ops.count_unstarted(store, "a") == 4 and ops.count_unstarted(store) == 7
    seen: list[int] = []
    assert ops.cancel_pending(store, clock.now(), "a", seen.append) == 4 and seen == [4]
    seen.clear()  # by id: one transaction per BATCH ids, progress after each
    done = ops.cancel_each(store, ids[2:], clock.now(), seen.append)
    assert done == {i: "cancelled" for i in ids[2::2]}
    assert seen == [3, 6]
    assert ops.cancel_pending(store, clock.now()) == 0
    assert ops.statuses(store, ids) == {i: "cancelled" for i in ids}
    assert store.get(running).status == "running"


def test_oldest_due_looks_at_every_priority(store, clock):
    assert ops.oldest_due(store, clock.now()) is None
    late = add(store, clock, priority=5)
    early = add(store, clock, priority=-3, run_at=clock.now() - 60)
    add(store, clock, priority=1, run_at=clock.now() + 60)  # not due: not counted
    assert ops.oldest_due(store, clock.now())["id"] == early
    assert ops.scheduled_by_type(store, clock.now()) == {"t": 1}
    assert late in ops.find_ids(store, late[:12], limit=5)


def test_scale_requests_and_counters_live_in_control_rows(store, clock):
    store.register_process("host:1:1", "supervisor", 1, "host", clock.now())
    assert ops.take_scale_request(store, "host:1:1") is None
    ops.request_scale(store, "host:1:1", 4)
    assert ops.pending_scale(store, "host:1:1") == 4
    assert ops.take_scale_request(store, "host:1:1") == 4
    assert ops.pending_scale(store, "host:1:1") is None
    ops.save_counters(store, "host:1:1", {"jobs_reaped": 2})
    ops.save_counters(store, "gone:2:2", {"jobs_reaped": 9})  # no process row: pruned next time
    ops.save_counters(store, "host:1:1", {"jobs_reaped": 3})
    assert ops.supervisor_counters(store) == {"host:1:1": {"jobs_reaped": 3}}
