"""The store (shared.engines.sqlite.store.SqliteStore): claim order and schedule, guarded transitions, and the
locking contract (every write is one statement or BEGIN IMMEDIATE; no lock kept after claim)."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone

import pytest

import shared.engines.sqlite.store as store_mod
from shared.runtime.clock import iso, parse_iso
from shared.model.job import Job
from shared.engines.sqlite.schema import VERSION
from shared.engines.sqlite.store import Finish, NewJob, SqliteStore
from shared.model.errors import StoreError
from tests.proc import write_lock_free

OWNER = "testhost:1111:1"
OTHER = "testhost:2222:2"


def claim_one(store, clock, owner=OWNER):
    jobs = store.claim(owner, 1111, clock.now(), 1)
    return jobs[0] if jobs else None


def raw_row(path, job_id):
    with sqlite3.connect(path) as c:
        c.row_factory = sqlite3.Row
        return dict(c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())


# -- schema / opening -----------------------------------------------------------------------------


def test_open_creates_wal_database_with_schema(db_path):
    with SqliteStore(db_path) as s:
        assert s.conn.execute("PRAGMA journal_mode").fetchone()["journal_mode"] == "wal"
        assert s.conn.execute("PRAGMA user_version").fetchone()["user_version"] == VERSION
    with SqliteStore(db_path) as s:  # migrating again is a no-op
        assert s.counts() == {}
    assert s.closed


def test_synchronous_setting_is_applied(db_path):
    with SqliteStore(db_path, synchronous="full") as s:
        assert s.conn.execute("PRAGMA synchronous").fetchone()["synchronous"] == 2
    with SqliteStore(db_path, synchronous="normal") as s:
        assert s.conn.execute("PRAGMA synchronous").fetchone()["synchronous"] == 1


def test_missing_folder_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore(str(tmp_path / "nope" / "jobq.db"))


def test_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a database"):
        SqliteStore(str(path))


# -- claim order and schedule ---------------------------------------------------------------------


def test_claim_order_priority_then_run_at_then_created(queue, clock):
    base = clock.now()
    # Same priority and run_at, created one after the other.
    c1 = queue.enqueue("t", "c1", run_at=base - 100)
    clock.advance(1)
    c2 = queue.enqueue("t", "c2", run_at=base - 100)
    clock.advance(1)
    # Earlier run_at but created later: first due beats first created.
    early = queue.enqueue("t", "early", run_at=base - 500)
    clock.advance(1)
    low = queue.enqueue("t", "low", priority=-1, run_at=base - 10_000)
    high = queue.enqueue("t", "high", priority=10)
    mid = queue.enqueue("t", "mid", priority=5, run_at=base - 50)
    order = []
    while (job := claim_one(queue.store, clock)) is not None:
        order.append(job.id)
    assert order == [high, mid, early, c1, c2, low]


def test_claim_limit_returns_jobs_in_claim_order(queue, clock):
    ids = [queue.enqueue("t", i, priority=i) for i in range(5)]
    jobs = queue.store.claim(OWNER, 1, clock.now(), 3)
    assert sorted(j.id for j in jobs) == sorted(ids[2:])
    assert queue.counts() == {"pending": 2, "running": 3}


def test_future_job_is_not_claimed_until_clock_passes_it(queue, clock):
    job_id = queue.enqueue("t", delay=60)
    assert claim_one(queue.store, clock) is None
    clock.advance(59.999)
    assert claim_one(queue.store, clock) is None
    assert queue.get(job_id).run_at == iso(clock.now() + 0.001)
    clock.advance(0.001)  # due exactly now
    job = claim_one(queue.store, clock)
    assert job is not None and job.id == job_id


def test_future_high_priority_does_not_block_due_low_priority(queue, clock):
    queue.enqueue("t", "later", priority=100, delay=3600)
    due = queue.enqueue("t", "now", priority=0)
    assert claim_one(queue.store, clock).id == due
    assert claim_one(queue.store, clock) is None


def test_claim_marks_job_running(queue, clock):
    job_id = queue.enqueue("t", {"a": 1})
    clock.advance(5)
    job = queue.store.claim(OWNER, 4242, clock.now(), 1)[0]
    assert job.id == job_id
    assert job.status == "running"
    assert job.attempts == 1
    assert job.owner == OWNER and job.owner_pid == 4242
    assert job.started_at == job.heartbeat_at == job.updated_at == iso(clock.now())
    assert job.payload == {"a": 1}
    assert queue.get(job_id) == job
    assert claim_one(queue.store, clock, OTHER) is None  # a running job is not claimed twice


def test_paused_queue_claims_nothing(queue, clock):
    queue.enqueue("t")
    queue.pause()
    assert claim_one(queue.store, clock) is None
    queue.resume()
    assert claim_one(queue.store, clock) is not None


def test_claimed_job_with_invalid_json_payload(queue, clock, db_path):
    job_id = queue.enqueue("t", {})
    with sqlite3.connect(db_path) as c:
        c.execute("UPDATE jobs SET payload = '{not json' WHERE id = ?", (job_id,))
    job = claim_one(queue.store, clock)
    assert job.payload == "{not json"
    assert job.payload_error and "JSONDecodeError" in job.payload_error


# -- transitions ------------------------------------------------------------------------------------


def test_complete(queue, clock):
    job_id = queue.enqueue("t")
    job = claim_one(queue.store, clock)
    clock.advance(2)
    assert queue.store.finish(
        Finish("completed", job_id, job.attempts, '{"ok":true}'), OWNER, clock.now()
    )
    done = queue.get(job_id)
    assert done.status == "completed"
    assert done.result == {"ok": True}
    assert done.completed_at == done.updated_at == iso(clock.now())
    assert done.owner is None and done.owner_pid is None and done.heartbeat_at is None
    assert claim_one(queue.store, clock) is None


def test_retry(queue, clock):
    job_id = queue.enqueue("t")
    job = claim_one(queue.store, clock)
    assert queue.store.finish(
        Finish("retry", job_id, job.attempts, "boom", clock.now() + 30, 3), OWNER, clock.now()
    )
    again = queue.get(job_id)
    assert again.status == "pending"
    assert again.error == "boom"
    assert again.attempts == 1
    assert again.max_attempts == 3  # recorded when first unset
    assert again.run_at == iso(clock.now() + 30)
    assert again.owner is None
    clock.advance(30)
    assert claim_one(queue.store, clock).attempts == 2


def test_retry_keeps_a_max_attempts_given_at_enqueue(queue, clock):
    job_id = queue.enqueue("t", max_attempts=7)
    job = claim_one(queue.store, clock)
    assert queue.store.finish(
        Finish("retry", job_id, job.attempts, "e", clock.now(), 3), OWNER, clock.now()
    )
    assert queue.get(job_id).max_attempts == 7


def test_fail(queue, clock):
    job_id = queue.enqueue("t")
    job = claim_one(queue.store, clock)
    assert queue.store.finish(
        Finish("failed", job_id, job.attempts, "bad", 0.0, 3), OWNER, clock.now()
    )
    failed = queue.get(job_id)
    assert failed.status == "failed"
    assert failed.error == "bad"
    assert failed.completed_at == iso(clock.now())
    assert failed.owner is None


def _transition(name, store, job_id, attempt, owner, now):
    if name == "complete":
        return store.finish(Finish("completed", job_id, attempt, None), owner, now)
    if name == "retry":
        return store.finish(Finish("retry", job_id, attempt, "e", now, 3), owner, now)
    return store.finish(Finish("failed", job_id, attempt, "e", 0.0, 3), owner, now)


@pytest.mark.parametrize("name", ["complete", "retry", "fail"])
def test_guarded_transitions_refuse_wrong_owner_or_attempt(queue, clock, db_path, name):
    job_id = queue.enqueue("t")
    job = claim_one(queue.store, clock)
    clock.advance(1)
    before = raw_row(db_path, job_id)
    assert _transition(name, queue.store, job_id, job.attempts, OTHER, clock.now()) is False
    assert _transition(name, queue.store, job_id, job.attempts + 1, OWNER, clock.now()) is False
    assert _transition(name, queue.store, job_id, job.attempts - 1, OWNER, clock.now()) is False
    assert _transition(name, queue.store, "f" * 32, job.attempts, OWNER, clock.now()) is False
    assert raw_row(db_path, job_id) == before
    # The right owner and attempt still can.
    assert _transition(name, queue.store, job_id, job.attempts, OWNER, clock.now()) is True


def test_batched_completions_are_guarded_one_by_one(queue, clock, db_path):
    """A worker's batch commits its completions in one statement: each is still matched on id,
    'running', attempt and owner, and only the ones that lost their lease are dropped."""
    from shared.engines.sqlite.store import Finish

    ids = [queue.enqueue("t") for _ in range(5)]
    mine = queue.store.claim(OWNER, 1, clock.now(), limit=4)
    theirs = claim_one(queue.store, clock, OTHER)
    assert [j.id for j in mine] == ids[:4] and theirs.id == ids[4]
    a, b, c, d = mine
    before = {i: raw_row(db_path, i) for i in (b.id, c.id, theirs.id)}
    clock.advance(1)
    ok, got = queue.store.finish_and_claim(
        [
            Finish("completed", a.id, a.attempts, '{"n":1}'),
            Finish("completed", b.id, b.attempts + 1, None),  # stale attempt
            Finish("retry", d.id, d.attempts, "again", clock.now(), 3),
            Finish("completed", c.id, c.attempts, None),
            Finish("completed", theirs.id, theirs.attempts, None),
        ],  # another owner's job
        OWNER,
        1,
        clock.now(),
        limit=0,
    )
    assert ok == [True, False, True, True, False] and got == []
    assert queue.get(a.id).status == "completed" and queue.get(a.id).result == {"n": 1}
    assert queue.get(c.id).status == "completed"
    assert queue.get(d.id).status == "pending" and queue.get(d.id).error == "again"
    assert raw_row(db_path, b.id) == before[b.id]
    assert raw_row(db_path, theirs.id) == before[theirs.id]


@pytest.mark.parametrize("name", ["complete", "retry", "fail"])
def test_lease_lost_result_is_dropped(queue, clock, db_path, name):
    """The supervisor re-queued the job (lease expired) and another worker took it: the first
    worker's late outcome must change nothing."""
    job_id = queue.enqueue("t")
    first = claim_one(queue.store, clock, OWNER)
    released = queue.store.release_owner(
        OWNER, "lease expired", clock.now(), max_attempts_for=lambda j: 3
    )
    assert [(r.id, r.status) for r in released] == [(job_id, "pending")]
    second = claim_one(queue.store, clock, OTHER)
    assert second.id == job_id and second.attempts == 2
    before = raw_row(db_path, job_id)
    assert _transition(name, queue.store, job_id, first.attempts, OWNER, clock.now()) is False
    # Even the old owner with the new attempt number, or the new owner with the old attempt.
    assert _transition(name, queue.store, job_id, second.attempts, OWNER, clock.now()) is False
    assert _transition(name, queue.store, job_id, first.attempts, OTHER, clock.now()) is False
    assert raw_row(db_path, job_id) == before


def test_transitions_refuse_a_finished_job(queue, clock, db_path):
    job_id = queue.enqueue("t")
    job = claim_one(queue.store, clock)
    assert queue.store.finish(Finish("completed", job_id, job.attempts, None), OWNER, clock.now())
    before = raw_row(db_path, job_id)
    for name in ("complete", "retry", "fail"):
        assert _transition(name, queue.store, job_id, job.attempts, OWNER, clock.now()) is False
    assert raw_row(db_path, job_id) == before


def test_release_owner_counts_the_attempt_or_fails(queue, clock):
    a = queue.enqueue("t", priority=2, max_attempts=1)
    b = queue.enqueue("t", priority=1)
    claim_one(queue.store, clock)
    claim_one(queue.store, clock)
    out = {
        r.id: r
        for r in queue.store.release_owner(
            OWNER, "worker died", clock.now(), max_attempts_for=lambda j: j.max_attempts or 3
        )
    }
    assert out[a].status == "failed" and out[b].status == "pending"
    assert queue.get(a).error == "worker died"
    assert queue.get(b).attempts == 1 and queue.get(b).owner is None


def test_heartbeat_refreshes_only_the_owners_jobs(queue, clock):
    mine = queue.enqueue("t", priority=1)
    theirs = queue.enqueue("t")
    claim_one(queue.store, clock, OWNER)
    claim_one(queue.store, clock, OTHER)
    clock.advance(10)
    assert queue.store.heartbeat(OWNER, clock.now()) == 1
    assert queue.get(mine).heartbeat_at == iso(clock.now())
    assert queue.get(theirs).heartbeat_at == iso(clock.now() - 10)
    assert [j.id for j in queue.store.running() if j.owner == OWNER] == [mine]
    assert sorted({j.owner for j in queue.store.running()}) == sorted([OWNER, OTHER])


def test_heartbeat_reads_a_clock_function_inside_its_write_transaction(queue, clock):
    """A beat that waits for the write lock records the time it got it, not the time it asked:
    a clock function is read only once ``BEGIN IMMEDIATE`` holds the lock."""
    mine = queue.enqueue("t")
    claim_one(queue.store, clock, OWNER)
    seen = []

    def now():
        seen.append(queue.store.conn.in_transaction)
        return clock.now() + 7

    assert queue.store.heartbeat(OWNER, now) == 1
    assert seen == [True]
    assert queue.get(mine).heartbeat_at == iso(clock.now() + 7)


def test_process_rows(queue, clock):
    s = queue.store
    s.register_process(OWNER, "worker", 1111, "testhost", clock.now(), slot=0, parent="sup")
    clock.advance(3)
    s.touch_process(OWNER, clock.now())
    rows = s.processes("worker")
    assert len(rows) == 1 and rows[0]["heartbeat_at"] == iso(clock.now()) and rows[0]["slot"] == 0
    s.remove_process(OWNER)
    assert s.processes() == []


# -- locking contract -------------------------------------------------------------------------------


@contextmanager
def write_lock_held(path, hold=0.3):
    """Another connection holds the write lock (``BEGIN IMMEDIATE``) for ``hold`` seconds.

    Yields an Event set just before that connection commits: an operation that returns
    successfully while it is unset did not wait for the lock.
    """
    locked, releasing, errors = threading.Event(), threading.Event(), []

    def holder():
        try:
            c = sqlite3.connect(path, isolation_level=None, timeout=5)
            c.execute("BEGIN IMMEDIATE")
            locked.set()
            time.sleep(hold)  # the lock-holding period itself, not synchronisation
            releasing.set()
            c.execute("COMMIT")
            c.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            locked.set()

    t = threading.Thread(target=holder, daemon=True)
    t.start()
    assert locked.wait(10), "the lock holder did not start"
    try:
        yield releasing
    finally:
        t.join(10)
    assert not errors, errors


def _new(i, key=None):
    return NewJob(
        id=f"{i:032x}",
        type="t",
        payload="{}",
        priority=0,
        run_at=1_767_225_600.0,
        max_attempts=None,
        key=key,
    )


WRITES = {
    "enqueue_one": lambda s, now: s.enqueue([_new(1001)], now),
    "enqueue_keyed": lambda s, now: s.enqueue([_new(1002, key="k")], now),
    "enqueue_many": lambda s, now: s.enqueue([_new(1003), _new(1004, key="k2"), _new(1005)], now),
    "claim": lambda s, now: s.claim(OWNER, 1, now, 2),
    "complete": lambda s, now: s.finish(Finish("completed", "a" * 32, 1, None), OWNER, now),
    "retry": lambda s, now: s.finish(Finish("retry", "a" * 32, 1, "e", now, 3), OWNER, now),
    "fail": lambda s, now: s.finish(Finish("failed", "a" * 32, 1, "e", 0.0, 3), OWNER, now),
    "heartbeat": lambda s, now: s.heartbeat(OWNER, now),
    "release_owner": lambda s, now: s.release_owner(
        OWNER, "gone", now, max_attempts_for=lambda j: 3
    ),
    "set_paused": lambda s, now: s.set_paused(False),
    "register_process": lambda s, now: s.register_process(OTHER, "worker", 2, "h", now),
    "touch_process": lambda s, now: s.touch_process(OWNER, now),
    "remove_process": lambda s, now: s.remove_process(OWNER),
    # Newer write paths, checked when this version of the store has them.
    "finish_and_claim": lambda s, now: s.finish_and_claim(
        [store_mod.Finish("completed", "a" * 32, 1, None)], OWNER, 1, now, 2
    ),
    "release_unstarted": lambda s, now: s.release_unstarted(OWNER, ["a" * 32], now),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_wait_for_the_write_lock_instead_of_failing(db_path, clock, name):
    """A read-then-write in a deferred transaction gets SQLITE_BUSY at once, without consulting
    the busy timeout; a single statement or BEGIN IMMEDIATE waits. Retries are disabled so only
    the busy timeout can make the write succeed."""
    if name in ("finish_and_claim", "release_unstarted") and not hasattr(SqliteStore, name):
        pytest.skip(f"this store has no {name}()")
    with SqliteStore(db_path) as s:
        s.enqueue([_new(0xA, key=None)], clock.now())
        s.conn.execute("UPDATE jobs SET id = ? WHERE id = ?", ("a" * 32, f"{0xA:032x}"))
        s.enqueue([_new(0xB)], clock.now())
        assert len(s.claim(OWNER, 1, clock.now(), 1)) == 1  # 'a'*32 is running under OWNER
        s.register_process(OWNER, "worker", 1, "h", clock.now())
        s.busy_retries = 0
        with write_lock_held(db_path) as releasing:
            WRITES[name](s, clock.now())
            assert releasing.is_set(), "the write returned while another connection held the lock"
        assert not s.conn.in_transaction


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_claim_releases_the_write_lock(queue, clock, db_path, limit):
    """An unread RETURNING cursor keeps the write lock and hides the change."""
    ids = [queue.enqueue("t", i) for i in range(5)]
    jobs = queue.store.claim(OWNER, 1, clock.now(), limit)
    assert len(jobs) == min(limit, 5)
    assert write_lock_free(db_path)
    with sqlite3.connect(db_path) as other:  # the change is visible to other connections
        running = other.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()[0]
    assert running == len(jobs)
    assert set(ids) >= {j.id for j in jobs}


def test_empty_claim_releases_the_write_lock(queue, clock, db_path):
    assert queue.store.claim(OWNER, 1, clock.now(), 1) == []
    assert write_lock_free(db_path)


def test_keyed_enqueue_releases_the_write_lock(queue, db_path):
    queue.enqueue("t", key="k")
    assert write_lock_free(db_path)
    queue.enqueue("t", key="k")  # the conflict path: RETURNING gives nothing, then a SELECT
    assert write_lock_free(db_path)


def test_reads_leave_no_transaction_open(queue, clock, db_path):
    queue.enqueue("t")
    s = queue.store
    s.get("x"), s.counts(), s.running(), s.is_paused(), s.processes()
    assert not s.conn.in_transaction
    assert write_lock_free(db_path)


def test_checkpoint_truncates_the_wal(queue):
    queue.enqueue_many([("t", i) for i in range(500)])
    assert queue.store.wal_bytes() > 0
    busy, _, _ = queue.store.checkpoint()
    assert busy == 0
    assert queue.store.wal_bytes() == 0
    assert queue.counts() == {"pending": 500}


def test_job_from_row_round_trip(queue):
    job = queue.get(queue.enqueue("t", [1, "x"]))
    assert isinstance(job, Job)
    assert job.attempt == job.attempts == 0
    assert datetime.fromtimestamp(parse_iso(job.created_at), timezone.utc).year == 2026
