"""PostgreSQL's per-(type, status) counts when enqueues count their own rows
(schema.COUNTED_INSERTS): the enqueue statements write their deltas and mark their rows, the
insert trigger counts every other row; the counts equal a real count whoever inserted."""

from __future__ import annotations

import pytest

from shared.producer.api import JobQueue
from shared.engines.postgres.schema import COUNTS

psycopg = pytest.importorskip("psycopg")

_REAL = """
SELECT type, status, count(*) FROM jobs GROUP BY type, status
UNION ALL SELECT type, 'delayed', count(*) FROM jobs WHERE status = 'pending' AND run_at > created_at GROUP BY type
"""


def _kept(conn) -> dict:
    return {
        (t, s): n for t, s, n in (tuple(r.values()) for r in conn.execute(COUNTS).fetchall()) if n
    }


def _real(conn) -> dict:
    return {(t, s): n for t, s, n in (tuple(r.values()) for r in conn.execute(_REAL).fetchall())}


def test_counts_equal_a_real_count_whoever_inserted_and_the_trigger_counts_no_row_twice(pg):
    q = JobQueue(config=pg.config())
    try:
        first = q.enqueue("a", None)
        q.enqueue("a", {"n": 1})  # the prepared single statement
        q.enqueue("a", None, delay=60)  # delayed
        assert q.enqueue("b", None, key="k") == q.enqueue(
            "b", None, key="k"
        )  # the second is skipped
        q.enqueue_many([("a", None), ("b", None, {"delay": 30}), ("c", None)])
        q.enqueue("d", None, after=[first])  # a workflow's insert (the trigger counts it)
        with psycopg.connect(pg.database) as app:  # the application's transaction
            q.enqueue("e", None, conn=app)
            q.enqueue_many([("e", None), ("e", None, {"delay": 5})], conn=app)
        conn = q.store.conn
        conn.execute(
            "INSERT INTO jobs (id, type, payload, run_at, created_at, updated_at) "
            "VALUES ('0123456789abcdef0123456789abcdef', 'f', 'null', '2100-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z', "
            "'2000-01-01T00:00:00.000Z')"
        )  # a writer around jobq
        assert _kept(conn) == _real(conn)
        assert _kept(conn)[("a", "pending")] == 4 and _kept(conn)[("f", "delayed")] == 1
        marked = conn.execute("SELECT count(*) AS n FROM jobs WHERE tally IS NOT NULL").fetchone()[
            "n"
        ]
        assert marked == 10  # every row but the workflow's and the outside writer's counted itself
        q.store.fold_counts()
        assert _kept(conn) == _real(conn)
    finally:
        q.close()
