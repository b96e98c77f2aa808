"""The store contract suite, in the manner of Huey's storage tests: every method of
every protocol in ``shared.engines.contract``, run against each engine fixture of ``tests.engines``
through the factory, and nothing engine-specific. ``test_every_protocol_method_is_exercised``
keeps the suite honest: a method added to a protocol without a test here fails it.
"""

from __future__ import annotations

import dataclasses

import inspect
import re
import select
from pathlib import Path

import pytest

from shared import ops
from shared.engines import contract
from shared.engines.opsaccess import OpsAccess
from shared.engines.reads import Reads
from shared.runtime.clock import FakeClock, iso
from shared.settings.config import Config, ScheduleConfig
from shared.engines import open_store, upkeep_tasks
from shared.model.errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
from shared.model.job import Finish, NewJob, new_id
from shared.model.limits import TypeLimit
from shared.model.uniqueness import unique_scope
from shared.settings.schedule import fingerprint, plan
from tests.proc import wait_until

OWNER, PID = "host:4242:1", 4242
OTHER = "host:4343:1"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(engine):
    with engine.open() as s:
        yield s


def job(
    clock: FakeClock,
    job_type: str = "t",
    *,
    delay: float = 0.0,
    priority: int = 0,
    key: str | None = None,
    max_attempts: int | None = None,
    payload: str = "{}",
) -> NewJob:
    return NewJob(new_id(), job_type, payload, priority, clock.now() + delay, max_attempts, key)


def put(store, clock, *jobs: NewJob) -> list[str]:
    return store.enqueue(list(jobs) or [job(clock)], clock.now())


def run(store, clock, n: int = 1, owner: str = OWNER):
    return store.claim(owner, PID, clock.now(), n)


def complete(store, clock, j, owner: str = OWNER, result: str | None = '"ok"') -> bool:
    return store.finish_and_claim(
        [Finish("completed", j.id, j.attempts, result)], owner, PID, clock.now(), 0
    )[0][0]


# -- connection ---------------------------------------------------------------------------------------


def test_a_store_names_its_database_and_closes(engine):
    s = engine.open()
    assert s.location and not s.closed
    with s as same:
        assert same is s
    assert s.closed
    s.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        s.get("x")


def test_a_failed_statement_on_a_working_connection_is_not_an_outage(store, clock):
    """A statement the database refuses (a missing table, a constraint) is StoreQueryError,
    never StoreUnavailable (what a caller retries on), and the connection goes on working."""
    with pytest.raises(StoreQueryError, match="no_such_table") as err:
        store.read("SELECT * FROM no_such_table")
    assert not isinstance(err.value, StoreUnavailable) and err.value.cause is not None
    with pytest.raises(StoreQueryError, match=store.location.split("?")[0]):
        store.write("INSERT INTO jobs (id) VALUES (NULL)")
    assert put(store, clock) and store.counts() == {"pending": 1}


def test_a_store_for_another_thread_works_there_and_closes_alone(store, clock):
    import threading

    got: list = []

    def borrow() -> None:
        other = store.for_thread()
        got.append(other.enqueue([job(clock)], clock.now()))
        other.close()
        got.append(other.closed)

    t = threading.Thread(target=borrow)
    t.start()
    t.join(10)
    assert got[1:] == [True] and not store.closed
    assert store.get(got[0][0]).status == "pending"


def test_every_path_that_ends_an_attempt_records_it_once(store, clock):
    """Completions (one, and a batch), retries, failures and a dead owner's release each leave
    one history row with the attempt's times and owner; a claim given back leaves none."""
    due = clock.now()
    ids = put(store, clock, *[job(clock) for _ in range(7)])
    a, b = run(store, clock, 2)
    clock.advance(1)
    ok, _ = store.finish_and_claim(
        [Finish("completed", a.id, 1, None), Finish("completed", b.id, 1, '"r"')],
        OWNER,
        PID,
        clock.now(),
        0,
    )
    c, d, e = run(store, clock, 3)
    ok2, _ = store.finish_and_claim(
        [
            Finish("retry", c.id, 1, "again", clock.now() + 60, 3),
            Finish("failed", d.id, 1, "boom", 0.0, 3),
        ],
        OWNER,
        PID,
        clock.now(),
        0,
    )
    assert store.release_unstarted(OWNER, [e.id], clock.now()) == 1
    f = run(store, clock, 1, owner=OTHER)[0]
    store.release_owner(OTHER, "gone", clock.now(), max_attempts_for=lambda j: 3)
    assert ok == [True, True] and ok2 == [True, True]
    seen = {
        i: [(h["attempt"], h["outcome"], h["owner"]) for h in ops.attempt_history(store, i)]
        for i in ids
    }
    assert seen[a.id] == seen[b.id] == [(1, "completed", OWNER)]
    assert seen[c.id] == [(1, "retry", OWNER)] and seen[d.id] == [(1, "failed", OWNER)]
    assert seen[e.id] == [] and seen[f.id] == [(1, "retry", OTHER)]
    [h] = ops.attempt_history(store, d.id)
    assert h["due_at"] == iso(due) and h["ended_at"] == iso(clock.now()) and h["error"] == "boom"
    assert ops.attempt_history(store, a.id)[0]["error"] is None


def test_an_unknown_engine_and_an_unreachable_server_are_clear_errors():
    with pytest.raises(
        StoreUnavailable, match=r"database postgresql://jobq:\*\*\*@db.invalid/jobq: "
    ) as err:
        open_store(Config(database="postgresql://jobq:secret@db.invalid/jobq"))
    assert "secret" not in str(err.value)
    with pytest.raises(StoreUnavailable, match="refused"):
        open_store(Config(database="postgres://jobq:secret@127.0.0.1:1/jobq"))
    with pytest.raises(StoreUnavailable, match="unknown engine 'mysql'"):
        open_store(Config(database="mysql://x/y"))


def test_a_missing_folder_is_store_unavailable_naming_it(tmp_path: Path):
    missing = tmp_path / "nope" / "q.db"
    with pytest.raises(StoreUnavailable, match=f"database {missing}.*does not exist"):
        open_store(Config(database=str(missing)))


# -- producer -----------------------------------------------------------------------------------------


def test_enqueue_flow_and_parents(store, clock):
    """A graph in one call: a child waits for its parents (existing ones and earlier ones of the
    call), its parents read back in the order given; an unknown parent writes nothing."""
    (root,) = put(store, clock, job(clock))
    mid = dataclasses.replace(job(clock), after=(root,))
    leaf = dataclasses.replace(job(clock, "u"), after=(mid.id, root), after_failure="run")
    assert store.enqueue_flow([mid, leaf], clock.now()) == [mid.id, leaf.id]
    assert [store.get(i).status for i in (root, mid.id, leaf.id)] == [
        "pending",
        "waiting",
        "waiting",
    ]
    assert [(p["id"], p["status"], p["done"]) for p in store.parents(leaf.id)] == [
        (mid.id, "waiting", 0),
        (root, "pending", 0),
    ]
    assert store.parents(root) == [] and store.counts()["waiting"] == 2
    with pytest.raises(ValueError, match="not found"):
        store.enqueue_flow([dataclasses.replace(job(clock), after=("nope",))], clock.now())
    [claimed] = store.claim(OWNER, PID, clock.now())
    assert claimed.id == root
    store.finish(Finish("completed", root, 1, '"r"'), OWNER, clock.now())
    assert store.get(mid.id).status == "pending" and store.get(leaf.id).status == "waiting"
    assert store.parents(leaf.id)[1]["result"] == '"r"' and store.parents(leaf.id)[1]["done"] == 1


def test_enqueue_get_and_counts(store, clock):
    a, b = put(
        store, clock, job(clock, payload='{"n": 1}'), job(clock, "u", delay=5, max_attempts=2)
    )
    got = store.get(a)
    assert (got.id, got.type, got.status, got.payload, got.attempts) == (
        a,
        "t",
        "pending",
        {"n": 1},
        0,
    )
    assert got.run_at == got.created_at == iso(clock.now())  # a Job shows times as ISO text
    assert store.get(b).run_at == iso(clock.now() + 5) and store.get(b).max_attempts == 2
    assert store.get("missing") is None
    # an id as jobq writes it or nothing, on every engine (a uuid column would read upper case)
    assert store.get(a.upper()) is None and store.get("") is None
    assert store.counts() == {"pending": 2}


def test_a_taken_key_returns_the_kept_job(store, clock):
    first = put(store, clock, job(clock, key="k"))[0]
    assert put(store, clock, job(clock, key="k"), job(clock))[0] == first
    assert store.counts() == {"pending": 2}


def test_a_key_held_outside_a_scope_is_freed_for_the_new_job(store, clock):
    """A keyed job with a ``unique`` scope joins a kept job of its key inside the scope, and
    takes the key from one outside it (the old job's key becomes NULL), on every enqueue path:
    one job, a batch, a workflow, counts unchanged by the move."""
    pending = unique_scope("pending")
    first = put(store, clock, dataclasses.replace(job(clock, key="k"), unique=pending))[0]
    again = dataclasses.replace(job(clock, key="k"), unique=pending)
    assert put(store, clock, again, job(clock))[0] == first
    assert [j.id for j in run(store, clock)] == [first]
    batch = [dataclasses.replace(job(clock, key="k"), unique=pending), job(clock, key="z")]
    new = put(store, clock, *batch)[0]
    assert new == batch[0].id and store.get(first).key is None and store.get(new).key == "k"
    assert store.counts() == {"pending": 3, "running": 1}
    clock.advance(30)
    timed = dataclasses.replace(job(clock, key="k"), unique=unique_scope(10))
    assert store.enqueue_flow([dataclasses.replace(timed, after=(first,))], clock.now()) == [
        timed.id
    ]
    assert store.get(new).key is None and store.get(timed.id).key == "k"
    kept = dataclasses.replace(job(clock, key="k"), unique=unique_scope("kept"))
    assert put(store, clock, kept) == [timed.id]


def test_pause_stops_claims_and_resume_restarts_them(store, clock):
    put(store, clock)
    store.set_paused(True)
    assert store.is_paused() and run(store, clock) == []
    store.set_paused(False)
    assert not store.is_paused() and len(run(store, clock)) == 1


# -- worker -------------------------------------------------------------------------------------------


def test_claim_order_priority_then_due_then_created(store, clock):
    low, high = put(store, clock, job(clock, priority=0), job(clock, priority=5))
    later = put(store, clock, job(clock, delay=10))[0]
    assert [j.id for j in run(store, clock)] == [high]
    got = run(store, clock, 3) + [j for j in store.running() if j.owner == OWNER]
    assert {j.id for j in got} == {high, low}
    assert all(j.status == "running" and j.attempts == 1 and j.owner == OWNER for j in got)
    clock.advance(10)
    assert [j.id for j in run(store, clock)] == [later]


def test_a_claimed_batch_comes_in_claim_order(store, clock):
    """A batch is run front to back: whatever order the engine updated the rows in (SQLite's
    RETURNING follows rowid), the batch lists the highest priority first, on every claim path."""
    low, high, middle = put(
        store, clock, job(clock, priority=-50), job(clock, priority=90), job(clock, priority=5)
    )
    assert [j.id for j in run(store, clock, 3)] == [high, middle, low]
    more = put(
        store, clock, job(clock, priority=-50), job(clock, priority=90), job(clock, priority=5)
    )
    _, got = store.finish_and_claim([], OWNER, PID, clock.now(), 3)
    assert [j.id for j in got] == [more[1], more[2], more[0]]


def test_finish_and_claim_records_outcomes_guarded_and_claims_more(store, clock):
    ids = put(store, clock, job(clock), job(clock), job(clock), job(clock))
    a, b, c = run(store, clock, 3)
    finishes = [
        Finish("completed", a.id, a.attempts, '"r"'),
        Finish("retry", b.id, b.attempts, "boom", clock.now() + 30, 3),
        Finish("failed", c.id, c.attempts, "bad", 0.0, 3),
        Finish("completed", c.id, c.attempts + 1, None),
    ]  # a stale attempt: refused
    done, more = store.finish_and_claim(finishes, OWNER, PID, clock.now(), 2)
    assert done == [True, True, True, False]
    assert [j.id for j in more] == [ids[3]]
    assert store.get(a.id).status == "completed" and store.get(a.id).result == "r"
    again = store.get(b.id)
    assert (again.status, again.error, again.run_at) == ("pending", "boom", iso(clock.now() + 30))
    assert store.get(c.id).status == "failed" and store.get(c.id).error == "bad"
    assert store.finish_and_claim([], OWNER, PID, clock.now(), 0) == ([], [])


def test_finish_and_claim_with_types_claims_only_those_types(store, clock):
    """The async runner's claim (worker.aio): only jobs of the async types, with its outcomes."""
    put(
        store,
        clock,
        job(clock, "sync"),
        job(clock, "a"),
        job(clock, "sync"),
        job(clock, "b"),
        job(clock, "a"),
    )
    done, got = store.finish_and_claim([], OWNER, PID, clock.now(), 2, {}, types=["a", "b"])
    assert done == [] and [j.type for j in got] == ["a", "b"]
    first = got[0]
    done, more = store.finish_and_claim(
        [Finish("completed", first.id, first.attempts, None)],
        OWNER,
        PID,
        clock.now(),
        5,
        None,
        types=["a"],
    )
    assert done == [True] and [j.type for j in more] == ["a"]
    assert store.get(first.id).status == "completed"
    assert store.finish_and_claim([], OWNER, PID, clock.now(), 5, None, types=["a", "b"]) == (
        [],
        [],
    )
    assert sorted(j.type for j in run(store, clock, 5)) == ["sync", "sync"]


def test_another_owner_cannot_finish_a_job(store, clock):
    put(store, clock)
    j = run(store, clock)[0]
    assert not complete(store, clock, j, owner=OTHER)
    assert store.get(j.id).status == "running"


def test_limited_claims_keep_concurrency_and_rate(store, clock):
    put(store, clock, *[job(clock, "c") for _ in range(3)], *[job(clock, "r") for _ in range(3)])
    limits = {"c": TypeLimit("c", concurrency=1), "r": TypeLimit("r", rate=(1, 60.0))}
    got = store.claim_limited(OWNER, PID, clock.now(), limits, 10)
    assert sorted(j.type for j in got) in (["c"], ["c", "r"], ["r"])
    got += store.claim_limited(OWNER, PID, clock.now(), limits, 10)
    assert sorted(j.type for j in got) == ["c", "r"]
    assert store.claim_limited(OWNER, PID, clock.now(), limits, 10) == []
    _, more = store.finish_and_claim([], OWNER, PID, clock.now() + 61, 5, limits)
    assert [j.type for j in more] == ["r"]


def test_release_unstarted_gives_the_attempt_back(store, clock):
    put(store, clock, job(clock), job(clock))
    a, b = run(store, clock, 2)
    assert store.release_unstarted(OWNER, [b.id], clock.now()) == 1
    assert store.release_unstarted(OWNER, [], clock.now()) == 0
    back = store.get(b.id)
    assert (back.status, back.attempts, back.owner) == ("pending", 0, None)
    assert store.get(a.id).status == "running"


def renewed_at(engine, clock) -> str | None:
    """What a lease renewed now reads as: the caller's time on an engine that takes it (SQLite),
    None for an engine that keeps leases on its server's clock (checked as "not earlier")."""
    return iso(clock.now()) if engine.name == "sqlite" else None


def test_heartbeat_refreshes_leases_and_the_process_row(engine, store, clock):
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=0, parent="sup")
    put(store, clock)
    run(store, clock)
    before = store.running()[0].heartbeat_at
    clock.advance(7)
    assert store.heartbeat(OWNER, clock.now) == 1
    lease, row = store.running()[0].heartbeat_at, store.processes("worker")[0]["heartbeat_at"]
    assert lease >= before and row >= before
    assert renewed_at(engine, clock) in (None, lease) and renewed_at(engine, clock) in (None, row)
    assert store.heartbeat(OTHER, clock.now()) == 0


def test_a_heartbeat_renews_only_the_jobs_held_and_gives_back_the_rest(engine, store, clock):
    """A claim whose answer never reached the worker leaves a job running
    under its owner. The heartbeat renews only the ids the worker holds; the owner's other
    running jobs go back to pending at once (due now, no attempt charged, no history row)
    instead of being kept alive until ``job_timeout`` and charged "timed out"."""
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=0)
    put(store, clock, job(clock), job(clock), job(clock), job(clock))
    a, b, lost = run(store, clock, 3)
    theirs = run(store, clock, owner=OTHER)[0]
    before = store.get(a.id).heartbeat_at
    clock.advance(7)
    assert store.heartbeat(OWNER, clock.now, holding=[a.id, b.id]) == 2
    back = store.get(lost.id)
    assert (back.status, back.attempts, back.owner, back.heartbeat_at) == ("pending", 0, None, None)
    assert back.run_at == iso(clock.now()) and ops.attempt_history(store, lost.id) == []
    for held in (a, b):
        renewed = store.get(held.id)
        assert (renewed.status, renewed.attempts, renewed.owner) == ("running", 1, OWNER)
        assert renewed.heartbeat_at >= before and renewed_at(engine, clock) in (
            None,
            renewed.heartbeat_at,
        )
    assert store.get(theirs.id).status == "running"  # another owner's job is not ours to give back
    again = run(store, clock)[0]
    assert (again.id, again.attempts) == (lost.id, 1)
    assert (
        store.heartbeat(OWNER, clock.now, holding=[a.id, b.id, again.id]) == 3
    )  # nothing given back
    assert store.heartbeat(OWNER, clock.now(), holding=[]) == 0  # holding none: all of them back
    assert {store.get(i).status for i in (a.id, b.id, again.id)} == {"pending"}
    assert store.get(theirs.id).status == "running"


def test_lease_ages_are_of_running_jobs_and_process_rows(store, clock):
    """Seconds since each lease (and process row) was renewed, on the engine's clock: SQLite
    takes the caller's ``now``, a server engine its own clock (so only bounds are checked)."""
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=0)
    a, b, _ = put(store, clock, job(clock), job(clock), job(clock, delay=60))
    ja, jb = run(store, clock, 2)
    assert complete(store, clock, jb)
    clock.advance(5)
    ages = store.lease_ages(clock.now())
    assert set(ages) == {ja.id} and 0 <= ages[ja.id] < 60
    assert store.heartbeat(OWNER, clock.now) == 1
    assert 0 <= store.lease_ages(clock.now())[ja.id] <= ages[ja.id]
    procs = store.process_ages(clock.now())
    assert set(procs) == {OWNER} and 0 <= procs[OWNER] < 60
    assert store.lease_ages(clock.now()) and complete(store, clock, ja)
    assert store.lease_ages(clock.now()) == {}


def test_a_supervisors_touch_renews_its_workers_rows_too(store, clock):
    """A supervisor's touch renews its own row and its children's (``parent`` its token), not
    another supervisor's workers': its idle workers need not beat for their rows."""
    store.register_process("host:1:1", "supervisor", 1, "host", clock.now())
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=0, parent="host:1:1")
    store.register_process(OTHER, "worker", 4343, "host", clock.now(), slot=0, parent="host:2:1")
    store.write("UPDATE processes SET heartbeat_at = :t", {"t": iso(1.0)})  # (1970)
    store.touch_process("host:1:1", clock.now())
    ages = store.process_ages(clock.now())
    assert {p for p, age in ages.items() if age < 3600} == {"host:1:1", OWNER}


def test_running_groups_sum_up_the_running_jobs_per_owner_and_type(store, clock):
    """One row per owner and type: how many run, the first start, the oldest lease (on the
    engine's clock: bounds only) and the cancels asked; nothing when nothing runs."""
    assert store.running_groups(clock.now()) == []
    put(store, clock, job(clock, "a"), job(clock, "a"), job(clock, "b"), job(clock, "a"))
    mine = run(store, clock, 3)
    clock.advance(2)
    (theirs,) = run(store, clock, 1, owner=OTHER)
    ops.cancel_jobs(store, [theirs.id], clock.now())
    clock.advance(3)
    groups = {(g.owner, g.type): g for g in store.running_groups(clock.now())}
    by_key: dict = {}
    for j in mine + [theirs]:
        by_key.setdefault((j.owner, j.type), []).append(j)
    assert {k: g.jobs for k, g in groups.items()} == {k: len(v) for k, v in by_key.items()}
    assert all(g.first_start == min(j.started_at for j in by_key[k]) for k, g in groups.items())
    assert {k: g.cancels for k, g in groups.items()} == {
        k: int(k == (OTHER, theirs.type)) for k in by_key
    }
    assert all(0 <= g.oldest_lease < 60 for g in groups.values())
    for j in mine:
        assert complete(store, clock, j)
    assert [(g.owner, g.jobs) for g in store.running_groups(clock.now())] == [(OTHER, 1)]


def test_has_due_and_next_due_are_numbers(store, clock):
    assert not store.has_due(clock.now()) and store.next_due() is None
    put(store, clock, job(clock, delay=30))
    assert not store.has_due(clock.now())
    assert store.next_due() == pytest.approx(clock.now() + 30, abs=1e-3)
    assert store.has_due(clock.now() + 30)


def test_the_idle_read_answers_has_due_and_next_due_at_once(store, clock):
    assert store.idle_read(clock.now()) == (False, None)
    put(store, clock, job(clock, delay=30))
    due, nxt = store.idle_read(clock.now())
    assert not due and nxt == pytest.approx(clock.now() + 30, abs=1e-3)
    assert store.idle_read(clock.now() + 30)[0] is True


def test_process_registry(engine, store, clock):
    store.register_process("sup", "supervisor", 1, "host", clock.now())
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=1, parent="sup")
    assert [p["id"] for p in store.processes()] == ["sup", OWNER]
    assert [p["slot"] for p in store.processes("worker")] == [1]
    before = store.processes("supervisor")[0]["heartbeat_at"]
    clock.advance(3)
    store.touch_process("sup", clock.now())
    touched = store.processes("supervisor")[0]["heartbeat_at"]
    assert touched >= before and renewed_at(engine, clock) in (None, touched)
    store.remove_process(OWNER)
    assert [p["id"] for p in store.processes()] == ["sup"]


def test_a_wakeup_reports_commits_and_hands_the_lead_on(engine, store, clock):
    wake = store.wakeup()
    try:
        fd, timeout = wake.prepare(clock.now(), 0.5)
        if (fd, timeout) == (
            None,
            0.0,
        ):  # claim first (PostgreSQL: a new lead LISTENs, then claims once)
            assert wake.woke(False) is True and run(store, clock) == []
            fd, timeout = wake.prepare(clock.now(), 0.5)
        assert timeout > 0
        wake.before_claim()
        with engine.open() as producer:
            put(producer, clock)
        if fd is not None:
            assert select.select([fd], [], [], 5)[0] == [fd]
        assert wake.woke(fd is not None) is (fd is not None)
        wake.before_claim()
        jobs = wake.fast_claim(OWNER, PID, clock.now, 1)
        if jobs is None:  # an engine without a faster claim: the ordinary one
            jobs = run(store, clock)
        assert len(jobs) == 1
        wake.claimed()
        assert wake.prepare(clock.now(), 0.5)[1] <= max(0.5, 5.0)
    finally:
        wake.close()


def test_a_store_locked_past_every_retry_raises_store_busy(engine, clock):
    with engine.open(impatient=True) as s, engine.locked():
        with pytest.raises(StoreBusy, match=re.escape(f"database {s.location}")):
            put(s, clock)


# -- upkeep -------------------------------------------------------------------------------------------


def test_running_lists_every_owners_running_jobs(store, clock):
    put(store, clock, job(clock), job(clock), job(clock))
    a = run(store, clock)[0]
    clock.advance(1)
    b = run(store, clock, owner=OTHER)[0]
    assert [j.id for j in store.running()] == [a.id, b.id]  # the first started first
    assert [j.id for j in store.running() if j.owner == OTHER] == [b.id]


def test_release_owner_requeues_or_fails_by_attempts(store, clock):
    ids = put(
        store,
        clock,
        job(clock, max_attempts=1),
        job(clock, max_attempts=3),
        job(clock, max_attempts=3),
    )
    jobs = {j.id: j for j in run(store, clock, 3)}
    out = store.release_owner(
        OWNER,
        "worker died",
        clock.now(),
        max_attempts_for=lambda j: j.max_attempts,
        unstarted=[ids[2]],
    )
    by_id = {r.id: r for r in out}
    assert (by_id[ids[0]].status, by_id[ids[0]].attempts) == ("failed", 1)
    assert (by_id[ids[1]].status, by_id[ids[1]].attempts) == ("pending", 1)
    assert (by_id[ids[2]].status, by_id[ids[2]].attempts) == ("pending", 0)
    assert store.get(ids[0]).error == "worker died" and len(jobs) == 3
    put(store, clock)
    j = run(store, clock)[0]
    assert (
        store.release_owner(
            OWNER, "shutdown", clock.now(), max_attempts_for=lambda j: 3, count_attempt=False
        )[0].attempts
        == j.attempts - 1
    )


def test_one_supervisor_at_a_time_holds_the_upkeep_lead(store, clock):
    """``lead_upkeep`` is a lease: the holder renews it, the others are refused while it is
    fresh; given up, the next caller takes it at once; not renewed for ``hold`` seconds (on the
    engine's lease clock: SQLite the caller's, a server its own, hence the wait), it is taken."""
    assert store.lead_upkeep(OWNER, clock.now(), 30.0)
    assert not store.lead_upkeep(OTHER, clock.now(), 30.0)
    clock.advance(10)
    assert store.lead_upkeep(OWNER, clock.now(), 30.0)  # renewed
    assert not store.lead_upkeep(OTHER, clock.now(), 30.0)
    assert not store.lead_upkeep(OTHER, clock.now(), 0)  # not OTHER's to give up: a no-op
    assert not store.lead_upkeep(OTHER, clock.now(), 30.0)
    assert not store.lead_upkeep(OWNER, clock.now(), 0)  # given up
    assert store.lead_upkeep(OTHER, clock.now(), 30.0)
    assert not store.lead_upkeep(OWNER, clock.now(), 30.0)
    clock.advance(1)
    wait_until(lambda: store.lead_upkeep(OWNER, clock.now(), 0.3), what="the lapsed lead taken")
    assert not store.lead_upkeep(OTHER, clock.now(), 30.0)


def test_an_upkeep_lead_that_is_not_a_time_is_taken(store, clock):
    """A lead row written around jobq (its value not a time and a token) counts as lapsed."""
    store.write("INSERT INTO control (name, value) VALUES ('upkeep_lead', 'junk')")
    assert store.lead_upkeep(OWNER, clock.now(), 30.0)
    assert not store.lead_upkeep(OTHER, clock.now(), 30.0)


def test_schedule_marks_and_run_schedule_enqueue_each_tick_once(store, clock):
    spec = ScheduleConfig(name="s", type="t", cron="* * * * *")
    fp = fingerprint(spec)
    assert store.schedule_marks() == {}
    assert store.run_schedule("s", fp, clock.now(), plan(spec, clock.now())) is None  # anchored
    assert store.schedule_marks()["s"].last_tick == pytest.approx(clock.now(), abs=1e-3)
    clock.advance(61)
    ids = store.run_schedule("s", fp, clock.now(), plan(spec, clock.now()))
    assert len(ids) == 1 and store.get(ids[0]).type == "t"
    assert store.run_schedule("s", fp, clock.now(), plan(spec, clock.now())) == []


class CountingChunks:
    """A pacer of ``rows`` jobs per chunk that counts its chunks (each one transaction of the
    engine's, as its own pacer runs them)."""

    def __init__(self, rows: int) -> None:
        self.rows, self.chunks = rows, 0

    def chunk(self, store, fn):
        self.chunks += 1
        return store._paced(lambda c: fn(c, self.rows))


def finished(store, clock, n: int, outcome: str = "completed") -> list[str]:
    """``n`` jobs ended with ``outcome`` (completed, failed or cancelled) now."""
    ids = put(store, clock, *[job(clock, max_attempts=1) for _ in range(n)])
    for j in run(store, clock, n):
        kind = "failed" if outcome == "failed" else "completed"
        assert store.finish_and_claim(
            [Finish(kind, j.id, j.attempts, '"x"')], OWNER, PID, clock.now(), 0
        )[0] == [True]  # (a result is JSON)
    return ids


def test_purge_finished_deletes_what_ended_before_its_cutoff_with_its_history(store, clock):
    old_done, old_failed = finished(store, clock, 5), finished(store, clock, 2, "failed")
    clock.advance(100)
    new_done = finished(store, clock, 2)
    waiting = put(store, clock, job(clock), job(clock, delay=3600))
    held = run(store, clock)[0]
    cuts = {"completed": clock.now() - 50, "failed": None, "cancelled": clock.now() - 50}
    pacer = CountingChunks(3)
    assert store.purge_finished(cuts, pacer=pacer) == {"completed": 5, "failed": 0, "cancelled": 0}
    assert pacer.chunks == 4  # 12 jobs, 3 looked at per transaction
    assert all(store.get(i) is None for i in old_done) and store.export_attempts(old_done) == []
    assert [store.get(i).status for i in old_failed + new_done] == ["failed"] * 2 + [
        "completed"
    ] * 2
    assert store.get(held.id).status == "running" and store.get(waiting[1]).status == "pending"
    assert len(store.export_attempts(old_failed)) == 2
    assert store.purge_finished({**cuts, "failed": clock.now()}) == {
        "completed": 0,
        "failed": 2,
        "cancelled": 0,
    }


def test_purge_finished_lets_another_thread_of_the_process_in_between_its_chunks(store, clock):
    """The worker's heartbeat thread shares the store (``for_thread``: one connection taking
    turns on some engines): it must get its turn while a long purge runs, not after it."""
    import threading

    finished(store, clock, 4)
    clock.advance(10)
    store.register_process(OWNER, "worker", PID, "host", clock.now())
    beats: list[bool] = []

    class BeatBetweenChunks(CountingChunks):
        def chunk(self, s, fn):
            def beat() -> None:
                other = store.for_thread()
                other.touch_process(OWNER, clock.now())
                other.close()
                beats.append(True)

            t = threading.Thread(target=beat)
            t.start()
            t.join(20)  # a purge holding the store's turn would keep the beat waiting: deadlock
            assert not t.is_alive(), "the other thread waited for the whole purge"
            return super().chunk(s, fn)

    t_pacer = BeatBetweenChunks(1)
    assert store.purge_finished({"completed": clock.now()}, pacer=t_pacer) == {"completed": 4}
    assert beats == [True] * t_pacer.chunks and t_pacer.chunks >= 4  # a job per chunk


def test_purge_finished_without_a_cutoff_reads_nothing(store, clock):
    finished(store, clock, 2)
    clock.advance(10)
    pacer = CountingChunks(1)
    assert store.purge_finished({"completed": None, "failed": None}, pacer=pacer) == {
        "completed": 0,
        "failed": 0,
    }
    assert pacer.chunks == 0 and store.counts() == {"completed": 2}
    assert store.purge_finished({"completed": clock.now()}, chunk=1) == {"completed": 2}
    assert store.counts() == {}


def test_upkeep_tasks_run_through_a_round(engine, store, clock):
    cfg = engine.config()
    tasks = upkeep_tasks(cfg)
    assert tasks and all(isinstance(t, contract.UpkeepTask) for t in tasks)
    put(store, clock)
    rnd = contract.Round(store, cfg, clock.now(), clock.monotonic() + 3600)
    for t in tasks:
        t.run(rnd)
    assert isinstance(store.stats(), dict) and store.counts() == {"pending": 1}


# -- ops and status -----------------------------------------------------------------------------------


def test_ops_reads(store, clock):
    a, b, _ = put(store, clock, job(clock, "x"), job(clock, "y"), job(clock, "y", delay=60))
    assert ops.counts_by_type(store) == [
        {"type": "x", "status": "pending", "n": 1},
        {"type": "y", "status": "pending", "n": 2},
    ]
    assert ops.scheduled_by_type(store, clock.now()) == {"y": 1}
    assert ops.oldest_due(store, clock.now())["id"] == a
    assert [r["id"] for r in ops.list_jobs(store, "pending", "y")][0] == b
    assert len(ops.list_jobs(store, limit=2)) == 2
    assert ops.find_ids(store, a[:24]) == [a] and ops.find_ids(store, "f" * 32) == []
    assert ops.statuses(store, [a, "missing"]) == {a: "pending"}
    j = run(store, clock)[0]
    store.finish_and_claim(
        [Finish("failed", j.id, j.attempts, "bad", 0.0, 1)], OWNER, PID, clock.now(), 0
    )
    assert [r["id"] for r in ops.recent_failures(store)] == [j.id]
    assert [r["status"] for r in ops.finished_per_minute(store, clock.now() - 60)] == ["failed"]
    assert [h["outcome"] for h in ops.attempt_history(store, j.id)] == ["failed"]
    assert ops.last_attempt_seq(store) >= 1
    assert [r["outcome"] for r in ops.recent_attempts(store, clock.now() - 60, 10)] == ["failed"]
    agg = ops.attempt_aggregates(store, 0, ops.last_attempt_seq(store), [0.5, 1.0])
    assert [(r["type"], r["outcome"], r["n"]) for r in agg] == [(j.type, "failed", 1)]
    assert "wait_le_0" in agg[0] and "run_le_1" in agg[0]


def test_browse_and_activity_reads(store, clock):
    """The dashboard's listing and the activity reads (paging itself: tests/engines/test_browse.py)."""
    ids, made = (
        [],
        sorted(new_id() for _ in range(3)),
    )  # ids in creation order (one millisecond may hold all)
    for i, j in zip(
        made,
        (
            job(clock, "x", key="ka", payload='{"w": "needle"}'),
            job(clock, "y", priority=1),
            job(clock, "x"),
        ),
    ):
        clock.advance(1)
        ids += put(store, clock, dataclasses.replace(j, id=i, run_at=clock.now()))
    a, b, c = ids
    rows, end = ops.browse.browse_jobs(store, None, None, None, None, 2, 10)
    assert [r["id"] for r in rows] == [c, b] and end is None
    assert {"id", "type", "status", "payload", "error", "key", "cursor"} <= set(rows[0])
    rest, _ = ops.browse.browse_jobs(store, None, None, None, rows[-1]["cursor"], 2, 10)
    assert [r["id"] for r in rest] == [a]
    rows, _ = ops.browse.browse_jobs(store, "pending", None, None, None, 5, 10)
    assert [r["id"] for r in rows] == [b, a, c]  # claim order
    rows, end = ops.browse.browse_jobs(
        store, "pending", "x", None, None, 5, 2
    )  # the window ends first
    assert [r["id"] for r in rows] == [a] and end is not None
    assert [r["id"] for r in ops.browse.browse_jobs(store, "pending", "x", None, end, 5, 2)[0]] == [
        c
    ]
    assert [
        r["id"] for r in ops.browse.browse_jobs(store, None, None, "needle", None, 5, 10)[0]
    ] == [a]
    assert [r["id"] for r in ops.browse.find_jobs(store, "ka")] == [a]
    assert [r["id"] for r in ops.browse.find_jobs(store, b[:20].upper(), "pending", "y")] == [b]
    assert (
        ops.job_texts(store, a) == {"payload": '{"w": "needle"}', "result": None}
        and ops.job_texts(store, "no") is None
    )
    assert (
        ops.activity.attempt_seq_bounds(store) == (1, 0)
        and ops.activity.attempt_from(store, 1) is None
    )
    j = run(store, clock)[0]
    assert complete(store, clock, j)
    seq = ops.activity.attempt_seq_bounds(store)[0]
    assert (
        ops.activity.attempt_seq_bounds(store) == (seq, seq)
        and ops.activity.attempt_from(store, 0)["seq"] == seq
    )
    minute = iso(clock.now())[:16]
    assert ops.activity.attempts_per_minute(store, seq - 1, seq) == [
        {"minute": minute, "status": "completed", "n": 1}
    ]
    assert ops.activity.attempts_per_minute(store, 0, since=clock.now() + 1) == []
    assert ops.activity.rate_window_use(store, "x", clock.now() - 60) == 0


def test_worker_rows_and_jobs_without_a_worker(store, clock):
    store.register_process(OWNER, "worker", PID, "host", clock.now(), slot=0)
    put(store, clock, job(clock), job(clock))
    mine = run(store, clock)[0]
    theirs = run(store, clock, owner=OTHER)[0]
    assert [r["job_id"] for r in ops.worker_rows(store)] == [mine.id]
    assert [r["id"] for r in ops.running_without_worker(store)] == [theirs.id]


def test_ops_writes(store, clock):
    a, b, c = put(store, clock, job(clock), job(clock), job(clock))
    assert ops.cancel_jobs(store, [a, a, "missing"], clock.now()) == [a]
    j = run(store, clock)[0]
    store.finish_and_claim(
        [Finish("failed", j.id, j.attempts, "bad", 0.0, 1)], OWNER, PID, clock.now(), 0
    )
    assert ops.retry_jobs(store, [a], clock.now()) == [a]
    assert ops.retry_failed(store, clock.now()) == 1
    assert store.counts() == {"pending": 3}
    assert ops.cancel_jobs(store, [a, b, c], clock.now()) == [a, b, c]
    clock.advance(10)
    assert ops.purge(store, "cancelled", clock.now(), dry_run=True) == 3
    assert ops.purge(store, "cancelled", clock.now()) == 3 and store.counts() == {}
    with pytest.raises(ValueError, match="purge: status"):
        ops.purge(store, "pending", clock.now())
    d, e = put(store, clock, job(clock), job(clock))
    assert ops.cancel_jobs(store, [d], clock.now()) == [d]
    assert ops.purge_jobs(store, [d, e, d, "missing"]) == [d]  # only finished jobs go; e is pending
    assert store.counts() == {"pending": 1}


def test_scale_requests_and_counters(store, clock):
    store.register_process("sup", "supervisor", 1, "host", clock.now())
    assert ops.pending_scale(store, "sup") is None and ops.take_scale_request(store, "sup") is None
    ops.request_scale(store, "sup", 5)
    assert ops.pending_scale(store, "sup") == 5
    assert ops.take_scale_request(store, "sup") == 5 and ops.pending_scale(store, "sup") is None
    ops.save_counters(store, "sup", {"worker_starts": 2})
    assert ops.supervisor_counters(store) == {"sup": {"worker_starts": 2}}
    store.remove_process("sup")
    ops.save_counters(store, "other", {"x": 1})  # rows of supervisors without a process row go
    assert "sup" not in ops.supervisor_counters(store)


def test_is_paused_and_the_engine_gauges_for_status(store, clock, engine):
    assert store.is_paused() is False
    put(store, clock)
    stats = store.stats()  # the engine's own gauges, each described by store.gauges
    assert sorted(stats) == sorted(g.key for g in store.gauges)
    assert all(g.label and g.help for g in store.gauges)
    if engine.name == "sqlite":  # the write-ahead log's size: its own, and shown as ever
        assert isinstance(stats["wal_bytes"], int) and stats["wal_bytes"] >= 0
        assert [(g.key, g.label, g.unit) for g in store.gauges] == [("wal_bytes", "WAL", "bytes")]
    else:  # the server's log is the cluster's: nothing of jobq's own to show
        assert stats == {} and store.gauges == ()


def test_the_read_layer_runs_its_sql_through_the_store(store, clock):
    """read/write/transaction/batches take ``:name`` parameters on every engine (the dialect
    spells them), return plain dict rows, roll a failed transaction back, translate driver errors."""
    a, b, c = (job(clock, priority=i) for i in range(3))
    put(store, clock, a, b, c)
    assert store.dialect.name
    assert store.read("SELECT count(*) AS n FROM jobs WHERE status = :s", {"s": "pending"}) == [
        {"n": 3}
    ]
    assert store.write(
        "UPDATE jobs SET priority = :p WHERE id = :id RETURNING id, priority", {"p": 9, "id": a.id}
    ) == [{"id": a.id, "priority": 9}]
    assert (
        store.write("DELETE FROM control WHERE name = :n", {"n": "nothing"}) == []
    )  # no rows: none back

    def fails(run):
        run("INSERT INTO control (name, value) VALUES (:n, '1')", {"n": "half-done"})
        raise RuntimeError("after the first statement")

    with pytest.raises(RuntimeError):
        store.transaction(fails)
    assert store.read("SELECT name FROM control WHERE name = 'half-done'") == []  # rolled back
    assert store.transaction(lambda run: run("SELECT count(*) AS n FROM jobs")[0]["n"]) == 3
    touched = store.batches(
        "UPDATE jobs SET priority = 1 WHERE id IN (SELECT id FROM jobs WHERE id > :after "
        f"ORDER BY id LIMIT :batch{store.dialect.lock}) RETURNING id",
        {},
        1,
    )
    assert touched == 3 and {r["priority"] for r in store.read("SELECT priority FROM jobs")} == {1}
    store.wake_idle()  # idle workers told where the engine's wake-up needs it; harmless otherwise
    store.notify_controls("scale")  # supervisors told, where the engine notifies (test_pg_controls)
    with pytest.raises(StoreError):
        store.read("SELECT * FROM no_such_table")


# -- transfer (jobq copy) ----------------------------------------------------------------------------


def test_jobs_go_out_and_in_whole_once_by_id(store, clock):
    """export/import keep every column and the history, skip by id and by key, and delete_copied
    removes only what did not change since it was read (tests/engines/test_copy.py: across engines)."""
    first = job(clock)
    put(store, clock, first)
    (j,) = run(store, clock)
    assert complete(store, clock, j)
    put(
        store,
        clock,
        job(clock, "u", priority=3),
        NewJob(new_id(), "k", "1", 0, clock.now(), 4, "key-1"),
    )
    rows = store.export_jobs("", 10)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows) and set(rows[0]) == set(
        contract.JOB_FIELDS
    )
    assert [r["id"] for r in store.export_jobs(rows[0]["id"], 10, ["pending"])] == [
        r["id"] for r in rows[1:] if r["status"] == "pending"
    ]
    history = store.export_attempts([first.id])
    assert [(a["attempt"], a["outcome"]) for a in history] == [(1, "completed")]
    again = store.import_jobs(rows, history)
    assert again.inserted == [] and again.present == [r["id"] for r in rows]
    clash = dict(next(r for r in rows if r["key"]), id=new_id())  # another id, a key held here
    assert store.import_jobs([clash]).key_taken == [clash["id"]]
    (started,) = run(store, clock)  # "u", priority 3
    assert store.import_jobs(rows).differing == [started.id]
    assert store.delete_copied(rows) == [
        r["id"] for r in rows if r["id"] != started.id
    ]  # it changed since
    assert store.export_attempts([first.id]) == []
    assert store.import_jobs([r for r in rows if r["id"] == first.id], history).inserted == [
        first.id
    ]
    assert (
        store.get(first.id).status == "completed" and store.export_attempts([first.id]) == history
    )
    assert store.counts() == {"completed": 1, "running": 1}


def test_a_workflow_goes_out_and_in_with_its_edges_and_settles_on_arrival(store, clock):
    """export_edges gives a child's edges as they are; delete_copied moves a parent without
    cancelling its waiting child; import_jobs settles a waiting child whose parent arrives ended,
    and writes the edges of a child it inserts, settled at once if its parent here has ended
    (tests/engines/test_copy_flows.py: across engines and through the CLI)."""
    (root,) = put(store, clock, job(clock))
    mid = dataclasses.replace(job(clock), after=(root,))
    store.enqueue_flow([mid], clock.now())
    edges = store.export_edges([mid.id])
    assert [tuple(e[f] for f in contract.EDGE_FIELDS) for e in edges] == [(mid.id, root, 0, 0)]
    rows = {r["id"]: r for r in store.export_jobs("", 10)}
    assert store.delete_copied([rows[root]]) == [root]
    assert store.get(mid.id).status == "waiting"  # moved, not cancelled: its child waits on
    ended = dict(
        rows[root], status="completed", attempts=1, result='"r"', completed_at=iso(clock.now())
    )
    assert store.import_jobs([ended]).inserted == [root]  # it completed where it ran
    assert store.get(mid.id).status == "pending" and store.export_edges([mid.id])[0]["done"] == 1
    now = {r["id"]: r for r in store.export_jobs("", 10)}
    assert store.delete_copied([now[mid.id]]) == [mid.id] and store.export_edges([mid.id]) == []
    back = store.import_jobs([rows[mid.id]], edges=edges)  # as read while it waited: edge not done
    assert back.inserted == [mid.id] and back.edges == 1
    assert store.get(mid.id).status == "pending" and store.parents(mid.id)[0]["result"] == '"r"'
    assert store.counts() == {"completed": 1, "pending": 1}


# -- named queues ----------------------------------------------------------------------------------


def queued(clock: FakeClock, queue: str, priority: int = 0) -> NewJob:
    return dataclasses.replace(job(clock, priority=priority), queue=queue)


def test_serve_claims_only_the_served_queues_in_claim_order_within_each(store, clock):
    a1, b1, d1 = queued(clock, "a"), queued(clock, "b", priority=5), job(clock)
    clock.advance(1)
    a2 = queued(clock, "a", priority=9)
    put(store, clock, a1, b1, d1, a2)
    store.serve((("a", 1),))
    assert [j.id for j in run(store, clock, 5)] == [a2.id, a1.id]
    assert run(store, clock) == []  # b's and default's jobs are not this worker's
    store.serve((("b", 1), ("default", 1)))
    got = run(store, clock, 1) + run(store, clock, 1)
    assert sorted(j.id for j in got) == sorted([b1.id, d1.id]) and {j.queue for j in got} == {
        "b",
        "default",
    }
    store.serve(())
    put(store, clock, queued(clock, "a"))
    assert run(store, clock) == []  # an empty set serves nothing
    store.serve(None)
    assert [j.queue for j in run(store, clock)] == ["a"]


def test_a_paused_queue_is_skipped_by_every_claim_and_resumed(store, clock):
    r, e = queued(clock, "reports", priority=9), queued(clock, "emails")
    put(store, clock, r, e)
    store.set_queue_paused("reports", True)
    assert store.is_queue_paused("reports") and not store.is_queue_paused("emails")
    assert store.paused_queues() == ["reports"] and not store.is_paused()
    assert [j.id for j in run(store, clock, 5)] == [e.id]  # every queue: reports' job stepped over
    store.serve((("reports", 1),))
    assert run(store, clock) == []
    limits = {"other": TypeLimit("other", concurrency=1)}
    assert store.claim_limited(OWNER, PID, clock.now(), limits, 5) == []
    store.set_queue_paused("reports", False)
    assert store.paused_queues() == [] and [j.id for j in run(store, clock)] == [r.id]


def test_the_limited_claim_takes_only_the_served_queues(store, clock):
    put(store, clock, queued(clock, "a"), queued(clock, "b"))
    store.serve((("b", 1),))
    got = store.claim_limited(OWNER, PID, clock.now(), {"t": TypeLimit("t", concurrency=5)}, 5)
    assert [j.queue for j in got] == ["b"]


def test_a_batch_of_two_fair_types_moves_each_types_turn(store, clock):
    """One limited claim that takes keyed jobs of two fair types moves both turns, each to the
    last key it served (on PostgreSQL in the claim statement, which is the transaction's last)."""
    put(
        store,
        clock,
        *[
            dataclasses.replace(job(clock, t), limit_key=k)
            for t in ("f", "g")
            for k in ("k1", "k2")
        ],
    )
    limits = {"f": TypeLimit("f", fair=True), "g": TypeLimit("g", fair=True, concurrency_per_key=1)}
    assert len(store.claim_limited(OWNER, PID, clock.now(), limits, 4)) == 4
    assert {
        r["type"]: r["last_key"] for r in store.read("SELECT type, last_key FROM key_turns")
    } == {"f": "k2", "g": "k2"}


# -- stopping a running job ------------------------------------------------------------------------


def test_check_in_stores_progress_guarded_and_reports_cancel_requests(store, clock):
    a_id, b_id, c_id = put(store, clock, job(clock), job(clock), job(clock))
    a, b = run(store, clock, 2)
    assert store.check_in(OWNER) == set()
    assert ops.cancel_jobs(store, [a.id, c_id, "nope"], clock.now()) == [a.id, c_id]
    assert store.get(c_id).status == "cancelled"  # pending: at once
    assert store.get(a.id).status == "running" and store.get(a.id).cancel_requested_at == iso(
        clock.now()
    )
    assert store.check_in(
        OWNER,
        [
            (b.id, b.attempts, '{"fraction":0.5,"note":"half"}'),
            (a.id, a.attempts + 1, '{"stale":true}'),
        ],
    ) == {a.id}
    assert store.get(b.id).progress == {"fraction": 0.5, "note": "half"}
    assert store.get(a.id).progress is None  # another attempt's: refused
    assert store.check_in(OTHER, [(b.id, b.attempts, '{"x":1}')]) == set()
    assert store.get(b.id).progress == {"fraction": 0.5, "note": "half"}
    assert {j.id: j.cancel_requested_at is not None for j in store.running()} == {
        a.id: True,
        b.id: False,
    }


def test_every_outcome_path_writes_the_handlers_last_progress(store, clock):
    """A report made just before the handler returned comes with its outcome (the check-in's
    is older), in each of finish_and_claim's statements; an outcome without one keeps it."""
    put(store, clock, *[job(clock) for _ in range(8)])
    a, b, c, d, e, f, g = run(store, clock, 7)
    half = [(j.id, j.attempts, '{"fraction":0.5}') for j in (a, b, c, d, e, f, g)]
    assert store.check_in(OWNER, half) == set()

    def last(n: int) -> str:
        return '{"fraction":1.0,"note":"last %d"}' % n

    assert store.finish_and_claim(
        [
            Finish("completed", a.id, a.attempts, None, progress=last(1)),
            Finish("completed", b.id, b.attempts, None),
        ],
        OWNER,
        PID,
        clock.now(),
        0,
    )[0] == [True, True]
    done, more = store.finish_and_claim(
        [Finish("completed", c.id, c.attempts, None, progress=last(2))], OWNER, PID, clock.now(), 1
    )
    assert done == [True] and len(more) == 1
    retry = Finish("retry", d.id, d.attempts, "boom", clock.now() + 30, 3, progress=last(3))
    assert store.finish_and_claim([retry], OWNER, PID, clock.now(), 1)[0] == [True]
    mixed = [
        Finish("failed", e.id, e.attempts, "bad", 0.0, 3, progress=last(4)),
        Finish("completed", f.id, f.attempts, None, progress=last(5)),
        Finish("cancelled", g.id, g.attempts, "stop", progress=last(6)),
    ]
    done, _ = store.finish_and_claim(mixed, OWNER, PID, clock.now(), 1, {})
    assert done == [True, True, True]
    notes = {j.id: (store.get(j.id).progress or {}).get("note") for j in (a, b, c, d, e, f, g)}
    assert notes == {
        a.id: "last 1",
        b.id: None,
        c.id: "last 2",
        d.id: "last 3",
        e.id: "last 4",
        f.id: "last 5",
        g.id: "last 6",
    }
    assert store.get(b.id).progress == {"fraction": 0.5}


def test_every_claim_starts_a_run_without_an_earlier_attempts_error_or_progress(store, clock):
    """A job retried (or given back) keeps its error while it waits; the run that takes it
    shows none, whichever claim took it, and its attempt history keeps the error."""
    put(store, clock, job(clock), job(clock), job(clock), job(clock))
    first = run(store, clock, 4)
    store.check_in(OWNER, [(j.id, j.attempts, '{"fraction":0.5}') for j in first])
    assert (
        store.finish_and_claim(
            [Finish("retry", j.id, j.attempts, f"boom {j.id}", clock.now(), 3) for j in first],
            OWNER,
            PID,
            clock.now(),
            0,
        )[0]
        == [True] * 4
    )
    assert all(store.get(j.id).error == f"boom {j.id}" for j in first)
    again = run(store, clock, 1)
    done_one = Finish("completed", again[0].id, 2, None)
    _, more = store.finish_and_claim([done_one], OWNER, PID, clock.now(), 1)
    again += more + store.claim_limited(OWNER, PID, clock.now(), {}, 1)
    _, more = store.finish_and_claim([], OWNER, PID, clock.now(), 1, {}, types=["t"])
    again += more
    assert len(again) == 4 and {j.id for j in again} == {j.id for j in first}
    rows = {j.id: store.get(j.id) for j in again}
    running = [(r.error, r.progress) for r in rows.values() if r.status == "running"]
    assert running == [(None, None)] * 3
    assert [j.error for j in again] == [None] * 4
    assert all(ops.attempt_history(store, j.id)[0]["error"] == f"boom {j.id}" for j in first)


def test_a_cancelled_outcome_and_a_released_cancel_request_end_cancelled(store, clock):
    put(store, clock, job(clock), job(clock), job(clock))
    a, b, c = run(store, clock, 3)
    ops.cancel_jobs(store, [a.id, b.id, c.id], clock.now())
    done, _ = store.finish_and_claim(
        [
            Finish("cancelled", a.id, a.attempts, "stopped", ended=clock.now()),
            Finish("completed", b.id, b.attempts, '"won"'),
        ],
        OWNER,
        PID,
        clock.now(),
        0,
    )
    assert done == [True, True]
    assert (store.get(a.id).status, store.get(a.id).error) == ("cancelled", "stopped")
    assert store.get(b.id).status == "completed"  # completed first: stays
    out = store.release_owner(OWNER, "cancelled: killed", clock.now(), max_attempts_for=lambda j: 5)
    assert [(r.id, r.status) for r in out] == [(c.id, "cancelled")]  # never re-queued
    assert [r["outcome"] for r in ops.attempt_history(store, c.id)] == ["cancelled"]
    assert ops.retry_jobs(store, [c.id], clock.now()) == [c.id]
    assert store.get(c.id).cancel_requested_at is None  # a retry starts afresh


def test_a_claimed_job_given_back_unstarted_after_a_cancel_request_ends_cancelled(store, clock):
    put(store, clock, job(clock), job(clock), job(clock))
    a, b, c = run(store, clock, 3)
    ops.cancel_jobs(store, [a.id, b.id], clock.now())
    assert store.release_unstarted(OWNER, [a.id, c.id], clock.now()) == 2
    assert (store.get(a.id).status, store.get(c.id).status) == ("cancelled", "pending")
    store.heartbeat(OWNER, clock.now(), [])  # b: claimed, not held
    assert store.get(b.id).status == "cancelled" and store.get(b.id).owner is None


# -- the suite covers the contract --------------------------------------------------------------------

PROTOCOLS = (
    contract.Connection,
    contract.ProducerTransitions,
    contract.WorkerTransitions,
    contract.UpkeepTransitions,
    contract.TransferTransitions,
    Reads,
    OpsAccess,
    contract.Wakeup,
)
CONTRACT_CAP = 30  # the transitions an engine implements, each with its guarantee


def protocol_members(proto: type) -> set[str]:
    """A protocol's members, inherited ones included: its methods (``__enter__``/``__exit__``
    too), properties and annotated attributes."""
    out: set[str] = set()
    for k in proto.__mro__:
        if not getattr(k, "_is_protocol", False) or k.__module__ == "typing":
            continue
        out |= {
            n
            for n, v in vars(k).items()
            if (n in ("__enter__", "__exit__") or not n.startswith("_"))
            and (inspect.isfunction(v) or isinstance(v, property))
        }
        out |= set(getattr(k, "__annotations__", {}))
    return out


def test_the_contract_stays_small():
    """The store contract is its transitions, each with its guarantee: at most 30 members. The
    reads (written once) and running the read layer's SQL are not part of it."""
    members = protocol_members(contract.Store)
    assert len(members) <= CONTRACT_CAP, sorted(members)
    assert not members & (protocol_members(Reads) | protocol_members(OpsAccess))
    assert protocol_members(contract.EngineStore) == (
        members | protocol_members(Reads) | protocol_members(OpsAccess)
    )
    undocumented = [
        n
        for k in contract.Store.__mro__
        if getattr(k, "_is_protocol", False) and k.__module__ == contract.__name__
        for n, v in vars(k).items()
        if inspect.isfunction(v)
        and n in members
        and not v.__doc__
        and not any(inspect.getdoc(getattr(o, n, None)) for o in k.__mro__[1:] if n in vars(o))
    ]
    assert undocumented == []


def test_every_protocol_method_is_exercised():
    """A method added to a protocol needs a test here that calls it."""
    source = Path(__file__).read_text(encoding="utf-8")
    names = {
        n
        for p in PROTOCOLS
        for n, v in vars(p).items()
        if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))
    }
    names |= {n for p in PROTOCOLS for n in getattr(p, "__annotations__", {})}
    missing = sorted(n for n in names if f".{n}" not in source)
    assert missing == []


def test_the_engine_store_implements_every_protocol(store):
    for proto in (*PROTOCOLS[:-1], contract.EngineStore):
        assert [n for n in sorted(protocol_members(proto)) if not hasattr(store, n)] == [], (
            proto.__name__
        )
    wake = store.wakeup()
    try:
        assert [
            n
            for n, v in vars(contract.Wakeup).items()
            if inspect.isfunction(v) and not n.startswith("_") and not hasattr(wake, n)
        ] == []
    finally:
        wake.close()
