"""The operators' layer: what the ops CLI, ``jobq status``/``top``, the metrics and the
dashboard read and write, engine-neutral, over the shared SQL of :mod:`shared.engines.sql`.

Both the CLI (``supervisor/cli``) and the dashboard (``supervisor/web``) use this package and
never import each other.

Every function takes a store (``shared.engines.contract.OpsStore``, opened through
``shared.engines.open_store``) and runs SQL written once here through the engine-level helper
that is not part of the store contract (``shared.engines.opsaccess.OpsAccess``: ``store.read``,
``write``, ``transaction``, ``batches``); where engines spell a statement differently it asks
``store.dialect``. Reads work with no supervisor running; ``now`` comes from the caller; rows
are plain dicts, their times ISO-8601 UTC text as ``jobq`` prints them. Modules: :mod:`.queue`
(counts, what waits, failures), :mod:`.jobs` (listings, lookups, history), :mod:`.workers`,
:mod:`.history` (the attempt feed), :mod:`.activity` (per minute, rate windows), :mod:`.browse`
(the dashboard's pages), :mod:`.bulk` (retry, cancel, purge), :mod:`.scale` (control rows),
:mod:`.served` (the job types supervisors serve), :mod:`.gauges` (the engine's own).
"""

from __future__ import annotations

from . import activity, browse, gauges
from .bulk import (
    BATCH,
    RETRYABLE,
    cancel_each,
    cancel_jobs,
    cancel_pending,
    count_failed,
    count_unstarted,
    kept_parents,
    purge,
    purge_jobs,
    retry_failed,
    retry_jobs,
)
from .history import attempt_aggregates, last_attempt_seq, recent_attempts
from .jobs import attempt_history, find_ids, job_texts, list_jobs, statuses
from .queue import (
    counts_by_type,
    finished_per_minute,
    oldest_due,
    recent_failures,
    scheduled_by_type,
)
from .scale import (
    pending_scale,
    request_scale,
    save_counters,
    supervisor_counters,
    take_scale_request,
)
from .workers import running_without_worker, worker_rows

__all__ = [
    "BATCH",
    "RETRYABLE",
    "activity",
    "attempt_aggregates",
    "attempt_history",
    "browse",
    "cancel_each",
    "cancel_jobs",
    "cancel_pending",
    "count_failed",
    "count_unstarted",
    "kept_parents",
    "counts_by_type",
    "find_ids",
    "finished_per_minute",
    "gauges",
    "job_texts",
    "last_attempt_seq",
    "list_jobs",
    "oldest_due",
    "pending_scale",
    "purge",
    "purge_jobs",
    "recent_attempts",
    "recent_failures",
    "request_scale",
    "retry_failed",
    "retry_jobs",
    "running_without_worker",
    "save_counters",
    "scheduled_by_type",
    "statuses",
    "supervisor_counters",
    "take_scale_request",
    "worker_rows",
]
