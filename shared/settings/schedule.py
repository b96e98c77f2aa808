"""Recurring jobs: which ticks of a ``[[schedule]]`` entry are due, the jobs they become, and
the next run of each schedule (for the ops commands).

A schedule is a ``[[schedule]]`` entry or a task's own (``@task(schedule=...)``: see
:func:`entries`). Everything here is a pure function of (schedule, last tick handled, now); the
supervisor's
``supervisor.scheduler`` applies it through the store's ``run_schedule``. A tick becomes a job
with the idempotency key ``schedule:<name>:<tick as ISO UTC>``, so a tick is enqueued once even
if two supervisors (or a restart) evaluate it twice.

``catch_up`` decides what happens to ticks that fell due while no supervisor ran:
``"latest"`` (default) enqueues the most recent one once; ``"none"`` enqueues a tick only if it is
at most :data:`MISSED_GRACE` seconds late; ``"all"`` enqueues every missed tick (the most recent
:data:`MAX_CATCH_UP`), each due at its own tick time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from shared.settings import cron
from shared.runtime.clock import iso
from shared.model.job import NewJob, encode_json, new_id
from shared.model.queuenames import DEFAULT_QUEUE

CATCH_UP = ("latest", "none", "all")
MISSED_GRACE = 60.0
MAX_CATCH_UP = 1000


@dataclass(frozen=True)
class Due:
    """The ticks to enqueue now, and the tick the schedule's mark advances to (None: no tick
    fell due, nothing changes). Skipped ticks advance the mark too."""

    ticks: list[float]
    advance_to: float | None


@dataclass(frozen=True)
class NextRun:
    """One schedule as ``jobs``/``status`` shows it. ``next_at``: the first tick after now (None
    if the expression never fires again); ``last_tick``: the last tick handled, or when the
    schedule was first seen or last changed (None: not seen by a supervisor yet)."""

    name: str
    type: str
    cron: str
    timezone: str
    catch_up: str
    next_at: float | None
    last_tick: float | None
    source: str = "config"  # "config": a [[schedule]] entry; "code": a task's schedule=


def fingerprint(spec: Any) -> str:
    """What identifies a schedule's timing: changing it re-anchors the schedule."""
    return f"{spec.cron}|{spec.timezone}"


def tick_key(name: str, tick: float) -> str:
    return f"schedule:{name}:{iso(tick)}"


def due_ticks(spec: Any, last: float, now: float) -> Due:
    """The ticks in ``(last, now]`` to enqueue under ``spec.catch_up``."""
    keep = MAX_CATCH_UP if spec.catch_up == "all" else 1
    ticks = cron.ticks_between(spec.cron, spec.timezone, last, now, keep)
    if not ticks:
        return Due([], None)
    advance_to = ticks[-1]
    if spec.catch_up == "none":
        ticks = [t for t in ticks if now - t <= MISSED_GRACE]
    return Due(ticks, advance_to)


def tick_jobs(
    spec: Any, ticks: list[float], priority: int = 0, queue: str = DEFAULT_QUEUE
) -> list[NewJob]:
    """One job per tick, due at the tick, keyed by schedule and tick, on ``queue``."""
    payload = encode_json(spec.payload, f"payload of schedule {spec.name!r}")
    return [
        NewJob(new_id(), spec.type, payload, priority, t, None, tick_key(spec.name, t), queue=queue)
        for t in ticks
    ]


def plan(
    spec: Any, now: float, priority: int = 0, queue: str = DEFAULT_QUEUE
) -> Callable[[float], tuple[list[NewJob], float | None]]:
    """The ``plan`` argument of the store's ``run_schedule`` for ``spec`` at ``now``."""

    def decide(last: float) -> tuple[list[NewJob], float | None]:
        due = due_ticks(spec, last, now)
        return tick_jobs(spec, due.ticks, priority, queue), due.advance_to

    return decide


def is_due(spec: Any, last: float, now: float) -> bool:
    """Cheap check (one cron step): has a tick fallen due since ``last``?"""
    nxt = cron.next_after(spec.cron, spec.timezone, last)
    return nxt is not None and nxt <= now


def entries(config: Any, registry: Any = None) -> list[Any]:
    """Every schedule: the ``[[schedule]]`` entries of ``config`` in order, then the schedule
    of each task of ``registry`` (``@task(schedule=...)``, named after the task) that no entry
    names: where both name one schedule, the config file's wins."""
    out = list(config.schedules)
    if registry is None:
        return out
    names = {s.name for s in out}
    for jtype in registry.types():
        own = registry.get(jtype).schedule
        if own is not None and own.name not in names:
            out.append(own)
    return out


def next_runs(config: Any, now: float, store: Any = None, registry: Any = None) -> list[NextRun]:
    """The next run of each schedule of ``config`` (and of ``registry``'s tasks: see
    :func:`entries`), in that order.

    With ``store`` (a store on the config's database) ``last_tick`` is filled in from
    the database; without it, it is None. For ``jobs``/``status``/``schedules``.
    """
    marks = store.schedule_marks() if store is not None else {}
    mine = {s.name for s in config.schedules}
    out = []
    for s in entries(config, registry):
        mark = marks.get(s.name)
        last = mark.last_tick if mark is not None and mark.fingerprint == fingerprint(s) else None
        out.append(
            NextRun(
                s.name,
                s.type,
                s.cron,
                s.timezone,
                s.catch_up,
                cron.next_after(s.cron, s.timezone, now),
                last,
                "config" if s.name in mine else "code",
            )
        )
    return out
