"""The claim query stays on the partial index ``jobs_claim`` (a skip-scan over the few distinct
priorities), so one claim costs the same at any queue depth, also when most pending jobs are
scheduled in the future. Checked with EXPLAIN QUERY PLAN and by counting SQLite VM steps (a
deterministic cost measure: no wall-clock timing)."""

from __future__ import annotations

import random
import re
import sqlite3

import pytest

from shared.runtime.clock import iso
from shared.engines.sqlite.store import _CLAIM, SqliteStore

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
PARAMS = {"owner": "h:1:1", "pid": 1, "now": iso(NOW), "limit": 1}
_SUB = re.search(r"\((SELECT rowid FROM jobs.*?LIMIT :limit)\)", _CLAIM, re.S)
assert _SUB, "the claim statement no longer has the expected subquery"
CLAIM_SUBQUERY = _SUB.group(1)


def plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, PARAMS).fetchall()
    return [r["detail"] if isinstance(r, dict) else r[3] for r in rows]


def assert_on_claim_index(details: list[str]) -> None:
    text = "\n".join(details)
    assert "USING INDEX jobs_claim" in text, text
    assert "TEMP B-TREE" not in text, text
    # Neither a plain table scan nor a full walk of the claim index: the plan must SEARCH.
    assert not any(re.match(r"SCAN jobs\b", d) for d in details), text


def fill(
    conn: sqlite3.Connection,
    n: int,
    future_fraction: float,
    seed: int = 1,
    future_priority: int | None = None,
) -> None:
    """Insert ``n`` pending jobs; ``future_fraction`` of them have run_at in the future."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        future = rng.random() < future_fraction
        run_at = NOW + rng.uniform(1, 86_400) if future else NOW - rng.uniform(0, 3600)
        if future and future_priority is not None:
            priority = future_priority
        else:
            priority = rng.choice((0, 0, 0, 1, 5, -1))
        created = NOW - rng.uniform(0, 7200)
        rows.append((f"{i:032x}", "t", "{}", priority, iso(run_at), iso(created), iso(created)))
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO jobs (id, type, status, payload, attempts, priority, run_at, created_at, "
        "updated_at) VALUES (?, ?, 'pending', ?, 0, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")


def vm_steps(conn: sqlite3.Connection) -> int:
    """VM instructions one claim executes (rolled back, so the data stays as it is)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        conn.execute("BEGIN IMMEDIATE")
        claimed = conn.execute(_CLAIM, PARAMS).fetchall()
        conn.execute("ROLLBACK")
    finally:
        conn.set_progress_handler(None, 1)
    assert len(claimed) == 1
    return steps


@pytest.mark.parametrize("sql", [_CLAIM, CLAIM_SUBQUERY], ids=["claim", "subquery"])
def test_fresh_database_plan_on_the_creating_connection(db_path, sql):
    """The connection that created the schema (the first worker or producer) keeps its plan for
    its whole life, so it must see the planner statistics too."""
    with SqliteStore(db_path) as s:
        assert_on_claim_index(plan(s.conn, sql))


@pytest.mark.parametrize("sql", [_CLAIM, CLAIM_SUBQUERY], ids=["claim", "subquery"])
def test_fresh_database_plan_on_a_new_connection(db_path, sql):
    SqliteStore(db_path).close()
    with SqliteStore(db_path) as s:
        assert_on_claim_index(plan(s.conn, sql))
    conn = sqlite3.connect(db_path)
    try:
        assert_on_claim_index(plan(conn, sql))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def deep_db(tmp_path_factory):
    """20,000 pending jobs, 90% scheduled in the future."""
    path = str(tmp_path_factory.mktemp("plan") / "deep.db")
    with SqliteStore(path) as s:
        fill(s.conn, 20_000, 0.9)
    return path


def test_plan_with_20000_mostly_future_jobs(deep_db):
    with SqliteStore(deep_db) as s:
        assert s.counts() == {"pending": 20_000}
        for sql in (_CLAIM, CLAIM_SUBQUERY):
            assert_on_claim_index(plan(s.conn, sql))


def test_plan_after_analyze_with_20000_mostly_future_jobs(deep_db, tmp_path):
    with SqliteStore(deep_db) as s:
        s.conn.execute("ANALYZE")
        stats = {r["idx"]: r["stat"] for r in s.conn.execute("SELECT idx, stat FROM sqlite_stat1")}
        assert stats["jobs_claim"].startswith("20000 ")  # real statistics replaced the seeded row
        for sql in (_CLAIM, CLAIM_SUBQUERY):
            assert_on_claim_index(plan(s.conn, sql))
    with SqliteStore(deep_db) as s:  # and a connection opened after the ANALYZE
        for sql in (_CLAIM, CLAIM_SUBQUERY):
            assert_on_claim_index(plan(s.conn, sql))


@pytest.mark.parametrize("analyze", [False, True], ids=["seeded-stats", "analyzed"])
@pytest.mark.parametrize("new_connection", [False, True], ids=["creating-conn", "new-conn"])
def test_claim_cost_does_not_grow_with_future_jobs(tmp_path, analyze, new_connection):
    """The worst case for a walk of the index: every job of the top priority is in the future,
    so a scan in (priority DESC, run_at) order passes all of them before the first due job."""
    steps = {}
    for n in (200, 20_000):
        path = str(tmp_path / f"q{n}.db")
        with SqliteStore(path) as s:
            fill(s.conn, n, 0.9, future_priority=10)
            if analyze:
                s.conn.execute("ANALYZE")
            if new_connection:
                conn = sqlite3.connect(path, isolation_level=None)
                try:
                    steps[n] = vm_steps(conn)
                finally:
                    conn.close()
            else:
                steps[n] = vm_steps(s.conn)
    # A scan would cost ~5 VM steps per skipped future job (~90,000 at 20,000 jobs).
    assert steps[20_000] <= 2 * steps[200] + 200, steps


def test_batched_completion_looks_jobs_up_by_id(deep_db):
    """All of a batch's completions are one UPDATE ... FROM (VALUES ...): it must find each job
    through the primary key, never scan the table (also once ANALYZE has real statistics)."""
    from shared.engines.sqlite.finish import _complete_many_sql

    sql = _complete_many_sql(16)
    # id, attempt, result, start, end, progress
    row = ["x", 1, None, None, "2026-01-01T00:00:00.000Z", None]
    params = ["2026-01-01T00:00:00.000Z", "h:1:1"] + row * 16
    with SqliteStore(deep_db) as s:
        for _ in range(2):
            detail = [r["detail"] for r in s.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            assert any(
                "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)" in d for d in detail
            ), detail
            assert not any(d.startswith("SCAN jobs") for d in detail), detail
            s.conn.execute("ANALYZE")


def test_claim_cost_does_not_grow_with_waiting_jobs(tmp_path):
    """A workflow's waiting children are outside the claim index: 20,000 of them cost a claim
    nothing (VM steps, as above), also once ANALYZE has real statistics."""
    steps = {}
    for n in (0, 20_000):
        path = str(tmp_path / f"w{n}.db")
        with SqliteStore(path) as s:
            fill(s.conn, 200, 0.5)
            rows = [(f"w{i:031x}", iso(NOW - 60)) for i in range(n)]
            s.conn.execute("BEGIN IMMEDIATE")
            s.conn.executemany(
                "INSERT INTO jobs (id, type, status, payload, attempts, priority, run_at, "
                "created_at, updated_at, after_failure, waiting_on) "
                "VALUES (?, 't', 'waiting', '{}', 0, 9, ?, ?, ?, 'cancel', 1)",
                [(i, t, t, t) for i, t in rows],
            )
            s.conn.execute("COMMIT")
            s.conn.execute("ANALYZE")
            assert_on_claim_index(plan(s.conn, _CLAIM))
            steps[n] = vm_steps(s.conn)
    assert steps[20_000] <= steps[0] + 50, steps
