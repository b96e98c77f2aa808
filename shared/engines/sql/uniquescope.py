"""A key's uniqueness scope on every engine (shared.model.uniqueness): before a keyed job with
a scope that can lapse is inserted, the kept job holding its key, if it is outside the scope,
gives the key up (``key = NULL``) in the same transaction, so the insert that follows takes
the key; a job inside the scope keeps it, the insert meets the unique index ``jobs_key``
(``ON CONFLICT ... DO NOTHING``) and the enqueue returns that job's id, as a key always did.

Why this is safe under concurrency: both statements run in one transaction (SQLite's
``BEGIN IMMEDIATE``, PostgreSQL's ``READ COMMITTED`` transaction). On PostgreSQL two enqueues
of one key meet on the old row's lock: the second's ``UPDATE`` waits, then re-reads the row,
whose key the first has freed, and leaves it; its insert then waits on the first's new index
entry and skips. So one job per scope, however many producers race.
"""

from __future__ import annotations

from typing import Any

from shared.model.job import NewJob
from shared.model.uniqueness import Unique
from shared.runtime.clock import iso


def free_sql(table: str, unique: Unique) -> str:
    """The statement (``:key``, ``:since`` parameters) that frees ``key`` from the job of
    ``table`` holding it when that job is outside ``unique`` (statuses are the model's
    constants, written in: one statement text per scope kind)."""
    inside = []
    if unique.statuses is not None:
        inside.append("status IN (" + ", ".join(f"'{s}'" for s in unique.statuses) + ")")
    if unique.period is not None:
        inside.append("created_at > :since")
    return f"UPDATE {table} SET key = NULL WHERE key = :key AND NOT ({' AND '.join(inside)})"


def free_params(job: NewJob, now: float) -> dict[str, Any]:
    """The parameters of :func:`free_sql` for ``job`` enqueued at ``now``."""
    period = job.unique.period if job.unique is not None else None
    return {"key": job.key, "since": iso(now - period) if period is not None else None}


def scoped(jobs: Any) -> list[NewJob]:
    """The jobs whose key may have to be freed first (a key and a scope that can lapse)."""
    return [j for j in jobs if j.key is not None and j.unique is not None and j.unique.frees]


def free_keys(run: Any, table: str, jobs: Any, now: float) -> None:
    """Free the keys of the :func:`scoped` ``jobs`` held outside their scopes: ``run(sql,
    params)`` runs one ``:name`` statement in the enqueue's transaction."""
    for j in scoped(jobs):
        assert j.unique is not None
        run(free_sql(table, j.unique), free_params(j, now))
