"""The online conversion of columns to native types (``shared.engines.postgres.online``,
``jobq db upgrade``), PostgreSQL only: prepare while a writer inserts and updates, a prepare
interrupted and run again, finish; then every value is the old one converted (times the same
instants, JSON the same values, ids the same ignoring hyphens), the indexes and constraints
are back under their old names, and a second finish does nothing. Also the guard that makes a
store refuse to convert a big queue in place, and the command."""

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
from shared.engines.postgres.native import NATIVE_COLUMNS, NativeColumn
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


class Writer(threading.Thread):
    """Inserts rows and updates others' times and documents, until stopped; ``writes`` counts."""

    def __init__(self, pg, ids: list[str]) -> None:
        super().__init__(daemon=True)
        self.pg, self.ids, self.stop, self.writes = pg, ids, threading.Event(), 0
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


def test_the_command_prepares_then_finishes_and_names_the_schema_it_cannot_upgrade(
    pg, native_step, monkeypatch, tmp_path, capsys
):
    old_schema(pg, monkeypatch, 40)
    config = write_config(tmp_path, pg)
    assert cli(["db", "upgrade", "--config", config, "--batch", "20"]) == 0
    out, err = capsys.readouterr()
    assert f"schema {pg.schema}: prepared" in out and "jobq db upgrade: jobs: page" in err
    with connect(pg) as c:  # a worker of the old version still runs
        c.execute(
            f'INSERT INTO "{pg.schema}".processes (id, kind, pid, host, started_at, heartbeat_at) '
            f"VALUES ('w', 'worker', 77, 'h1', %s, %s)",
            (now_text(),) * 2,
        )
        c.execute(f'UPDATE "{pg.schema}".processes SET heartbeat_at = "{pg.schema}".db_now()')
        assert cli(["db", "upgrade", "--finish", "--config", config]) == 5
        err = capsys.readouterr().err
        assert f"schema {pg.schema}: jobq processes still run on it (1: worker 77@h1)" in err
        c.execute(f'DELETE FROM "{pg.schema}".processes')
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    out, _ = capsys.readouterr()
    assert f"upgraded to version {native_step}" in out and "locked for" in out
    assert cli(["db", "upgrade", "--finish", "--config", config]) == 0
    assert "native types already" in capsys.readouterr().out
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
