"""The per-(type, status) counters the triggers keep: they always equal a real count,
whatever path changes a job, and the migration fills them for an existing database."""

from __future__ import annotations

import random
import sqlite3

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import ops as reads
from shared.engines.sqlite import schema
from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock, iso
from shared.settings.config import Config
from shared import SqliteStore
from shared.model.job import Finish
from supervisor.views import actions as ops

TYPES = ("a", "b", "c")


def _real(store: SqliteStore) -> tuple[dict, dict]:
    rows = store.conn.execute(
        "SELECT type, status, count(*) AS n FROM jobs GROUP BY type, status"
    ).fetchall()
    delayed = store.conn.execute(
        "SELECT type, count(*) AS n FROM jobs WHERE status = 'pending' "
        "AND run_at > created_at GROUP BY type"
    ).fetchall()
    return {(r["type"], r["status"]): r["n"] for r in rows}, {r["type"]: r["n"] for r in delayed}


def _kept(store: SqliteStore) -> tuple[dict, dict]:
    counts = {(r["type"], r["status"]): r["n"] for r in reads.counts_by_type(store)}
    rows = store.conn.execute(
        "SELECT type, n FROM job_counts WHERE status = 'delayed' AND n <> 0"
    ).fetchall()
    return counts, {r["type"]: r["n"] for r in rows}


def _scheduled(store: SqliteStore, now: float) -> dict[str, int]:
    rows = store.conn.execute(
        "SELECT type, count(*) AS n FROM jobs WHERE status = 'pending' AND run_at > ? "
        "GROUP BY type",
        (iso(now),),
    ).fetchall()
    return {r["type"]: r["n"] for r in rows}


def _step(q: JobQueue, clock: FakeClock, rnd: random.Random, op: int) -> None:
    s, now = q.store, clock.now()
    running = s.running()
    if op == 0:
        q.enqueue(rnd.choice(TYPES), {"n": rnd.random()}, delay=rnd.choice([None, 0, 5, 50]))
    elif op == 1:
        q.enqueue_many(
            [
                (rnd.choice(TYPES), None, {"delay": rnd.choice([0, 30])})
                for _ in range(rnd.randrange(1, 4))
            ]
        )
    elif op == 2:
        s.claim("w:1:1", 1, now, limit=rnd.randrange(1, 4))
    elif op == 3 and running:
        j = rnd.choice(running)
        s.finish(Finish("completed", j.id, j.attempts, None), j.owner, now)
    elif op == 4 and running:
        j = rnd.choice(running)
        s.finish(Finish("retry", j.id, j.attempts, "boom", now + rnd.choice([0, 20])), j.owner, now)
    elif op == 5 and running:
        j = rnd.choice(running)
        s.finish(Finish("failed", j.id, j.attempts, "boom"), j.owner, now)
    elif op == 6:
        ids = [
            r["id"]
            for r in s.conn.execute("SELECT id FROM jobs ORDER BY random() LIMIT 3").fetchall()
        ]
        rnd.choice(
            [
                lambda: ops.retry_ids(s, ids, now),
                lambda: ops.cancel_ids(s, ids, now),
                lambda: ops.purge_ids(s, ids),
            ]
        )()
    elif op == 7:
        s.release_owner("w:1:1", "test", now, max_attempts_for=lambda j: 2)
    elif op == 8:
        reads.purge(s, rnd.choice(["completed", "failed", "cancelled"]), now + 1)
    elif op == 9:  # a worker's batch: its completions and the next claim counted per statement
        mine = [j for j in running if j.owner == "w:1:1"][: rnd.randrange(0, 4)]
        kinds = ["completed", "completed", "retry", "failed"]
        s.finish_and_claim(
            [
                Finish(
                    k,
                    j.id,
                    j.attempts,
                    None if k == "completed" else "boom",
                    now + 20 if k == "retry" else None,
                )
                for j, k in ((j, rnd.choice(kinds)) for j in mine)
            ],
            "w:1:1",
            1,
            now,
            limit=rnd.randrange(0, 4),
        )
    elif op == 10:  # a batch past one insert statement's rows (store.CHUNK), some delayed
        q.enqueue_many(
            [
                (rnd.choice(TYPES), None, {"delay": rnd.choice([0, 0, 30])})
                for _ in range(rnd.randrange(80, 200))
            ]
        )
    clock.advance(rnd.choice([0, 1, 10]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 10), max_size=60), st.integers(0, 2**32))
def test_counters_equal_a_real_count_after_any_operations(tmp_path_factory, ops_seq, seed):
    clock = FakeClock()
    rnd = random.Random(seed)
    path = str(tmp_path_factory.mktemp("counts") / "q.db")
    with JobQueue(config=Config(database=path), clock=clock) as q:
        for op in ops_seq:
            _step(q, clock, rnd, op)
            assert _kept(q.store) == _real(q.store)
            assert reads.scheduled_by_type(q.store, clock.now()) == _scheduled(q.store, clock.now())
        by_status: dict[str, int] = {}
        for (_, status), n in _real(q.store)[0].items():
            by_status[status] = by_status.get(status, 0) + n
        assert q.store.counts() == by_status


@pytest.mark.parametrize("seed", range(4))
def test_counters_hold_over_long_random_runs(tmp_path, seed):
    """Long runs reach what short examples rarely do: delayed jobs falling due and being claimed,
    retried with a back-off, released, purged."""
    clock = FakeClock()
    rnd = random.Random(seed)
    with JobQueue(config=Config(database=str(tmp_path / "q.db")), clock=clock) as q:
        for _ in range(300):
            _step(q, clock, rnd, rnd.randrange(11))
            assert _kept(q.store) == _real(q.store)
            assert reads.scheduled_by_type(q.store, clock.now()) == _scheduled(q.store, clock.now())


def test_migration_fills_the_counters_of_an_existing_database(tmp_path):
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    before = schema.MIGRATIONS.index(schema.JOB_COUNTS)
    for version in range(before):  # the schema before the counters
        for statement in schema._statements(schema.MIGRATIONS[version]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {before}")
    rows = [
        (
            f"{i:032x}",
            TYPES[i % 3],
            ["pending", "completed", "failed"][i % 3],
            "null",
            "2026-01-01T00:00:00.000Z" if i % 2 else "2026-01-01T00:10:00.000Z",
        )
        for i in range(30)
    ]
    conn.executemany(
        "INSERT INTO jobs (id, type, status, payload, run_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        assert _kept(store) == _real(store)
        assert _real(store)[1]  # some delayed jobs were there to count


def test_status_counts_do_not_scan_the_jobs_table(tmp_path):
    """The plan of every statement ``status`` runs for its counts touches no full scan of jobs."""
    with SqliteStore(str(tmp_path / "q.db")) as store:
        seen: list[str] = []
        store.conn.set_trace_callback(seen.append)
        reads.counts_by_type(store)
        reads.scheduled_by_type(store, 0.0)
        store.conn.execute("INSERT INTO job_counts VALUES ('a', 'delayed', 1)")
        reads.scheduled_by_type(store, 0.0)
        store.conn.set_trace_callback(None)
        for sql in seen:
            if sql.startswith("INSERT"):
                continue
            plan = " | ".join(
                r["detail"]
                for r in store.conn.execute(
                    "EXPLAIN QUERY PLAN " + sql.replace("'1970-01-01T00:00:00.000Z'", "?"),
                    ("1970",) if "?" in sql.replace("'1970-01-01T00:00:00.000Z'", "?") else (),
                ).fetchall()
            )
            assert "SCAN jobs" not in plan, (sql, plan)


def test_the_counted_paths_leave_the_triggers_out_and_a_writer_around_jobq_is_counted(tmp_path):
    """A batched enqueue, a batch's claim and its completions add their counts once per
    statement (their rows are marked and the count triggers skip them: counted twice otherwise);
    a row written around jobq (no mark) is counted by the triggers, also when jobq's hot path
    moves it on."""
    clock = FakeClock()
    with JobQueue(config=Config(database=str(tmp_path / "q.db")), clock=clock) as q:
        s = q.store
        q.enqueue_many([("a", None, {"delay": 30 if i % 4 == 0 else 0}) for i in range(200)])
        s.conn.execute(
            "INSERT INTO jobs (id, type, status, payload, run_at, created_at, updated_at) "
            "VALUES ('0', 'b', 'pending', 'null', ?1, ?1, ?1)",
            (iso(clock.now()),),
        )
        statements: list[str] = []
        s.conn.set_trace_callback(statements.append)
        _, got = s.finish_and_claim([], "w:1:1", 1, clock.now(), limit=300)
        done, more = s.finish_and_claim(
            [Finish("completed", j.id, j.attempts, None) for j in got],
            "w:1:1",
            1,
            clock.now(),
            limit=5,
        )
        s.conn.set_trace_callback(None)
        assert len(got) == 151 and all(done) and not more  # 150 due of type a, and b's
        assert _kept(s) == _real(s)
        assert _kept(s)[0][("a", "completed")] == 150 and _kept(s)[0][("b", "completed")] == 1
        upserts = [x for x in statements if x.startswith("INSERT INTO job_counts")]
        assert 0 < len(upserts) <= 8, upserts  # per (type, status), not per job
        clock.advance(60)
        _, late = s.finish_and_claim([], "w:1:1", 1, clock.now(), limit=100)
        s.finish_and_claim(
            [Finish("completed", j.id, j.attempts, None) for j in late],
            "w:1:1",
            1,
            clock.now(),
            limit=0,
        )
        assert len(late) == 50 and _kept(s) == _real(s) and _kept(s)[1] == {}


def test_migration_to_counts_per_statement_keeps_the_counts_of_an_existing_database(tmp_path):
    """A database of the version before ``tally`` upgrades with its counts right, and its old
    rows (no mark) move on through the counted paths without being counted twice."""
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    before = schema.MIGRATIONS.index(schema.TALLY)
    for version in range(before):
        for statement in schema._statements(schema.MIGRATIONS[version]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {before}")
    conn.executemany(
        "INSERT INTO jobs (id, type, status, payload, run_at, created_at, updated_at) "
        "VALUES (?, ?, 'pending', 'null', ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        [
            (
                f"{i:032x}",
                TYPES[i % 3],
                "2026-01-01T00:00:00.000Z" if i % 2 else "2026-01-01T00:10:00.000Z",
            )
            for i in range(30)
        ],
    )
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        assert (
            store.conn.execute("PRAGMA user_version").fetchone()["user_version"] == schema.VERSION
        )
        assert _kept(store) == _real(store)
        now = 1767226800.0 + 3600  # 2026-01-01T01:00Z: every old job is due
        _, got = store.finish_and_claim([], "w:1:1", 1, now, limit=40)
        store.finish_and_claim(
            [Finish("completed", j.id, j.attempts, None) for j in got], "w:1:1", 1, now, limit=0
        )
        assert len(got) == 30 and _kept(store) == _real(store) and _kept(store)[1] == {}
