"""Retention's deletes written once (``shared.engines.contract.UpkeepStore.purge_finished``).

Finished jobs are found by walking the primary key (ids grow with time) one bounded range per
statement, so no index on finished jobs is needed (every job would pay for one) and no write
holds its locks long. The chunks run through the engine's pacer (``pacer``): an engine with
one write lock pauses after each (its own pacer) so other writers get the single
write lock; elsewhere (:class:`Chunks`) row locks let other writers work meanwhile.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, TypeVar

from shared.runtime.clock import iso
from shared.model.job import TERMINAL
from ..guard import unguarded
from .base import SqlBase

T = TypeVar("T")
BATCH = 500  # jobs looked at in the first chunk (then sized by the engine's pacer)
CHUNK_HOLD = 0.050  # seconds: the longest one chunk of Chunks should take (its row locks are on finished rows)

_CHUNK_END = "SELECT id FROM jobs WHERE id > :after ORDER BY id LIMIT 1 OFFSET :skip"
# (not max(id): PostgreSQL has no max() of a uuid; the primary key read backwards is as cheap)
_LAST_ID = "SELECT id FROM jobs WHERE id > :after ORDER BY id DESC LIMIT 1"
_DELETE_FINISHED = (
    "DELETE FROM jobs WHERE id > :after AND id <= :upto AND ("
    "(status = 'completed' AND coalesce(completed_at, updated_at) < :completed) OR "
    "(status = 'cancelled' AND coalesce(completed_at, updated_at) < :cancelled) OR "
    "(status = 'failed' AND coalesce(completed_at, updated_at) < :failed)) "
    # a parent stays while a child of it has yet to run (workflows: its results)
    "AND (has_children = 0 OR NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs c ON c.id = d.child "
    "WHERE d.parent = jobs.id AND c.status IN ('waiting', 'pending', 'running'))) "
    "RETURNING status"
)


class Chunks:
    """A pacer that runs each chunk as one transaction of its own, at once: for an engine whose
    row locks let other writers work meanwhile (nothing to pace). The chunk size follows the
    time a chunk takes, from ``rows``: doubled while one takes under half of ``hold``, halved
    past ``hold``, within ``least`` and ``most`` rows. At a fixed 500 rows a purge of 500,000
    jobs on PostgreSQL was 1,000 transactions, each a few round trips and a commit under load.
    ``most`` bounds what one commit flushes (every other writer's commit waits behind it: 20,000
    rows per chunk stalled an enqueue for 3.7 s once). ``timer`` is injected (``time.perf_counter``
    by default) so tests can give the times."""

    def __init__(
        self,
        rows: int = BATCH,
        *,
        hold: float = CHUNK_HOLD,
        least: int = 50,
        most: int = 2_000,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.least, self.most = min(least, most), max(least, most)
        self.rows = max(self.least, min(int(rows), self.most))
        self.hold, self.timer = hold, timer

    def chunk(self, store: Any, fn: Callable[[Any, int], T]) -> T:
        """Run ``fn(conn, rows)`` in one transaction of ``store``; what ``fn`` returned. ``rows``
        is this chunk's size (``self.rows`` is already the next one's when this returns)."""
        rows, t0 = self.rows, self.timer()
        out: T = store._paced(lambda c: fn(c, rows))
        took = self.timer() - t0
        if took > self.hold:
            self.rows = max(self.least, rows // 2)
        elif took < self.hold / 2:
            self.rows = min(self.most, rows * 2)
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
    def purge_finished(
        self, cutoffs: Mapping[str, float | None], chunk: int = BATCH, pacer: Any = None
    ) -> dict[str, int]:
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
            batch, after = pacer.chunk(
                self, lambda c, rows: self.delete_finished_in(c, cutoffs, start, rows)
            )
            for status, n in batch.items():
                deleted[status] = deleted.get(status, 0) + n
        return deleted

    def delete_finished_in(
        self, c: Any, cutoffs: Mapping[str, float | None], after: str = "", chunk: int = BATCH
    ) -> tuple[dict[str, int], str | None]:
        """Look at the next ``chunk`` jobs by id after ``after`` ("" = the first) and delete those
        whose terminal status has a cutoff and that finished before it (no ``completed_at``:
        ``updated_at``), on ``c`` inside the caller's transaction: one statement over one
        primary-key range (the attempt history goes with them). The deletions per status and
        the id to continue after (None: that was the end)."""
        after = after or self.dialect.id_floor
        row = self._run(c, _CHUNK_END, {"after": after, "skip": max(0, chunk - 1)}).fetchone()
        last = None if row else self._run(c, _LAST_ID, {"after": after}).fetchone()
        upto = row["id"] if row else (last["id"] if last else None)
        if upto is None:
            return {}, None
        params = {
            "after": after,
            "upto": upto,
            **{s: _iso_or_none(cutoffs.get(s)) for s in TERMINAL},
        }
        deleted: dict[str, int] = {}
        for r in self._run(c, _DELETE_FINISHED, params).fetchall():
            deleted[r["status"]] = deleted.get(r["status"], 0) + 1
        return deleted, upto if row else None


def _iso_or_none(t: float | None) -> str | None:
    return None if t is None else iso(t)
