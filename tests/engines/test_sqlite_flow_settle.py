"""SQLite: a worker's batch of completions settles its completed parents once per statement
(``shared.engines.sqlite.flowsettle``), with the counts exact; a completion written without the
settle mark (the version before, still connected after the upgrade; any other writer) is
settled by the trigger as before; a database of the version before migrates."""

from __future__ import annotations

import dataclasses

from shared import SqliteStore
from shared.engines.sqlite import finish, schema, tally
from shared.model.job import Finish, NewJob, new_id
from shared.runtime.clock import FakeClock, iso
from tests.engines.test_counts import _kept, _real
from tests.engines.test_outcome_commit import sqlite_before

OWNER, PID = "w:1:1", 1


def _job(clock: FakeClock, *after: str, run_at: float | None = None) -> NewJob:
    job = NewJob(new_id(), "t", "{}", 0, clock.now() if run_at is None else run_at, None, None)
    return dataclasses.replace(job, after=after)


def _completed(jobs) -> list[Finish]:
    return [Finish("completed", j.id, j.attempts, None) for j in jobs]


def test_a_batch_settles_its_parents_in_statements_not_per_parent(tmp_path):
    """Twenty parents completed in one batch: a chain's next link each, a fan-in's join and a
    delayed child become pending (the delayed one counted as delayed), a child cancelled before
    is left as it is; the batch runs the same few statements whatever the number of parents
    (the trigger ran its three per parent), and the counts equal a real count."""
    clock = FakeClock()
    with SqliteStore(str(tmp_path / "q.db")) as s:
        parents = [_job(clock) for _ in range(20)]
        links = [_job(clock, p.id) for p in parents[:10]]
        join = _job(clock, *(p.id for p in parents[10:18]))
        delayed = _job(clock, parents[18].id, run_at=clock.now() + 60)
        gone = _job(clock, parents[19].id)
        s.enqueue_flow([*parents, *links, join, delayed, gone], clock.now())
        s.write("UPDATE jobs SET status = 'cancelled' WHERE id = :id", {"id": gone.id})
        claimed = s.claim(OWNER, PID, clock.now(), 20)
        assert {j.id for j in claimed} == {p.id for p in parents}
        statements: list[str] = []
        s.conn.set_trace_callback(statements.append)
        done, got = s.finish_and_claim(_completed(claimed), OWNER, PID, clock.now(), 0)
        s.conn.set_trace_callback(None)
        assert all(done) and got == []
        # the trace names a trigger's statements by the statement that fired them: the
        # completion's were 13 per parent with the settle trigger's three, 5 without
        completion = [x for x in statements if "SET tally = 1 - tally, settle_mark" in x]
        assert len(completion) <= 6 * 20, len(completion)
        assert sum(x.startswith("UPDATE job_deps") for x in statements) == 1
        assert {s.get(j.id).status for j in [*links, join, delayed]} == {"pending"}
        assert s.get(gone.id).status == "cancelled"
        assert _kept(s) == _real(s) and _kept(s)[1] == {"t": 1}
        edges = s.conn.execute("SELECT count(*) AS n FROM job_deps WHERE done = 0").fetchone()
        assert edges["n"] == 0
        _, more = s.finish_and_claim([], OWNER, PID, clock.now(), 20)
        assert {j.id for j in more} == {*(j.id for j in links), join.id}


def test_a_completion_without_the_settle_mark_is_settled_by_the_trigger(tmp_path):
    """The previous version's batched completion (counted, not settle-marked), from a process
    still connected after the upgrade, releases its children through the trigger."""
    clock = FakeClock()
    with SqliteStore(str(tmp_path / "q.db")) as s:
        parent = _job(clock)
        child = _job(clock, parent.id)
        s.enqueue_flow([parent, child], clock.now())
        [j] = s.claim(OWNER, PID, clock.now(), 1)
        old = finish._COMPLETE_MANY.replace("SET status", "SET " + tally.MARK + "status")
        stamp = iso(clock.now())
        s.conn.execute("BEGIN IMMEDIATE")
        rows = s.conn.execute(
            old.format(rows="(?3, ?4, ?5, ?6, ?7, ?8)"),
            (stamp, OWNER, j.id, j.attempts, None, stamp, stamp, None),
        ).fetchall()
        tally.add(s.conn, tally.moved((r["type"] for r in rows), "running", "completed"))
        s.conn.execute("COMMIT")
        assert s.get(parent.id).status == "completed" and s.get(child.id).status == "pending"
        assert _kept(s) == _real(s)


def test_a_database_before_the_settle_per_statement_migrates_and_settles(tmp_path):
    """A database of the version before, with a child waiting and its parent running, gains the
    mark, and this version's batch completing the parent releases the child."""
    clock = FakeClock()
    path = str(tmp_path / "old.db")
    sqlite_before(path, schema.FLOW_SETTLE).close()
    with SqliteStore(path, migrate=False) as old:  # the schema before, not migrated
        parent = _job(clock)
        child = _job(clock, parent.id)
        old.enqueue_flow([parent, child], clock.now())
        [j] = old.claim(OWNER, PID, clock.now(), 1)
    with SqliteStore(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()["user_version"] == schema.VERSION
        done, got = s.finish_and_claim(_completed([j]), OWNER, PID, clock.now(), 1)
        assert done == [True] and [g.id for g in got] == [child.id]
        assert _kept(s) == _real(s)
