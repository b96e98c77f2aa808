"""PostgreSQL's limited claim runs its transaction in psycopg's pipeline mode (a fair
claim at 1,000,000 pending across 10,000 keys is mostly round trips): BEGIN, the advisory lock
and the state read go in one round trip, the candidate reads in one, the claim with its COMMIT in
one. Counted from libpq's protocol trace (no timing). A failure inside it leaves the session out
of any transaction, and the claim is whole or not at all."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from shared.settings.config import from_dict
from shared.model.job import Finish, NewJob, new_id
from shared.model.limits import type_limits

psycopg = pytest.importorskip("psycopg")

OWNER, PID = "h:1:1", 1
FAIR = from_dict({"types": {"t": {"concurrency_per_key": 2, "fair": True}}})


def traced(store, fn) -> list[tuple[str, str]]:
    """(side, message) of every protocol message while ``fn()`` runs on the store's connection."""
    fd, path = tempfile.mkstemp()
    store.conn.pgconn.trace(fd)
    try:
        fn()
    finally:
        store.conn.pgconn.untrace()
        os.close(fd)
    with open(path) as f:
        out = [tuple((line.split("\t") + ["", "", ""])[1:4:2]) for line in f]
    os.unlink(path)
    return out


def trips(messages: list[tuple[str, str]]) -> int:
    return sum(1 for (a, _), (b, _) in zip(messages, messages[1:]) if a == "F" and b == "B")


def filled(store, keys: int = 20, each: int = 3) -> float:
    now = time.time()
    store.enqueue(
        [
            NewJob(new_id(), "t", "{}", 0, now - 1, None, None, limit_key=f"k{i % keys:03d}")
            for i in range(keys * each)
        ],
        now,
    )
    return now


def test_a_fair_claim_takes_three_round_trips_and_a_worker_s_one_more_for_its_outcomes(pg):
    with pg.open(FAIR) as store:
        filled(store)
        limits, got = type_limits(FAIR), []
        alone = traced(
            store, lambda: got.extend(store.claim_limited(OWNER, PID, time.time, limits, 1))
        )
        assert len(got) == 1 and trips(alone) == 3, alone  # 4 while COMMIT went on its own
        done = Finish("completed", got[0].id, got[0].attempts, None)
        both = traced(
            store,
            lambda: got.extend(store.finish_and_claim([done], OWNER, PID, time.time, 1, limits)[1]),
        )
        print(f"\nround trips: fair claim {trips(alone)}, with an outcome {trips(both)}")
        assert len(got) == 2 and trips(both) <= 4, both  # + the completion
        assert (
            store.get(got[0].id).status == "completed" and store.get(got[1].id).status == "running"
        )


def test_a_failed_limited_claim_rolls_back_and_leaves_the_session_usable(pg, monkeypatch):
    with pg.open(FAIR) as store:
        filled(store)
        limits = type_limits(FAIR)
        real = type(store)._claim_is_last

        def broken(self, c):
            c.execute(
                "SELECT 1/0"
            )  # the claim's UPDATE is sent, then a statement fails before COMMIT
            real(self, c)

        monkeypatch.setattr(type(store), "_claim_is_last", broken)
        with pytest.raises(Exception):
            store.claim_limited(OWNER, PID, time.time, limits, 1)
        monkeypatch.undo()
        assert store.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.read("SELECT count(*) AS n FROM jobs WHERE status = 'running'")[0]["n"] == 0
        assert len(store.claim_limited(OWNER, PID, time.time, limits, 1)) == 1


def cycle(store, limits) -> list:
    """One fair claim, its job completed after."""
    got = store.claim_limited(OWNER, PID, time.time, limits, 1)
    store.finish_and_claim(
        [Finish("completed", j.id, j.attempts, None) for j in got], OWNER, PID, time.time(), 0
    )
    return got


def test_once_two_claims_found_the_same_inputs_the_candidate_reads_go_with_the_state_read(pg):
    """The third claim of a steady worker sends its candidate reads with the lock and the state
    read, on the inputs the last two found (no type full, no key at its limit): 2 round trips."""
    with pg.open(FAIR) as store:
        filled(store)
        limits, got = type_limits(FAIR), []
        cycle(store, limits), cycle(store, limits)
        third = traced(
            store, lambda: got.extend(store.claim_limited(OWNER, PID, time.time, limits, 1))
        )
        assert len(got) == 1 and trips(third) == 2, third


def test_early_reads_made_on_inputs_that_no_longer_hold_are_read_again(pg):
    """A key filled to its limit by another worker since this worker's last claim: the early
    reads (made as if it had room) are dropped and read again, stepping over it."""
    with pg.open(FAIR) as store, pg.open(FAIR) as other:
        filled(store)
        limits = type_limits(FAIR)
        served = [cycle(store, limits)[0].limit_key for _ in range(3)]
        assert served == ["k000", "k001", "k002"]
        k003 = [
            r["id"]
            for r in store.read(
                "SELECT id FROM jobs WHERE limit_key = 'k003' AND status = 'pending'"
            )
        ]
        assert (
            len(other.claim_limited("h:2:1", 2, time.time, limits, 2, ids=k003[:2])) == 2
        )  # k003: 2 running
        got = []
        fourth = traced(
            store, lambda: got.extend(store.claim_limited(OWNER, PID, time.time, limits, 1))
        )
        assert [j.limit_key for j in got] == ["k004"] and trips(fourth) == 3, fourth


def test_a_workers_fair_claims_keep_generic_plans(pg):
    """The claim's statements are prepared (psycopg, from their sixth run) and PostgreSQL keeps
    their generic plan instead of planning each execution again: the candidate read (LIMIT as a
    literal) and the one-job claim (``id = :id``) included; they were planned on every claim
    (custom plans), the largest share of a claim's server time after its commit."""
    with pg.open(FAIR) as store:
        filled(
            store, keys=100, each=200
        )  # a table of some size, analyzed: the planner's choice is real
        store.analyze_if_stale(0, 0)
        limits = type_limits(FAIR)
        for _ in range(20):
            assert len(cycle(store, limits)) == 1
        plans = store.read("SELECT custom_plans AS n, statement AS s FROM pg_prepared_statements")
        claim = [
            p
            for p in plans
            if "key_turns" in p["s"] or "FROM jobs WHERE status = 'pending'" in p["s"]
        ]
        assert len(claim) >= 3 and all(p["n"] <= 5 for p in claim), plans
