"""The ``queue`` and ``limit_key`` columns reach databases made before them: a
SQLite file and a PostgreSQL schema of the previous version migrate on open; their jobs are on
queue ``default`` with no key, claimed by the plain claim and by a ``default`` pool."""

from __future__ import annotations

import dataclasses

from shared.runtime.clock import FakeClock, iso
from shared.model.job import NewJob, new_id
from tests.engines.test_outcome_commit import sqlite_before, upgrade_postgres, write_old_jobs


def _old_jobs_are_on_default(open_new, old_conn, param: str = "?") -> None:
    clock = FakeClock()
    old_ids = [new_id(), new_id()]
    stamp = iso(clock.now())
    write_old_jobs(old_conn, param, stamp, *old_ids)
    with open_new() as s:
        assert s.get(old_ids[0]).queue == "default"
        s.enqueue(
            [
                dataclasses.replace(
                    NewJob(new_id(), "t", "{}", 0, clock.now(), None, None),
                    queue="emails",
                    limit_key="k",
                )
            ],
            clock.now(),
        )
        s.serve((("default", 1),))
        assert sorted(j.id for j in s.claim("o", 1, clock.now(), 5)) == sorted(old_ids)
        s.serve(None)
        assert [j.queue for j in s.claim("o", 1, clock.now(), 5)] == ["emails"]


def test_a_sqlite_database_of_the_previous_version_gains_queues(tmp_path):
    from shared.engines.sqlite import schema
    from shared.engines.sqlite.store import SqliteStore

    path = str(tmp_path / "old.db")
    _old_jobs_are_on_default(lambda: SqliteStore(path), sqlite_before(path, schema.QUEUES))


def test_a_postgres_schema_of_the_previous_version_gains_queues(tmp_path, monkeypatch):
    upgrade_postgres(tmp_path, "QUEUES", monkeypatch, _old_jobs_are_on_default)
