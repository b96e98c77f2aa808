"""Retention's deletes written once (``shared.contract.UpkeepStore.purge_finished``).

Finished jobs are found by walking the primary key (ids grow with time) one bounded range per
statement, so no index on finished jobs is needed (every job would pay for one) and no write
holds its locks long. The chunks run through the engine's pacer (``pacer``): an engine with
one write lock pauses after each (its own pacer) so other writers get the single
write lock; elsewhere (:class:`Chunks`) row locks let other writers work meanwhile.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from ...clock import iso
from ...job import TERMINAL
from ..guard import unguarded
from .base import SqlBase

T = TypeVar("T")
BATCH = 500  # jobs looked at in the first chunk (then sized by the engine's pacer)

_CHUNK_END = "SELECT id FROM jobs WHERE id > :after ORDER BY id LIMIT 1 OFFSET :skip"
_LAST_ID = "SELECT max(id) AS id FROM jobs WHERE id > :after"
_DELETE_FINISHED = ("DELETE FROM jobs WHERE id > :after AND id <= :upto AND ("
                    "(status = 'completed' AND coalesce(completed_at, updated_at) < :completed) OR "
                    "(status = 'cancelled' AND coalesce(completed_at, updated_at) < :cancelled) OR "
                    "(status = 'failed' AND coalesce(completed_at, updated_at) < :failed)) "
                    # a parent stays while a child of it has yet to run (workflows: its results)
                    "AND (has_children = 0 OR NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs c ON c.id = d.child "
                    "WHERE d.parent = jobs.id AND c.status IN ('waiting', 'pending', 'running'))) "
                    "RETURNING status")


class Chunks:
    """A pacer that runs each chunk of ``rows`` as one transaction of its own, at once: for an
    engine whose row locks let other writers work meanwhile (nothing to pace)."""

    def __init__(self, rows: int = BATCH) -> None:
        self.rows = max(1, int(rows))

    def chunk(self, store: Any, fn: Callable[[Any, int], T]) -> T:
        """Run ``fn(conn, rows)`` in one transaction of ``store``; what ``fn`` returned."""
        rows = self.rows
        out: T = store._paced(lambda c: fn(c, rows))
        return out


class RetentionSql(SqlBase):
    """``purge_finished`` (the contract) over ``delete_finished_in`` (one chunk)."""

    def pacer(self, rows: int = BATCH) -> Any:
        """The engine's pacer for a bulk write (this one: no pauses; an engine whose writers
        queue on one lock overrides it)."""
        return Chunks(rows)

    def _paced(self, fn: Callable[[Any], T]) -> T:
        """One chunk of a bulk write: ``fn(conn)`` in a transaction (the engine's guard
        translates its errors and takes its lock for this chunk only, see ``guard``)."""
        return self._tx(fn)

    @unguarded
    def purge_finished(self, cutoffs: Mapping[str, float | None], chunk: int = BATCH,
                       pacer: Any = None) -> dict[str, int]:
        """Delete every finished job older than its status's cutoff (``cutoffs``: 'completed',
        'cancelled', 'failed' -> Unix time, or None to keep them all); the number deleted per
        status of ``cutoffs``. Short transactions, one primary-key range each (about ``chunk``
        jobs looked at to start with), paced by the engine (or ``pacer``) so other writers are
        never held off long. With no cutoff at all nothing is read."""
        deleted = {status: 0 for status in cutoffs}
        if all(cut is None for cut in cutoffs.values()):
            return deleted
        pacer = pacer or self.pacer(chunk)
        after: str | None = ""
        while after is not None:
            start = after
            batch, after = pacer.chunk(self, lambda c, rows: self.delete_finished_in(c, cutoffs, start, rows))
            for status, n in batch.items():
                deleted[status] = deleted.get(status, 0) + n
        return deleted

    def delete_finished_in(self, c: Any, cutoffs: Mapping[str, float | None],
                           after: str = "", chunk: int = BATCH) -> tuple[dict[str, int], str | None]:
        """Look at the next ``chunk`` jobs by id after ``after`` ("" = the first) and delete those
        whose terminal status has a cutoff and that finished before it (no ``completed_at``:
        ``updated_at``), on ``c`` inside the caller's transaction: one statement over one
        primary-key range (the attempt history goes with them). The deletions per status and
        the id to continue after (None: that was the end)."""
        row = self._run(c, _CHUNK_END, {"after": after, "skip": max(0, chunk - 1)}).fetchone()
        upto = row["id"] if row else self._run(c, _LAST_ID, {"after": after}).fetchone()["id"]
        if upto is None:
            return {}, None
        params = {"after": after, "upto": upto, **{s: _iso_or_none(cutoffs.get(s)) for s in TERMINAL}}
        deleted: dict[str, int] = {}
        for r in self._run(c, _DELETE_FINISHED, params).fetchall():
            deleted[r["status"]] = deleted.get(r["status"], 0) + 1
        return deleted, upto if row else None


def _iso_or_none(t: float | None) -> str | None:
    return None if t is None else iso(t)
