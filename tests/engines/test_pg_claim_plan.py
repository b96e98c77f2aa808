"""The PostgreSQL claim walks the claim index in order and stops after ``limit`` rows whatever the
table's statistics say: a jobs table ANALYZEd while empty, then filled by a burst of
enqueues, got a plan that read and sorted every due pending row per claim (a bitmap scan and a
sort: 45-65 ms instead of 1 ms with 20,000 pending). A worker's session plans without sorts
(``shared.engines.postgres.store.WORKER_SESSION``). Checked with EXPLAIN: no timing.

A worker's session also keeps one generic plan per hot statement instead of planning each
execution (0.6-0.7 ms of server CPU per statement): that plan is made once, from whatever the
statistics said then, and serves every batch size, so it must find rows by key, never scan the
table or join the batch in a nested loop."""

from __future__ import annotations

import re
import time

import pytest

from shared.runtime.clock import iso
from shared.engines.postgres.finish import COMPLETE_MANY, completion_params
from shared.engines.postgres.store import _CLAIM, _CLAIM_QUEUE, _COMPLETE_AND_CLAIM
from shared.model.job import Finish, NewJob, new_id

psycopg = pytest.importorskip("psycopg")


def plans(store, now: float) -> dict[str, str]:
    out = {}
    for name, sql in (("claim", _CLAIM), ("queue claim", _CLAIM_QUEUE)):
        params = {"owner": "h:1:1", "pid": 1, "now": iso(now), "limit": 10, "queue": "default"}
        with (
            store.lock,
            store.conn.transaction(force_rollback=True),
        ):  # (EXPLAIN ANALYZE runs the claim)
            rows = store.conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql, params
            ).fetchall()
            out[name] = "\n".join(r["QUERY PLAN"] for r in rows)
    return out


def analyzed_empty_then_filled(store) -> float:
    """ANALYZE ``jobs`` while empty (the planner then expects a tiny table), then enqueue 4,000
    due jobs; the time they are due at."""
    store.conn.execute("ANALYZE jobs")
    now = time.time()
    for _ in range(4):
        store.enqueue([NewJob(new_id(), "t", "{}", 0, now, None, None) for _ in range(1000)], now)
    return now


def test_a_workers_claim_walks_the_index_on_a_table_analyzed_while_empty(pg):
    with pg.open() as store:
        now = analyzed_empty_then_filled(store)
        bare = plans(store, now + 1)
        store.wakeup().close()  # a worker's session (the wake-up sets it up)
        worker = plans(store, now + 1)
    # the trap itself: without the worker's setting the planner sorts every pending row
    assert "Sort" in bare["claim"] and "rows=4000" in bare["claim"], bare["claim"]
    for name, plan in worker.items():
        assert "Sort" not in plan and "Index Scan using jobs_" in plan, f"{name}:\n{plan}"
        assert "rows=4000" not in plan, f"{name} reads every pending row:\n{plan}"


def kept_plan(store, sql: str, params: dict) -> tuple[str, int, int]:
    """``sql`` run twice as a prepared statement on the store's connection (it claims and
    completes for real: psycopg forgets what it prepared in a rolled-back transaction), then the
    plan its session keeps for it: (the plan, generic plans made and custom plans made by the
    two runs)."""
    numbers: dict[str, str] = {}  # psycopg numbers named parameters in order of appearance
    sent = re.sub(r"%\((\w+)\)s", lambda m: numbers.setdefault(m[1], f"${len(numbers) + 1}"), sql)
    count = (
        "SELECT statement, parameter_types::text[] AS types, generic_plans, custom_plans "
        "FROM pg_prepared_statements WHERE NOT from_sql AND statement = %s"
    )
    with store.lock:
        store.conn.execute(sql, params, prepare=True).fetchall()  # prepared here, if not before
        before = store.conn.execute(count, (sent,)).fetchone()
        store.conn.execute(sql, params, prepare=True).fetchall()
        store.conn.execute(sql, params, prepare=True).fetchall()
        row = store.conn.execute(count, (sent,)).fetchone()
        store.conn.execute(
            f"PREPARE jobq_plan_probe ({', '.join(row['types'])}) AS {row['statement']}"
        )
        try:  # a generic plan does not depend on the values: NULLs will do
            nulls = ", ".join("NULL" for _ in row["types"])
            rows = store.conn.execute(
                f"EXPLAIN (COSTS OFF) EXECUTE jobq_plan_probe ({nulls})"
            ).fetchall()
        finally:
            store.conn.execute("DEALLOCATE jobq_plan_probe")
    return (
        "\n".join(r["QUERY PLAN"] for r in rows),
        row["generic_plans"] - before["generic_plans"],
        row["custom_plans"] - before["custom_plans"],
    )


def test_a_workers_session_keeps_one_plan_per_hot_statement_that_finds_rows_by_key(pg):
    with pg.open() as store:
        now = analyzed_empty_then_filled(store)
        owner = "h:1:1"
        running = store.claim(owner, 1, now + 1, 200)
        store.wakeup().close()  # a worker's session (the wake-up sets it up)
        done = [
            Finish("completed", j.id, j.attempts, None, started=now, ended=now + 1) for j in running
        ]
        params = {
            **completion_params(done, owner, iso(now + 1), "jobq_done_x"),
            "pid": 1,
            "limit": 100,
            "queue": "default",
        }
        for name, sql in (
            ("claim", _CLAIM),
            ("queue claim", _CLAIM_QUEUE),
            ("complete many", COMPLETE_MANY),
            ("complete and claim", _COMPLETE_AND_CLAIM[False]),
            ("complete and claim a queue", _COMPLETE_AND_CLAIM[True]),
        ):
            plan, generic, custom = kept_plan(store, sql, params)
            assert generic == 2 and custom == 0, (
                f"{name}: planned per execution ({generic=}, {custom=})"
            )
            assert "Seq Scan on jobs" not in plan and "Sort" not in plan, f"{name}:\n{plan}"
            assert "Function Scan on unnest" not in plan, f"{name} joins the batch:\n{plan}"
            assert re.search(
                r"(Index Scan using|Bitmap Index Scan on) jobs_(pkey|running)\b|Tid Scan on jobs",
                plan,
            ), f"{name} finds its rows by no key:\n{plan}"
            if "claim" in name:  # the claimed rows are updated where the claim locked them
                assert re.search(r"Tid Scan on jobs( \w+)?\s+TID Cond: \(ctid = ANY", plan), (
                    f"{name}:\n{plan}"
                )
