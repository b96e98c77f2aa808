"""The supervisor's side of recurring jobs: every maintenance round, enqueue the due ticks of
each ``[[schedule]]`` entry exactly once.

Stateless: what it remembers lives in the database (``schedule_marks``), so a restart, or a
second supervisor on the same file, carries on where the last round left off; each tick's job
has an idempotency key on top. It reads the config it is given each round, so an edited or
removed entry takes effect at the first round after a reload. ``shared.settings.schedule`` decides
which ticks are due; the store's ``run_schedule`` reads, enqueues and advances in one transaction.
"""

from __future__ import annotations

from typing import Any

from shared.settings import cron, schedule
from shared.runtime.clock import iso
from shared.runtime.logs import event, get_logger

log = get_logger("supervisor")


def run_due(store: Any, config: Any, now: float) -> int:
    """Enqueue the due ticks of ``config.schedules`` at ``now``; returns the number of jobs
    enqueued. Costs one read, plus a write transaction only for a schedule with a tick due (or
    seen for the first time, or changed)."""
    marks = store.schedule_marks()
    enqueued = 0
    for spec in config.schedules:
        mark = marks.get(spec.name)
        if (
            mark is not None
            and mark.fingerprint == schedule.fingerprint(spec)
            and not schedule.is_due(spec, mark.last_tick, now)
        ):
            continue
        enqueued += _run_one(store, config, spec, now)
    return enqueued


def _run_one(store: Any, config: Any, spec: Any, now: float) -> int:
    priority = config.for_type(spec.type).priority or 0
    ids = store.run_schedule(
        spec.name, schedule.fingerprint(spec), now, schedule.plan(spec, now, priority)
    )
    if ids is None:
        nxt = cron.next_after(spec.cron, spec.timezone, now)
        event(
            log,
            "schedule.anchored",
            schedule=spec.name,
            cron=spec.cron,
            timezone=spec.timezone,
            next=iso(nxt) if nxt is not None else "never",
        )
        return 0
    if ids:
        event(
            log,
            "schedule.enqueued",
            schedule=spec.name,
            type=spec.type,
            jobs=len(ids),
            ids=",".join(ids),
        )
    return len(ids)
