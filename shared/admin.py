"""What the operators' tools read and write (issue 5): the ops CLI, ``top``, the metrics and the
dashboard call these. Each takes a store (``shared.contract.OpsStore``, opened through
``shared.engines.open_store``) and asks it: the SQL is the engine's (``shared.engines.sqlite.ops``).

Reads work with no supervisor running. Bulk writes (``retry_failed``, ``purge``) go in short
paced transactions (the SQLite engine's ``bulk``) so the write lock is never held for long
while workers run, and waiting writers get it between two of them. Rows are plain dicts;
their times are ISO-8601 UTC text, as ``jobq`` prints them.
"""
from __future__ import annotations

from typing import Any, Sequence

from .contract import OpsStore

BATCH = 1000  # rows per statement of a bulk write
RETRYABLE = ("failed", "cancelled")


def counts_by_type(store: OpsStore) -> list[dict[str, Any]]:
    """Rows ``{type, status, n}`` for every (type, status) that has jobs (index ``jobs_type``)."""
    return store.counts_by_type()


def scheduled_by_type(store: OpsStore, now: float) -> dict[str, int]:
    """``{type: n}`` of pending jobs not due yet (delayed, or waiting for a retry)."""
    return store.scheduled_by_type(now)


def oldest_due(store: OpsStore, now: float) -> dict[str, Any] | None:
    """The due pending job that has waited longest: ``{id, type, run_at, created_at}`` or None."""
    return store.oldest_due(now)


def finished_per_minute(store: OpsStore, since: float) -> list[dict[str, Any]]:
    """Rows ``{minute, status, n}``: completed and failed jobs per minute (``YYYY-MM-DDTHH:MM``)
    that finished at or after ``since``."""
    return store.finished_per_minute(since)


def recent_failures(store: OpsStore, limit: int = 10) -> list[dict[str, Any]]:
    """The last ``limit`` jobs that failed for good, newest first."""
    return store.recent_failures(limit)


def list_jobs(store: OpsStore, status: str | None = None, job_type: str | None = None,
              limit: int = 50) -> list[dict[str, Any]]:
    """Jobs filtered by ``status`` and ``job_type``, at most ``limit``. Order: newest first; pending
    jobs in claim order; running by start; finished ones by finish time, newest first. Each
    order follows an index, so a listing costs the same in a big database."""
    return store.list_jobs(status, job_type, limit)


def find_ids(store: OpsStore, prefix: str, limit: int = 2) -> list[str]:
    """Ids that start with ``prefix`` (a range over the primary key), at most ``limit``."""
    return store.find_ids(prefix, limit)


def statuses(store: OpsStore, ids: Sequence[str]) -> dict[str, str]:
    """``{id: status}`` of the ids that exist."""
    return store.statuses(ids)


def attempt_history(store: OpsStore, job_id: str) -> list[dict[str, Any]]:
    """The ended attempts of one job, oldest first (see ``job_attempts`` in the SQLite engine's schema)."""
    return store.attempt_history(job_id)


def worker_rows(store: OpsStore) -> list[dict[str, Any]]:
    """Registered workers with the job(s) each is running: one row per (worker, running job),
    ``job_id`` None for an idle worker. Ordered by slot, then the job's start."""
    return store.worker_rows()


def running_without_worker(store: OpsStore) -> list[dict[str, Any]]:
    """Running jobs whose owner has no process row (a worker run alone, or one that died)."""
    return store.running_without_worker()


def last_attempt_seq(store: OpsStore) -> int:
    """The newest ``job_attempts.seq`` (0 when there is none)."""
    return store.last_attempt_seq()


def recent_attempts(store: OpsStore, since: float, limit: int) -> list[dict[str, Any]]:
    """At most the last ``limit`` ended attempts, of those that ended at or after ``since``, oldest
    first: ``{type, outcome, due_at, started_at, ended_at}`` (a rowid range, no scan)."""
    return store.recent_attempts(since, limit)


def attempt_aggregates(store: OpsStore, after: int, upto: int,
                       bounds: Sequence[float]) -> list[dict[str, Any]]:
    """Per (type, outcome), over attempts with ``after < seq <= upto``: ``n``, ``wait_sum``,
    ``run_sum`` and cumulative bucket counts ``wait_le_<i>``/``run_le_<i>`` for each of
    ``bounds`` (seconds). wait: due -> start; run: start -> end; both clamped at 0."""
    return store.attempt_aggregates(after, upto, bounds)


def retry_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Put failed or cancelled jobs back to pending, due now, with their attempts reset."""
    return store.retry_jobs(ids, now)


def retry_failed(store: OpsStore, now: float, job_type: str | None = None) -> int:
    """Retry every failed job (of ``job_type``), ``BATCH`` per statement. Returns how many."""
    return store.retry_failed(now, job_type)


def cancel_jobs(store: OpsStore, ids: Sequence[str], now: float) -> list[str]:
    """Cancel pending jobs (a running job cannot be cancelled). One transaction; returns the ids
    cancelled."""
    return store.cancel_jobs(ids, now)


def purge_jobs(store: OpsStore, ids: Sequence[str]) -> list[str]:
    """Delete the named jobs that are finished (completed, failed or cancelled), with their
    attempt history. One transaction; returns the ids deleted."""
    return store.purge_jobs(ids)


def purge(store: OpsStore, status: str, before: float, *, dry_run: bool = False) -> int:
    """Delete jobs of a terminal ``status`` that finished before ``before`` (a job without
    ``completed_at`` counts from ``updated_at``), ``BATCH`` per statement; their attempt history
    goes with them (trigger). With ``dry_run``, count only. Returns how many."""
    return store.purge(status, before, dry_run=dry_run)


def request_scale(store: OpsStore, supervisor: str, workers: int) -> None:
    """Ask the supervisor with owner token ``supervisor`` to run ``workers`` workers."""
    return store.request_scale(supervisor, workers)


def pending_scale(store: OpsStore, supervisor: str) -> int | None:
    """The scale request not yet taken by ``supervisor``, or None."""
    return store.pending_scale(supervisor)


def take_scale_request(store: OpsStore, supervisor: str) -> int | None:
    """Remove and return ``supervisor``'s scale request (a read, then a write only if one is there)."""
    return store.take_scale_request(supervisor)


def save_counters(store: OpsStore, supervisor: str, counters: dict[str, int]) -> None:
    """Publish a supervisor's own counters (restarts, reaped jobs ...) for ``status``; drops the rows
    of supervisors that no longer have a process row. One transaction."""
    return store.save_counters(supervisor, counters)


def supervisor_counters(store: OpsStore) -> dict[str, dict[str, int]]:
    """``{supervisor token: counters}`` as published by :func:`save_counters`."""
    return store.supervisor_counters()
