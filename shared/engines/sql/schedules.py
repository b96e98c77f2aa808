"""Schedule marks written once: ``schedule_marks`` remembers the last tick each ``[[schedule]]``
entry handled, and :meth:`SchedulesSql.run_schedule` enqueues a schedule's due ticks exactly
once, however many supervisors (on however many hosts) run it.

The transaction makes sure the mark's row exists (``ON CONFLICT DO NOTHING``: a new mark is
anchored at ``now``), reads it locked (``dialect.lock``: ``FOR UPDATE`` where rows are locked;
an engine's single write lock holds the whole database), enqueues the due ticks and advances the mark:
a second supervisor waits for the first one's commit and then sees its tick.
"""

from __future__ import annotations

from typing import Any, Callable

from shared.runtime.clock import iso, parse_iso
from shared.model.job import NewJob, ScheduleMark
from .base import SqlBase

Plan = Callable[[float], "tuple[list[NewJob], float | None]"]  # see shared.engines.contract

_MARKS = "SELECT name, fingerprint, last_tick FROM schedule_marks"
_MARK = "SELECT fingerprint, last_tick FROM schedule_marks WHERE name = :name"
_NEW_MARK = (
    "INSERT INTO schedule_marks (name, fingerprint, last_tick, updated_at) "
    "VALUES (:name, :fp, :now, :now) ON CONFLICT (name) DO NOTHING RETURNING name"
)
_ANCHOR = "UPDATE schedule_marks SET fingerprint = :fp, last_tick = :now, updated_at = :now WHERE name = :name"
_ADVANCE = "UPDATE schedule_marks SET last_tick = :tick, updated_at = :now WHERE name = :name"


class SchedulesSql(SqlBase):
    """``schedule_marks`` and ``run_schedule`` (needs the store's ``enqueue`` with ``conn``)."""

    enqueue: Callable[..., list[str]]

    def schedule_marks(self) -> dict[str, ScheduleMark]:
        """Every schedule's mark, by name (a plain read)."""
        return {
            r["name"]: ScheduleMark(r["fingerprint"], parse_iso(r["last_tick"]))
            for r in self._rows(_MARKS)
        }

    def run_schedule(self, name: str, fingerprint: str, now: float, plan: Plan) -> list[str] | None:
        """Enqueue a schedule's due ticks exactly once, in one transaction.

        A schedule without a mark, or whose mark has another ``fingerprint`` (its cron or time
        zone changed), is anchored at ``now`` and None is returned: ticks before that are not
        its business. Otherwise ``plan(last_tick)`` (pure, no I/O) returns the jobs to enqueue
        (each with its tick's idempotency key) and the new last tick, or None when nothing is
        due (``[]`` is returned); the jobs' ids are returned (an existing job's id for a key
        already taken).
        """
        params = {"name": name, "fp": fingerprint, "now": iso(now)}

        def tx(c: Any) -> list[str] | None:
            if self._run(c, _NEW_MARK, params).fetchall():
                return None  # a new mark, anchored at now
            row = self._run(c, _MARK + self.dialect.lock, params).fetchone()
            if row["fingerprint"] != fingerprint:
                self._run(c, _ANCHOR, params)
                return None
            jobs, advance_to = plan(parse_iso(row["last_tick"]))
            if advance_to is None:
                return []
            ids = self.enqueue(jobs, now, conn=c) if jobs else []
            self._run(c, _ADVANCE, {**params, "tick": iso(advance_to)})
            return ids

        return self._tx(tx)
