"""What ``jobq copy`` moves between stores (:class:`shared.engines.contract.TransferStore`): the
columns of a job, of an attempt and of a workflow edge, and :class:`Imported`, what an import did
with each row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


JOB_FIELDS = (
    "id",
    "type",
    "status",
    "payload",
    "result",
    "error",
    "attempts",
    "max_attempts",
    "priority",
    "run_at",
    "started_at",
    "completed_at",
    "created_at",
    "updated_at",
    "key",
    "owner",
    "owner_pid",
    "heartbeat_at",
    "trace",
    "queue",
    "limit_key",
    "ended_at",
    "after_failure",
    "waiting_on",
    "has_children",
    "flow_depth",
    "cancel_requested_at",
    "progress",
)
# Every column of the jobs table but the engines' own bookkeeping (:data:`LOCAL_FIELDS`), which
# the target writes for itself (a test compares this list with both engines' tables).
LOCAL_FIELDS = (
    "tally",  # SQLite: rows a statement counted itself (the count triggers skip them)
    "settle_mark",  # SQLite: completions a statement settled itself (the settle trigger skips them)
)
ATTEMPT_FIELDS = (
    "job_id",
    "type",
    "attempt",
    "outcome",
    "due_at",
    "started_at",
    "ended_at",
    "owner",
    "error",
)  # a job_attempts row without its engine-local ``seq``
EDGE_FIELDS = (
    "child",
    "parent",
    "pos",
    "done",
)  # a job_deps row: the child waits for (waited for) the parent


@dataclass
class Imported:
    """What :meth:`TransferStore.import_jobs` did with each row, by job id."""

    inserted: list[str] = field(default_factory=list)  # new here, with their attempt history
    present: list[str] = field(
        default_factory=list
    )  # already here, same status, attempts, updated_at
    differing: list[str] = field(
        default_factory=list
    )  # already here in another state: kept as it is
    key_taken: list[str] = field(default_factory=list)  # skipped: another job here holds its key
    rejected: dict[str, str] = field(
        default_factory=dict
    )  # id -> why this engine cannot store the row
    edges: int = 0  # workflow edges written (those of the jobs inserted)

    def sort_skipped(
        self, skipped: Sequence[Mapping[str, Any]], here: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """File the rows an import's insert skipped, given the rows ``here`` by id (id, status,
        attempts, updated_at): present (same state), differing, or kept out by a key (not here)."""
        for r in skipped:
            h = here.get(r["id"])
            if h is None:
                self.key_taken.append(r["id"])
            elif (h["status"], h["attempts"], h["updated_at"]) == (
                r["status"],
                r["attempts"],
                r["updated_at"],
            ):
                self.present.append(r["id"])
            else:
                self.differing.append(r["id"])
