"""Producers' and workers' statements written once: a job's row, the counts, the running jobs,
when the next job is due, and the pause flag (``shared.engines.contract`` Producer and Worker
parts).

:class:`JobsSql` is a mixin of an engine's store (with :class:`~.base.SqlBase`). The hot path
(claim, outcomes, heartbeat, release of unstarted jobs) stays in each engine: its SQL differs.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Iterable

from shared.runtime.clock import iso, parse_iso
from shared.model.job import Job
from .base import SqlBase

JOB_COLUMNS = (
    "id, type, status, payload, result, error, attempts, max_attempts, priority, run_at, "
    "started_at, completed_at, created_at, updated_at, key, owner, owner_pid, heartbeat_at, trace, queue"
)
RELEASE = "owner = NULL, owner_pid = NULL, heartbeat_at = NULL "  # a job no worker holds
# A claimed job given back unstarted is pending again, unless a cancel was asked meanwhile.
GIVEN_BACK = "status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END, "
CLAIM_ORDER = "ORDER BY priority DESC, run_at, created_at"  # the claim index's order


def in_claim_order(jobs: Iterable[Job]) -> list[Job]:
    """Claimed jobs in claim order (:data:`CLAIM_ORDER`): an ``UPDATE ... RETURNING`` returns
    its rows in the order it updated them (SQLite: rowid order; PostgreSQL: the order the
    locked rows came), not the subquery's, and a worker runs a batch front to back.

    Two stable sorts by C-level keys (the later ones first; ``reverse`` keeps equal keys in
    order): no Python call and no tuple per job, and a batch already in order is one pass."""
    out = sorted(jobs, key=_LATER_KEYS)
    out.sort(key=_PRIORITY, reverse=True)
    return out


_LATER_KEYS = attrgetter("run_at", "created_at")
_PRIORITY = attrgetter("priority")


_STOPPING = ", cancel_requested_at, progress, limit_key"  # read with a row, not claimed with it
_GET = f"SELECT {JOB_COLUMNS}{_STOPPING} FROM jobs WHERE id = :id"
_GET_ON = f"SELECT {JOB_COLUMNS}{_STOPPING} FROM {{jobs}} WHERE id = :id"  # through conn=
_RUNNING = f"SELECT {JOB_COLUMNS}{_STOPPING} FROM jobs WHERE status = 'running' ORDER BY started_at"
# A delayed or retried job (due later than it was created): the small jobs_delayed index.
_NEXT_DUE = "SELECT min(run_at) AS t FROM jobs WHERE status = 'pending' AND run_at > created_at"
_HAS_DUE = (
    f"SELECT 1 AS due FROM jobs WHERE status = 'pending' AND run_at <= :now {CLAIM_ORDER} LIMIT 1"
)
# The idle lead's one read per wait: both of the above in one statement.
_IDLE_READ = (
    "SELECT (SELECT 1 FROM jobs WHERE status = 'pending' AND run_at <= :now "
    f"{CLAIM_ORDER} LIMIT 1) AS due, ({_NEXT_DUE}) AS t"
)
_SET_PAUSED = (
    "INSERT INTO control (name, value) VALUES ('paused', :value) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
_IS_PAUSED = "SELECT value FROM control WHERE name = 'paused'"


class JobsSql(SqlBase):
    """Reads of jobs and the pause flag, on every engine."""

    def get(self, job_id: str, conn: Any = None) -> Job | None:
        """The job with this id, or None (a read). With ``conn`` (the application's connection
        of this engine, as ``enqueue`` takes it), read through it: in its open transaction, a
        job that transaction wrote and has not committed is found."""
        job_id = self.dialect.lookup_id(job_id)
        if conn is None:
            row = self._row(_GET, {"id": job_id})
        else:
            rows = self._rows_on(conn, _GET_ON.format(jobs=self.named("jobs")), {"id": job_id})
            row = rows[0] if rows else None
        return Job.from_row(row) if row else None

    def counts(self) -> dict[str, int]:
        """Jobs per status, from the engine's counters (``dialect.counts``: no table scan);
        statuses with no job are left out."""
        rows = self._rows(
            f"SELECT status, sum(n) AS n FROM {self.dialect.counts} c "
            "WHERE status <> 'delayed' GROUP BY status HAVING sum(n) > 0"
        )
        return {r["status"]: int(r["n"]) for r in rows}

    def running(self) -> list[Job]:
        """Every running job, the first started first."""
        return [Job.from_row(r) for r in self._rows(_RUNNING)]

    def next_due(self) -> float | None:
        """The earliest ``run_at`` of a pending job scheduled later than it was created (a
        delayed or retried job), or None."""
        t = self._value(_NEXT_DUE)
        return None if t is None else parse_iso(t)

    def has_due(self, now: float) -> bool:
        """Is any pending job due? (a read: cheaper than a claim that finds nothing)"""
        return self._row(_HAS_DUE, {"now": iso(now)}) is not None

    def idle_read(self, now: float) -> tuple[bool, float | None]:
        """``has_due(now)`` and ``next_due()`` in one statement (the idle lead's read)."""
        row = self._row(_IDLE_READ, {"now": iso(now)}) or {}
        t = row.get("t")
        return row.get("due") is not None, None if t is None else parse_iso(t)

    def set_paused(self, paused: bool) -> None:
        """Set the pause flag (one statement; it wakes idle workers where the engine notifies)."""
        params = {"value": "1" if paused else "0", "channel": self.channel}
        self._write(lambda c: self._run(c, self.dialect.waking(_SET_PAUSED), params))

    def is_paused(self) -> bool:
        return bool(self._value(_IS_PAUSED) == "1")
