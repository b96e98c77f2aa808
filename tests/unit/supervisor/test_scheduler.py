"""supervisor.scheduler: a round reads the marks once and writes only for a schedule that is
due, new or changed (what is due: tests/unit/shared/test_settings_schedule.py); the lead skips
the read while the marks it read show nothing due, for at most MARKS_REREAD seconds."""

from __future__ import annotations

from types import SimpleNamespace

from shared.model.job import ScheduleMark
from shared.settings import schedule
from shared.settings.config import from_dict
from supervisor.scheduler import MARKS_REREAD, MarksSeen, run_due

T0 = 1_735_689_600.0  # on the hour


def config():
    return from_dict(
        {
            "types": {"report": {"priority": 7}},
            "schedule": [
                {"name": "hourly", "type": "report", "cron": "0 * * * *"},
                {"name": "daily", "type": "other", "cron": "0 8 * * *"},
            ],
        }
    )


class Store:
    def __init__(self, marks):
        self.marks, self.runs = marks, []

    def schedule_marks(self):
        self.reads = getattr(self, "reads", 0) + 1
        return dict(self.marks)

    def run_schedule(self, name, fingerprint, now, plan):
        mark = self.marks.get(name)
        if mark is None or mark.fingerprint != fingerprint:
            self.runs.append((name, "anchored"))
            return None
        jobs, _ = plan(mark.last_tick)
        self.runs.append((name, [(j.run_at, j.priority) for j in jobs]))
        return [j.id for j in jobs]


def mark(spec, last):
    return ScheduleMark(schedule.fingerprint(spec), last)


def test_only_due_new_or_changed_schedules_are_written():
    cfg = config()
    hourly, daily = cfg.schedules
    store = Store({"hourly": mark(hourly, T0), "daily": mark(daily, T0)})
    assert run_due(store, cfg, T0 + 1800) == 0 and store.runs == []
    assert run_due(store, cfg, T0 + 3600) == 1
    assert store.runs == [("hourly", [(T0 + 3600, 7)])]  # the type's priority


def test_a_new_or_changed_schedule_is_anchored_without_jobs():
    cfg = config()
    hourly, daily = cfg.schedules
    changed = ScheduleMark("0 9 * * *|UTC", T0)
    store = Store({"hourly": mark(hourly, T0), "daily": changed})
    assert run_due(store, cfg, T0 + 60) == 0
    assert store.runs == [("daily", "anchored")]
    store = Store({})
    assert run_due(store, cfg, T0 + 60) == 0 and len(store.runs) == 2
    assert run_due(Store({}), SimpleNamespace(schedules=[]), T0) == 0


def test_the_lead_reads_the_marks_again_only_when_a_tick_is_due_or_they_are_old():
    cfg = config()
    hourly, daily = cfg.schedules
    store = Store({"hourly": mark(hourly, T0), "daily": mark(daily, T0)})
    seen = MarksSeen()

    def round_at(now, monotonic):
        if not seen.quiet(cfg, None, now, monotonic):
            run_due(store, cfg, now, None, seen, monotonic)

    round_at(T0 + 1, 100.0)
    for i in range(1, 30):  # rounds a second apart, nothing due: no read
        round_at(T0 + 1 + i, 100.0 + i)
    assert store.reads == 1 and store.runs == []
    round_at(T0 + 60, 100.0 + MARKS_REREAD)  # read again, however quiet
    assert store.reads == 2
    round_at(T0 + 3600, 100.0 + MARKS_REREAD + 1)  # the hourly tick: read, then written
    assert store.reads == 3 and store.runs == [("hourly", [(T0 + 3600, 7)])]
    store.marks["hourly"] = mark(hourly, T0 + 3600)
    round_at(T0 + 3601, 100.0 + MARKS_REREAD + 2)  # the marks moved: read them again
    round_at(T0 + 3602, 100.0 + MARKS_REREAD + 3)
    assert store.reads == 4 and len(store.runs) == 1
    cfg = from_dict({"schedule": [{"name": "new", "type": "t", "cron": "0 * * * *"}]})
    round_at(T0 + 3603, 100.0 + MARKS_REREAD + 4)  # a reload added one: read, then anchor it
    assert store.reads == 5 and store.runs[-1] == ("new", "anchored")
