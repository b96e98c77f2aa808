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

from shared.model.queuenames import DEFAULT_QUEUE
from shared.settings import cron, schedule
from shared.runtime.clock import iso
from shared.runtime.logs import event, get_logger

log = get_logger("supervisor")


def run_due(store: Any, config: Any, now: float, registry: Any = None) -> int:
    """Enqueue the due ticks of ``config.schedules`` and of ``registry``'s tasks' own schedules
    (the file's entry wins where both name one: ``shared.settings.schedule.entries``) at
    ``now``; returns the number of jobs enqueued. Costs one read, plus a write transaction only
    for a schedule with a tick due (or seen for the first time, or changed)."""
    marks = store.schedule_marks()
    enqueued = 0
    for spec in schedule.entries(config, registry):
        mark = marks.get(spec.name)
        if (
            mark is not None
            and mark.fingerprint == schedule.fingerprint(spec)
            and not schedule.is_due(spec, mark.last_tick, now)
        ):
            continue
        enqueued += _run_one(store, config, spec, now, registry)
    return enqueued


def _run_one(store: Any, config: Any, spec: Any, now: float, registry: Any) -> int:
    typed = config.for_type(spec.type)
    served = registry.get(spec.type) if registry is not None else None
    # the type's queue, as an enqueue without one finds it (shared.producer.newjobs)
    queue = typed.queue or (served.queue if served is not None else None) or DEFAULT_QUEUE
    ids = store.run_schedule(
        spec.name,
        schedule.fingerprint(spec),
        now,
        schedule.plan(spec, now, typed.priority or 0, queue),
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
