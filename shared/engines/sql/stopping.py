"""A busy worker's check-in, written once (``shared.engines.contract.WorkerStore.check_in``):
the progress its handler reported, written under the outcome's guard, and which of its running
jobs someone asked to cancel (``cancel_requested_at``, set by ``shared.ops.cancel_jobs``).

The worker's heartbeat thread checks in a few times a second while a job runs: a read of the
owner's running rows (the ``jobs_running`` index), and a short write transaction only when there
is new progress to store.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import SqlBase

_PROGRESS = (
    "UPDATE jobs SET progress = :progress WHERE id = :id AND status = 'running' "
    "AND attempts = :attempt AND owner = :owner"
)
_ASKED = "SELECT id FROM jobs WHERE status = 'running' AND owner = :owner AND cancel_requested_at IS NOT NULL"


class StoppingSql(SqlBase):
    """``check_in``."""

    def check_in(self, owner: str, progress: Sequence[tuple[str, int, str]] = ()) -> set[str]:
        """Store each ``(job id, attempt, progress JSON)`` of ``owner`` (guarded by id, ``running``,
        attempt and owner: a job it no longer runs is left alone) and return the ids of its
        running jobs whose cancel was requested. Only a read when ``progress`` is empty."""
        if not progress:
            return {r["id"] for r in self._rows(_ASKED, {"owner": owner})}

        def tx(c: Any) -> set[str]:
            for job_id, attempt, text in progress:
                self._run(
                    c,
                    _PROGRESS,
                    {
                        "id": job_id,
                        "attempt": attempt,
                        "owner": owner,
                        "progress": self.dialect.json_value(text),
                    },
                )
            return {r["id"] for r in self._run(c, _ASKED, {"owner": owner}).fetchall()}

        return self._tx(tx)
