"""Retention: which finished jobs are old enough to delete, and deleting them in batches.

``[retention] completed_after`` (default "7d") applies to completed and cancelled jobs,
``failed_after`` (default "never": failed jobs are the dead-letter queue) to failed ones. The
built-in job ``cleanup:old-data`` (shared.execution.builtin_jobs) runs :func:`purge`.
"""

from __future__ import annotations

from typing import Any

from shared.settings.durations import parse_duration

BATCH = 500  # jobs looked at in the first transaction (then sized by the engine's pacer)
DAY = 86400.0


def cutoffs(
    retention: Any, now: float, retention_days: float | None = None
) -> dict[str, float | None]:
    """Per terminal status, the time before which finished jobs are deleted (None: keep all).

    ``retention_days`` (the job's ``retentionDays``) overrides ``completed_after`` for completed
    and cancelled jobs.
    """
    keep = parse_duration(retention.completed_after)
    if retention_days is not None:
        keep = float(retention_days) * DAY
    keep_failed = parse_duration(retention.failed_after)
    return {
        "completed": _cut(now, keep),
        "cancelled": _cut(now, keep),
        "failed": _cut(now, keep_failed),
    }


def _cut(now: float, keep: float | None) -> float | None:
    return None if keep is None else now - keep


def purge(
    store: Any, cuts: dict[str, float | None], chunk: int = BATCH, pacer: Any = None
) -> dict[str, int]:
    """Delete the finished jobs older than their status's cutoff: the store's
    ``purge_finished`` (``shared.engines.contract.UpkeepStore``: short transactions over the whole
    table by id, paced by the engine, or by ``pacer``, so other writers get in; about ``chunk``
    jobs looked at per transaction to start with). Returns the number deleted per status."""
    deleted: dict[str, int] = store.purge_finished(cuts, chunk=chunk, pacer=pacer)
    return deleted
