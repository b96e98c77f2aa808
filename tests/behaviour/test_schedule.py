"""Recurring jobs: cron ticks in a time zone (DST included), catch-up modes, exactly-once
enqueue across supervisors and restarts, edits on reload, and the next-run view.

Schedules are driven with a FakeClock through the supervisor's ``scheduler.run_due`` on a real
database of each engine; one process-level test runs two real supervisors on one database.
"""

from __future__ import annotations

import json

import signal
import subprocess
import sys
import threading
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from shared.settings import cron, schedule
from shared.runtime.clock import FakeClock, iso, parse_iso
from shared.settings.config import (
    Config,
    ConfigError,
    ScheduleConfig,
    TypeConfig,
    from_dict,
    load,
    load_snapshot,
    write_snapshot,
)
from shared.engines.contract import EngineStore
from shared.engines import open_store
from supervisor.scheduler import run_due
from tests.engines import raw
from tests.proc import Running, db, env, wait_until, write_config

pytestmark = pytest.mark.engines  # the tests that use database (or store) run on each engine

NY = "America/New_York"
HOUR, DAY = 3600.0, 86400.0


def at(y, mo, d, h=0, mi=0, tz=NY, fold=0) -> float:
    return datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz), fold=fold).timestamp()


def local(ts: float, tz: str = NY) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M%z")


def sched(
    cron_expr="0 8 * * *", tz=NY, catch_up="latest", name="s", type="report:generate", payload=None
) -> ScheduleConfig:
    return ScheduleConfig(
        name, type, cron_expr, tz, payload if payload is not None else {"format": "pdf"}, catch_up
    )


def cfg(*schedules: ScheduleConfig) -> Config:
    return Config(schedules=tuple(schedules))


def opened(config: Config) -> EngineStore:
    """A store on ``config``'s database, with ``raw()``: a plain connection to it (rows read
    and written around jobq)."""
    s = open_store(config)
    s.raw = lambda: raw(config)
    return s


@pytest.fixture
def store(database, tmp_path):
    s = opened(database.config(tmp_path))
    yield s
    s.close()


def job_rows(store: EngineStore) -> list[dict]:
    with store.raw() as c:
        return c.execute(
            "SELECT id, type, payload, run_at, key FROM jobs ORDER BY run_at"
        ).fetchall()


def run_ticks(
    store: EngineStore, config: Config, clock: FakeClock, until: float, step: float
) -> None:
    """Maintenance rounds every ``step`` seconds of fake time until ``until``."""
    while clock.now() < until:
        clock.advance(min(step, until - clock.now()))
        run_due(store, config, clock.now())


def start(store, config, when: float) -> FakeClock:
    """A clock at ``when`` and a first round, which anchors new schedules there."""
    clock = FakeClock(when)
    assert run_due(store, config, clock.now()) == 0
    return clock


# -- daylight saving time (America/New_York) ---------------------------------------------------


def test_spring_forward_job_in_the_skipped_hour_runs_once_right_after_the_jump(store):
    config = cfg(sched("30 2 * * *"))
    clock = start(store, config, at(2026, 3, 6, 12))
    run_ticks(store, config, clock, at(2026, 3, 10, 12), step=300)
    runs = [local(parse_iso(r["run_at"])) for r in job_rows(store)]
    # 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
    assert runs == [
        "2026-03-07 02:30-0500",
        "2026-03-08 03:00-0400",
        "2026-03-09 02:30-0400",
        "2026-03-10 02:30-0400",
    ]


def test_fall_back_job_in_the_repeated_hour_runs_once(store):
    config = cfg(sched("30 1 * * *"))
    clock = start(store, config, at(2026, 10, 30, 12))
    run_ticks(store, config, clock, at(2026, 11, 3, 12), step=300)
    runs = [local(parse_iso(r["run_at"])) for r in job_rows(store)]
    # 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens twice, the job runs once.
    assert runs == [
        "2026-10-31 01:30-0400",
        "2026-11-01 01:30-0400",
        "2026-11-02 01:30-0500",
        "2026-11-03 01:30-0500",
    ]


@pytest.mark.parametrize("day, hours", [((2026, 3, 8), 23), ((2026, 11, 1), 25)])
def test_hourly_job_follows_real_time_across_transitions(store, day, hours):
    config = cfg(sched("0 * * * *"))
    clock = start(store, config, at(*day) - 1)
    run_ticks(store, config, clock, at(day[0], day[1], day[2] + 1) - 1, step=600)
    ticks = [parse_iso(r["run_at"]) for r in job_rows(store)]
    assert len(ticks) == hours
    assert all(b - a == HOUR for a, b in zip(ticks, ticks[1:]))


@pytest.mark.parametrize(
    "expr",
    [
        "30 2 * * *",
        "30 1 * * *",
        "0 * * * *",
        "*/20 1-3 * * *",
        "0 0 * * 0",
        "15 3 1 * *",
        "0 8 * * 1-5",
    ],
)
@pytest.mark.parametrize(
    "window",
    [
        (at(2026, 3, 1), at(2026, 3, 20)),
        (at(2026, 10, 25), at(2026, 11, 8)),
        (at(2026, 11, 1, 1, 10, fold=1), at(2026, 11, 1, 1, 50, fold=1)),
    ],
)
@pytest.mark.parametrize("keep", [1, 3, 1000])
def test_ticks_between_matches_a_plain_forward_walk(expr, window, keep):
    after, until = window
    walk, t = [], after
    while (t := cron.next_after(expr, NY, t)) is not None and t <= until:
        walk.append(t)
    assert cron.ticks_between(expr, NY, after, until, keep) == walk[-keep:]


# -- catch-up -----------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, 0, 10, tzinfo=timezone.utc).timestamp()  # hourly ticks at :00 UTC


@pytest.mark.parametrize("mode, hours", [("latest", [5]), ("none", []), ("all", [1, 2, 3, 4, 5])])
def test_missed_ticks_follow_catch_up(store, mode, hours):
    config = cfg(sched("0 * * * *", "UTC", catch_up=mode))
    clock = start(store, config, T0)
    clock.set(T0 + 5 * HOUR + 600)  # down from 00:10 to 05:20: ticks 01:00..05:00 missed
    run_due(store, config, clock.now())
    run_due(store, config, clock.now())  # a second round changes nothing
    got = [
        datetime.fromtimestamp(parse_iso(r["run_at"]), timezone.utc).hour for r in job_rows(store)
    ]
    assert got == hours
    assert (
        store.schedule_marks()["s"].last_tick == T0 - 600 + 5 * HOUR
    )  # skipped ticks are handled too


def test_catch_up_none_still_runs_a_tick_that_is_only_slightly_late(store):
    config = cfg(sched("0 * * * *", "UTC", catch_up="none"))
    clock = start(store, config, T0)
    clock.set(T0 - 600 + HOUR + schedule.MISSED_GRACE - 1)
    assert run_due(store, config, clock.now()) == 1


def test_catch_up_all_is_capped_to_the_most_recent_ticks(store, monkeypatch):
    monkeypatch.setattr(schedule, "MAX_CATCH_UP", 3)
    config = cfg(sched("* * * * *", "UTC", catch_up="all"))
    clock = start(store, config, T0)
    clock.advance(2 * DAY)
    assert run_due(store, config, clock.now()) == 3
    runs = [parse_iso(r["run_at"]) for r in job_rows(store)]
    assert runs == [T0 + 2 * DAY - 600 + 60 * k for k in (8, 9, 10)]


def test_a_new_schedule_starts_at_first_sight_not_in_the_past(store):
    config = cfg(sched("0 * * * *", "UTC", catch_up="all"))
    clock = start(store, config, T0 + 30 * DAY)
    assert job_rows(store) == []
    run_ticks(store, config, clock, clock.now() + HOUR, step=60)
    assert len(job_rows(store)) == 1


# -- the jobs themselves ---------------------------------------------------------------------------


def test_tick_job_has_type_payload_key_due_time_and_type_priority(store):
    config = cfg(sched("0 8 * * *", payload={"reportId": "daily", "format": "pdf"})).replace(
        types={"report:generate": TypeConfig(priority=7)}
    )
    clock = start(store, config, at(2026, 6, 1, 7, 59))
    clock.advance(120)
    assert run_due(store, config, clock.now()) == 1
    with store.raw() as c:
        [row] = c.execute("SELECT * FROM jobs").fetchall()
    assert row["type"] == "report:generate" and row["status"] == "pending"
    assert json.loads(row["payload"]) == {"reportId": "daily", "format": "pdf"}
    assert row["run_at"] == iso(at(2026, 6, 1, 8))
    assert row["key"] == f"schedule:s:{iso(at(2026, 6, 1, 8))}"
    assert row["priority"] == 7


# -- exactly once ----------------------------------------------------------------------------------


def test_two_schedulers_on_one_file_enqueue_each_tick_once(database, tmp_path):
    """Two supervisors' schedulers, each with its own connection, race through five rounds."""
    path = database.config(tmp_path)
    config = cfg(sched("0 * * * *", "UTC", catch_up="all"), sched("*/30 * * * *", "UTC", name="t"))
    rounds = [T0 + k * 10 * HOUR for k in range(6)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def supervisor() -> None:
        try:
            with opened(path) as s:
                for now in rounds:
                    barrier.wait(30)
                    run_due(s, config, now)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=supervisor) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    with opened(path) as s:
        keys = [r["key"] for r in job_rows(s)]
    assert len(keys) == len(set(keys))
    assert sum(k.startswith("schedule:s:") for k in keys) == 50  # every hour of 5 x 10 hours
    assert sum(k.startswith("schedule:t:") for k in keys) == 5  # the latest tick of each round


def test_a_crash_inside_the_enqueue_leaves_nothing_and_the_restart_enqueues_once(
    database, tmp_path, monkeypatch
):
    path = database.config(tmp_path)
    config = cfg(sched("0 * * * *", "UTC", catch_up="all"))
    first = opened(path)
    run_due(first, config, T0)
    real = first.enqueue

    def enqueue_then_die(*args, **kw):
        real(*args, **kw)
        raise KeyboardInterrupt("killed mid-transaction")

    monkeypatch.setattr(first, "enqueue", enqueue_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_due(first, config, T0 + 3 * HOUR)
    first.close()
    restarted = opened(path)
    assert job_rows(restarted) == [] and restarted.schedule_marks()["s"].last_tick == T0
    assert run_due(restarted, config, T0 + 3 * HOUR) == 3
    assert run_due(restarted, config, T0 + 3 * HOUR) == 0
    restarted.close()


def test_the_idempotency_key_holds_even_if_the_mark_goes_back(store):
    config = cfg(sched("0 * * * *", "UTC", catch_up="all"))
    run_due(store, config, T0)
    run_due(store, config, T0 + 3 * HOUR)
    before = job_rows(store)
    with store.raw() as c:
        c.execute("UPDATE schedule_marks SET last_tick = ?", (iso(T0),))  # e.g. an old backup
    assert run_due(store, config, T0 + 3 * HOUR) == 3  # the same three jobs' ids, nothing new
    assert job_rows(store) == before


# -- edits on reload -------------------------------------------------------------------------------


def test_changing_the_cron_re_anchors_instead_of_catching_up(store):
    clock = start(store, cfg(sched("0 8 * * *")), at(2026, 6, 1, 7))
    run_ticks(store, cfg(sched("0 8 * * *")), clock, at(2026, 6, 1, 10), step=300)
    assert len(job_rows(store)) == 1
    edited = cfg(sched("0 9 * * *"))  # at 10:00, after 09:00 passed: not caught up
    run_ticks(store, edited, clock, at(2026, 6, 2, 10), step=300)
    runs = [local(parse_iso(r["run_at"])) for r in job_rows(store)]
    assert runs == ["2026-06-01 08:00-0400", "2026-06-02 09:00-0400"]


def test_editing_payload_or_type_applies_to_the_next_tick_and_removal_stops_it(store):
    clock = start(store, cfg(sched("0 8 * * *")), at(2026, 6, 1, 7))
    run_ticks(store, cfg(sched("0 8 * * *")), clock, at(2026, 6, 1, 9), step=300)
    edited = cfg(sched("0 8 * * *", type="exploration:run", payload={"sessionId": "x"}))
    run_ticks(store, edited, clock, at(2026, 6, 2, 9), step=300)
    assert [(r["type"], json.loads(r["payload"])) for r in job_rows(store)] == [
        ("report:generate", {"format": "pdf"}),
        ("exploration:run", {"sessionId": "x"}),
    ]
    run_ticks(store, cfg(), clock, at(2026, 6, 5, 9), step=1800)
    assert len(job_rows(store)) == 2


# -- next run (for `jobs` / `status`) ------------------------------------------------------------


def test_next_runs_lists_each_schedule_with_its_next_and_last_tick(store):
    config = cfg(sched("0 8 * * *"), sched("30 2 * * *", name="night", catch_up="none"))
    clock = start(store, config, at(2026, 3, 7, 9))
    run_ticks(store, config, clock, at(2026, 3, 8, 12), step=600)
    runs = schedule.next_runs(config, clock.now(), store)
    assert [(r.name, r.catch_up) for r in runs] == [("s", "latest"), ("night", "none")]
    assert local(runs[0].next_at) == "2026-03-09 08:00-0400"
    assert local(runs[0].last_tick) == "2026-03-08 08:00-0400"
    assert local(runs[1].next_at) == "2026-03-09 02:30-0400"
    assert local(runs[1].last_tick) == "2026-03-08 03:00-0400"
    assert [r.last_tick for r in schedule.next_runs(config, clock.now())] == [None, None]


# -- config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, key, expected",
    [
        (
            {"name": "a", "type": "t", "cron": "0 25 * * *"},
            "schedule[0].cron",
            "5-field cron expression",
        ),
        (
            {"name": "a", "type": "t", "cron": "0 8 * * * *"},
            "schedule[0].cron",
            "5-field cron expression",
        ),
        ({"name": "a", "type": "t"}, "schedule[0].cron", "is missing"),
        (
            {"name": "a", "type": "t", "cron": "0 8 * * *", "timezone": "America/Nowhere"},
            "schedule[0].timezone",
            "IANA time zone",
        ),
        (
            {"name": "a", "type": "t", "cron": "0 8 * * *", "catch_up": "some"},
            "schedule[0].catch_up",
            "'latest'",
        ),
        ({"name": "a", "type": "", "cron": "0 8 * * *"}, "schedule[0].type", "non-empty string"),
        (
            {"name": "a", "type": "t", "cron": "0 8 * * *", "payload": "x"},
            "schedule[0].payload",
            "table",
        ),
        (
            {"name": "a", "type": "t", "cron": "0 8 * * *", "every": 5},
            "schedule[0].every",
            "known: catch_up",
        ),
    ],
)
def test_bad_schedule_names_file_key_value_and_expectation(entry, key, expected):
    with pytest.raises(ConfigError) as err:
        from_dict({"schedule": [entry]}, source="/etc/jobq.toml")
    msg = str(err.value)
    assert msg.startswith("/etc/jobq.toml: ") and f"'{key}'" in msg and expected in msg


def test_duplicate_schedule_names_and_toml_dates_in_payload_are_refused(tmp_path):
    entry = {"name": "a", "type": "t", "cron": "0 8 * * *"}
    with pytest.raises(ConfigError, match=r"'schedule\[1\].name' = 'a': expected a name no other"):
        from_dict({"schedule": [entry, entry]})
    path = tmp_path / "jobq.toml"
    path.write_text(
        '[[schedule]]\nname = "a"\ntype = "t"\ncron = "0 8 * * *"\npayload = { day = 2026-01-01 }\n'
    )
    with pytest.raises(ConfigError, match=r"'schedule\[0\].payload' = .*no TOML dates"):
        load(path)


def test_schedules_round_trip_through_to_dict_and_the_worker_snapshot(tmp_path):
    config = cfg(
        sched("0 8 * * *", payload={"a": [1, {"b": None}]}), sched("* * * * *", "UTC", "all", "x")
    )
    write_snapshot(config, str(tmp_path / "snap.json"))
    assert load_snapshot(str(tmp_path / "snap.json")).schedules == config.schedules


# -- two real supervisors ------------------------------------------------------------------------


def test_two_supervisors_on_one_file_enqueue_each_missed_tick_once(database, tmp_path):
    """Ten yearly ticks missed (catch_up = "all"); two supervisors start at once on the file."""
    entry = {
        "name": "yearly",
        "type": "test:noop",
        "cron": "0 0 1 1 *",
        "timezone": "UTC",
        "payload": {},
        "catch_up": "all",
    }
    config_path = write_config(tmp_path, supervisor={"workers": 0}, schedule=[entry])
    spec = from_dict({"schedule": [entry]}).schedules[0]
    decade_ago = at(datetime.now(timezone.utc).year - 10, 1, 1, tz="UTC")
    with open_store(load(config_path)) as s:  # as if the last supervisor ran 10 years ago
        s.run_schedule("yearly", schedule.fingerprint(spec), decade_ago, lambda last: ([], None))
    sups = [Running(config_path), Running(config_path)]
    try:

        def count() -> int:
            with db(config_path) as c:
                return c.execute(
                    "SELECT count(*) FROM jobs WHERE key LIKE 'schedule:yearly:%'"
                ).fetchone()[0]

        wait_until(lambda: count() >= 10, timeout=20, what="10 missed ticks enqueued")
        # Each supervisor takes a `jobq scale` request in a maintenance round: two requests taken
        # one after the other mean at least one whole round of each (its schedules included) ran
        # after the ten were enqueued.
        for _ in range(2):
            r = subprocess.run(
                [sys.executable, "-m", "supervisor", "scale", "0", "--config", str(config_path)],
                capture_output=True,
                text=True,
                env=env(),
                timeout=60,
                cwd=str(tmp_path),
            )
            assert r.returncode == 0 and r.stdout.count("scaling to 0 workers") == 2, (
                r.stdout + r.stderr
            )
        assert count() == 10
        for sup in sups:
            sup.signal(signal.SIGTERM)
        assert [sup.wait(20) for sup in sups] == [0, 0]
        logs = "".join(sup.output() for sup in sups)
        assert logs.count("schedule.enqueued") >= 1
    finally:
        for sup in sups:
            sup.close()
