"""The workflow schema reaches databases made before it: a SQLite file and a
PostgreSQL schema of the previous version migrate on open, keep their jobs, accept ``waiting``
and settle children from then on; SQLite's widened status CHECK still refuses other statuses."""

from __future__ import annotations

import dataclasses

import pytest

from shared.runtime.clock import FakeClock, iso
from shared.model.job import Finish, NewJob, new_id
from tests.engines.test_outcome_commit import sqlite_before, upgrade_postgres, write_old_jobs


def _old_parent_new_child(open_new, old_conn, param: str = "?") -> None:
    clock = FakeClock()
    old_id, stamp = new_id(), iso(clock.now())
    write_old_jobs(old_conn, param, stamp, old_id)
    with open_new() as s:
        child = dataclasses.replace(
            NewJob(new_id(), "c", "{}", 0, clock.now(), None, None), after=(old_id,)
        )
        s.enqueue_flow([child], clock.now())
        assert s.get(child.id).status == "waiting"
        [job] = s.claim("o:1:1", 1, clock.now())
        assert job.id == old_id and s.finish(
            Finish("completed", old_id, 1, "7"), "o:1:1", clock.now()
        )
        assert s.get(child.id).status == "pending" and s.parents(child.id)[0]["result"] == "7"


def test_a_sqlite_database_of_the_previous_version_gains_workflows(tmp_path):
    import sqlite3
    from shared.engines.sqlite import schema
    from shared.engines.sqlite.store import SqliteStore

    path = str(tmp_path / "old.db")
    _old_parent_new_child(lambda: SqliteStore(path), sqlite_before(path, schema.FLOWS))
    with SqliteStore(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()["user_version"] == schema.VERSION
        assert list(s.conn.execute("PRAGMA integrity_check").fetchone().values()) == ["ok"]
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            s.conn.execute("UPDATE jobs SET status = 'lost'")


def test_a_postgres_schema_of_the_previous_version_gains_workflows(tmp_path, monkeypatch):
    upgrade_postgres(tmp_path, "FLOWS", monkeypatch, _old_parent_new_child)


def _deep_chain_names_its_root(open_new, old_conn, param: str = "?") -> None:
    """Opened by this jobq, a database made before the bounded chain settles with it."""
    clock = FakeClock()
    with open_new() as s:
        ids = [new_id() for _ in range(60)]
        jobs = [NewJob(ids[0], "c", "{}", 0, clock.now(), None, None)]
        jobs += [
            dataclasses.replace(NewJob(i, "c", "{}", 0, clock.now(), None, None), after=(p,))
            for p, i in zip(ids, ids[1:])
        ]
        s.enqueue_flow(jobs, clock.now())
        [job] = s.claim("o:1:1", 1, clock.now())
        assert s.finish(Finish("failed", job.id, 1, "boom", 0.0, 1), "o:1:1", clock.now())
        assert s.get(ids[-1]).error == (
            f"parent job {ids[-2]} (c) cancelled <- 57 more <- parent job {ids[0]} (c) failed"
        )


def test_a_sqlite_database_before_bounded_chains_keeps_the_failed_job_in_errors(tmp_path):
    from shared.engines.sqlite import schema
    from shared.engines.sqlite.store import SqliteStore

    path = str(tmp_path / "old.db")
    _deep_chain_names_its_root(lambda: SqliteStore(path), sqlite_before(path, schema.FLOW_CHAINS))


def test_a_postgres_schema_before_bounded_chains_keeps_the_failed_job_in_errors(
    tmp_path, monkeypatch
):
    upgrade_postgres(tmp_path, "FLOW_CHAINS", monkeypatch, _deep_chain_names_its_root)
