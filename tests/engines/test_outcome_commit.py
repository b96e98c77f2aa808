"""Outcome commits: an outcome re-sent after an error that left its commit unknown
recognises its own committed row (reported recorded, applied once, its hooks run), on both
engines; and each attempt records its own run time, also when its job ran in a batch."""

from __future__ import annotations

import dataclasses
import signal
import time
import types
import uuid
from collections import Counter
from typing import Any, Callable

from shared import ops
from shared.runtime.clock import FakeClock, iso, parse_iso
from shared.settings.config import Config, WorkerConfig
from shared.execution.handlers import Registry, handler
from shared.model.job import Finish, NewJob, new_id
from tests.engines import PostgresEngine
from tests.proc import Running, log_events, wait_until, write_config
from tests.engines.test_store_contract import OTHER, OWNER, PID, clock, store  # noqa: F401 - the suite's fixtures
from worker.loop import Worker


def _put(store, clock, n: int) -> list[str]:
    return store.enqueue(
        [NewJob(new_id(), "t", "{}", 0, clock.now(), None, None) for _ in range(n)], clock.now()
    )


def _ran(f: Finish, started: float, ended: float) -> Finish:
    return dataclasses.replace(f, started=started, ended=ended)


def _history(store, job_id: str) -> list[tuple]:
    return [
        (h["attempt"], h["outcome"], h["owner"], h["started_at"], h["ended_at"], h["error"])
        for h in ops.attempt_history(store, job_id)
    ]


def test_an_outcome_resent_after_an_unknown_commit_is_recognised_and_applied_once(store, clock):
    """Commit outcomes (a batch of every kind, and one alone), then send them again as after a
    lost answer: each is reported recorded, and the rows and history are as after the first."""
    ids = _put(store, clock, 5)
    a, b, c, d, e = store.claim(OWNER, PID, clock.now(), 5)
    t = clock.now()
    batch = [
        _ran(Finish("completed", a.id, 1, '"a"'), t, t + 0.01),
        _ran(Finish("completed", b.id, 1, '"b"'), t + 0.01, t + 0.02),
        _ran(Finish("retry", c.id, 1, "again", t + 60, 3), t + 0.02, t + 0.03),
        _ran(Finish("failed", d.id, 1, "boom", 0.0, 3), t + 0.03, t + 0.04),
    ]
    alone = _ran(Finish("completed", e.id, 1, None), t + 0.04, t + 0.05)
    clock.advance(1)
    assert store.finish_and_claim(batch, OWNER, PID, clock.now(), 0)[0] == [True] * 4
    assert store.finish_and_claim([alone], OWNER, PID, clock.now(), 1) == ([True], [])
    rows = {i: store.get(i) for i in ids}
    history = {i: _history(store, i) for i in ids}
    assert all(len(h) == 1 for h in history.values())

    clock.advance(1)
    assert store.finish_and_claim(batch, OWNER, PID, clock.now(), 0)[0] == [True] * 4
    assert store.finish_and_claim([alone], OWNER, PID, clock.now(), 1) == ([True], [])
    assert [store.finish(f, OWNER, clock.now()) for f in [*batch, alone]] == [True] * 5
    assert {i: store.get(i) for i in ids} == rows
    assert {i: _history(store, i) for i in ids} == history

    # The retried job runs again elsewhere: its first attempt's outcome is still recognised,
    # and the running attempt is left alone.
    clock.advance(60)
    [again] = store.claim(OTHER, PID, clock.now(), 1)
    assert (again.id, again.attempts) == (c.id, 2)
    assert store.finish_and_claim([batch[2]], OWNER, PID, clock.now(), 0)[0] == [True]
    assert (store.get(c.id).status, store.get(c.id).owner) == ("running", OTHER)


def test_an_outcome_that_never_committed_is_still_refused(store, clock):
    """Recognition is of this owner's own outcome of this attempt: another owner, another
    attempt, another outcome, or the supervisor's release of the attempt is not it."""
    _put(store, clock, 2)
    a, b = store.claim(OWNER, PID, clock.now(), 2)
    t = clock.now()
    done = _ran(Finish("completed", a.id, 1, '"a"'), t, t + 0.01)
    assert store.finish(done, OWNER, clock.now())
    assert not store.finish(done, OTHER, clock.now())
    assert not store.finish(dataclasses.replace(done, attempt=2), OWNER, clock.now())
    assert not store.finish(
        _ran(Finish("failed", a.id, 1, "x", 0.0, 3), t, t + 0.01), OWNER, clock.now()
    )
    assert not store.finish(dataclasses.replace(done, ended=t + 0.02), OWNER, clock.now())
    store.release_owner(OWNER, "worker died", clock.now(), max_attempts_for=lambda j: 3)
    retry = _ran(Finish("retry", b.id, 1, "boom", t + 5, 3), t, clock.now())
    assert store.finish_and_claim([retry], OWNER, PID, clock.now(), 0)[0] == [False]
    assert [h[1:3] + h[5:] for h in _history(store, b.id)] == [("retry", OWNER, "worker died")]


def test_each_attempt_records_its_own_run_time(store, clock):
    """Three jobs claimed together and committed together, run one after another: each
    attempt (and job row) shows its own start and end, not the claim and the commit."""
    _put(store, clock, 4)
    jobs = store.claim(OWNER, PID, clock.now(), 4)
    t = clock.now() + 0.001
    spans = [(t, t), (t, t + 0.05), (t + 0.05, t + 0.15), (t + 0.15, t + 0.2)]
    kinds = [
        Finish("completed", jobs[0].id, 1, None),
        Finish("completed", jobs[1].id, 1, '"r"'),
        Finish("retry", jobs[2].id, 1, "again", t + 60, 3),
        Finish("failed", jobs[3].id, 1, "bad", 0.0, 3),
    ]
    clock.advance(1)
    ok, _ = store.finish_and_claim(
        [_ran(f, *s) for f, s in zip(kinds, spans)], OWNER, PID, clock.now(), 0
    )
    assert ok == [True] * 4
    for job, (start, end) in zip(jobs, spans):
        [h] = ops.attempt_history(store, job.id)
        assert (h["started_at"], h["ended_at"]) == (iso(start), iso(end)), h
    second = store.get(jobs[1].id)
    assert (second.started_at, second.completed_at) == (iso(t), iso(t + 0.05))
    # An outcome without its own times: the claim's start and the commit's time, as before.
    _put(store, clock, 1)
    [j] = store.claim(OWNER, PID, clock.now(), 1)
    claimed = clock.now()
    clock.advance(2)
    assert store.finish(Finish("completed", j.id, 1, None), OWNER, clock.now())
    [h] = ops.attempt_history(store, j.id)
    assert (h["started_at"], h["ended_at"]) == (iso(claimed), iso(clock.now()))


def test_an_attempt_that_ends_when_the_last_one_ended_keeps_its_own_times(store, clock):
    """Two attempts of one job whose ends carry the same time (a clock stepped back): the second
    is recorded with its own times and recognised when re-sent."""
    _put(store, clock, 1)
    [j] = store.claim(OWNER, PID, clock.now(), 1)
    t = clock.now()
    assert store.finish(
        _ran(Finish("retry", j.id, 1, "again", t, 3), t, t + 0.01), OWNER, clock.now()
    )
    [j] = store.claim(OWNER, PID, clock.now(), 1)
    clock.advance(1)
    second = _ran(Finish("completed", j.id, 2, None), t + 0.005, t + 0.01)
    assert store.finish(second, OWNER, clock.now()) and store.finish(second, OWNER, clock.now())
    assert [
        (h["attempt"], h["started_at"], h["ended_at"]) for h in ops.attempt_history(store, j.id)
    ] == [(1, iso(t), iso(t + 0.01)), (2, iso(t + 0.005), iso(t + 0.01))]


def test_a_batch_of_jobs_of_different_lengths_records_each_ones_run(engine, tmp_path):
    """A worker claims three jobs (0, 0.05 and 0.1 s long) in one batch, runs them one after
    another and commits them together: each attempt's start and end frame its own run, so the
    runs follow each other instead of all spanning the whole batch."""

    @handler("sleepy")
    def sleepy(payload, job):
        time.sleep(payload)

    reg = Registry()
    reg.add_module(types.SimpleNamespace(sleepy=sleepy))
    cfg = engine.config(Config().replace(worker=WorkerConfig(max_batch=8)))
    with engine.open() as s:
        ids = s.enqueue(
            [
                NewJob(new_id(), "sleepy", str(p), 3 - i, 0.0, None, None)
                for i, p in enumerate((0, 0.05, 0.1))
            ],
            time.time(),
        )
    w = Worker(cfg, reg)
    w.store = engine.open()
    try:
        w.held.size = 8
        assert w.claim() and len(w.held.queue) == 3
        while w.held.queue:
            job = w.take()
            w.held.ran(w.process(job))
        w.commit(limit=0, must=True)
        runs = [ops.attempt_history(w.store, i)[0] for i in ids]
    finally:
        w.store.close()
        w.signals.close()
    spans = [(parse_iso(h["started_at"]), parse_iso(h["ended_at"])) for h in runs]
    for (start, end), length in zip(spans, (0, 0.05, 0.1)):
        assert end - start >= length - 0.002, spans  # (times are kept to the millisecond)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, spans  # one after another, as the worker ran them


def test_dropped_connections_lose_no_hook_and_report_no_lease_lost(tmp_path):
    """Workers' PostgreSQL connections are terminated 60 times while short jobs with an
    ``on_completed`` hook run one at a time (each outcome committed, then the next claim sent:
    a drop between them left a committed outcome whose re-send was refused): every job
    completes once, every hook runs once, and no ``job.lease_lost`` is logged."""
    import psycopg

    pg = PostgresEngine(tmp_path)
    app = f"jobq_drop_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in pg.database else "?"
    cfg = write_config(
        tmp_path,
        database=f"{pg.database}{sep}application_name={app}",
        handlers=["dropjobs"],
        postgres={"schema": pg.schema},
        supervisor={"workers": 2},
        worker={"max_batch": 1, "lease_timeout": 30},
        log_format="json",
    )

    def more(s, n: int = 100) -> list[str]:
        return s.enqueue(
            [
                NewJob(new_id(), "drop:short", '{"sleep": 0.002}', 0, 0.0, None, None)
                for _ in range(n)
            ],
            time.time(),
        )

    sup = Running(cfg)
    try:
        with pg.open() as s, psycopg.connect(pg.database, autocommit=True) as admin:
            ids = more(s)
            wait_until(
                lambda: s.counts().get("pending", 0) < len(ids), timeout=30, what="the first claims"
            )
            cuts = 0
            while cuts < 60:
                if s.counts().get("pending", 0) < 50:  # keep the workers busy until the last cut
                    ids += more(s)
                cuts += admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (app,),
                ).fetchone()[0]
                time.sleep(0.15)  # paces the cuts (not a synchronisation: nothing waits on it)
            wait_until(
                lambda: s.counts().get("completed") == len(ids),
                timeout=120,
                what="every job completed",
            )
            history = {
                i: [(h["attempt"], h["outcome"]) for h in ops.attempt_history(s, i)] for i in ids
            }
        sup.signal(signal.SIGTERM)  # the workers finish what follows their last commit, and exit
        assert sup.wait(60) == 0
        hooks = Counter(
            line.split()[0] for line in (tmp_path / "hooks.log").read_text().splitlines()
        )
        lost = log_events(sup, "job.lease_lost")
    finally:
        sup.close()
        pg.drop()
    assert lost == []
    assert {i: h for i, h in history.items() if h != [(1, "completed")]} == {}
    assert hooks == Counter({i: 1 for i in ids})


# The previous jobq's enqueue and claim of one job, in its own columns (later migrations add
# columns that this jobq's statements write): `?` parameters, turned into `%s` for PostgreSQL.
OLD_INSERT = (
    "INSERT INTO jobs (id, type, status, payload, attempts, priority, run_at, created_at, "
    "updated_at) VALUES (?, 't', 'pending', '{}', 0, 0, ?, ?, ?)"
)  # as the jobq of schema v1 wrote
_OLD_CLAIM = (
    "UPDATE jobs SET status = 'running', attempts = 1, owner = ?, owner_pid = ?, "
    "started_at = ?, heartbeat_at = ?, updated_at = ? WHERE id = ?"
)


def write_old_jobs(old_conn: Any, param: str, stamp: str, *ids: str) -> None:
    """Pending jobs ``ids`` written by the previous jobq through ``old_conn`` (``param``: its
    driver's placeholder), committed; the connection is closed after."""
    for job_id in ids:
        old_conn.execute(OLD_INSERT.replace("?", param), (job_id, stamp, stamp, stamp))
    old_conn.commit()
    old_conn.close()


def _finish_a_job_claimed_before_the_upgrade(open_new, old_conn, param: str = "?") -> dict:
    """Claim a job on the old schema (through ``old_conn``, as the previous jobq did), then
    finish it (with its own times) on the upgraded one; its attempt as recorded."""
    clock = FakeClock()
    job_id, stamp = new_id(), iso(clock.now())
    old_conn.execute(OLD_INSERT.replace("?", param), (job_id, stamp, stamp, stamp))
    old_conn.execute(_OLD_CLAIM.replace("?", param), (OWNER, PID, stamp, stamp, stamp, job_id))
    old_conn.commit()
    old_conn.close()
    with open_new() as s:
        clock.advance(1)
        f = _ran(Finish("completed", job_id, 1, None), clock.now() - 0.5, clock.now() - 0.25)
        assert s.finish(f, OWNER, clock.now()) and s.finish(f, OWNER, clock.now())
        return ops.attempt_history(s, job_id)


def sqlite_before(path: str, migration: str) -> Any:
    """A connection (autocommit) to a new SQLite database at ``path`` whose schema stops just
    before ``migration`` (one of the engine's MIGRATIONS), as a jobq of that version made it."""
    import sqlite3

    from shared.engines.sqlite import schema

    conn = sqlite3.connect(path, isolation_level=None)
    before = schema.MIGRATIONS.index(migration)
    for version in range(before):
        for statement in schema._statements(schema.MIGRATIONS[version]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {before}")
    return conn


def test_a_sqlite_database_of_the_previous_version_migrates_forward(tmp_path):
    from shared.engines.sqlite import schema
    from shared.engines.sqlite.store import SqliteStore

    path = str(tmp_path / "old.db")
    conn = sqlite_before(path, schema.RUN_TIMES)
    [h] = _finish_a_job_claimed_before_the_upgrade(lambda: SqliteStore(path), conn)
    assert (h["started_at"], h["ended_at"]) == (
        iso(FakeClock().now() + 0.5),
        iso(FakeClock().now() + 0.75),
    )


def test_an_attempt_ended_around_jobq_ends_at_its_update_on_sqlite(tmp_path):
    """A writer around jobq that ends a running attempt (and clears its start) without writing
    run times: the attempt ends at the row's ``updated_at``, never at an earlier attempt's end."""
    import sqlite3

    from shared.engines.sqlite.store import SqliteStore

    path, clock = str(tmp_path / "q.db"), FakeClock()
    with SqliteStore(path) as s:
        _put(s, clock, 1)
        [j] = s.claim(OWNER, PID, clock.now(), 1)
        t = clock.now()
        assert s.finish(
            _ran(Finish("retry", j.id, 1, "again", t, 3), t, t + 0.01), OWNER, clock.now()
        )
        s.claim(OWNER, PID, clock.now(), 1)
    c = sqlite3.connect(path, isolation_level=None)
    c.execute(
        "UPDATE jobs SET status = 'pending', owner = NULL, owner_pid = NULL, heartbeat_at = NULL, "
        "started_at = NULL, updated_at = ? WHERE status = 'running'",
        (iso(t + 5),),
    )
    c.close()
    with SqliteStore(path) as s:
        assert [h["ended_at"] for h in ops.attempt_history(s, j.id)] == [iso(t + 0.01), iso(t + 5)]


def postgres_before(pg: PostgresEngine, migration: str, monkeypatch) -> Any:
    """A store on ``pg``'s new schema as made by a jobq whose migrations stop just before
    ``migration`` (one of the PostgreSQL engine's MIGRATIONS)."""
    from shared.engines.postgres import schema

    with monkeypatch.context() as m:
        before = schema.MIGRATIONS.index(migration)
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:before])
        m.setattr(schema, "VERSION", before)
        return pg.open()


def upgrade_postgres(tmp_path, migration: str, monkeypatch, check: Callable[..., Any]) -> Any:
    """``check(open_new, old_conn, "%s")`` on a fresh PostgreSQL schema made by a jobq whose
    migrations stop just before ``migration`` (a name in the engine's schema module); the schema
    is dropped after. What ``check`` returns."""
    from shared.engines.postgres import schema

    pg = PostgresEngine(tmp_path)
    try:
        old = postgres_before(pg, getattr(schema, migration), monkeypatch)
        return check(pg.open, old.conn, "%s")
    finally:
        pg.drop()


def test_a_postgres_schema_of_the_previous_version_migrates_forward(tmp_path, monkeypatch):
    [h] = upgrade_postgres(
        tmp_path, "RUN_TIMES", monkeypatch, _finish_a_job_claimed_before_the_upgrade
    )
    assert (h["started_at"], h["ended_at"]) == (
        iso(FakeClock().now() + 0.5),
        iso(FakeClock().now() + 0.75),
    )
