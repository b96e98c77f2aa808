"""The PostgreSQL engine's native column types (schema step NATIVE, the list in
``shared.engines.postgres.native``): the tables have them, a DBA's own SQL finds jobs by payload
field and time window, and a schema of the previous version is converted with its rows intact."""

from __future__ import annotations

import pytest

from shared.engines.postgres import schema
from shared.engines.postgres.native import NATIVE_COLUMNS
from shared.model.job import new_id
from shared.producer.api import JobQueue
from tests.engines import PostgresEngine
from tests.engines.test_outcome_commit import postgres_before

psycopg = pytest.importorskip("psycopg")

_TYPES = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_schema = %s"
)
_DATA_TYPE = {"timestamptz": "timestamp with time zone", "jsonb": "jsonb"}


def _dba(pg: PostgresEngine):
    """A plain psycopg connection, as a DBA's (no loaders of jobq's: the server's own types)."""
    conn = psycopg.connect(pg.database, autocommit=True)
    conn.execute(f'SET search_path TO "{pg.schema}"')
    return conn


def test_every_listed_column_has_its_native_type(pg):
    with pg.open():
        pass
    with _dba(pg) as c:
        found = {(t, col): kind for t, col, kind in c.execute(_TYPES, (pg.schema,)).fetchall()}
        fn = c.execute("SELECT pg_typeof(db_now())::text, db_now() = date_trunc('ms', db_now())")
        assert fn.fetchone() == ("timestamp with time zone", True)
    assert NATIVE_COLUMNS and {
        (n.table, n.column): found.get((n.table, n.column)) for n in NATIVE_COLUMNS
    } == {(n.table, n.column): _DATA_TYPE[n.type] for n in NATIVE_COLUMNS}


def test_a_dba_query_by_payload_field_and_time_window_finds_an_enqueued_job(pg):
    with JobQueue(config=pg.config()) as q:
        mine = q.enqueue("invoice:send", {"customer": "42", "lines": [1, 2]})
        q.enqueue("invoice:send", {"customer": "7"})
    with _dba(pg) as c:
        rows = c.execute(
            "SELECT id, payload, created_at FROM jobs WHERE payload->>'customer' = '42' "
            "AND created_at > now() - interval '1 hour'"
        ).fetchall()
        # the id is the server's uuid: its hex is jobq's id
        assert [(r[0].hex, r[1]) for r in rows] == [(mine, {"customer": "42", "lines": [1, 2]})]
        assert rows[0][2].tzinfo is not None  # a time, not text
        later = c.execute("SELECT count(*) FROM jobs WHERE created_at > now() + interval '1 hour'")
        assert later.fetchone() == (0,)


# Rows of the previous version, as it wrote them: times as ISO text, JSON as the producer's text
# (its own key order and spacing), a workflow edge, an ended attempt.
_OLD_JOBS = (
    "INSERT INTO jobs (id, type, status, payload, result, progress, attempts, priority, run_at, "
    "started_at, completed_at, created_at, updated_at, heartbeat_at, ended_at, owner, "
    "has_children, after_failure, waiting_on) VALUES "
    "(%(a)s, 'old:done', 'completed', '{\"z\": 1, \"a\": [true, null]}', '{\"ok\":1}', "
    "'{\"fraction\":0.5}', 1, 0, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.250Z', "
    "'2026-01-01T00:00:02.999Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:02.999Z', NULL, "
    "'2026-01-01T00:00:02.998Z', NULL, 0, NULL, 0), "
    "(%(b)s, 'old:later', 'waiting', 'null', NULL, NULL, 0, 5, '2030-06-01T12:00:00.001Z', NULL, "
    "NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', NULL, NULL, NULL, 0, "
    "'cancel', 1), "
    "(%(c)s, 'old:run', 'running', '\"x\"', NULL, NULL, 1, 0, '2026-01-01T00:00:00.000Z', "
    "'2026-01-01T00:00:00.500Z', NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.500Z', "
    "'2026-01-01T00:00:00.500Z', NULL, 'h:1:1', 1, NULL, 0)"
)
_OLD_EDGE = "INSERT INTO job_deps (child, parent, pos, done) VALUES (%(b)s, %(c)s, 0, 0)"
_OLD_ATTEMPT = (
    "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, "
    "owner) VALUES (%(a)s, 'old:done', 1, 'completed', '2026-01-01T00:00:00.000Z', "
    "'2026-01-01T00:00:01.250Z', '2026-01-01T00:00:02.998Z', 'h:1:1')"
)


def test_a_schema_of_the_previous_version_is_converted_with_its_rows(pg, monkeypatch):
    ids = {"a": new_id(), "b": new_id(), "c": new_id()}
    with postgres_before(pg, schema.NATIVE, monkeypatch) as old:
        for sql in (_OLD_JOBS, _OLD_EDGE, _OLD_ATTEMPT):
            old.conn.execute(sql, ids)
        before = [old.get(i) for i in ids.values()]
        assert before[0].started_at == "2026-01-01T00:00:01.250Z"  # text columns, as written
    with pg.open() as new:
        assert [new.get(i) for i in ids.values()] == before
        assert [
            (h["job_id"], h["attempt"], h["outcome"], h["started_at"], h["ended_at"])
            for h in new.export_attempts(sorted(ids.values()))
        ] == [(ids["a"], 1, "completed", "2026-01-01T00:00:01.250Z", "2026-01-01T00:00:02.998Z")]
        assert new.get(ids["a"]).payload == {"z": 1, "a": [True, None]}
        # the converted workflow still settles: its running parent fails, the child is cancelled
        new.conn.execute(
            "UPDATE jobs SET status = 'failed', owner = NULL, updated_at = %s WHERE id = %s",
            ("2026-01-01T00:00:03.000Z", ids["c"]),
        )
        child = new.get(ids["b"])
        assert child.status == "cancelled" and child.completed_at == "2026-01-01T00:00:03.000Z"
        assert child.error.startswith(f"parent job {ids['c']} (old:run) failed")


def test_the_applications_connection_reads_jobs_as_jobq_text_and_keeps_its_own_types(pg):
    """Through ``conn=`` jobq reads with loaders on its own cursor only: the job reads as on
    jobq's connections, the application's connection still gives the server's types."""
    with JobQueue(config=pg.config()) as q, psycopg.connect(pg.database) as app:
        job_id = q.enqueue("t", {"customer": "42"}, conn=app)
        job = q.get(job_id, conn=app)  # in the application's transaction
        assert job.payload == {"customer": "42"} and job.created_at.endswith("Z")
        row = app.execute(f'SELECT created_at, payload FROM "{pg.schema}".jobs').fetchone()
        assert row[0].tzinfo is not None and row[1] == {"customer": "42"}


_TIMES = [
    "0001-01-01T00:00:00.999Z",
    "1969-12-31T23:59:59.999Z",
    "2024-02-29T23:59:59.100Z",
    "2026-11-30T14:01:29.123Z",
    "9999-12-31T23:59:59.999Z",
]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns", "Etc/GMT+12"])
def test_times_read_as_jobq_text_whatever_the_sessions_time_zone(pg, zone):
    """A session whose TimeZone is not UTC (a role's or database's setting) prints times in its
    zone, past year 9999 for the last one east of UTC: they still read as jobq's UTC text."""
    from shared.engines.postgres.loaders import register_native

    with psycopg.connect(pg.database, autocommit=True) as c:
        register_native(c.adapters)
        c.execute(f"SET TimeZone = '{zone}'")
        got = c.execute(
            "SELECT t::timestamptz, ARRAY[t::timestamptz], (left(t, 23) || '456Z')::timestamptz "
            "FROM unnest(%s::text[]) t",
            (_TIMES,),
        ).fetchall()
    assert [r[0] for r in got] == _TIMES and [r[1] for r in got] == [[t] for t in _TIMES]
    assert [r[2] for r in got] == _TIMES  # microseconds cut to the millisecond


def test_a_results_repeated_times_are_converted_once_each(pg, monkeypatch):
    """A claimed batch repeats its times (claim, lease, update): each distinct text of one
    result is converted once, and a result with more distinct times than the loader keeps
    still reads every one right."""
    from shared.engines.postgres.loaders import IsoTimeLoader, register_native

    converted: list[bytes] = []
    convert = IsoTimeLoader._convert

    def counted(self, raw):
        converted.append(raw)
        return convert(self, raw)

    monkeypatch.setattr(IsoTimeLoader, "_convert", counted)
    with psycopg.connect(pg.database, autocommit=True) as c:
        register_native(c.adapters)
        sql = (
            "SELECT t::timestamptz, t::timestamptz "
            "FROM unnest(%s::text[]) t, generate_series(1, 50)"
        )
        got = c.execute(sql, (_TIMES,)).fetchall()
        assert sorted({r[0] for r in got}) == sorted(_TIMES) and all(r[0] == r[1] for r in got)
        assert len(converted) == len(_TIMES)
        monkeypatch.setattr(IsoTimeLoader, "MEMO", 2)
        got = c.execute(sql, (_TIMES,)).fetchall()
    assert [r[0] for r in got[::50]] == _TIMES and all(r[0] == r[1] for r in got)


def test_json_that_jsonb_refuses_is_kept_visible_and_the_rest_as_written():
    from shared.engines.postgres.dialect import pg_json

    assert (
        pg_json('{"a": "x\\u0000y", "b": "\\\\u0000"}') == '{"a": "x\\\\u0000y", "b": "\\\\u0000"}'
    )
    assert (
        pg_json('["\\udc80", "\\ud83d\\ude00", "\\u00fc"]')
        == '["\\\\udc80", "\\ud83d\\ude00", "\\u00fc"]'
    )
    assert pg_json('{"plain": 1}') == '{"plain": 1}' and pg_json(None) is None
