"""PostgreSQL's limited claim runs its transaction in psycopg's pipeline mode (issue 26: a fair
claim at 1,000,000 pending across 10,000 keys is mostly round trips): BEGIN, the advisory lock
and the state read go in one round trip, the candidate reads in one, the claim in one, COMMIT in
one. Counted from libpq's protocol trace (no timing). A failure inside it leaves the session out
of any transaction, and the claim is whole or not at all."""
from __future__ import annotations

import os
import tempfile
import time

import pytest

from shared.config import from_dict
from shared.job import Finish, NewJob, new_id
from shared.limits import type_limits

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
    store.enqueue([NewJob(new_id(), "t", "{}", 0, now - 1, None, None, limit_key=f"k{i % keys:03d}")
                   for i in range(keys * each)], now)
    return now


def test_a_fair_claim_takes_four_round_trips_and_a_worker_s_one_more_for_its_outcomes(pg):
    with pg.open(FAIR) as store:
        filled(store)
        limits, got = type_limits(FAIR), []
        alone = traced(store, lambda: got.extend(store.claim_limited(OWNER, PID, time.time, limits, 1)))
        assert len(got) == 1 and trips(alone) == 4, alone
        done = Finish("completed", got[0].id, got[0].attempts, None)
        both = traced(store, lambda: got.extend(store.finish_and_claim([done], OWNER, PID, time.time, 1, limits)[1]))
        print(f"\nround trips: fair claim {trips(alone)}, with an outcome {trips(both)}")
        assert len(got) == 2 and trips(both) <= 5, both  # + the completion
        assert store.get(got[0].id).status == "completed" and store.get(got[1].id).status == "running"


def test_a_failed_limited_claim_rolls_back_and_leaves_the_session_usable(pg, monkeypatch):
    with pg.open(FAIR) as store:
        filled(store)
        limits = type_limits(FAIR)
        real = type(store)._take

        def broken(self, c, *args, **kw):
            real(self, c, *args, **kw)   # the claim's UPDATE is sent, then the claim fails
            c.execute("SELECT 1/0").fetchall()
        monkeypatch.setattr(type(store), "_take", broken)
        with pytest.raises(Exception):
            store.claim_limited(OWNER, PID, time.time, limits, 1)
        monkeypatch.undo()
        assert store.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.read("SELECT count(*) AS n FROM jobs WHERE status = 'running'")[0]["n"] == 0
        assert len(store.claim_limited(OWNER, PID, time.time, limits, 1)) == 1
