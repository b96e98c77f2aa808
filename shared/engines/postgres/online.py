"""Converting columns to native types on a live queue (``jobq db upgrade``), for any list of
:class:`.native.NativeColumn`: an in-place ``ALTER ... TYPE`` rewrites the table under an ACCESS
EXCLUSIVE lock, seconds on a million jobs, while every claim and outcome waits.

- :func:`prepare` runs while the old workers keep running: each column gets a shadow of the
  native type (``col__native``), kept in step by a BEFORE INSERT OR UPDATE row trigger for the
  writers that know only the old column; the rows there were are converted in short batches
  (:mod:`.onlinefill`); the NOT NULLs and CHECKs are added as validated constraints on the
  shadows and the indexes are built again over them with CREATE INDEX CONCURRENTLY. Every lock
  it takes is brief and asked for with a short ``lock_timeout``, then asked again. It resumes
  where it stopped when run again after a kill.
- :func:`finish` (:mod:`.onlineswap`) runs when the old workers are stopped: one short
  transaction locks the tables, drops the triggers, retires the old columns and indexes
  (renamed, dropped after the commit without blocking), gives the shadows and their indexes
  the old names, restores NOT NULL (proved by the validated constraints: no scan) and
  defaults, runs ``after`` (the SQL that re-creates functions and triggers for the new types)
  and sets ``meta.version``. It returns how long the tables were locked.
- :func:`guard_step`: the migration's guard, so that a store opening a big schema refuses
  (naming ``jobq db upgrade``) rather than run an online step (:mod:`.onlinesteps`) in place.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import psycopg

from shared.model.errors import StoreRefused
from . import onlineddl as ddl
from . import onlinesteps
from .native import NativeColumn
from .onlinefill import COMMAND, STATE, backfill, ensure_state, exclusive, locked_tx, recheck
from .onlineddl import by_table, not_null_name, q, rows, shadow
from .onlineswap import After, Finished, finish
from .onlinesteps import OnlineStep

__all__ = ["After", "Finished", "finish", "prepare", "guard_step", "refuse_if_large", "COMMAND"]

ONLINE_ROWS = 100_000  # above this many jobs, the conversion is online, never at a store's open
BATCH = 5_000

Progress = Callable[[str, bool], None]  # (text, one of many batch lines)


def guard_step(conn: psycopg.Connection, schema: str, version: int) -> None:
    """The migration's check before the step that reaches ``version``: an online step
    (:func:`.onlinesteps.reaching`) on a schema whose jobs table is large is refused
    (:func:`refuse_if_large`); a small step passes."""
    if (step := onlinesteps.reaching(version)) is not None:
        refuse_if_large(conn, schema, step)


def refuse_if_large(
    conn: psycopg.Connection, schema: str, step: OnlineStep, threshold: int | None = None
) -> None:
    """Raise StoreRefused (naming ``step`` and :data:`COMMAND`) when ``schema.jobs`` holds more
    than ``threshold`` rows (default :data:`ONLINE_ROWS`): running ``step`` in place would lock
    it for seconds. Counts at most ``threshold + 1`` rows."""
    threshold = ONLINE_ROWS if threshold is None else threshold
    if count_up_to(conn, schema, "jobs", threshold + 1) > threshold:
        raise StoreRefused(
            f"schema {schema}: the jobs table holds more than {threshold:,} rows: converting "
            f"{step.what} in place ({onlinesteps.named(step)}) would lock it for seconds. Run "
            f"`{COMMAND}` while the workers run, then stop them and run `{COMMAND} --finish` "
            "before starting this version"
        )


def count_up_to(conn: psycopg.Connection, schema: str, table: str, limit: int) -> int:
    """The rows of ``schema.table``, counted up to ``limit``."""
    query = f"SELECT count(*) FROM (SELECT 1 FROM {q(schema)}.{q(table)} LIMIT %s) s"
    return int(rows(conn, query, (limit,))[0][0])


def plan(
    conn: psycopg.Connection, schema: str, columns: Sequence[NativeColumn]
) -> dict[str, tuple[NativeColumn, ...]]:
    """The columns by table, checked against the schema: StoreRefused naming the schema for a
    table or column that is not there, a column already of its native type, a foreign key."""
    out = by_table(columns)
    for table, cols in out.items():
        facts = ddl.column_facts(conn, schema, table)
        if not facts:
            raise StoreRefused(f"schema {schema}: no table {table} (is it a jobq schema?)")
        for c in cols:
            if c.column not in facts:
                raise StoreRefused(f"schema {schema}: table {table} has no column {c.column}")
            if facts[c.column].type == c.type:
                raise StoreRefused(
                    f"schema {schema}: {table}.{c.column} is {c.type} already (upgraded?)"
                )
        if keys := ddl.foreign_keys(conn, schema, table):
            raise StoreRefused(
                f"schema {schema}: {table} has foreign keys ({', '.join(keys)}), "
                "which the online upgrade does not convert"
            )
    return out


def prepare(
    conn: psycopg.Connection,
    schema: str,
    columns: Sequence[NativeColumn],
    *,
    batch: int = BATCH,
    progress: Progress | None = None,
) -> None:
    """Make ``schema`` ready for :func:`finish` while its writers run (see the module). ``conn``
    is in autocommit and not in a transaction. Resumable: run again after a kill, it goes on
    where it stopped. An exception from ``progress`` stops it (nothing is lost)."""
    say = progress or (lambda text, batch_line: None)
    tables = plan(conn, schema, columns)
    with exclusive(conn, schema):
        _prepare(conn, schema, tables, batch, say)


def _prepare(
    conn: psycopg.Connection,
    schema: str,
    tables: dict[str, tuple[NativeColumn, ...]],
    batch: int,
    say: Progress,
) -> None:
    conn.execute("SET lock_timeout = 0")  # the concurrent steps wait on nobody's work
    ensure_state(conn, schema)
    for table, cols in tables.items():
        _shadow_columns(conn, schema, table, cols)
    say(f"schema {schema}: shadow columns and sync triggers on {', '.join(tables)}", False)
    for table, cols in tables.items():
        backfill(conn, schema, table, cols, batch, say)
        say(f"{table}: checking that every row is converted", False)
        recheck(conn, schema, table, cols)
    for table, cols in tables.items():
        _constraints(conn, schema, table, cols, say)
        _indexes(conn, schema, table, cols, say)
        conn.execute(f"ANALYZE {q(schema)}.{q(table)}")
        conn.execute(f"UPDATE {q(schema)}.{STATE} SET ready = true WHERE tbl = %s", (table,))


def _shadow_columns(
    conn: psycopg.Connection, schema: str, table: str, cols: Sequence[NativeColumn]
) -> None:
    """The shadow columns, the sync trigger and the table's place in the state table, in one
    short transaction: every row written after it is converted by the trigger, and the pages
    the table had then (``end_page``) hold every row the backfill must convert."""
    t = f"{q(schema)}.{q(table)}"
    adds = ", ".join(f"ADD COLUMN IF NOT EXISTS {q(shadow(c.column))} {c.type}" for c in cols)
    trigger = q(ddl.sync_name(table))
    function = ddl.sync_function(schema, table, cols)

    def step() -> None:
        conn.execute(f"ALTER TABLE {t} {adds}")
        conn.execute(function)
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {t}")
        conn.execute(
            f"CREATE TRIGGER {trigger} BEFORE INSERT OR UPDATE ON {t} "
            f"FOR EACH ROW EXECUTE FUNCTION {q(schema)}.{trigger}()"
        )
        conn.execute(
            f"INSERT INTO {q(schema)}.{STATE} AS s (tbl, cols, next_page, end_page) "
            "SELECT %s, %s, 0, pg_relation_size(%s) / current_setting('block_size')::int "
            "ON CONFLICT (tbl) DO UPDATE SET cols = excluded.cols, next_page = 0, "
            "end_page = excluded.end_page, ready = false WHERE s.cols <> excluded.cols",
            (table, ",".join(c.column for c in cols), t),
        )

    locked_tx(conn, schema, f"adding shadow columns to {table}", step)


def _constraints(
    conn: psycopg.Connection,
    schema: str,
    table: str,
    cols: Sequence[NativeColumn],
    say: Progress,
) -> None:
    """On the shadows: a CHECK (shadow IS NOT NULL) for each NOT NULL column (it lets finish set
    NOT NULL without a scan) and each CHECK that reads an old column, over the shadows; added NOT
    VALID (a brief lock) then validated (a scan that blocks no writer)."""
    t = f"{q(schema)}.{q(table)}"
    facts = ddl.column_facts(conn, schema, table)
    names = {c.column: shadow(c.column) for c in cols}
    wanted = [
        (not_null_name(c), f"CHECK ({q(shadow(c.column))} IS NOT NULL)")
        for c in cols
        if facts[c.column].not_null
    ] + [(shadow(name), d) for name, d in ddl.check_defs(conn, schema, table, names)]
    validated = dict(
        rows(
            conn,
            "SELECT conname, convalidated FROM pg_constraint WHERE conrelid = %s::regclass",
            (t,),
        )
    )
    for name, definition in wanted:
        if name not in validated:
            check = definition.removesuffix(" NOT VALID")
            add = f"ALTER TABLE {t} ADD CONSTRAINT {q(name)} {check} NOT VALID"
            locked_tx(conn, schema, f"adding constraint {name}", lambda add=add: conn.execute(add))
        if not validated.get(name):
            say(f"{table}: validating {name}", False)
            conn.execute(f"ALTER TABLE {t} VALIDATE CONSTRAINT {q(name)}")


def _indexes(
    conn: psycopg.Connection,
    schema: str,
    table: str,
    cols: Sequence[NativeColumn],
    say: Progress,
) -> None:
    """Each index that reads an old column, built again over the shadows concurrently; one
    left invalid by a build that was killed is dropped and built again."""
    names = {c.column: shadow(c.column) for c in cols}
    for index in ddl.index_defs(conn, schema, table, names):
        new = f"{q(schema)}.{q(shadow(index.name))}"
        found = rows(
            conn, "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (new,)
        )
        if found and found[0][0]:
            continue
        if found:
            conn.execute(f"DROP INDEX CONCURRENTLY {new}")
        say(f"{table}: building index {shadow(index.name)} (for {index.name})", False)
        started = time.monotonic()
        conn.execute(index.create)
        say(
            f"{table}: index {shadow(index.name)} built in {time.monotonic() - started:.1f} s",
            False,
        )
