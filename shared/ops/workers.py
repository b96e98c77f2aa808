"""The workers the process table knows, and running jobs no registered process owns."""

from __future__ import annotations

from typing import Any

from shared.engines.contract import OpsStore


def worker_rows(store: OpsStore) -> list[dict[str, Any]]:
    """Registered workers with the job(s) each is running: one row per (worker, running job),
    ``job_id`` None for an idle worker. Ordered by slot, then the job's start (NULLs first)."""
    return store.read(
        "SELECT p.id AS token, p.pid, p.host, p.slot, p.parent, p.started_at, p.heartbeat_at, "
        "j.id AS job_id, j.type AS job_type, j.attempts AS job_attempt, j.started_at AS job_started_at, "
        "j.progress AS job_progress, j.cancel_requested_at AS job_cancel_requested_at "
        "FROM processes p LEFT JOIN jobs j ON j.status = 'running' AND j.owner = p.id "
        "WHERE p.kind = 'worker' "
        "ORDER BY p.slot NULLS FIRST, p.pid, j.started_at NULLS FIRST, j.id NULLS FIRST"
    )


def running_without_worker(store: OpsStore) -> list[dict[str, Any]]:
    """Running jobs whose owner has no process row (a worker run alone, or one that died)."""
    return store.read(
        "SELECT id, type, attempts, owner, owner_pid, started_at FROM jobs j "
        "WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM processes p WHERE p.id = j.owner)"
    )
