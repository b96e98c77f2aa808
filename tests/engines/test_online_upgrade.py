"""The online conversion of columns to native types (``shared.engines.postgres.online``,
``jobq db upgrade``), PostgreSQL only: prepare while a writer inserts and updates, a prepare
interrupted and run again, finish; then every value is the old one converted (times the same
instants, JSON the same values, ids the same ignoring hyphens), the indexes and constraints
are back under their old names, and a second finish does nothing. Then the job ids' step
(IDS) prepared under an old worker's writes, interrupted and finished, every id kept and the
catalogue (indexes, constraints, columns, triggers, functions) that of a schema made fresh by
the migrations. Also the guard that makes a store refuse to run an online step in place on a
big queue, and the command, one online step per prepare and finish."""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import datetime
from typing import Any

import pytest

from shared.engines.postgres import online
from shared.engines.postgres import schema as schema_mod
from shared.engines.postgres.native import ID_COLUMNS, NATIVE_COLUMNS, NativeColumn
from shared.model.errors import StoreRefused
from shared.model.job import Finish, NewJob, new_id
from shared.runtime.clock import FakeClock
from supervisor.cli.main import main as cli
from tests.engines import postgres_url
from tests.engines.test_outcome_commit import postgres_before

psycopg = pytest.importorskip("psycopg")

COLUMNS = (
    NativeColumn("things", "id", "uuid", "{c}::uuid"),
    NativeColumn("things", "at", "timestamptz", "{c}::timestamptz"),
    NativeColumn("things", "later", "timestamptz", "{c}::timestamptz"),
    NativeColumn("things", "doc", "jsonb", "{c}::jsonb"),
    NativeColumn("marks", "at", "timestamptz", "{c}::timestamptz"),  # a table with no key
)
ISO = """to_char((timestamptz '2026-01-01' + ({n}) * interval '1.5 s') AT TIME ZONE 'UTC',
'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
TABLES = f"""
CREATE TABLE meta (version integer NOT NULL);
INSERT INTO meta VALUES (7);
CREATE TABLE things (
    id    text COLLATE "C" PRIMARY KEY,
    at    text COLLATE "C" NOT NULL,
    later text COLLATE "C",
    doc   text NOT NULL DEFAULT '{{}}',
    n     integer NOT NULL,
    CHECK (later IS NULL OR later > at)
);
CREATE INDEX things_due ON things (at) WHERE later IS NOT NULL AND n > 0;
CREATE INDEX things_n ON things (n, at DESC);
CREATE TABLE marks (name text NOT NULL, at text COLLATE "C" NOT NULL);
CREATE INDEX marks_by_name ON marks (name, at);
INSERT INTO things SELECT gen_random_uuid()::text, {ISO.format(n="i")},
    CASE WHEN i % 2 = 0 THEN {ISO.format(n="i + 3")} END, '{{"i": ' || i || ', "s": "x"}}', i % 5
FROM generate_series(1, 3000) i;
INSERT INTO marks SELECT 'm' || (i % 10), {ISO.format(n="i")} FROM generate_series(1, 300) i;
"""


@pytest.fixture
def scratch(pg):
    """A schema of the test's own with two tables of text columns (``TABLES``)."""
    with psycopg.connect(pg.database, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{pg.schema}"')
        c.execute(f'SET search_path = "{pg.schema}"')
        c.execute(TABLES)
    return pg


def connect(pg) -> Any:
    return psycopg.connect(pg.database, autocommit=True)


def now_text(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(1.8e9 + offset).astimezone().isoformat(timespec="milliseconds")


class Writing(threading.Thread):
    """Calls ``write(c, i)`` on a connection of its own in the schema, until stopped; ``writes``
    counts, ``error`` keeps what ended it."""

    def __init__(self, pg) -> None:
        super().__init__(daemon=True)
        self.pg, self.stop, self.writes = pg, threading.Event(), 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with connect(self.pg) as c:
                c.execute(f'SET search_path = "{self.pg.schema}"')
                while not self.stop.is_set():
                    self.write(c, self.writes)
                    self.writes += 1
        except BaseException as exc:  # seen by the test
            self.error = exc

    def write(self, c: Any, i: int) -> None:
        raise NotImplementedError


class Writer(Writing):
    """Inserts rows and updates others' times and documents."""

    def __init__(self, pg, ids: list[str]) -> None:
        super().__init__(pg)
        self.ids = ids

    def write(self, c: Any, i: int) -> None:
        new = str(uuid.uuid4())
        c.execute(
            "INSERT INTO things (id, at, later, doc, n) VALUES (%s, %s, NULL, %s, %s)",
            (new, now_text(i), json.dumps({"w": i}), i % 5),
        )
        self.ids.append(new)
        c.execute(
            "UPDATE things SET at = %s, later = %s, doc = %s WHERE id = %s",
            (
                now_text(i),
                now_text(i + 9),
                json.dumps({"u": i, "t": [1, "é"]}),
                self.ids[i * 7 % 3000],
            ),
        )
        c.execute("INSERT INTO marks VALUES ('w', %s)", (now_text(i),))


def catalogue(c: Any, schema: str, table: str) -> dict[str, Any]:
    """The indexes (name -> definition) and constraints of ``table``, names and NOT NULLs."""
    index = c.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c "
        "ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass",
        (f'"{schema}".{table}',),
    ).fetchall()
    cons = c.execute(
        "SELECT conname, contype FROM pg_constraint WHERE conrelid = %s::regclass",
        (f'"{schema}".{table}',),
    ).fetchall()
    cols = c.execute(
        "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s",
        (schema, table),
    ).fetchall()
    return {"indexes": dict(index), "constraints": sorted(cons), "columns": sorted(cols)}


def same(kind: str, old: str | None, new: Any) -> bool:
    """``new`` (native) is ``old`` (text) converted: the same instant, JSON value or id."""
    if old is None or new is None:
        return old is None and new is None
    if kind == "timestamptz":
        return datetime.fromisoformat(old.replace("Z", "+00:00")) == new
    if kind == "jsonb":
        return json.loads(old) == new
    return old.replace("-", "") == new.hex


def snapshot(c: Any, schema: str, cols: tuple[NativeColumn, ...]) -> dict[str, list[tuple]]:
    """Each table's converted columns, row by row in a stable order (ctid: the swap keeps it)."""
    out = {}
    for table in dict.fromkeys(col.table for col in cols):
        names = ", ".join(f'"{col.column}"' for col in cols if col.table == table)
        out[table] = c.execute(f'SELECT {names} FROM "{schema}"."{table}" ORDER BY ctid').fetchall()
    return out


def assert_converted(before: dict, after: dict, cols: tuple[NativeColumn, ...]) -> None:
    for table, rows in before.items():
        kinds = [col.type for col in cols if col.table == table]
        assert len(after[table]) == len(rows)
        for old, new in zip(rows, after[table]):
            assert all(same(k, o, n) for k, o, n in zip(kinds, old, new)), (table, old, new)


class Interrupted(Exception):
    pass


def test_prepare_under_writes_resumes_after_an_interrupt_and_finish_keeps_every_value(scratch):
    schema = scratch.schema
    with connect(scratch) as c:
        ids = [r[0] for r in c.execute(f'SELECT id FROM "{schema}".things').fetchall()]
        old = {t: catalogue(c, schema, t) for t in ("things", "marks")}
        writer = Writer(scratch, ids)
        writer.start()
        lines: list[str] = []

        def stop_on_third(text: str, batch_line: bool) -> None:
            lines.append(text)
            if sum(1 for x in lines if x.startswith("things: page")) == 3:
                raise Interrupted

        with pytest.raises(Interrupted):
            online.prepare(c, schema, COLUMNS, batch=200, progress=stop_on_third)
        stopped_at = int(re.search(r"page ([\d,]+)/", lines[-1]).group(1).replace(",", ""))
        assert 0 < stopped_at
        with pytest.raises(StoreRefused, match=f"schema {schema}: .*prepare has not completed"):
            online.finish(c, schema, COLUMNS, version=8)
        again: list[str] = []
        written = writer.writes
        online.prepare(c, schema, COLUMNS, batch=200, progress=lambda t, b: again.append(t))
        first = next(x for x in again if x.startswith("things: page"))
        assert int(re.search(r"page ([\d,]+)/", first).group(1).replace(",", "")) > stopped_at
        assert writer.writes > written  # the writer was never held up for long
        writer.stop.set()
        writer.join()
        assert writer.error is None
        before = snapshot(c, schema, COLUMNS)
        done = online.finish(c, schema, COLUMNS, version=8)
        assert done.done and done.lock_seconds <= done.seconds
        assert_converted(before, snapshot(c, schema, COLUMNS), COLUMNS)
        new = {t: catalogue(c, schema, t) for t in ("things", "marks")}
        for t in old:
            assert new[t]["indexes"].keys() == old[t]["indexes"].keys()
            assert new[t]["constraints"] == old[t]["constraints"]
            assert [col[:2] for col in new[t]["columns"]] == [col[:2] for col in old[t]["columns"]]
        assert "WHERE ((later IS NOT NULL) AND (n > 0))" in new["things"]["indexes"]["things_due"]
        assert c.execute(f'SELECT version FROM "{schema}".meta').fetchone()[0] == 8
        kinds = dict(
            c.execute(
                "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = %s",
                (schema,),
            ).fetchall()
        )
        assert kinds["things.id"] == "uuid" and kinds["things.doc"] == "jsonb"
        assert kinds["marks.at"] == kinds["things.later"] == "timestamp with time zone"
        c.execute(f'INSERT INTO "{schema}".things (id, at, n) VALUES (gen_random_uuid(), now(), 1)')
        assert online.finish(c, schema, COLUMNS, version=8).done is False


def test_finish_needs_a_prepare_and_prepare_a_known_column_and_no_other_run(scratch):
    schema = scratch.schema
    with connect(scratch) as c:
        with pytest.raises(StoreRefused, match=f"schema {schema}: no online upgrade was prepared"):
            online.finish(c, schema, COLUMNS, version=8)
        with pytest.raises(StoreRefused, match=f"schema {schema}: table things has no column x"):
            online.prepare(c, schema, (NativeColumn("things", "x", "uuid", "{c}::uuid"),))
        with connect(scratch) as other:  # a second operator's command, running
            other.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"jobq.online.{schema}",))
            with pytest.raises(StoreRefused, match=f"schema {schema}: another `jobq db upgrade`"):
                online.prepare(c, schema, COLUMNS)


# -- the real schema --------------------------------------------------------------------------


# Jobs as the version before the native step wrote them: times as ISO text, JSON as text. A
# quarter completed (a result, progress, an attempt), a quarter failed, the rest pending.
_OLD_JOBS = """
INSERT INTO jobs (id, type, status, payload, result, progress, error, attempts, priority, run_at,
                  started_at, completed_at, created_at, updated_at, ended_at)
SELECT md5(i::text), 't', s, '{"i": ' || i || '}',
       CASE WHEN s = 'completed' THEN '{"ok": 1}' END, CASE WHEN s = 'completed' THEN '{"p": 5}' END,
       CASE WHEN s = 'failed' THEN 'boom' END, CASE WHEN s = 'pending' THEN 0 ELSE 1 END, 0,
       '2027-01-15T08:00:00.000Z', CASE WHEN s <> 'pending' THEN '2027-01-15T08:00:01.250Z' END,
       CASE WHEN s <> 'pending' THEN '2027-01-15T08:00:02.999Z' END, '2027-01-15T08:00:00.000Z',
       '2027-01-15T08:00:02.999Z', CASE WHEN s <> 'pending' THEN '2027-01-15T08:00:02.998Z' END
FROM (SELECT i, CASE i %% 4 WHEN 0 THEN 'completed' WHEN 1 THEN 'failed' ELSE 'pending' END AS s
      FROM generate_series(1, %(n)s) i) g
"""
_OLD_ATTEMPTS = """
INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner)
SELECT id, type, 1, status, run_at, started_at, ended_at, 'h:1:1' FROM jobs WHERE attempts = 1
"""
_OLD_FLOW = """
INSERT INTO jobs (id, type, status, payload, attempts, priority, run_at, created_at, updated_at,
                  has_children, waiting_on, after_failure)
VALUES (%(parent)s, 'p', 'pending', '{}', 0, 0, '2027-01-15T08:00:00.000Z',
        '2027-01-15T08:00:00.000Z', '2027-01-15T08:00:00.000Z', 1, 0, NULL),
       (%(child)s, 'c', 'waiting', '{}', 0, 0, '2027-01-15T08:00:00.000Z',
        '2027-01-15T08:00:00.000Z', '2027-01-15T08:00:00.000Z', 0, 1, 'cancel')
"""
_OLD_EDGE = "INSERT INTO job_deps (child, parent, pos, done) VALUES (%(child)s, %(parent)s, 0, 0)"


def fill(pg, monkeypatch, n: int) -> tuple[str, str]:
    """``pg``'s schema at the version before the native step, with ``n`` jobs as that version
    wrote them and a workflow's child waiting on its parent; the (parent, child) ids."""
    parent, child = new_id(), new_id()
    with postgres_before(pg, schema_mod.NATIVE, monkeypatch) as old:
        old.conn.execute(_OLD_JOBS, {"n": n})
        old.conn.execute(_OLD_ATTEMPTS)
        for sql in (_OLD_FLOW, _OLD_EDGE):
            old.conn.execute(sql, {"parent": parent, "child": child})
    return parent, child


def native_after(conn: Any) -> None:
    conn.execute(schema_mod.NATIVE_AFTER)


def test_the_real_schema_converts_online_with_the_native_columns(pg, monkeypatch):
    parent, child = fill(pg, monkeypatch, 400)
    with connect(pg) as c:
        old = {t: catalogue(c, pg.schema, t) for t in ("jobs", "job_attempts")}
        online.prepare(c, pg.schema, NATIVE_COLUMNS, batch=50)
        before = snapshot(c, pg.schema, NATIVE_COLUMNS)  # the old columns, in the rows' places
        assert len(before["jobs"]) == 402 and before["job_attempts"]
        done = online.finish(
            c, pg.schema, NATIVE_COLUMNS, version=schema_mod.NATIVE_VERSION, after=native_after
        )
        assert done.done
        assert_converted(before, snapshot(c, pg.schema, NATIVE_COLUMNS), NATIVE_COLUMNS)
        for t, was in old.items():
            now = catalogue(c, pg.schema, t)
            assert now["indexes"].keys() == was["indexes"].keys()
            assert now["constraints"] == was["constraints"]
    with pg.open() as store:  # this version goes on from there (its later steps in place)
        assert store.get(md5_id(4)).result == {"ok": 1}
        assert store.get(md5_id(4)).started_at == "2027-01-15T08:00:01.250Z"
        # the converted workflow still settles: its parent fails, the child is cancelled
        store.conn.execute(
            "UPDATE jobs SET status = 'failed', updated_at = %s WHERE id = %s",
            ("2027-01-15T09:00:00.000Z", parent),
        )
        assert store.get(child).status == "cancelled"
        assert store.get(child).error.startswith(f"parent job {parent} (p) failed")


def md5_id(i: int) -> str:
    import hashlib

    return hashlib.md5(str(i).encode()).hexdigest()


# -- the guard at open, and the command ----------------------------------------------------------


@pytest.fixture
def native_step(monkeypatch):
    """The native conversion's version, with a queue of more than 30 jobs called large."""
    monkeypatch.setattr(online, "ONLINE_ROWS", 30)
    return schema_mod.NATIVE_VERSION


def old_schema(pg, monkeypatch, n: int) -> None:
    """``pg``'s schema at the version before the native step, with ``n`` jobs."""
    fill(pg, monkeypatch, n)


def test_a_store_refuses_to_convert_a_big_queue_in_place_and_names_the_command(
    pg, native_step, monkeypatch
):
    old_schema(pg, monkeypatch, 40)
    with pytest.raises(
        StoreRefused, match=f"schema {pg.schema}: .*more than 30 rows.*jobq db upgrade"
    ):
        pg.open().close()
    with connect(pg) as c:
        assert c.execute(f'SELECT version FROM "{pg.schema}".meta').fetchone()[0] == native_step - 1


def test_a_store_converts_a_small_queue_in_place(pg, native_step, monkeypatch):
    old_schema(pg, monkeypatch, 10)
    pg.open().close()
    with connect(pg) as c:
        assert c.execute(f'SELECT version FROM "{pg.schema}".meta').fetchone()[0] == (
            schema_mod.VERSION
        )


def write_config(tmp_path, pg, schema: str | None = None) -> str:
    path = tmp_path / "jobq.toml"
    path.write_text(
        f'database = "{postgres_url()}"\n[postgres]\nschema = "{schema or pg.schema}"\n',
        encoding="utf-8",
    )
    return str(path)


def add_process(c: Any, schema: str) -> None:
    """A worker of an old version, its heartbeat now (on the database's clock)."""
    c.execute(
        f'INSERT INTO "{schema}".processes (id, kind, pid, host, started_at, heartbeat_at) '
        "VALUES ('w', 'worker', 77, 'h1', %s, %s)",
        (now_text(),) * 2,
    )
    c.execute(f'UPDATE "{schema}".processes SET heartbeat_at = "{schema}".db_now()')


def test_the_command_runs_each_online_step_and_ends_with_a_fresh_schemas_catalogue(
    pg, native_step, monkeypatch, tmp_path, capsys
):
    old_schema(pg, monkeypatch, 40)
    config = write_config(tmp_path, pg)
    assert cli(["db", "upgrade", "--config", config, "--batch", "20"]) == 0
    out, err = capsys.readouterr()
    assert f"schema {pg.schema}: step NATIVE (to version {native_step}) prepared" in out
    assert f"step IDS (to version {schema_mod.IDS_VERSION}) follows" in out
    assert "jobq db upgrade: jobs: page" in err
    with connect(pg) as c:  # a worker of the old version still runs
        add_process(c, pg.schema)
        assert cli(["db", "upgrade", "--finish", "--config", config]) == 5
        err = capsys.readouterr().err
        assert f"schema {pg.schema}: jobq processes still run on it (1: worker 77@h1)" in err
        c.execute(f'DELETE FROM "{pg.schema}".processes')
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    out, _ = capsys.readouterr()
    assert f"upgraded to version {native_step}" in out and "locked for" in out
    assert f"left: step IDS (to version {schema_mod.IDS_VERSION})" in out
    # the next run's small steps (FLOW_SETTLE) run in place only with no process on the schema
    with connect(pg) as c:
        add_process(c, pg.schema)
        assert cli(["db", "upgrade", "--config", config]) == 5
        err = capsys.readouterr().err
        assert f"step {native_step + 1} runs in place before step IDS" in err
        assert version_of(c, pg.schema) == native_step
        c.execute(f'DELETE FROM "{pg.schema}".processes')
    assert cli(["db", "upgrade", "--config", config, "--batch", "20"]) == 0
    out, err = capsys.readouterr()
    assert f"step IDS (to version {schema_mod.IDS_VERSION}) prepared" in out
    assert "start this version" in out and f"step {native_step + 1} runs in place" in err
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    out, _ = capsys.readouterr()
    assert f"upgraded to version {schema_mod.IDS_VERSION}" in out
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    assert "no online step left" in capsys.readouterr().out
    with connect(pg) as c:
        assert definitions(c, pg.schema) == fresh_definitions(c, tmp_path)
    missing = write_config(tmp_path, pg, schema=pg.schema + "_none")
    assert cli(["db", "upgrade", "--config", missing]) == 5
    assert f"schema {pg.schema}_none: no jobq tables there" in capsys.readouterr().err


def test_a_column_added_to_the_list_after_a_prepare_is_converted_by_batches_too(scratch):
    schema, first = scratch.schema, (COLUMNS[0], COLUMNS[3])  # id and doc: no CHECK reads them
    with connect(scratch) as c:
        online.prepare(c, schema, first, batch=500)
        lines: list[str] = []
        online.prepare(c, schema, COLUMNS, batch=500, progress=lambda t, b: lines.append(t))
        assert any(x.startswith("things: page") for x in lines)  # not left to the final check
        before = snapshot(c, schema, COLUMNS)
        assert online.finish(c, schema, COLUMNS, version=8).done
        assert_converted(before, snapshot(c, schema, COLUMNS), COLUMNS)


# -- the job ids to uuid (step IDS) --------------------------------------------------------------


def version_of(c: Any, schema: str) -> int:
    return c.execute(f'SELECT version FROM "{schema}".meta').fetchone()[0]


def definitions(c: Any, schema: str) -> dict[str, list[tuple]]:
    """Every index, constraint, column, trigger and function of ``schema`` as the catalogue
    defines it, the schema's name taken out: equal for two schemas that are alike."""
    reads = {
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s",
        "constraints": "SELECT c.relname, con.conname, pg_get_constraintdef(con.oid) "
        "FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid "
        "WHERE c.relnamespace = %s::regnamespace",
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = %s",
        "triggers": "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = %s::regnamespace AND NOT t.tgisinternal",
        "functions": "SELECT proname, pg_get_function_result(oid), prosrc FROM pg_proc "
        "WHERE pronamespace = %s::regnamespace",
    }
    out = {}
    for kind, sql in reads.items():
        found = c.execute(sql, (schema,)).fetchall()
        out[kind] = sorted(
            tuple(str(v).replace(f"{schema}.", "S.") if v is not None else v for v in row)
            for row in found
        )
    return out


def fresh_definitions(c: Any, tmp_path) -> dict[str, list[tuple]]:
    """:func:`definitions` of a schema this jobq's migrations made from nothing."""
    from shared.engines.postgres.migration import migrate_schema
    from tests.engines import PostgresEngine

    fresh = PostgresEngine(tmp_path)
    try:
        with connect(fresh) as f:
            migrate_schema(f, fresh.schema)
        return definitions(c, fresh.schema)
    finally:
        fresh.drop()


# Jobs as the version before the ids' step wrote them (native times and JSON, ids as 32-hex
# text): a quarter completed with an attempt row, a quarter failed, the rest pending; and a
# workflow's edges, each child waiting on the job before it.
_V12_JOBS = """
INSERT INTO jobs (id, type, status, payload, result, attempts, priority, run_at, started_at,
                  completed_at, created_at, updated_at, ended_at)
SELECT md5(i::text), 't', s, jsonb_build_object('i', i),
       CASE WHEN s = 'completed' THEN '{"ok": 1}'::jsonb END, CASE s WHEN 'pending' THEN 0 ELSE 1 END,
       0, now(), CASE WHEN s <> 'pending' THEN now() END, CASE WHEN s <> 'pending' THEN now() END,
       now(), now(), CASE WHEN s <> 'pending' THEN now() END
FROM (SELECT i, CASE i %% 4 WHEN 0 THEN 'completed' WHEN 1 THEN 'failed' ELSE 'pending' END AS s
      FROM generate_series(1, %(n)s) i) g;
INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, owner)
SELECT id, type, 1, status, run_at, started_at, ended_at, 'h:1:1' FROM jobs WHERE attempts = 1;
INSERT INTO job_deps (child, parent, pos, done)
SELECT md5(i::text), md5((i - 1)::text), 0, 0 FROM generate_series(2, %(n)s, 7) i
"""


def ids_schema(pg, monkeypatch, n: int) -> None:
    """``pg``'s schema at the version before the ids' step, ``n`` jobs in it (plain SQL)."""
    with postgres_before(pg, schema_mod.IDS, monkeypatch) as old:
        for statement in _V12_JOBS.split(";\n"):
            old.conn.execute(statement, {"n": n})


class IdWriter(Writing):
    """An old worker's writes with text ids, in plain SQL: a job inserted, an attempt and an
    edge for it, an old job updated and one deleted."""

    def __init__(self, pg, n: int) -> None:
        super().__init__(pg)
        self.n = n

    def write(self, c: Any, i: int) -> None:
        new, old = uuid.uuid4().hex, md5_id(1 + i * 13 % self.n)
        c.execute(
            "INSERT INTO jobs (id, type, payload, run_at, created_at, updated_at) "
            "VALUES (%s, 'w', '{}', now(), now(), now())",
            (new,),
        )
        c.execute(
            "INSERT INTO job_attempts (job_id, type, attempt, outcome, ended_at) "
            "VALUES (%s, 'w', 1, 'failed', now())",
            (new,),
        )
        c.execute("INSERT INTO job_deps (child, parent, pos) VALUES (%s, %s, 0)", (new, old))
        c.execute(
            "UPDATE jobs SET priority = priority + 1, updated_at = now() WHERE id = %s", (old,)
        )
        c.execute("UPDATE job_deps SET done = 1 WHERE parent = %s", (old,))
        if i % 5 == 0:
            c.execute("DELETE FROM jobs WHERE id = %s AND status = 'completed'", (md5_id(i * 4),))


def id_values(c: Any, schema: str) -> dict[str, list[tuple]]:
    """Each id column's values as 32-hex text, rows in ctid order (the swap keeps it)."""
    out: dict[str, list[tuple]] = {}
    for col in ID_COLUMNS:
        got = c.execute(
            f"SELECT replace({col.column}::text, '-', '') FROM \"{schema}\".{col.table} "
            "ORDER BY ctid"
        ).fetchall()
        out[f"{col.table}.{col.column}"] = got
    return out


def test_the_ids_step_prepared_under_writes_resumed_and_finished_keeps_every_id(
    pg, monkeypatch, tmp_path
):
    ids_schema(pg, monkeypatch, 3000)
    with connect(pg) as c:
        writer = IdWriter(pg, 3000)
        writer.start()
        lines: list[str] = []

        def stop_on_third(text: str, batch_line: bool) -> None:
            lines.append(text)
            if sum(1 for x in lines if x.startswith("jobs: page")) == 3:
                raise Interrupted

        with pytest.raises(Interrupted):
            online.prepare(c, pg.schema, ID_COLUMNS, batch=200, progress=stop_on_third)
        written = writer.writes
        again: list[str] = []
        online.prepare(c, pg.schema, ID_COLUMNS, batch=200, progress=lambda t, b: again.append(t))
        first = next(x for x in again if x.startswith("jobs: page"))
        assert not first.startswith("jobs: page 0/")  # it went on from where it stopped
        assert writer.writes > written  # the writer was never held up for long
        writer.stop.set()
        writer.join()
        assert writer.error is None
        before = id_values(c, pg.schema)
        assert len(before["job_deps.child"]) > 3000 // 7
        done = online.finish(c, pg.schema, ID_COLUMNS, version=schema_mod.IDS_VERSION)
        assert done.done
        assert id_values(c, pg.schema) == before
        assert version_of(c, pg.schema) == schema_mod.IDS_VERSION
        defs = definitions(c, pg.schema)
        assert defs == fresh_definitions(c, tmp_path)
        kinds = {(t, col): kind for t, col, kind, *_ in defs["columns"]}
        assert {kinds[(col.table, col.column)] for col in ID_COLUMNS} == {"uuid"}
        indexes = {name: d for _, name, d in defs["indexes"]}
        assert "(status, id) WHERE" in indexes["jobs_dead"]
        assert (
            "UNIQUE INDEX job_deps_pkey ON S.job_deps USING btree (child, parent)"
            in (indexes["job_deps_pkey"])
        )
        assert "(parent, done)" in indexes["job_deps_parent"]
        assert "(job_id)" in indexes["job_attempts_job"]
        key = c.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'jobs_pkey' "
            "AND conrelid = %s::regclass",
            (f'"{pg.schema}".jobs',),
        ).fetchone()
        assert key == ("PRIMARY KEY (id)",)


def test_a_store_refuses_the_ids_step_in_place_on_a_big_queue_and_names_the_command(
    pg, native_step, monkeypatch
):
    ids_schema(pg, monkeypatch, 40)
    with pytest.raises(StoreRefused) as refused:
        pg.open().close()
    text = str(refused.value)
    assert text.startswith(f"schema {pg.schema}: the jobs table holds more than 30 rows")
    assert f"its job ids to uuid in place (step IDS (to version {schema_mod.IDS_VERSION}))" in text
    assert "Run `jobq db upgrade` while" in text and "`jobq db upgrade --finish`" in text
    with connect(pg) as c:
        assert version_of(c, pg.schema) == schema_mod.IDS_VERSION - 1


def test_the_command_prepares_then_finishes_the_ids_step(
    pg, native_step, monkeypatch, tmp_path, capsys
):
    ids_schema(pg, monkeypatch, 40)
    with connect(pg) as c:
        before = id_values(c, pg.schema)
    config = write_config(tmp_path, pg)
    assert cli(["db", "upgrade", "--config", config, "--batch", "20"]) == 0
    out, err = capsys.readouterr()
    assert f"step IDS (to version {schema_mod.IDS_VERSION}) prepared" in out
    assert "preparing step IDS" in err and "in place" not in err
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    out, _ = capsys.readouterr()
    assert f"step IDS (to version {schema_mod.IDS_VERSION}) finished" in out
    assert out.rstrip().endswith("start this version")
    with connect(pg) as c:
        assert id_values(c, pg.schema) == before
        assert version_of(c, pg.schema) == schema_mod.IDS_VERSION
