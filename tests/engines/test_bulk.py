"""Bulk writes let other writers in (issue 12 case 9): shared.bulk.Pacer sizes and spaces the
chunks of a purge; while a big purge runs, a writer with a small busy timeout still writes."""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from shared import ops, retention
from shared.api import JobQueue
from shared.engines.sqlite.bulk import MOST, Pacer
from shared.clock import iso
from shared import SqliteStore

NOW = 1_767_225_600.0


class FakeStore:
    """Runs ``_paced`` at once and lets the test say how long each chunk held the lock."""

    def __init__(self, timer_box: list[float], holds: list[float]) -> None:
        self.box, self.holds = timer_box, holds

    def _paced(self, fn):
        out = fn(None)
        self.box[0] += self.holds.pop(0)
        return out


def test_the_pacer_halves_slow_chunks_doubles_quick_ones_and_pauses_at_least_as_long_as_it_held():
    box, pauses, sizes = [0.0], [], []
    holds = [0.050, 0.030, 0.012, 0.007, 0.001, 0.001, 0.0001]
    pacer = Pacer(1000, hold=0.010, least=100, most=2000, sleep=pauses.append, timer=lambda: box[0])
    store = FakeStore(box, list(holds))
    for _ in holds:
        pacer.chunk(store, lambda c, rows: sizes.append(rows))
    assert sizes == [1000, 500, 250, 125, 125, 250, 500]
    assert pacer.rows == 1000
    assert pauses == [pytest.approx(max(h, 0.010)) for h in holds]
    assert Pacer(5, least=50).rows == 50 and Pacer(10**6, most=2000).rows == 2000


def fill_old(path: str, rows: int) -> None:
    """``rows`` completed jobs (with one attempt row each) that finished 30 days before NOW."""
    JobQueue(path).close()
    stamp = iso(NOW - 30 * 86400)
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    c.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
              "INSERT INTO jobs (id, type, status, payload, attempts, run_at, started_at, completed_at, "
              "created_at, updated_at) SELECT printf('0000%028x', i), 'old', 'completed', 'null', 1, "
              "?2, ?2, ?2, ?2, ?2 FROM n", (rows, stamp))
    c.execute("INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at) "
              "SELECT id, type, 1, 'completed', run_at, started_at, completed_at FROM jobs")
    c.execute("COMMIT")
    c.close()


PURGES = {
    "jobq purge": lambda store: ops.purge(store, "completed", NOW),
    "cleanup:old-data": lambda store: retention.purge(store, {"completed": NOW, "cancelled": None, "failed": None}),
}


@pytest.mark.parametrize("which", sorted(PURGES))
def test_a_writer_waits_for_at_most_a_chunk_or_two_of_a_big_purge(tmp_path, which):
    """The mechanism: while a purge of 80,000 jobs runs, another connection writes again and
    again, as a worker does (a short transaction with the default busy_timeout, then ~2 ms of
    work). Each of its writes gets the lock within a chunk or two of the purge -- measured in
    jobs the purge deleted while the write waited (the purge goes by id, oldest first, so
    ``min(rowid)`` shows its progress), never more than two of its biggest chunks -- not
    after many chunks by luck. The count does not depend on how fast this machine is. Before
    the fix chunks ran back to back and a writer could wait through dozens of them (7.2 s of
    them in issue 12)."""
    path = str(tmp_path / "q.db")
    fill_old(path, 80_000)
    result: dict[str, object] = {}

    def purge() -> None:
        with SqliteStore(path) as store:
            result["deleted"] = PURGES[which](store)
    purger = threading.Thread(target=purge)
    writer = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    oldest = "SELECT coalesce(min(rowid), 80001) FROM jobs"
    passed, waits, failures = [], [], []
    purger.start()
    try:
        while purger.is_alive():
            before, t0 = writer.execute(oldest).fetchone()[0], time.perf_counter()
            try:
                writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                failures.append(f"{exc} after {time.perf_counter() - t0:.3f} s")
                continue
            waits.append(time.perf_counter() - t0)
            passed.append(writer.execute(oldest).fetchone()[0] - before)
            writer.execute("INSERT INTO control (name, value) VALUES (?, 'x')", (f"w{len(passed)}",))
            writer.execute("COMMIT")
            time.sleep(0.002)  # the writer's own work between two writes (load, not synchronisation)
    finally:
        purger.join()
        writer.close()
    deleted = result["deleted"]
    assert (deleted if isinstance(deleted, int) else deleted["completed"]) == 80_000
    assert failures == []
    assert len(passed) >= 10
    worst = sorted(passed)[-3:]
    assert max(passed) <= 2 * MOST, (f"writes waited while the purge deleted {worst} jobs (its chunks are at "
                                     f"most {MOST}); longest wait {max(waits):.3f} s")
