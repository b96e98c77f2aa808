"""The online upgrade's finish (:mod:`.online`): the prepared shadows put in the old columns'
place in one short transaction, then the old columns and indexes dropped without blocking.

Dropping an indexed column in the transaction would also drop its indexes' files at the commit,
with the locks still held: a tenth of a second or more on a million jobs. So the transaction
only renames: the old columns become ``col__old`` (NOT NULL and defaults dropped, so that new
writes leave them NULL) and their indexes ``name__old``; a primary key or unique constraint on
an old column, whose index cannot outlive it, and the CHECKs that read old columns are dropped
there. After the commit :func:`cleanup` drops the old indexes concurrently, then the old columns
(a brief lock, no files); a finish run again after a kill there cleans up what is left.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, Sequence

import psycopg

from shared.model.errors import StoreRefused
from . import onlineddl as ddl
from .native import NativeColumn
from .onlineddl import RETIRED, by_table, not_null_name, q, retired, rows, shadow
from .onlinefill import COMMAND, STATE, exclusive, locked_tx, states

After = Callable[[psycopg.Connection], None]


class Finished(NamedTuple):
    """What :func:`finish` did: ``done`` False when there was nothing to do (version reached);
    ``lock_seconds`` from holding the tables' locks to the commit; ``seconds`` the whole call,
    the cleanup after the commit included."""

    done: bool
    lock_seconds: float
    seconds: float


def finish(
    conn: psycopg.Connection,
    schema: str,
    columns: Sequence[NativeColumn],
    *,
    version: int,
    after: After | None = None,
    lock_timeout_ms: int = 2_000,
) -> Finished:
    """Swap the prepared shadows in, in one short transaction (see the module), then run
    ``after`` in it (search path on ``schema``) and set ``meta.version`` to ``version``; then
    clean up. Refused (StoreRefused naming the schema) unless :func:`.online.prepare`
    completed; a schema at ``version`` already with nothing prepared is only cleaned up
    (``done`` False)."""
    started = time.monotonic()
    tables = by_table(columns)
    with exclusive(conn, schema):
        if not _prepared(conn, schema, tables, version):
            cleanup(conn, schema, columns)
            return Finished(False, 0.0, time.monotonic() - started)
        script = ";\n".join(s for t, cols in tables.items() for s in _swap(conn, schema, t, cols))
        lock = "LOCK TABLE " + ", ".join(f"{q(schema)}.{q(t)}" for t in tables)
        held: list[float] = []

        def step() -> None:
            conn.execute(lock + " IN ACCESS EXCLUSIVE MODE")
            held.append(time.monotonic())
            conn.execute(script)
            conn.execute(f"SET LOCAL search_path = {q(schema)}")
            if after is not None:
                after(conn)
            conn.execute(f"UPDATE {q(schema)}.meta SET version = %s", (version,))
            conn.execute(f"DROP TABLE {q(schema)}.{STATE}")

        locked_tx(conn, schema, "finishing", step, lock_timeout_ms=lock_timeout_ms, tries=10)
        locked = time.monotonic() - held[-1]
        cleanup(conn, schema, columns)
    return Finished(True, locked, time.monotonic() - started)


def _prepared(conn: psycopg.Connection, schema: str, tables: dict[str, Any], version: int) -> bool:
    """Did prepare complete for every table? False: nothing to do (``version`` reached, none
    prepared); StoreRefused naming the schema when finish cannot run."""
    found = states(conn, schema)
    if found is None:
        meta = rows(conn, "SELECT to_regclass(%s)", (f"{q(schema)}.meta",))[0][0]
        at = rows(conn, f"SELECT version FROM {q(schema)}.meta")[0][0] if meta else 0
        if at >= version:
            return False
        raise StoreRefused(
            f"schema {schema}: no online upgrade was prepared: run `{COMMAND}` first"
        )
    waiting = [t for t in tables if not found.get(t, (0, 0, False))[2]]
    if waiting:
        raise StoreRefused(
            f"schema {schema}: the upgrade's prepare has not completed for "
            f"{', '.join(waiting)}: run `{COMMAND}` again first"
        )
    return True


def _swap(
    conn: psycopg.Connection, schema: str, table: str, cols: Sequence[NativeColumn]
) -> list[str]:
    """The statements that put ``table``'s shadows in the old columns' place, as few as
    PostgreSQL allows (each ALTER TABLE rebuilds the table's cached description), read from
    the catalogue before the lock so that the lock is held for catalogue writes only."""
    t = f"{q(schema)}.{q(table)}"
    facts = ddl.column_facts(conn, schema, table)
    names = {c.column: shadow(c.column) for c in cols}
    indexes = ddl.index_defs(conn, schema, table, names)
    checks = [name for name, _ in ddl.check_defs(conn, schema, table, names)]
    sync = q(ddl.sync_name(table))
    keys = [i.name for i in indexes if i.constraint in ("p", "u")]
    loosen = [f"DROP CONSTRAINT {q(name)}" for name in checks + keys] + [
        f"ALTER COLUMN {q(c.column)} DROP NOT NULL, ALTER COLUMN {q(c.column)} DROP DEFAULT"
        for c in cols
    ]
    out = [f"DROP TRIGGER {sync} ON {t}", f"DROP FUNCTION {q(schema)}.{sync}()"]
    out.append(f"ALTER TABLE {t} " + ", ".join(loosen))
    for c in cols:
        out.append(f"ALTER TABLE {t} RENAME COLUMN {q(c.column)} TO {q(retired(c.column))}")
        out.append(f"ALTER TABLE {t} RENAME COLUMN {q(names[c.column])} TO {q(c.column)}")
    out += [
        f"ALTER INDEX {q(schema)}.{q(i.name)} RENAME TO {q(retired(i.name))}"
        for i in indexes
        if i.constraint not in ("p", "u")
    ]
    if settle := _settle(cols, facts, indexes):
        out.append(f"ALTER TABLE {t} " + ", ".join(settle))
    proofs = [f"DROP CONSTRAINT {q(not_null_name(c))}" for c in cols if facts[c.column].not_null]
    if proofs:  # only now: SET NOT NULL above is proved by them (no scan)
        out.append(f"ALTER TABLE {t} " + ", ".join(proofs))
    out += [f"ALTER TABLE {t} RENAME CONSTRAINT {q(shadow(n))} TO {q(n)}" for n in checks]
    return out + [
        f"ALTER INDEX {q(schema)}.{q(shadow(i.name))} RENAME TO {q(i.name)}"
        for i in indexes
        if i.constraint not in ("p", "u")
    ]


def _settle(
    cols: Sequence[NativeColumn], facts: dict[str, ddl.ColumnFacts], indexes: list[ddl.IndexDef]
) -> list[str]:
    """The new columns' defaults and NOT NULLs, and their keys (on the shadow indexes)."""
    out = [
        f"ALTER COLUMN {q(c.column)} SET DEFAULT {converted(c, facts[c.column].default)}"
        for c in cols
        if facts[c.column].default is not None
    ] + [f"ALTER COLUMN {q(c.column)} SET NOT NULL" for c in cols if facts[c.column].not_null]
    for i in indexes:
        if i.constraint in ("p", "u"):
            kind = "PRIMARY KEY" if i.constraint == "p" else "UNIQUE"
            out.append(f"ADD CONSTRAINT {q(i.name)} {kind} USING INDEX {q(shadow(i.name))}")
    return out


def cleanup(conn: psycopg.Connection, schema: str, columns: Sequence[NativeColumn]) -> None:
    """Drop what finish retired: the old indexes concurrently (no writer waits), then the old
    columns in a brief transaction per table (no index files left to drop at its commit)."""
    conn.execute("SET lock_timeout = 0")
    for table, cols in by_table(columns).items():
        found = rows(
            conn,
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(%s) AND c.relname LIKE %s",
            (f"{q(schema)}.{q(table)}", f"%{RETIRED}"),
        )
        for (name,) in found:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {q(schema)}.{q(name)}")
        facts = ddl.column_facts(conn, schema, table)
        old = [retired(c.column) for c in cols if retired(c.column) in facts]
        if old:
            drop = f"ALTER TABLE {q(schema)}.{q(table)} " + ", ".join(
                f"DROP COLUMN {q(name)}" for name in old
            )
            locked_tx(
                conn, schema, f"dropping the old columns of {table}", lambda d=drop: conn.execute(d)
            )


def converted(c: NativeColumn, expr: str) -> str:
    """``expr`` (of the old form) converted as ``c`` says."""
    return ddl.converted(c.using, expr)
