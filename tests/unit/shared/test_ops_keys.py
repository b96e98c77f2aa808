"""shared.ops.keys: per limited type, its busiest keys and the due jobs a limit holds back, read
from a real SQLite file."""

from __future__ import annotations

import pytest

from shared.engines import open_store
from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock
from shared.settings.config import from_dict
from shared.ops.keys import type_keys


@pytest.fixture
def setup(tmp_path):
    clock = FakeClock()
    cfg = from_dict(
        {
            "database": str(tmp_path / "jobs.db"),
            "types": {
                "k": {"key": "payload.c", "concurrency_per_key": 1},
                "t": {"concurrency": 1},
                "free": {},
            },
        }
    )
    q = JobQueue(config=cfg, clock=clock)
    store = open_store(cfg)
    yield q, store, clock
    store.close()
    q.close()


def test_a_full_key_holds_back_its_due_jobs_and_the_busiest_come_first(setup):
    q, store, clock = setup
    for c in ("A", "A", "A", "B"):
        q.enqueue("k", {"c": c})
    q.enqueue("k", {"c": "C"}, run_at=clock.now() + 3600)  # not due
    q.enqueue("free", {})
    [running] = store.claim("host:1:1", 1, clock.now(), limit=1)
    assert running.payload == {"c": "A"}
    rows = type_keys(store, q.config, clock.now())
    assert [r["type"] for r in rows] == ["k", "t"]  # limited types only, by name
    k = rows[0]
    assert (k["running"], k["due"], k["waiting"]) == (1, 3, 2)
    assert k["busiest"] == [
        {"key": "A", "running": 1, "due": 2},
        {"key": "B", "running": 0, "due": 1},
    ]
    assert type_keys(store, q.config, clock.now(), top=1)[0]["busiest"][0]["key"] == "A"


def test_a_full_type_holds_back_every_due_job(setup):
    q, store, clock = setup
    for _ in range(3):
        q.enqueue("t", {})
    t = type_keys(store, q.config, clock.now())[1]
    assert (t["running"], t["due"], t["waiting"], t["busiest"]) == (0, 3, 0, [])
    store.claim("host:1:1", 1, clock.now(), limit=1)
    t = type_keys(store, q.config, clock.now())[1]
    assert (t["running"], t["due"], t["waiting"]) == (1, 2, 2)
