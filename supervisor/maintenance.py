"""Periodic upkeep decisions: hard timeouts, expired leases, orphaned jobs, stale process rows.

These functions look at the database and decide; the arbiter acts (signals its own children,
re-queues after reaping). Jobs of owners that are not this supervisor's children are handled
here directly: a dead owner's jobs are re-queued; a live owner silent past its lease is killed
first, and its jobs re-queued only once it is gone, so two runs never overlap. Owners on other
hosts (another ``host_id``) are judged by their lease alone, measured on the database's clock,
and never signalled: a worker that cannot renew its lease stops itself first (``worker.fence``).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Any, Iterable


from shared.runtime.clock import parse_iso
from shared.model.job import Job, Released, RunningGroup
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy
from shared.runtime.processes import host_id, parse_token, token_alive, token_host
from shared.engines.contract import UpkeepStore

log = get_logger("supervisor")
KILL_GRACE = (
    0.05  # seconds the loop waits for a SIGKILLed silent owner to go; later rounds look again
)


# Which owners (or process rows) a recovery or a prune looks at: every one (the default), this
# host's (every supervisor, for itself: judged by pid), or other hosts' (judged by their lease on
# the database's clock: the same for every supervisor, so only the upkeep lead does it).
ALL, HERE, ELSEWHERE = "all", "here", "elsewhere"


def _elsewhere(token: str, here: str) -> bool:
    """Does ``token`` name a process of another host than ``here``?"""
    host = token_host(token)
    return host is not None and host != here


def _looked_at(token: str, here: str, which: str) -> bool:
    """Is ``token`` among ``which`` owners (:data:`ALL`, :data:`HERE`, :data:`ELSEWHERE`)?"""
    return which == ALL or _elsewhere(token, here) == (which == ELSEWHERE)


@dataclass(frozen=True)
class Verdict:
    """What should happen to the worker running ``job``."""

    owner: str
    job: Job
    action: str  # 'timeout', 'cancel', 'blocked' (an async job's loop) or 'lease'
    reason: str


def worth_a_look(
    groups: list[RunningGroup],
    mine: set[str],
    policy: JobPolicy,
    now: float,
    here: str,
    elsewhere: bool = True,
) -> bool:
    """Could :func:`judge_running` or :func:`recover_foreign` find anything among the running
    jobs these groups (``UpkeepStore.running_groups``) sum up? True when a group has a lease
    older than ``lease_timeout`` (or unreadable), or is of this host (``here``) and has a cancel
    requested, a start older than its type's timeout plus ``kill_grace`` (or unreadable), or an
    owner that is not one of our live children (``mine``). Then the supervisor reads every
    running job; otherwise it skips that read, the round's main cost while jobs drain (30 ms of
    CPU for 1,500 running jobs). ``elsewhere`` False: other hosts' expired leases are not our
    business (another supervisor holds the upkeep lead), only this host's count."""
    lease, grace = policy.config.worker.lease_timeout, policy.config.supervisor.kill_grace
    for g in groups:
        expired = g.oldest_lease is not None and g.oldest_lease > lease
        if expired and (elsewhere or not _elsewhere(g.owner or "", here)):
            return True
        host = token_host(g.owner or "")
        if not g.owner or (host is not None and host != here):
            continue  # no verdict but an expired lease's can fall on it
        if g.cancels or g.owner not in mine:
            return True
        try:
            if g.first_start and now - parse_iso(g.first_start) > policy.timeout(g.type) + grace:
                return True
        except (ValueError, TypeError):
            return True
    return False


def judge_running(
    jobs: list[Job], ages: dict[str, float], policy: JobPolicy, now: float, here: str
) -> list[Verdict]:
    """Running jobs to stop by force (:func:`stop_verdict`) or with an expired lease.

    ``ages``: the store's ``lease_ages`` (seconds since each lease was renewed, on the database's
    clock: never this host's clock against another's). Timeouts and cancels are judged only for
    jobs whose owner runs on this host (``here``: ``shared.runtime.processes.host_id()``), by our
    clock: the supervisor of the owner's host polices them, and another host's job is never killed
    here (its pid means nothing on this host). A job can get both verdicts, the stop first."""
    out = []
    lease = policy.config.worker.lease_timeout
    for job in jobs:
        verdict = _stop_verdict_here(job, policy, now, here)
        if verdict is not None:
            out.append(verdict)
        verdict = lease_verdict(job, ages.get(job.id), lease)
        if verdict is not None:
            out.append(verdict)
    return out


def _stop_verdict_here(job: Job, policy: JobPolicy, now: float, here: str) -> Verdict | None:
    """:func:`stop_verdict` for a job whose owner runs on this host (``here``), else None. A row
    written around jobq (a date that does not parse) is logged and judged no further."""
    try:
        return stop_verdict(job, policy, now) if token_host(job.owner or "") == here else None
    except (
        ValueError,
        TypeError,
    ) as exc:  # a row written around jobq: the others are still policed
        event(
            log,
            "supervisor.maintenance_failed",
            logging.ERROR,
            task="timeouts",
            id=job.id,
            error=repr(exc),
        )
        return None


def lease_verdict(job: Job, silent: float | None, lease: float) -> Verdict | None:
    """'lease' when the lease of ``job`` was last renewed ``silent`` seconds ago (on the
    database's clock; None: unknown), longer than ``lease``; else None."""
    if silent is not None and silent > lease:
        return Verdict(
            job.owner,
            job,
            "lease",
            f"lease expired: worker silent for {silent:.1f} s (lease_timeout {lease:g} s)",
        )
    return None


def stop_verdict(job: Job, policy: JobPolicy, now: float) -> Verdict | None:
    """The backstops of a handler that does not stop: its worker raised JobTimeout in
    it at the timeout, and it still runs ``kill_grace`` later ('timeout'); a cancel was asked
    ``cancel_grace`` ago and it still runs ('cancel'). Judged by ``started_at`` and
    ``cancel_requested_at`` on our clock."""
    if job.cancel_requested_at is not None:
        grace = policy.config.worker.cancel_grace
        if now - parse_iso(job.cancel_requested_at) > grace:
            return Verdict(
                job.owner,
                job,
                "cancel",
                f"cancelled: the handler did not stop within cancel_grace ({grace:g} s)",
            )
    timeout, grace = policy.timeout(job.type), policy.config.supervisor.kill_grace
    if not job.started_at or now - parse_iso(job.started_at) <= timeout + grace:
        return None
    if policy.async_concurrency(job.type):  # its worker cancelled its task at the timeout
        return Verdict(
            job.owner,
            job,
            "blocked",
            f"timed out after {timeout:g} s and blocked its worker's "
            f"event loop for kill_grace ({grace:g} s) more",
        )
    return Verdict(job.owner, job, "timeout", f"timed out after {timeout:g} s")


class TimeoutLog:
    """The job attempts whose forced stop was logged (``job.timeout``, ``job.cancel_killed``) once
    per attempt, though the verdict stands every maintenance round until the killed worker is
    reaped and its job released."""

    def __init__(self) -> None:
        self.logged: set[tuple[str, int]] = set()

    def unlogged(self, verdicts: list[Verdict], running: list[Job]) -> list[Verdict]:
        """The timeout and cancel verdicts not logged before (remembered as logged from now on);
        attempts no longer ``running`` are forgotten."""
        self.logged &= {(j.id, j.attempts) for j in running}
        new = [
            v
            for v in verdicts
            if v.action in ("timeout", "cancel", "blocked")
            and (v.job.id, v.job.attempts) not in self.logged
        ]
        self.logged |= {(v.job.id, v.job.attempts) for v in new}
        return new


def expired_owners(jobs: list[Job], ages: dict[str, float], lease: float) -> set[str]:
    """Owners every one of whose running jobs has a lease older than ``lease`` (seconds, on the
    database's clock). A live worker renews all its jobs' leases in one statement, so one fresh
    lease means the owner is still renewing."""
    fresh, stale = set(), set()
    for job in jobs:
        if not job.owner:
            continue
        age = ages.get(job.id)
        (stale if age is not None and age > lease else fresh).add(job.owner)
    return stale - fresh


def recover_foreign(
    store: UpkeepStore,
    jobs: list[Job],
    mine: set[str],
    policy: JobPolicy,
    now: float,
    expired: set[str],
    here: str,
    which: str = ALL,
) -> int:
    """Re-queue the jobs of owners that are not our children (of ``which`` hosts: :data:`ALL`,
    :data:`HERE`, :data:`ELSEWHERE`), and returns how many were released:

    - an owner on another host (``here``: our ``host_id()``) only once its lease expired on the
      database's clock (``expired``, from :func:`expired_owners`): released directly, never
      killed (its pid is not a process of this host; it stopped itself before its lease could
      expire: see ``worker.fence``);
    - an owner on this host that is gone: released; alive but past its lease: killed, and
      released once it is gone, so two runs never overlap."""
    released = 0
    owners = {j.owner for j in jobs if j.owner and j.owner not in mine}
    for owner in sorted(o for o in owners if _looked_at(o, here, which)):
        reason = _release_reason(owner, expired, here)
        if reason is not None:
            released += _release(store, owner, reason, now, policy)
    return released


def _release_reason(owner: str, expired: set[str], here: str) -> str | None:
    """Why the jobs of ``owner``, not one of our children, are to be released now (killing it
    first when it is alive on this host but silent past its lease); None: not yet."""
    host = token_host(owner)
    if host is not None and host != here:
        if owner not in expired:
            return None
        return f"lease expired: worker {owner} on another host stopped renewing it"
    if token_alive(owner, here):
        if owner not in expired or not _kill_and_wait(owner):
            return None
        return "lease expired: owner was alive but silent; killed by the supervisor"
    return f"worker {owner} is gone (found by the supervisor)"


def _release(store: UpkeepStore, owner: str, reason: str, now: float, policy: JobPolicy) -> int:
    """Re-queue (or fail, past max_attempts) the running jobs of ``owner``, each logged
    ``job.reaped``; how many."""
    released = store.release_owner(owner, reason, now, max_attempts_for=policy.max_attempts)
    log_reaped(released, reason, owner=owner)
    return len(released)


def log_reaped(released: Iterable[Released], reason: str, **context: Any) -> None:
    """One ``job.reaped`` line per job a release re-queued or failed (``context``: the owner,
    where the caller names it)."""
    for r in released:
        event(
            log,
            "job.reaped",
            logging.WARNING,
            id=r.id,
            type=r.type,
            attempt=r.attempts,
            status=r.status,
            **context,
            reason=reason,
        )


def _kill_and_wait(owner: str, timeout: float = KILL_GRACE) -> bool:
    """SIGKILL the silent process ``owner`` names; True once it can run no more code (gone, or
    a zombie its parent has not reaped yet), False while it is still dying: the next round looks
    again. Waits at most ``timeout`` (a few milliseconds): this runs on the supervisor's loop,
    which must never block for long (a killed process whose parent is stopped stays a zombie
    for as long as the parent is stopped)."""
    parsed = parse_token(owner)
    if parsed is None:
        return False
    host, pid, _ = parsed
    if host != host_id():
        # Another host's process: its pid means nothing here (signalling it would hit one of
        # ours, and psutil's wait would reap our own worker behind the arbiter's back). Its
        # lease has expired: the job may be re-queued; that host's worker fences itself.
        return True
    import psutil  # here: see shared.runtime.processes

    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied as exc:
        event(log, "worker.kill_failed", logging.ERROR, owner=owner, error=repr(exc))
        return False
    except psutil.TimeoutExpired:
        return not token_alive(owner, host)  # a zombie counts as gone; else next round
    return True


def prune_processes(
    store: UpkeepStore, now: float, stale_after: float, here: str, which: str = ALL
) -> None:
    """Delete process rows of processes that are gone (crashed without cleaning up): on this
    host (``here``) by pid and start time; of other hosts when their row has not been refreshed
    for ``stale_after`` seconds on the database's clock (``process_ages``). ``which``: the rows
    of :data:`ALL` hosts, this one's (:data:`HERE`) or the others' (:data:`ELSEWHERE`)."""
    ages = store.process_ages(now) if which != HERE else {}
    for row in store.processes():
        token = row["id"]
        if not _looked_at(token, here, which):
            continue
        if _elsewhere(token, here):
            age = ages.get(token)
            gone = age is not None and age > stale_after
        else:
            gone = not token_alive(token, here)
        if gone:
            store.remove_process(token)
