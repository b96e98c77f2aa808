"""The supervisor's side of recurring jobs: every maintenance round, enqueue the due ticks of
each ``[[schedule]]`` entry exactly once.

What it remembers lives in the database (``schedule_marks``), so a restart, or a second
supervisor on the same file, carries on where the last round left off; each tick's job has an
idempotency key on top. The upkeep lead keeps the marks it last read (:class:`MarksSeen`) and
skips a round's read while none of them is due (they only move forward, so a tick they do not
show due is not due), reading them again at least every :data:`MARKS_REREAD` seconds. It reads the config it is given each round, so an edited or
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

MARKS_REREAD = 60.0  # seconds: the longest the lead goes on the marks it read (see MarksSeen)


class MarksSeen:
    """The schedule marks as a round last read them (none yet: ``marks`` is None), and when
    (monotonic seconds)."""

    def __init__(self) -> None:
        self.marks: dict[str, Any] | None = None
        self.read_at = 0.0
        self.config: Any = None  # the config they were read under: a reload reads again

    def quiet(self, config: Any, registry: Any, now: float, monotonic: float) -> bool:
        """Whether this round may skip the read: marks read less than :data:`MARKS_REREAD` ago
        show no schedule due, new or changed at ``now``, under this same ``config`` (a reload,
        ``jobq reload`` after marks were edited by hand included, reads them again)."""
        if self.marks is None or self.config is not config:
            return False
        if monotonic - self.read_at >= MARKS_REREAD:
            return False
        marks = self.marks
        return not any(
            _due(spec, marks.get(spec.name), now) for spec in schedule.entries(config, registry)
        )


def _due(spec: Any, mark: Any, now: float) -> bool:
    """Does ``spec`` need a write at ``now``: a tick due, or seen for the first time or changed?"""
    return (
        mark is None
        or mark.fingerprint != schedule.fingerprint(spec)
        or schedule.is_due(spec, mark.last_tick, now)
    )


def run_due(
    store: Any,
    config: Any,
    now: float,
    registry: Any = None,
    seen: MarksSeen | None = None,
    monotonic: float = 0.0,
) -> int:
    """Enqueue the due ticks of ``config.schedules`` and of ``registry``'s tasks' own schedules
    (the file's entry wins where both name one: ``shared.settings.schedule.entries``) at
    ``now``; returns the number of jobs enqueued. Costs one read, plus a write transaction only
    for a schedule with a tick due (or seen for the first time, or changed). ``seen``: where to
    keep the marks read (at ``monotonic``) while they stay as read (no schedule was written)."""
    marks = store.schedule_marks()
    due = [
        spec for spec in schedule.entries(config, registry) if _due(spec, marks.get(spec.name), now)
    ]
    if seen is not None:
        seen.marks, seen.read_at, seen.config = (None if due else marks), monotonic, config
    return sum(_run_one(store, config, spec, now, registry) for spec in due)


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
