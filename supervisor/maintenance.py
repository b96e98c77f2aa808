"""Periodic upkeep decisions: hard timeouts, expired leases, orphaned jobs, WAL checkpoints.

These functions look at the database and decide; the arbiter acts (signals its own children,
re-queues after reaping). Jobs of owners that are not this supervisor's children are handled
here directly: a dead owner's jobs are re-queued; a live owner silent past its lease is killed
first, and its jobs re-queued only once it is gone, so two runs never overlap.
"""
from __future__ import annotations

import logging
import signal
from dataclasses import dataclass

import psutil

from shared.clock import parse_iso
from shared.job import Job
from shared.logs import event, get_logger
from shared.policy import JobPolicy
from shared.procs import parse_token, token_alive
from shared.store import SqliteStore

log = get_logger("supervisor")


@dataclass(frozen=True)
class Verdict:
    """What should happen to the worker running ``job``."""
    owner: str
    job: Job
    action: str   # 'timeout' or 'lease'
    reason: str


def judge_running(jobs: list[Job], policy: JobPolicy, now: float) -> list[Verdict]:
    """Running jobs past their hard timeout or with an expired lease."""
    out = []
    lease = policy.config.worker.lease_timeout
    for job in jobs:
        timeout = policy.timeout(job.type)
        if job.started_at and now - parse_iso(job.started_at) > timeout:
            out.append(Verdict(job.owner, job, "timeout", f"timed out after {timeout:g} s"))
        elif job.heartbeat_at and now - parse_iso(job.heartbeat_at) > lease:
            silent = now - parse_iso(job.heartbeat_at)
            out.append(Verdict(job.owner, job, "lease",
                               f"lease expired: worker silent for {silent:.1f} s (lease_timeout {lease:g} s)"))
    return out


def recover_foreign(store: SqliteStore, jobs: list[Job], mine: set[str], policy: JobPolicy,
                    now: float, expired: set[str]) -> int:
    """Re-queue jobs of owners that are not our children and are gone; kill owners on this host
    that are alive but past their lease (``expired``), then re-queue. Returns jobs released."""
    released = 0
    for owner in sorted({j.owner for j in jobs if j.owner and j.owner not in mine}):
        if token_alive(owner):
            if owner not in expired or not _kill_and_wait(owner):
                continue
            reason = "lease expired: owner was alive but silent; killed by the supervisor"
        else:
            reason = f"worker {owner} is gone (found by the supervisor)"
        for r in store.release_owner(owner, reason, now, max_attempts_for=policy.max_attempts):
            released += 1
            event(log, "job.reaped", logging.WARNING, id=r.id, type=r.type, attempt=r.attempts,
                  status=r.status, owner=owner, reason=reason)
    return released


def _kill_and_wait(owner: str, timeout: float = 5.0) -> bool:
    parsed = parse_token(owner)
    if parsed is None:
        return False
    _, pid, _ = parsed
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        return True
    except (psutil.AccessDenied, psutil.TimeoutExpired) as exc:
        event(log, "worker.kill_failed", logging.ERROR, owner=owner, error=repr(exc))
        return False
    return True


def prune_processes(store: SqliteStore) -> None:
    """Delete process rows whose process is gone (crashed without cleaning up)."""
    for row in store.processes():
        if not token_alive(row["id"]):
            store.remove_process(row["id"])


def wal_checkpoint_mode(store: SqliteStore, limit_mb: float, idle: bool) -> str | None:
    """TRUNCATE a WAL grown past ``limit_mb``; when idle, a PASSIVE checkpoint, which copies the
    WAL into the database but keeps the file's length (commits then overwrite it instead of
    growing it, and a growing file makes each fsync costlier); else none."""
    size = store.wal_bytes()
    if size > limit_mb * (1 << 20):
        return "TRUNCATE"
    return "PASSIVE" if idle and size > 0 else None

