"""``jobq copy``'s reads written once (``shared.contract.TransferStore``): whole job rows paged
by id, and the attempt history of a page. Imports and the delete of copied rows stay in each
engine (how a chunk of rows travels, and which values the engine can hold, differ)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...transfer import ATTEMPT_FIELDS, JOB_FIELDS, Imported
from .base import SqlBase

COLUMNS = ", ".join(JOB_FIELDS)
ATTEMPT_COLUMNS = ", ".join(ATTEMPT_FIELDS)
IN_CHUNK = 500  # ids per list: below every driver's limit on parameters (999 at the least)
_HERE = "SELECT id, status, attempts, updated_at FROM jobs WHERE {ids}"


class ExportSql(SqlBase):
    """``export_jobs`` and ``export_attempts`` (plain reads), and what an import does after
    its inserts (:meth:`_classify`)."""

    def export_jobs(self, after: str, limit: int, statuses: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` jobs with ``id > after``, in id order, every column; only those of
        ``statuses`` when given."""
        if statuses is not None and not statuses:
            return []
        where, params = "", {"after": after, "limit": limit}
        if statuses is not None:
            where, more = self.dialect.member("status", "statuses", list(statuses))
            where, params = f"AND {where} ", {**params, **more}
        return self._rows(f"SELECT {COLUMNS} FROM jobs WHERE id > :after {where}ORDER BY id LIMIT :limit", params)

    def export_attempts(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The attempt history of these jobs, oldest first per job (lists of :data:`IN_CHUNK`)."""
        out: list[dict[str, Any]] = []
        for k in range(0, len(job_ids), IN_CHUNK):
            where, params = self.dialect.member("job_id", "ids", list(job_ids[k:k + IN_CHUNK]))
            out += self._rows(f"SELECT {ATTEMPT_COLUMNS} FROM job_attempts WHERE {where} ORDER BY seq", params)
        return out

    def _classify(self, c: Any, skipped: Sequence[Mapping[str, Any]], done: Imported) -> None:
        """Sort the rows an import's insert skipped (on ``c``, in its transaction): here by id
        (the same state or not), or kept out by a key another job here holds."""
        here: dict[str, Any] = {}
        for k in range(0, len(skipped), IN_CHUNK):
            where, params = self.dialect.member("id", "ids", [r["id"] for r in skipped[k:k + IN_CHUNK]])
            here.update((h["id"], h) for h in self._run(c, _HERE.format(ids=where), params).fetchall())
        done.sort_skipped(skipped, here)
