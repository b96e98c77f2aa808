"""Bulk writes let other writers in: shared.engines.sqlite.bulk.Pacer sizes and spaces the
chunks of a purge; while a big purge runs, a writer with a small busy timeout still writes."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from shared import ops
from shared.settings import retention
from shared.producer.api import JobQueue
from shared.engines.sqlite.bulk import MOST, STEP, Pacer
from shared.engines.sqlite.wants import Wants
from shared.model.errors import StoreError
from shared.runtime.clock import iso
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
    c.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO jobs (id, type, status, payload, attempts, run_at, started_at, completed_at, "
        "created_at, updated_at) SELECT printf('0000%028x', i), 'old', 'completed', 'null', 1, "
        "?2, ?2, ?2, ?2, ?2 FROM n",
        (rows, stamp),
    )
    c.execute(
        "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at) "
        "SELECT id, type, 1, 'completed', run_at, started_at, completed_at FROM jobs"
    )
    c.execute("COMMIT")
    c.close()


PURGES = {
    "jobq purge": lambda store: ops.purge(store, "completed", NOW),
    "cleanup:old-data": lambda store: retention.purge(
        store, {"completed": NOW, "cancelled": None, "failed": None}
    ),
}


def _write_during(path: str, which: str, write) -> tuple[object, list[int], list[float], list[str]]:
    """Run a purge of the 80,000 jobs of ``path`` in a thread while ``write(n)`` writes again and
    again, as a worker does (a short transaction, then ~2 ms of work): the purge's deletions,
    and per write the jobs the purge deleted while it waited (the purge goes by id, oldest first,
    so ``min(rowid)`` shows its progress), its wait, and the writes that failed."""
    result: dict[str, object] = {}

    def purge() -> None:
        with SqliteStore(path) as store:
            result["deleted"] = PURGES[which](store)

    purger = threading.Thread(target=purge)
    passed, waits, failures = [], [], []
    purger.start()
    try:
        while purger.is_alive():
            t0 = time.perf_counter()
            try:
                before, after = write(len(passed))
            except (sqlite3.OperationalError, StoreError) as exc:
                failures.append(f"{exc} after {time.perf_counter() - t0:.3f} s")
                continue
            waits.append(time.perf_counter() - t0)
            passed.append(after - before)
            time.sleep(
                0.002
            )  # the writer's own work between two writes (load, not synchronisation)
    finally:
        purger.join()
    return result["deleted"], passed, waits, failures


@pytest.mark.parametrize("which", sorted(PURGES))
def test_a_writer_waits_for_at_most_a_chunk_or_two_of_a_big_purge(tmp_path, which):
    """A jobq writer (its store stamps its wants: ``.wants``) gets the lock within a chunk or two
    of a purge of 80,000 jobs -- measured in jobs the purge deleted while the write waited, never
    more than two of its biggest chunks -- not after many chunks by luck. The count does not
    depend on how fast this machine is. Before the pacing, chunks ran back to back and a
    writer could wait through dozens of them (7.2 s of them); now they do run back to
    back while no writer waits."""
    path = str(tmp_path / "q.db")
    fill_old(path, 80_000)
    oldest = "SELECT coalesce(min(rowid), 80001) AS n FROM jobs"
    with SqliteStore(path) as writer:
        assert writer.wants.available

        def write(k: int) -> tuple[int, int]:
            before = writer.conn.execute(oldest).fetchone()["n"]
            return before, writer._immediate(
                lambda c: (
                    c.execute(oldest).fetchone()["n"],
                    c.execute("INSERT INTO control (name, value) VALUES (?, 'x')", (f"w{k}",)),
                )[0]
            )

        deleted, passed, waits, failures = _write_during(path, which, write)
    assert (deleted if isinstance(deleted, int) else deleted["completed"]) == 80_000
    assert failures == []
    assert len(passed) >= 10
    worst = sorted(passed)[-3:]
    assert max(passed) <= 2 * MOST, (
        f"writes waited while the purge deleted {worst} jobs (its chunks are at "
        f"most {MOST}); longest wait {max(waits):.3f} s"
    )


def test_a_writer_around_jobq_still_gets_in_during_a_big_purge(tmp_path):
    """A writer that does not stamp its wants (plain sqlite3, its default busy timeout) is let
    in by the purge's probe pauses: every write succeeds."""
    path = str(tmp_path / "q.db")
    fill_old(path, 80_000)
    writer = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    oldest = "SELECT coalesce(min(rowid), 80001) FROM jobs"

    def write(k: int) -> tuple[int, int]:
        before = writer.execute(oldest).fetchone()[0]
        writer.execute("BEGIN IMMEDIATE")
        after = writer.execute(oldest).fetchone()[0]
        writer.execute("INSERT INTO control (name, value) VALUES (?, 'x')", (f"w{k}",))
        writer.execute("COMMIT")
        return before, after

    try:
        deleted, passed, _, failures = _write_during(path, "jobq purge", write)
    finally:
        writer.close()
    assert deleted == 80_000 and failures == [] and len(passed) >= 2


def test_a_purge_runs_its_chunks_back_to_back_while_no_writer_waits_and_pauses_for_one():
    """With the writers' signal (``.wants``) the pacer does not pause after a chunk while no
    writer waits (until a probe pause is due), and pauses while one does, until it is through."""
    box, pauses = [0.0], []
    wants = Wants(None)
    standing = [False, True, True, True, False]  # waiting()? as the pacer looks

    class Signal:
        available = True

        def waiting(self) -> bool:
            return standing.pop(0) if standing else False

    def sleep(t: float) -> None:
        pauses.append(t)
        box[0] += t

    pacer = Pacer(1000, hold=0.010, sleep=sleep, timer=lambda: box[0])
    store = FakeStore(box, [0.008] * 4)
    store.wants = Signal()
    for _ in range(4):
        pacer.chunk(store, lambda c, rows: None)
    assert pauses == [STEP, STEP, STEP]  # after the second chunk only: a writer waited three looks
    assert pacer.paused == [0.0, pytest.approx(3 * STEP), 0.0, 0.0]
    assert not wants.available and not wants.waiting()


def test_writers_stamps_are_seen_by_every_connection_on_the_file(tmp_path):
    """A write that began and has not ended is seen from another connection's map of the same
    ``-wants`` file (per-connection slots: one writer's ``done`` does not hide another that still
    waits); no file (an in-memory database, a folder it cannot be made in): no signal."""
    path = str(tmp_path / "q.db")
    first, second, bulk = Wants(path), Wants(path), Wants(path)
    second.at = (first.at + 16) % (16 * 256)  # as two threads or processes get
    try:
        assert bulk.available and not bulk.waiting()
        first.want()
        second.want()
        assert bulk.waiting()
        second.done()
        assert bulk.waiting()  # the first still waits
        first.done()
        assert not bulk.waiting()
    finally:
        for w in (first, second, bulk):
            w.close()
    assert not Wants(None).available and not Wants(str(tmp_path / "missing" / "q.db")).available
    with SqliteStore(path) as store:
        assert store.wants.available and not store.wants.waiting()
        seen = store._immediate(
            lambda c: (
                c.execute("INSERT INTO control (name, value) VALUES ('x', '1')"),
                store.wants.waiting(),
            )[1]
        )
        assert seen and not store.wants.waiting()  # a write through the store stamps both ends
