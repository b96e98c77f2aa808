"""``jobq copy``'s reads written once (``shared.engines.contract.TransferStore``): whole job rows
paged by id, and the attempt history and workflow edges of a page; and what an import does after its
inserts: the edges, the settling of workflows across the copy, the sorting of skipped rows. The
insert of the jobs and the delete of copied rows stay in each engine (how a chunk of rows
travels, and which values the engine can hold, differ).

Settling reuses the schema's trigger rather than a second copy of its SQL: an ended parent with
an edge not done to a waiting child (one side of it inserted now) is set ``waiting`` and back to
its status, one parent at a time, in the import's transaction. Going back fires the trigger as
the end of that parent did where it ran, with the parent's own ``updated_at`` as the children's
time; the count triggers see -1 and +1 (nothing in all), nothing else fires on ``waiting``, and
no other session sees it (the row is locked, the transaction not committed). On PostgreSQL the
trigger notifies idle workers of released children, on the channel an import of pending jobs
notifies anyway (one notification per transaction reaches listeners)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from shared.engines.transfer import ATTEMPT_FIELDS, EDGE_FIELDS, JOB_FIELDS, Imported
from .base import SqlBase
from .flows import EDGE_COLUMNS, INSERT_EDGES, MARK_PARENTS

COLUMNS = ", ".join(JOB_FIELDS)
ATTEMPT_COLUMNS = ", ".join(ATTEMPT_FIELDS)
IN_CHUNK = 500  # ids per list: below every driver's limit on parameters (999 at the least)
_HERE = "SELECT id, status, attempts, updated_at FROM jobs WHERE {ids}"
_EDGES = f"SELECT {', '.join(EDGE_FIELDS)} FROM job_deps WHERE {{ids}} ORDER BY child, pos"
_IDS = (("id", "id"),)
# The ended parents an import must settle: an edge not done to a waiting child, the parent or the
# child inserted now (each side found by its index); in the order they ended (as their triggers
# fired where they ran).
_UNSETTLED = """
SELECT DISTINCT p.id, p.status, p.updated_at
FROM (SELECT parent, child FROM job_deps WHERE parent IN (SELECT id FROM {new}) AND done = 0
      UNION SELECT parent, child FROM job_deps WHERE child IN (SELECT id FROM {new}) AND done = 0) d
JOIN jobs p ON p.id = d.parent JOIN jobs c ON c.id = d.child
WHERE c.status = 'waiting' AND p.status IN ('completed', 'failed', 'cancelled')
ORDER BY p.updated_at, p.id
"""
_STATUS = "UPDATE jobs SET status = :status WHERE id = :id"


class ExportSql(SqlBase):
    """``export_jobs`` and ``export_attempts`` (plain reads), and what an import does after
    its inserts (:meth:`_classify`)."""

    def export_jobs(
        self, after: str, limit: int, statuses: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` jobs with ``id > after``, in id order, every column; only those of
        ``statuses`` when given."""
        if statuses is not None and not statuses:
            return []
        where, params = "", {"after": after or self.dialect.id_floor, "limit": limit}
        if statuses is not None:
            where, more = self.dialect.member("status", "statuses", list(statuses))
            where, params = f"AND {where} ", {**params, **more}
        return self._rows(
            f"SELECT {COLUMNS} FROM jobs WHERE id > :after {where}ORDER BY id LIMIT :limit", params
        )

    def export_attempts(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The attempt history of these jobs, oldest first per job (lists of :data:`IN_CHUNK`)."""
        out: list[dict[str, Any]] = []
        for k in range(0, len(job_ids), IN_CHUNK):
            where, params = self.dialect.member(
                "job_id", "ids", list(job_ids[k : k + IN_CHUNK]), kind="id"
            )
            out += self._rows(
                f"SELECT {ATTEMPT_COLUMNS} FROM job_attempts WHERE {where} ORDER BY seq", params
            )
        return out

    def export_edges(self, child_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The ``job_deps`` rows of these jobs as children, by child and position."""
        out: list[dict[str, Any]] = []
        for k in range(0, len(child_ids), IN_CHUNK):
            where, params = self.dialect.member(
                "child", "ids", list(child_ids[k : k + IN_CHUNK]), kind="id"
            )
            out += self._rows(_EDGES.format(ids=where), params)
        return out

    def _import_flows(
        self, c: Any, inserted: Sequence[str], edges: Sequence[Mapping[str, Any]]
    ) -> int:
        """In an import's transaction on ``c``, after its inserts: the edges of the jobs
        ``inserted`` (an edge here is kept), their parents here marked, then every ended parent
        with an edge not done to a waiting child, either of them inserted now, settled by the
        schema's trigger (see the module's docstring). The number of edges written."""
        if not inserted:
            return 0
        new = set(inserted)
        mine = [tuple(e[f] for f in EDGE_FIELDS) for e in edges if e["child"] in new]
        written = 0
        if mine:
            rows = self.dialect.row_set("e", EDGE_COLUMNS)
            insert = INSERT_EDGES.format(s=self.qualifier, rows=rows)
            written = self._run(
                c, insert, self.dialect.row_params("e", EDGE_COLUMNS, mine)
            ).rowcount
            parents = sorted({e[1] for e in mine})
            for k in range(0, len(parents), IN_CHUNK):
                where, params = self.dialect.member(
                    "id", "ids", parents[k : k + IN_CHUNK], kind="id"
                )
                self._run(c, MARK_PARENTS.format(s=self.qualifier, ids=where), params)
        ids = self.dialect.row_params("n", _IDS, [(i,) for i in inserted])
        for p in self._run(
            c, _UNSETTLED.format(new=self.dialect.row_set("n", _IDS)), ids
        ).fetchall():
            self._run(c, _STATUS, {"id": p["id"], "status": "waiting"})  # not an end: no trigger
            self._run(
                c, _STATUS, {"id": p["id"], "status": p["status"]}
            )  # the end again: the trigger
        return written

    def _classify(self, c: Any, skipped: Sequence[Mapping[str, Any]], done: Imported) -> None:
        """Sort the rows an import's insert skipped (on ``c``, in its transaction): here by id
        (the same state or not), or kept out by a key another job here holds."""
        here: dict[str, Any] = {}
        for k in range(0, len(skipped), IN_CHUNK):
            where, params = self.dialect.member(
                "id", "ids", [r["id"] for r in skipped[k : k + IN_CHUNK]], kind="id"
            )
            here.update(
                (h["id"], h) for h in self._run(c, _HERE.format(ids=where), params).fetchall()
            )
        done.sort_skipped(skipped, here)
