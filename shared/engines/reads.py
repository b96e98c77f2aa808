"""The store's reads: what producers, workers, the supervisor and ``jobq copy`` read from a
store, each answered by one statement written once for every engine in
:mod:`shared.engines.sql` (jobs, flows, queues, processes, schedules, transfer).

These are not the store contract (:mod:`shared.engines.contract`: the transitions an engine
implements, each with its guarantee): a read changes nothing, and an engine that builds on the
shared SQL layer has them all. Each answers as committed now; none opens a transaction that it
leaves open. The reads whose answer depends on the engine's own clock (lease and process ages)
are in the contract, since each engine judges them its own way.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from shared.model.job import Job, ScheduleMark


class Reads(Protocol):
    """Reads of jobs, flags, processes, schedule marks and whole rows for ``jobq copy``."""

    def get(self, job_id: str, conn: Any = None) -> Job | None:
        """The job with this id as committed now, or None; ``conn``: the application's own
        connection of this engine (as ``ProducerTransitions.enqueue``'s)."""
        ...

    def parents(self, job_id: str) -> list[dict[str, Any]]:
        """A job's parents in the order given: ``id``, ``type``, ``status``, ``result`` (JSON
        text), ``error``, ``done``."""
        ...

    def counts(self) -> dict[str, int]:
        """Jobs per status (statuses with none left out), from counters the writes keep: no
        table scan."""
        ...

    def is_paused(self) -> bool:
        """The pause flag as committed now."""
        ...

    def is_queue_paused(self, queue: str) -> bool:
        """Is this named queue paused?"""
        ...

    def paused_queues(self) -> list[str]:
        """The paused named queues, by name."""
        ...

    def has_due(self, now: float) -> bool:
        """Is a pending job due at ``now``? (cheaper than a claim that finds nothing)"""
        ...

    def next_due(self) -> float | None:
        """When the next delayed or retried job is due (for sleeping until then), or None."""
        ...

    def idle_read(self, now: float) -> tuple[bool, float | None]:
        """``(has_due(now), next_due())`` read in one statement (an idle lead's one read)."""
        ...

    def running(self) -> list[Job]:
        """Every running job, the first started first."""
        ...

    def processes(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every process row (only ``kind``'s when given), by kind and slot."""
        ...

    def schedule_marks(self) -> dict[str, ScheduleMark]:
        """Every schedule's mark, by name."""
        ...

    def export_jobs(
        self, after: str, limit: int, statuses: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` jobs with ``id > after``, in id order, every column
        (:data:`shared.engines.transfer.JOB_FIELDS`); only those of ``statuses`` when given.
        Paging by the last id resumes anywhere."""
        ...

    def export_attempts(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The attempt history of these jobs (:data:`shared.engines.transfer.ATTEMPT_FIELDS`),
        oldest first per job."""
        ...

    def export_edges(self, child_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The workflow edges of these jobs as children
        (:data:`shared.engines.transfer.EDGE_FIELDS`), as they are."""
        ...
