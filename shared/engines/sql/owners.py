"""The release of a dead or killed owner's jobs, written once
(``shared.engines.contract.UpkeepStore.release_owner``): the supervisor's recovery when a worker
died, was killed, or (elsewhere on a shared database) lost its lease.

One transaction: the owner's running rows are read (``dialect.skip_locked``: never waiting on
rows another session holds, such as a host cut off mid-transaction; what is skipped stays
running for the next round), and each is updated under the guard of ``running`` and the owner.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from shared.runtime.clock import iso
from shared.model.job import Job, Released, release_outcome
from .base import SqlBase
from .jobs import RELEASE

_OWNED = "SELECT * FROM jobs WHERE status = 'running' AND owner = :owner"
_REQUEUE = (
    "UPDATE jobs SET status = :status, attempts = :attempts, error = :reason, "
    "run_at = CASE WHEN :status = 'pending' THEN :now ELSE run_at END, "
    "completed_at = CASE WHEN :status IN ('failed', 'cancelled') THEN :now END, "
    "max_attempts = coalesce(max_attempts, :limit), updated_at = :now, "
    + RELEASE
    + "WHERE id = :id AND status = 'running' AND owner = :owner"
)
# The attempt a release ends, where no trigger records it (``dialect.release_history``), and on
# every engine a run interrupted and given back (``interrupted``, the reason its error).
_ENDED = (
    "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner, "
    "error) VALUES (:id, :type, :attempt, :outcome, :due, :started, :now, :owner, :reason)"
)


class OwnersSql(SqlBase):
    """``release_owner``."""

    def release_owner(
        self,
        owner: str,
        reason: str,
        now: float,
        *,
        max_attempts_for: Callable[[Job], int],
        count_attempt: bool = True,
        unstarted: Iterable[str] = (),
    ) -> list[Released]:
        """Re-queue the running jobs of a dead or killed ``owner``, in one transaction.

        With ``count_attempt`` the interrupted run counts: a job whose attempts are used up is
        ``failed`` with ``reason``; others go back to pending, due now. Without it (a shutdown
        the supervisor itself ordered) the attempt is given back. Jobs in ``unstarted`` (claimed
        in a batch, never begun) always get their attempt back. Idle workers are woken where
        the engine notifies and a job is pending again. A job whose cancel was requested ends
        ``cancelled`` instead (never re-queued).

        Each run that ended is in the attempt history with ``reason``: one that counts as its
        outcome (``retry``, ``failed``, ``cancelled``), one given back as ``interrupted`` (the
        next run has the same attempt number); jobs in ``unstarted`` never ran and have none.
        """
        unstarted = set(unstarted)
        base = {"owner": owner, "now": iso(now), "reason": self.dialect.text(reason)}

        def release(c: Any, row: Any) -> Released:
            job = Job.from_row(row)
            limit = max_attempts_for(job)
            return self._release_job(c, job, base, limit, count_attempt, job.id not in unstarted)

        return self._tx(lambda c: self._release_rows(c, base, release))

    def _release_rows(
        self, c: Any, base: dict[str, Any], release: Callable[[Any, Any], Released]
    ) -> list[Released]:
        """``release`` each running row of the owner (``base``: its parameters), skipping rows
        another session holds; wakes idle workers where the engine notifies if one is pending."""
        rows = self._run(c, _OWNED + self.dialect.skip_locked, base).fetchall()
        out = [release(c, row) for row in rows]
        if self.dialect.notify and any(r.status == "pending" for r in out):
            self._run(c, self.dialect.notify, {"channel": self.channel})
        return out

    def _release_job(
        self, c: Any, job: Job, base: dict[str, Any], limit: int, count_attempt: bool, ran: bool
    ) -> Released:
        """Re-queue, fail or cancel one running ``job`` (``limit``: its max attempts; ``ran``:
        it was begun, so with ``count_attempt`` its run counts), guarded by ``running`` and the
        owner, and record the run that ended (:meth:`_record_ended`)."""
        status, attempts = release_outcome(job, limit, count_attempt and ran)
        params = {**base, "status": status, "attempts": attempts, "limit": limit, "id": job.id}
        done = self._run(c, _REQUEUE, params).rowcount
        counted = attempts >= job.attempts
        if done and ((counted and self.dialect.release_history) or (ran and not counted)):
            self._record_ended(c, job, params, counted)
        return Released(job.id, job.type, status, attempts)

    def _record_ended(self, c: Any, job: Job, params: dict[str, Any], counted: bool) -> None:
        """The attempt history row of ``job``'s run that a release ended (``params``: the
        release's); ``counted``: the run counts as an attempt, its outcome the release's."""
        status = params["status"]
        outcome = "interrupted" if not counted else "retry" if status == "pending" else status
        self._run(
            c,
            _ENDED,
            {
                **params,
                "type": job.type,
                "attempt": job.attempts,
                "outcome": outcome,
                "started": job.started_at,
                "due": max(job.run_at, job.created_at),
            },
        )
