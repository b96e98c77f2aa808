"""The ``trace`` column reaches databases made before it: a SQLite file and a
PostgreSQL schema of the previous version migrate on open, keep their jobs (no context), and
store a context from then on."""

from __future__ import annotations

from shared.runtime.clock import FakeClock, iso
from shared.model.job import NewJob, new_id
from tests.engines.test_outcome_commit import sqlite_before, upgrade_postgres, write_old_jobs

PARENT = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'


def _old_job_and_a_traced_one(open_new, old_conn, param: str = "?") -> None:
    """A job written by the previous jobq (through ``old_conn``), then the upgraded store: the
    old job reads with no context, a new one keeps its context through the claim."""
    clock = FakeClock()
    old_id, stamp = new_id(), iso(clock.now())
    write_old_jobs(old_conn, param, stamp, old_id)
    with open_new() as s:
        assert s.get(old_id).trace is None
        new = NewJob(new_id(), "t", "{}", 0, clock.now() + 1, None, None, PARENT)
        s.enqueue([new], clock.now())
        assert s.get(new.id).trace == PARENT
        clock.advance(2)
        claimed = {j.id: j.trace for j in s.claim("o", 1, clock.now(), 5)}
        assert claimed == {old_id: None, new.id: PARENT}


def test_a_sqlite_database_of_the_previous_version_gains_the_column(tmp_path):
    from shared.engines.sqlite import schema
    from shared.engines.sqlite.store import SqliteStore

    path = str(tmp_path / "old.db")
    conn = sqlite_before(path, schema.TRACE)
    _old_job_and_a_traced_one(lambda: SqliteStore(path), conn)
    with SqliteStore(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()["user_version"] == schema.VERSION


def test_a_postgres_schema_of_the_previous_version_gains_the_column(tmp_path, monkeypatch):
    upgrade_postgres(tmp_path, "TRACE", monkeypatch, _old_job_and_a_traced_one)
