"""supervisor.scheduler: a round reads the marks once and writes only for a schedule that is
due, new or changed (what is due: tests/unit/shared/test_settings_schedule.py)."""

from __future__ import annotations

from types import SimpleNamespace

from shared.model.job import ScheduleMark
from shared.settings import schedule
from shared.settings.config import from_dict
from supervisor.scheduler import run_due

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
        return self.marks

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
