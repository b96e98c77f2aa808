"""Per-key limits and fairness: ``concurrency_per_key``, ``rate_per_key`` and
``fair = true`` held by the limited claim on each engine, and by real workers."""

from __future__ import annotations

import time

import pytest

from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock, parse_iso
from shared.settings.config import from_dict, load
from shared.model.job import Finish
from shared.model.limits import type_limits
from tests.proc import db, wait_until, write_config

pytestmark = pytest.mark.engines

OWNER, PID = "host:1:1", 1


def keyed_queue(database, tmp_path, clock, **settings):
    cfg = load(write_config(tmp_path, types={"key:job": {"key": "payload.customer", **settings}}))
    return JobQueue(config=cfg, clock=clock)


def drive(q, clock, steps: int, tick: float = 0.0):
    """One worker claiming one job at a time; when a claim finds nothing, the oldest running job
    completes. Returns the keys in start order and the most running at once per key."""
    limits, started, running, most = type_limits(q.config), [], [], {}
    for _ in range(steps):
        clock.advance(tick)
        got = q.store.claim_limited(OWNER, PID, clock.now(), limits, 1)
        for j in got:
            key = j.payload["customer"]
            started.append(key)
            running.append((j, key))
            most[key] = max(most.get(key, 0), sum(k == key for _, k in running))
        if not got and running:
            j, _ = running.pop(0)
            q.store.finish_and_claim(
                [Finish("completed", j.id, j.attempts, None)], OWNER, PID, clock.now(), 0
            )
    return started, most


def test_fair_turns_start_every_b_job_before_50_more_a_jobs(database, tmp_path):
    clock = FakeClock(1_800_000_000)
    q = keyed_queue(database, tmp_path, clock, concurrency_per_key=2, fair=True)
    try:
        q.enqueue_many([("key:job", {"customer": "A"}) for _ in range(10_000)], batch_size=5000)
        clock.advance(1)
        q.enqueue_many([("key:job", {"customer": "B"}) for _ in range(10)])
        started, most = drive(q, clock, 80)
        last_b = max(i for i, k in enumerate(started) if k == "B")
        assert started.count("B") == 10 and started[:last_b].count("A") < 50, "".join(started)
        assert most == {"A": 2, "B": 2}
    finally:
        q.close()


def test_without_fair_a_key_at_its_limit_is_stepped_over(database, tmp_path):
    clock = FakeClock(1_800_000_000)
    q = keyed_queue(database, tmp_path, clock, concurrency_per_key=2)
    try:
        q.enqueue_many([("key:job", {"customer": "A"}) for _ in range(50)])
        clock.advance(1)
        q.enqueue_many([("key:job", {"customer": "B"}) for _ in range(3)])
        started, most = drive(q, clock, 20)
        assert started[:4] == ["A", "A", "B", "B"] and most == {"A": 2, "B": 2}
    finally:
        q.close()


def test_rate_per_key_starts_at_most_10_in_any_60_s_per_key_over_5_minutes(database, tmp_path):
    clock = FakeClock(1_800_000_000)
    q = keyed_queue(database, tmp_path, clock, rate_per_key="10/min")
    try:
        q.enqueue_many([("key:job", {"customer": c}) for c in "AB" for _ in range(100)])
        limits, starts = type_limits(q.config), {"A": [], "B": []}
        for _ in range(300 * 4):  # 5 minutes in steps of 0.25 s
            clock.advance(0.25)
            for j in q.store.claim_limited(OWNER, PID, clock.now(), limits, 4):
                starts[j.payload["customer"]].append(clock.now())
        for key, ts in starts.items():
            assert 45 <= len(ts) <= 60, (key, len(ts))
            assert all(sum(s <= t < s + 60 for t in ts) <= 10 for s in ts), key
    finally:
        q.close()


def test_the_fair_walk_steps_over_full_keys_and_wraps_round_from_its_turn(database, tmp_path):
    clock = FakeClock(1_800_000_000)
    q = keyed_queue(database, tmp_path, clock, concurrency_per_key=1, fair=True)
    try:
        keys = [f"k{i:02d}" for i in range(12)]
        q.enqueue_many([("key:job", {"customer": k}) for k in keys for _ in range(3)])
        limits = type_limits(q.config)

        def claim(n: int) -> list:
            clock.advance(0.01)
            return q.store.claim_limited(OWNER, PID, clock.now(), limits, n)

        def finish(*jobs) -> None:
            q.store.finish_and_claim(
                [Finish("completed", j.id, j.attempts, None) for j in jobs],
                OWNER,
                PID,
                clock.now(),
                0,
            )

        running = {j.payload["customer"]: j for j in claim(5)}  # one walk serves five keys
        assert sorted(running) == keys[:5]
        for _ in range(7):
            running.update({j.payload["customer"]: j for j in claim(1)})
        assert sorted(running) == keys and claim(3) == []  # every key at its limit: none taken
        finish(running.pop("k02"), running.pop("k06"))  # the turn is at k11: the walk wraps round
        got = claim(3)
        assert sorted(j.payload["customer"] for j in got) == ["k02", "k06"]
        running.update({j.payload["customer"]: j for j in got})
        finish(running.pop("k00"), running.pop("k07"))  # the turn is at k06: k07 comes before k00
        assert [j.payload["customer"] for j in claim(1)] == ["k07"]
    finally:
        q.close()


def test_a_dead_workers_job_requeued_frees_its_keys_slot_at_once(database, tmp_path):
    clock = FakeClock(1_800_000_000)
    q = keyed_queue(database, tmp_path, clock, concurrency_per_key=1, fair=True)
    try:
        q.enqueue_many([("key:job", {"customer": "A"}) for _ in range(3)])
        limits = type_limits(q.config)
        (held,) = q.store.claim_limited("dead:1:1", 1, clock.now(), limits, 1)
        assert q.store.claim_limited(OWNER, PID, clock.now(), limits, 1) == []  # A at its limit
        released = q.store.release_owner(
            "dead:1:1", "worker died", clock.now(), max_attempts_for=lambda j: 5
        )
        assert [(r.id, r.status) for r in released] == [(held.id, "pending")]
        got = q.store.claim_limited(OWNER, PID, clock.now(), limits, 2)
        assert len(got) == 1 and got[0].payload == {"customer": "A"}  # one slot, free again
    finally:
        q.close()


@pytest.mark.engine_only("sqlite", reason="SQLite's query plan")
@pytest.mark.parametrize(
    "after", ["turn", "given"]
)  # the first pass reads the turn; a wrap is given ""
def test_the_fair_walk_seeks_the_key_index_and_scans_no_jobs(database, tmp_path, after):
    from shared.engines.sql.keys import FROM_TURN, WALK

    q = keyed_queue(database, tmp_path, FakeClock(1_800_000_000), concurrency_per_key=1, fair=True)
    try:
        d = q.store.dialect
        room = f"NOT ({d.any_of.format(col='walk.k', param=':wfull')})"
        start = FROM_TURN if after == "turn" else ":after"
        plan = " | ".join(
            r["detail"]
            for r in q.store.conn.execute(
                "EXPLAIN QUERY PLAN " + WALK.format(after=start, upto="", extra="", room=room),
                {
                    "wfull": d.list_param(["a"]),
                    "type": "key:job",
                    "after": "",
                    "now": "2026",
                    "want": 1,
                    "probes": 64,
                },
            )
        )
        assert "USING INDEX jobs_key_claim (type=? AND limit_key>?)" in plan, plan
        assert "USING INDEX jobs_key_claim (type=? AND limit_key=?)" in plan, plan
        assert "SCAN jobs" not in plan, plan
    finally:
        q.close()


def test_immediate_mode_runs_a_fair_types_keyed_job_at_enqueue(database, tmp_path):
    from worker import handler

    @handler("key:job")
    def keyed(payload, job):
        return payload["customer"]

    cfg = load(
        write_config(
            tmp_path,
            types={"key:job": {"key": "payload.customer", "concurrency_per_key": 1, "fair": True}},
        )
    )
    with JobQueue(config=cfg, immediate=True, handlers=[keyed]) as q:
        job = q.get(q.enqueue("key:job", {"customer": "A"}))  # taken by its id: no turn of keys
        assert (job.status, job.result) == ("completed", "A")


def test_a_missing_key_path_names_the_type_and_path_and_writes_nothing(tmp_path):
    cfg = from_dict(
        {"database": str(tmp_path / "x.db"), "types": {"key:job": {"key": "payload.customer.id"}}}
    )
    with JobQueue(config=cfg) as q:
        with pytest.raises(ValueError, match=r"'key:job'.*payload\.customer\.id"):
            q.enqueue("key:job", {"customer": {"name": "x"}})
        with pytest.raises(ValueError, match="enqueue_many item 1.*payload.customer.id"):
            q.enqueue_many([("key:job", {"customer": {"id": 7}}), ("key:job", {})])
        with pytest.raises(ValueError, match="limit_key"):
            q.enqueue("key:job", {}, limit_key="")
        assert q.counts() == {}
        assert q.get(q.enqueue("key:job", {"customer": {"id": 7}})).payload == {
            "customer": {"id": 7}
        }
        assert q.get(q.enqueue("key:job", {}, limit_key="tenant-9")) is not None


def test_eight_workers_hold_two_runs_per_key_and_serve_b_fairly(database, tmp_path, sup_factory):
    config_path = write_config(
        tmp_path,
        handlers=["keyjobs"],
        supervisor={"workers": 8},
        types={"key:job": {"key": "payload.customer", "concurrency_per_key": 2, "fair": True}},
    )
    with JobQueue(config=load(config_path)) as q:
        q.enqueue_many([("key:job", {"customer": "A"}) for _ in range(10_000)], batch_size=5000)
        sup_factory(config_path)
        wait_until(lambda: q.counts().get("completed", 0) >= 10, timeout=30, what="A jobs running")
        # the 10 B jobs in one transaction: ten single enqueues would each wait for the write
        # lock behind the workers' claims, and the A jobs started meanwhile measured that wait,
        # not the fair turn (on SQLite up to 449 A starts in one run)
        b_ids = q.enqueue_many([("key:job", {"customer": "B"}) for _ in range(10)])
        # from when they were committed (the call returned), not from created_at: the stamp is
        # taken before the write lock, and A jobs started while the enqueue waited for it
        # (64 in a loaded CI run) are not the fair turn's to answer for
        b_enqueued = time.time()
        wait_until(
            lambda: all(q.get(i).status == "completed" for i in b_ids),
            timeout=60,
            what="every B job done",
        )
    with db(config_path) as c:
        runs = [
            (r[0], parse_iso(r[1]), parse_iso(r[2]))
            for r in c.execute(
                "SELECT j.limit_key, a.started_at, a.ended_at FROM job_attempts a JOIN jobs j ON j.id = a.job_id"
            )
        ]
    assert max_overlap_per_key(runs) <= 2
    last_b = max(s for k, s, _ in runs if k == "B")
    a_between = sum(1 for k, s, _ in runs if k == "A" and b_enqueued <= s <= last_b)
    print(f"\n[{database.name}] A jobs started while the 10 B jobs were served: {a_between}")
    # Served in claim order (not fair), the B jobs would wait behind the ~9,990 A jobs left; by
    # turns, about 10 A jobs start beside them on a quiet machine. The bound leaves room for a
    # loaded one: on SQLite a B job's outcome can wait its turn for the write lock while the A
    # slots keep turning (70 A starts seen once in a loaded CI run), which is the lock, not
    # the turns.
    assert a_between < 300


def max_overlap_per_key(runs: list[tuple[str, float, float]]) -> int:
    """The most runs of one key at once, from (key, start, end) (an end before a start at the same time)."""
    most = 0
    for key in {k for k, _, _ in runs}:
        events = sorted(
            [(s, 1) for k, s, _ in runs if k == key] + [(e, -1) for k, _, e in runs if k == key]
        )
        now = 0
        for _, d in events:
            now += d
            most = max(most, now)
    return most


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rate_per_key_holds_in_real_time_over_5_minutes_under_eight_workers(
    database, tmp_path, sup_factory
):
    """Per-key rates in real time: 51 starts of each key take five windows of 60 s, at most 10 in
    each. Starts are the handlers' own (the attempt history), a few ms after their claims, so a
    window is checked 0.25 s shorter than 60 s to leave room for that lag."""
    config_path = write_config(
        tmp_path,
        handlers=["keyjobs"],
        supervisor={"workers": 8},
        types={"key:job": {"key": "payload.customer", "rate_per_key": "10/min"}},
    )
    with JobQueue(config=load(config_path)) as q:
        q.enqueue_many([("key:job", {"customer": c}) for c in "AB" for _ in range(60)])
        sup_factory(config_path)

        def starts() -> dict[str, list[float]]:
            with db(config_path) as c:
                rows = c.execute(
                    "SELECT j.limit_key, a.started_at FROM job_attempts a "
                    "JOIN jobs j ON j.id = a.job_id"
                ).fetchall()
            out: dict[str, list[float]] = {"A": [], "B": []}
            for r in rows:
                out[r[0]].append(parse_iso(r[1]))
            return {k: sorted(v) for k, v in out.items()}

        got = wait_until(
            lambda: (s := starts()) and all(len(v) >= 51 for v in s.values()) and s,
            timeout=400,
            what="51 starts of each key",
            interval=1.0,
        )
    for key, ts in got.items():
        most = max(sum(s - 59.75 < t <= s for t in ts) for s in ts)
        print(
            f"\n[{database.name}] key {key}: {len(ts)} starts over {ts[-1] - ts[0]:.1f} s, "
            f"at most {most} in any 60 s"
        )
        assert most <= 10 and ts[50] - ts[0] >= 295, (key, most, ts[50] - ts[0])
