"""Creating and upgrading jobq's tables in a PostgreSQL schema (:data:`.schema.MIGRATIONS`), as a
store opens (:class:`.connection.PgConnection`): one transaction under an advisory lock, so that
two processes starting at once migrate once; a schema newer than this code is refused, and so
is an online step (:mod:`.onlinesteps`) on a big queue (:func:`.online.guard_step`: ``jobq db
upgrade``). The command runs the small steps before an online one here too (:func:`migrate_to`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.rows import tuple_row

from shared.model.errors import StoreRefused
from . import schema as schema_mod
from .online import guard_step


def migrate_schema(conn: psycopg.Connection, schema: str) -> int:
    """Create or upgrade jobq's tables in ``schema`` to :data:`schema_mod.VERSION`, in one
    transaction under an advisory lock (two processes starting at once migrate once). Returns
    the version found. Refuses a schema newer than this code."""
    found = _version(conn, schema)
    if found == schema_mod.VERSION:
        return found
    return migrate_to(conn, schema, schema_mod.VERSION)


def migrate_to(conn: psycopg.Connection, schema: str, target: int) -> int:
    """Run the steps from ``schema``'s version to ``target`` (none when it is there already),
    in one transaction under the migration's advisory lock (keyed by the schema's name, as
    :func:`migrate_schema` takes it); an online step on a
    big queue is refused (:func:`.online.guard_step`), and so is a schema newer than this code.
    ``conn`` is not in a transaction. Returns the version found under the lock."""
    with conn.transaction():
        # a migration may wait for another process's and may take long: no session limit applies
        conn.execute(
            "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"
        )
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"jobq.migrate.{schema}",))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        found = _version(conn, schema)
        if found > (ours := schema_mod.VERSION):
            raise StoreRefused(f"schema {schema}: version {found} is newer than this jobq ({ours})")
        for version in range(found, target):
            guard_step(conn, schema, version + 1)  # a big queue converts online, not here
            conn.execute(f'SET LOCAL search_path = "{schema}"')
            conn.execute(schema_mod.MIGRATIONS[version])
            conn.execute(f'UPDATE "{schema}".meta SET version = %s', (version + 1,))
    return found


def _version(conn: psycopg.Connection, schema: str) -> int:
    """``meta.version`` (0: none); read at once but in a transaction (an error would end it)."""
    read = f'SELECT version FROM "{schema}".meta'
    try:
        if conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            return _one(conn, read)
    except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
        return 0
    if _one(conn, "SELECT to_regclass(%s)", (f'"{schema}".meta',)) is None:
        return 0
    return _one(conn, read)


def _one(conn: psycopg.Connection, query: str, params: tuple = ()) -> Any:
    """The first column of ``query``'s first row, whatever the connection's row factory (a
    store's reads dicts, the upgrade command's tuples)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchone()[0]
