"""The PostgreSQL claim walks the claim index in order and stops after ``limit`` rows whatever the
table's statistics say (issue 30): a jobs table ANALYZEd while empty, then filled by a burst of
enqueues, got a plan that read and sorted every due pending row per claim (a bitmap scan and a
sort: 45-65 ms instead of 1 ms with 20,000 pending). A worker's session plans without sorts
(``shared.engines.postgres.store.WORKER_SESSION``). Checked with EXPLAIN: no timing."""
from __future__ import annotations

import time

import pytest

from shared.clock import iso
from shared.engines.postgres.store import _CLAIM, _CLAIM_QUEUE
from shared.job import NewJob, new_id

psycopg = pytest.importorskip("psycopg")


def plans(store, now: float) -> dict[str, str]:
    out = {}
    for name, sql in (("claim", _CLAIM), ("queue claim", _CLAIM_QUEUE)):
        params = {"owner": "h:1:1", "pid": 1, "now": iso(now), "limit": 10, "queue": "default"}
        with store.lock, store.conn.transaction(force_rollback=True):  # (EXPLAIN ANALYZE runs the claim)
            rows = store.conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql, params).fetchall()
            out[name] = "\n".join(r["QUERY PLAN"] for r in rows)
    return out


def test_a_workers_claim_walks_the_index_on_a_table_analyzed_while_empty(pg):
    with pg.open() as store:
        store.conn.execute("ANALYZE jobs")  # empty: the planner now expects a tiny table
        now = time.time()
        for _ in range(4):
            store.enqueue([NewJob(new_id(), "t", "{}", 0, now, None, None) for _ in range(1000)], now)
        bare = plans(store, now + 1)
        store.wakeup().close()  # a worker's session (the wake-up sets it up)
        worker = plans(store, now + 1)
    # the trap itself: without the worker's setting the planner sorts every pending row
    assert "Sort" in bare["claim"] and "rows=4000" in bare["claim"], bare["claim"]
    for name, plan in worker.items():
        assert "Sort" not in plan and "Index Scan using jobs_" in plan, f"{name}:\n{plan}"
        assert "rows=4000" not in plan, f"{name} reads every pending row:\n{plan}"
