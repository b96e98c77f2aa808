"""shared.settings.schedule: which ticks of a schedule are due and the jobs they become."""

from __future__ import annotations

from types import SimpleNamespace

from shared.settings import schedule

HOUR = 3600.0
T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z, on the hour


def spec(catch_up="latest", cron="0 * * * *", tz="UTC", payload=None):
    return SimpleNamespace(
        name="hourly",
        type="report",
        cron=cron,
        timezone=tz,
        catch_up=catch_up,
        payload=payload or {"k": 1},
    )


def test_nothing_due_leaves_the_mark():
    assert schedule.due_ticks(spec(), T0, T0 + HOUR - 1) == schedule.Due([], None)


def test_latest_enqueues_only_the_most_recent_missed_tick():
    due = schedule.due_ticks(spec("latest"), T0, T0 + 5 * HOUR + 10)
    assert due == schedule.Due([T0 + 5 * HOUR], T0 + 5 * HOUR)


def test_all_enqueues_every_missed_tick_in_order():
    due = schedule.due_ticks(spec("all"), T0, T0 + 3 * HOUR)
    assert due.ticks == [T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]
    assert due.advance_to == T0 + 3 * HOUR


def test_all_is_capped():
    now = T0 + 60 * (schedule.MAX_CATCH_UP + 50)
    due = schedule.due_ticks(spec("all", cron="* * * * *"), T0, now)
    assert len(due.ticks) == schedule.MAX_CATCH_UP
    assert due.ticks[-1] == due.advance_to == now


def test_none_skips_late_ticks_but_still_advances():
    late = schedule.due_ticks(spec("none"), T0, T0 + HOUR + schedule.MISSED_GRACE + 1)
    assert late == schedule.Due([], T0 + HOUR)
    on_time = schedule.due_ticks(spec("none"), T0, T0 + HOUR + schedule.MISSED_GRACE)
    assert on_time == schedule.Due([T0 + HOUR], T0 + HOUR)


def test_tick_jobs_are_keyed_by_schedule_and_tick():
    jobs = schedule.tick_jobs(spec(), [T0, T0 + HOUR], priority=3)
    assert [j.key for j in jobs] == [
        "schedule:hourly:2025-01-01T00:00:00.000Z",
        "schedule:hourly:2025-01-01T01:00:00.000Z",
    ]
    assert [j.run_at for j in jobs] == [T0, T0 + HOUR]
    assert {j.type for j in jobs} == {"report"} and {j.priority for j in jobs} == {3}
    assert len({j.id for j in jobs}) == 2


def test_plan_decides_from_the_mark_it_is_given():
    decide = schedule.plan(spec(), T0 + 2 * HOUR)
    jobs, advance = decide(T0)
    assert [j.run_at for j in jobs] == [T0 + 2 * HOUR] and advance == T0 + 2 * HOUR
    assert decide(T0 + 2 * HOUR) == ([], None)


def test_is_due_and_fingerprint():
    assert schedule.is_due(spec(), T0, T0 + HOUR)
    assert not schedule.is_due(spec(), T0, T0 + HOUR - 1)
    assert schedule.fingerprint(spec()) != schedule.fingerprint(spec(tz="Europe/Berlin"))


def marks(by_name):
    return SimpleNamespace(schedule_marks=lambda: by_name)


def test_next_runs_use_a_mark_only_of_the_same_timing():
    config = SimpleNamespace(schedules=[spec()])
    mark = SimpleNamespace(last_tick=T0, fingerprint=schedule.fingerprint(spec()))
    stale = SimpleNamespace(last_tick=T0, fingerprint="0 8 * * *|UTC")
    [run] = schedule.next_runs(config, T0 + 10, marks({"hourly": mark}))
    assert run.next_at == T0 + HOUR and run.last_tick == T0
    [run] = schedule.next_runs(config, T0 + 10, marks({"hourly": stale}))
    assert run.last_tick is None
    assert schedule.next_runs(config, T0 + 10)[0].last_tick is None
