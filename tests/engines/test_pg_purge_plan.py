"""PostgreSQL: deleting jobs finds their attempt history by its index
(schema.ATTEMPTS_BY_INDEX). The delete trigger's ids come in a transition table, which has no
statistics: with ``job_id IN (SELECT id FROM old_rows)`` the planner hashed them and read the
whole of ``job_attempts`` for every DELETE on jobs, so each chunk of a purge cost a scan of the
entire history. Checked by the table's own scan counters, in the deleting transaction."""

from __future__ import annotations

import pytest

from shared import ops
from tests.engines import PostgresEngine
from tests.engines.test_outcome_commit import postgres_before

psycopg = pytest.importorskip("psycopg")

HISTORY = 20_000
_FILL = (
    "INSERT INTO jobs (id, type, status, payload, attempts, run_at, started_at, completed_at, created_at, "
    "updated_at) SELECT lpad(to_hex(i), 32, '0')::uuid, 'old', 'completed', 'null', 1, t, t, t, t, t "
    "FROM generate_series(1, %s) i, (SELECT '2020-01-01T00:00:00.000Z'::timestamptz AS t) c"
)
_HISTORY = (
    "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at) "
    "SELECT id, type, 1, 'completed', run_at, started_at, completed_at FROM jobs"
)
_SCANS = "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relid = %s::regclass"


def _scans(conn, table: str) -> tuple[int, int]:
    """The session's (sequential, index) scans of ``table`` so far (this transaction's too)."""
    row = conn.execute(_SCANS, (table,)).fetchone()
    return row["seq_scan"], row["idx_scan"]


def _scans_of_a_small_purge(conn) -> tuple[int, int, int]:
    """(sequential scans, index scans of job_attempts, attempts left) of deleting 3 old jobs,
    in one transaction, rolled back. Nested loops are off in it: the plan a planner picks for a
    join of the ids when it expects many of them or has no statistics (a 350,000-row history
    right after a bulk load), so the delete must not depend on a join of the ids."""
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_nestloop = off")
        seq0, idx0 = _scans(conn, "job_attempts")
        conn.execute(
            "DELETE FROM jobs WHERE id = ANY(ARRAY(SELECT id FROM jobs ORDER BY id LIMIT 3))"
        )
        seq, idx = _scans(conn, "job_attempts")
        left = conn.execute("SELECT count(*) AS n FROM job_attempts").fetchone()["n"]
    return seq - seq0, idx - idx0, left


def _filled(store, analyze: bool) -> None:
    """``HISTORY`` old completed jobs with an attempt each; ``analyze``: with fresh statistics
    (else as right after a bulk load, before autovacuum's analyze)."""
    store.conn.execute(_FILL, (HISTORY,))
    store.conn.execute(_HISTORY)
    if analyze:
        store.conn.execute("ANALYZE jobs")
        store.conn.execute("ANALYZE job_attempts")


@pytest.mark.parametrize("analyze", [False, True])
def test_a_delete_of_a_few_jobs_does_not_read_the_whole_attempt_history(pg, analyze):
    with pg.open() as store:
        _filled(store, analyze)
        seq, idx, left = _scans_of_a_small_purge(store.conn)
        assert (seq, left) == (0, HISTORY - 3) and idx >= 1
        assert (
            ops.purge(store, "completed", 2e9) == HISTORY
        )  # and a purge takes the history with them
        assert store.conn.execute("SELECT count(*) AS n FROM job_attempts").fetchone()["n"] == 0


def test_a_schema_of_the_previous_version_gets_the_indexed_delete(tmp_path, monkeypatch):
    from shared.engines.postgres import schema

    pg = PostgresEngine(tmp_path)
    try:
        old = postgres_before(pg, schema.ATTEMPTS_BY_INDEX, monkeypatch)
        _filled(old, analyze=False)
        assert _scans_of_a_small_purge(old.conn)[0] == 1  # the old trigger: one scan of the history
        old.close()
        with pg.open() as store:  # migrates
            seq, idx, left = _scans_of_a_small_purge(store.conn)
            assert (seq, left) == (0, HISTORY - 3) and idx >= 1
    finally:
        pg.drop()


def test_a_batched_purge_looks_its_batch_up_by_the_primary_key(pg):
    """``jobq purge``'s batches (``ops.purge``) are a subquery of ids; as ``id IN (...)`` the
    planner hashed a batch of a few thousand and scanned every job for each batch."""
    with pg.open() as store:
        _filled(store, analyze=False)
        with store.conn.transaction(force_rollback=True):
            store.conn.execute("SET LOCAL enable_nestloop = off")
            before = _scans(store.conn, "jobs")[0]
            assert ops.purge(store, "completed", 2e9) == HISTORY
            scans = _scans(store.conn, "jobs")[0] - before
        assert scans == 0
