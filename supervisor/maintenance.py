"""Periodic upkeep decisions: hard timeouts, expired leases, orphaned jobs, stale process rows.

These functions look at the database and decide; the arbiter acts (signals its own children,
re-queues after reaping). Jobs of owners that are not this supervisor's children are handled
here directly: a dead owner's jobs are re-queued; a live owner silent past its lease is killed
first, and its jobs re-queued only once it is gone, so two runs never overlap.
"""
from __future__ import annotations

import logging
import signal
import socket
from dataclasses import dataclass

import psutil

from shared.clock import parse_iso
from shared.job import Job
from shared.logs import event, get_logger
from shared.policy import JobPolicy
from shared.procs import parse_token, token_alive
from shared.contract import UpkeepStore

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
        try:
            timeout = policy.timeout(job.type)
            if job.started_at and now - parse_iso(job.started_at) > timeout:
                out.append(Verdict(job.owner, job, "timeout", f"timed out after {timeout:g} s"))
            elif job.heartbeat_at and now - parse_iso(job.heartbeat_at) > lease:
                silent = now - parse_iso(job.heartbeat_at)
                out.append(Verdict(job.owner, job, "lease",
                                   f"lease expired: worker silent for {silent:.1f} s (lease_timeout {lease:g} s)"))
        except (ValueError, TypeError) as exc:  # a row written around jobq: the others are still policed
            event(log, "supervisor.maintenance_failed", logging.ERROR, task="timeouts", id=job.id,
                  error=repr(exc))
    return out


def recover_foreign(store: UpkeepStore, jobs: list[Job], mine: set[str], policy: JobPolicy,
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
    host, pid, _ = parsed
    if host != socket.gethostname():
        # Another host's process: its pid means nothing here (signalling it would hit one of
        # ours, and psutil's wait would reap our own worker behind the arbiter's back). Its
        # lease has expired: the job may be re-queued; that host's worker fences itself.
        return True
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


def prune_processes(store: UpkeepStore) -> None:
    """Delete process rows whose process is gone (crashed without cleaning up)."""
    for row in store.processes():
        if not token_alive(row["id"]):
            store.remove_process(row["id"])
