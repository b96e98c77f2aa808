"""Limits and defaults per job type: [types."<type>"] concurrency, rate, max_attempts, timeout,
priority and backoff; the limited claim (no head-of-line blocking); 8 real workers."""

from __future__ import annotations

import random
import signal
import threading

import pytest

from shared import JobQueue
from shared.runtime.clock import FakeClock, parse_iso
from shared.settings.config import (
    Config,
    ConfigError,
    RetryConfig,
    TypeConfig,
    WorkerConfig,
    from_dict,
)
from shared.execution.handlers import HandlerSpec, Registry
from shared.model.job import Finish, Job
from shared.model.limits import TypeLimit, type_limits
from shared.execution.policy import JobPolicy
from shared.settings.config import load
from shared.engines.contract import EngineStore
from tests.engines import raw
from tests.proc import Running, db, events, wait_until, write_config

pytestmark = (
    pytest.mark.engines
)  # the tests that use database (or make_config, queue) run on each engine

OWNER, PID = "host:1:1", 1


def limited(**types: dict) -> Config:
    return Config(types={name: TypeConfig(**t) for name, t in types.items()})


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def q(database, tmp_path, clock):
    queue = JobQueue(config=database.config(tmp_path), clock=clock)
    yield queue
    queue.close()


def claim(
    store: EngineStore, config: Config, owner: str, pid: int, now: float, limit: int = 1
) -> list[Job]:
    """Claim as the worker does: the limited claim once some type of ``config`` has a limit."""
    return store.finish_and_claim([], owner, pid, now, limit, type_limits(config))[1]


def take(q: JobQueue, config: Config, clock: FakeClock, limit: int = 1) -> list[str]:
    """Types of the jobs one claim takes."""
    return [j.type for j in claim(q.store, config, OWNER, PID, clock.now(), limit)]


def drain(q, config, clock) -> list[str]:
    out = []
    while got := take(q, config, clock):
        out += got
    return out


# -- config ----------------------------------------------------------------------------------------


def test_types_parse_and_only_concurrency_or_rate_make_a_limit():
    cfg = from_dict(
        {
            "types": {
                "report:generate": {"concurrency": 2, "rate": "10/min"},
                "exploration:run": {"max_attempts": 9, "priority": -3},
            }
        }
    )
    assert type_limits(cfg) == {"report:generate": TypeLimit("report:generate", 2, (10, 60.0))}
    assert cfg.for_type("exploration:run").max_attempts == 9
    assert cfg.for_type("unknown") == TypeConfig()


@pytest.mark.parametrize(
    "entry, key, expected",
    [
        ({"concurrency": 0}, "concurrency", "an integer >= 1"),
        ({"concurrency": 1.5}, "concurrency", "an integer"),
        ({"rate": "10 per minute"}, "rate", 'a rate like "10/min"'),
        ({"rate": "0/min"}, "rate", 'a rate like "10/min"'),
        ({"timeout": 0}, "timeout", "a number > 0"),
        ({"max_attempts": 0}, "max_attempts", "an integer >= 1"),
        ({"priority": "high"}, "priority", "an integer"),
        ({"backoff_base": -1}, "backoff_base", "a number >= 0"),
        ({"limit": 3}, "limit", "known: async_concurrency, backoff_base"),
    ],
)
def test_bad_type_settings_name_file_key_value_and_expectation(entry, key, expected):
    with pytest.raises(ConfigError) as err:
        from_dict({"types": {"report:generate": entry}}, source="jobq.toml")
    msg = str(err.value)
    assert (
        msg.startswith("jobq.toml: ")
        and f"'types.\"report:generate\".{key}'" in msg
        and expected in msg
    )


# -- concurrency -----------------------------------------------------------------------------------


def test_a_type_at_its_concurrency_stays_pending_and_other_types_flow(q, clock):
    config = limited(a={"concurrency": 2})
    for _ in range(5):
        q.enqueue("a", {}, priority=10)
    for _ in range(3):
        q.enqueue("b", {})
    assert drain(q, config, clock) == ["a", "a", "b", "b", "b"]
    assert q.counts() == {"running": 5, "pending": 3}
    running_a = [j for j in q.store.running() if j.type == "a"]
    assert q.store.finish(Finish("completed", running_a[0].id, 1, None), OWNER, clock.now())
    assert drain(q, config, clock) == ["a"]


def test_finishing_and_claiming_in_one_transaction_frees_the_slot(q, clock):
    config = limited(a={"concurrency": 1})
    first = q.enqueue("a", {})
    q.enqueue("a", {})
    assert take(q, config, clock) == ["a"] and take(q, config, clock) == []
    ok, jobs = q.store.finish_and_claim(
        [Finish("completed", first, 1, None)], OWNER, PID, clock.now(), 5, type_limits(config)
    )
    assert ok == [True] and [j.type for j in jobs] == ["a"]


def test_a_batch_never_exceeds_the_room_of_a_type(q, clock):
    config = limited(a={"concurrency": 3})
    for _ in range(10):
        q.enqueue("a", {}, priority=1)
    for _ in range(10):
        q.enqueue("b", {})
    assert take(q, config, clock, limit=8) == ["a", "a", "a", "b", "b", "b", "b", "b"]


# -- rate ------------------------------------------------------------------------------------------


def test_rate_limit_is_a_sliding_window(q, clock):
    config = limited(r={"rate": "3/min"})
    for _ in range(5):
        q.enqueue("r", {}, priority=5)
    q.enqueue("b", {})
    assert drain(q, config, clock) == ["r", "r", "r", "b"]
    clock.advance(30)
    assert take(q, config, clock) == []
    clock.advance(29.999)
    assert take(q, config, clock) == []  # the first claim was 59.999 s ago
    clock.advance(0.002)
    assert drain(q, config, clock) == ["r", "r"]
    with raw(q.config) as c:
        starts = c.execute("SELECT count(*) AS n FROM type_starts WHERE type = 'r'").fetchone()["n"]
    assert starts == 2  # the expired starts were pruned


def hold_claims_lock(q: JobQueue, then) -> threading.Thread:
    """A thread that takes the lock limited claims take (SQLite's write lock; PostgreSQL's
    advisory lock) on a connection of its own, waits until a claim of ``q.store`` is blocked on
    it (that claim has asked for the lock: SQLite's ``-wants`` stamps; a lock not granted to its
    session: ``pg_locks``), calls ``then()`` and lets go. Returns once the lock is held."""
    held, pid = (
        threading.Event(),
        q.store.conn.info.backend_pid if q.store.dialect.limits_lock else None,
    )

    def hold() -> None:
        with raw(q.config) as c:
            if pid is not None:
                c.execute("BEGIN")
                c.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(?))", (f"jobq.limits.{q.store.schema}",)
                )
                waiting = lambda: (
                    c.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "  # noqa: E731
                        "AND NOT granted AND pid = ?",
                        (pid,),
                    ).fetchone()[0]
                    > 0
                )
            else:
                c.execute("BEGIN IMMEDIATE")
                waiting = q.store.wants.waiting
            held.set()
            try:
                wait_until(waiting, timeout=10, what="the claim waits for the lock")
                then()
            finally:
                c.execute("COMMIT")

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    return thread


@pytest.mark.parametrize(
    "rate", [{"rate": "1/s"}, {"rate_per_key": "1/s"}], ids=["rate", "rate_per_key"]
)
def test_a_claim_that_waited_for_the_lock_counts_its_start_when_it_got_the_lock(q, clock, rate):
    """A rate counts real starts: a claim that waited for the lock (behind other claims, or any
    writer) must stamp its start with the time it got the lock, not the time it asked. Stamped
    earlier, its start leaves the window early and a later claim starts too soon (seen as 5
    starts of a "4/1s" type inside 1 s by the handlers' own stamps, under load)."""
    config = limited(r=rate, b={"concurrency": 5})
    for _ in range(3):
        q.enqueue("r", {}, priority=1, limit_key="k")
    q.enqueue("b", {})
    limits, asked = type_limits(config), clock.now()
    holder = hold_claims_lock(q, lambda: clock.advance(5))  # held 5 s on the claim's clock
    got = q.store.finish_and_claim([], OWNER, PID, clock.now, 1, limits)[1]
    holder.join(10)
    assert [j.type for j in got] == ["r"] and parse_iso(got[0].started_at) == pytest.approx(
        asked + 5, abs=0.001
    )
    clock.advance(0.5)  # 0.5 s after that start: the rate has no room yet
    assert take(q, config, clock) == ["b"] and take(q, config, clock) == []
    clock.advance(0.5)
    assert take(q, config, clock) == ["r"]


def test_a_rate_limited_job_only_leads_a_batch(q, clock):
    config = limited(r={"rate": "2/min"}, a={"concurrency": 2})
    for _ in range(3):
        q.enqueue("r", {}, priority=10)
        q.enqueue("a", {}, priority=5)
    for _ in range(4):
        q.enqueue("b", {})
    assert take(q, config, clock, limit=10) == ["r"]  # claimed first, it starts at once
    assert take(q, config, clock, limit=10) == ["r"]
    assert take(q, config, clock, limit=10) == ["a", "a", "b", "b", "b", "b"]


# -- the claim itself ------------------------------------------------------------------------------


def test_without_anything_held_back_the_order_is_the_plain_claim_order(q, clock):
    config = limited(a={"concurrency": 100}, c={"rate": "100/s"})
    spec = [("a", 0, -5), ("b", 3, -1), ("c", 3, -9), ("a", 3, -3), ("b", 0, -20), ("z", 1, +50)]
    orders = []
    for use_limits in (False, True):
        with raw(q.config) as c:
            c.execute("DELETE FROM jobs")  # the same jobs again for the second claim
        for queue in (q,):
            for jtype, prio, due in spec:
                queue.enqueue(jtype, {"due": due}, priority=prio, run_at=clock.now() + due)
            got = []
            while jobs := claim(
                queue.store, config if use_limits else Config(), OWNER, PID, clock.now()
            ):
                got += [(j.type, j.payload["due"]) for j in jobs]
            orders.append(got)
    assert orders[0] == orders[1] == [("c", -9), ("a", -3), ("b", -1), ("b", -20), ("a", -5)]


def test_nothing_is_claimed_while_paused(q, clock):
    q.enqueue("a", {})
    q.pause()
    assert take(q, limited(a={"concurrency": 1}), clock) == []
    q.resume()
    assert take(q, limited(a={"concurrency": 1}), clock) == ["a"]


@pytest.mark.engine_only("sqlite", reason="SQLite's query plan (PostgreSQL's: test_postgres)")
def test_the_limited_claim_reads_the_claim_index_and_only_running_rows(q):
    from shared.engines.sql.limits import CANDIDATES, STATE

    def plan(sql: str, params: dict | None = None) -> str:
        return " | ".join(
            r["detail"] for r in q.store.conn.execute("EXPLAIN QUERY PLAN " + sql, params or {})
        )

    skip, params = q.store.dialect.member("type", "full", ["a", "b"], negate=True)
    candidates = plan(CANDIDATES.format(skip=f"AND {skip} ", n=4), {"now": "2026", **params})
    assert (
        "USING INDEX jobs_claim (ANY(priority) AND run_at<?)" in candidates
        and "TEMP B-TREE" not in candidates
    )
    assert "USING INDEX jobs_running" in plan(
        STATE.format(jobs=q.store.dialect.jobs_running, latest="max(t)")
    )


# -- per-type defaults -----------------------------------------------------------------------------


def _job(jtype: str, max_attempts=None) -> Job:
    return Job(
        id="j",
        type=jtype,
        status="running",
        payload={},
        result=None,
        error=None,
        attempts=1,
        max_attempts=max_attempts,
        priority=0,
        run_at="",
        started_at=None,
        completed_at=None,
        created_at="",
        updated_at="",
    )


def test_precedence_job_then_handler_then_type_then_global():
    config = Config(
        retry=RetryConfig(max_attempts=3),
        worker=WorkerConfig(job_timeout=300),
        types={
            "t": TypeConfig(max_attempts=7, timeout=30),
            "h": TypeConfig(max_attempts=7, timeout=30),
        },
    )
    registry = Registry([HandlerSpec("h", lambda p, j: None, max_attempts=2, timeout=5)])
    policy = JobPolicy(config, registry)
    assert policy.max_attempts(_job("t")) == 7 and policy.timeout("t") == 30
    assert policy.max_attempts(_job("h")) == 2 and policy.timeout("h") == 5
    assert policy.max_attempts(_job("other")) == 3 and policy.timeout("other") == 300
    assert policy.max_attempts(_job("h", max_attempts=11)) == 11


def test_backoff_per_type_overrides_retry_section():
    config = Config(
        retry=RetryConfig(backoff_base=1, backoff_max=60),
        types={"slow": TypeConfig(backoff_base=100, backoff_max=10)},
    )
    policy = JobPolicy(config, Registry(), rng=random.Random(7))
    for attempts in range(1, 6):
        assert 7.5 <= policy.backoff(attempts, "slow") <= 10.0
        plain = min(2**attempts, 60)
        assert 0.75 * plain <= policy.backoff(attempts, "other") <= plain
        assert 0.75 * plain <= policy.backoff(attempts) <= plain


def test_enqueue_takes_the_type_priority_unless_given_one(database, tmp_path, clock):
    config = database.config(tmp_path, Config(types={"report:generate": TypeConfig(priority=5)}))
    with JobQueue(config=config, clock=clock) as queue:
        ids = [
            queue.enqueue("report:generate", {}),
            queue.enqueue("report:generate", {}, priority=-1),
            queue.enqueue("exploration:run", {}),
        ]
        ids += queue.enqueue_many(
            [("report:generate", {}), ("report:generate", {}, {"priority": 2})]
        )
        assert [queue.get(i).priority for i in ids] == [5, -1, 0, 5, 2]


# -- 8 real workers ----------------------------------------------------------------------------------


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1])
    )
    live = best = 0
    for _, d in edges:
        live += d
        best = max(best, live)
    return best


def test_limits_hold_under_eight_workers_and_other_types_keep_flowing(database, tmp_path):
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    config_path = write_config(
        tmp_path,
        handlers=["testjobs", "limitjobs"],
        supervisor={"workers": 8},
        types={"limit:held": {"concurrency": 2}, "limit:rated": {"rate": "4/1s"}},
    )
    common = {"log": str(log), "gate": str(gate)}
    with JobQueue(config=load(config_path)) as queue:  # held ones first in claim order
        queue.enqueue_many(
            [("limit:held", common, {"priority": 10}) for _ in range(6)]
            + [("limit:rated", common, {"priority": 5}) for _ in range(12)]
            + [("limit:free", common) for _ in range(30)]
        )
    sup = Running(config_path)
    try:

        def by_type() -> dict[tuple[str, str], int]:
            with db(config_path) as c:
                return {
                    (r[0], r[1]): r[2]
                    for r in c.execute(
                        "SELECT type, status, count(*) FROM jobs GROUP BY type, status"
                    )
                }

        wait_until(
            lambda: (
                by_type().get(("limit:free", "completed")) == 30
                and by_type().get(("limit:rated", "completed")) == 12
            ),
            timeout=30,
            what="free and rated jobs done while the held type waits at its limit",
        )
        assert (
            by_type()[("limit:held", "running")] == 2 and by_type()[("limit:held", "pending")] == 4
        )
        gate.touch()
        wait_until(
            lambda: by_type().get(("limit:held", "completed")) == 6,
            timeout=30,
            what="held jobs done",
        )
        ev = events(log)
        spans: dict[str, list[float]] = {}
        for e in ev:
            if e["type"] == "limit:held":
                spans.setdefault(e["job"], []).append(e["t"])
        assert len(spans) == 6 and max_overlap([(s, e) for s, e in spans.values()]) == 2
        # A rate counts claims (starts are stamped by the claim, with its lock held): at most 4
        # in any 1 s (stamps are stored to the millisecond). The handlers' own starts come a
        # moment after their claims, a moment that has no bound on a loaded machine (a worker
        # waits for a core after its commit), so the window is not checked on them.
        claimed = {
            e["job"]: parse_iso(e["claimed"])
            for e in ev
            if e["type"] == "limit:rated" and e["event"] == "start"
        }
        ran = {e["job"]: e["t"] for e in ev if e["type"] == "limit:rated" and e["event"] == "start"}
        starts = sorted(claimed.values())
        assert len(starts) == 12
        assert all(sum(s - 1.0 + 0.0005 < t <= s for t in starts) <= 4 for s in starts), starts
        assert all(ran[j] >= claimed[j] - 0.001 for j in claimed), (
            claimed,
            ran,
        )  # (one clock, ms stamps)
        sup.signal(signal.SIGTERM)
        assert sup.wait(20) == 0
    finally:
        sup.close()
