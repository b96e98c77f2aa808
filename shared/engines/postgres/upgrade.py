"""``jobq db upgrade`` on PostgreSQL: the online conversion of the schema's columns to native
types (:mod:`.online`, over :data:`.native.NATIVE_COLUMNS`) for a queue too large to convert
when a store opens (:func:`.online.refuse_if_large`).

The steps it runs come from the migrations (:mod:`.schema`): ``NATIVE_VERSION``, the version
the native conversion's step reaches, and ``NATIVE_AFTER``, the SQL run after the swap (the
functions and triggers made again for the new types). Without a ``NATIVE_VERSION`` there is
nothing to do. The session is a direct one (``[postgres] listen`` in pooled mode): it sets
session settings and builds indexes concurrently, which a transaction pooler would break.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import psycopg

from shared.engines.location import redacted, scrub
from shared.model.errors import StoreQueryError, StoreRefused
from . import online
from . import schema as schema_mod
from .errors import error_for
from .native import NATIVE_COLUMNS
from .onlineddl import q, rows


def upgrade(
    url: str,
    schema: str,
    *,
    batch: int,
    finish: bool,
    progress: Callable[[str, bool], None],
    connect_timeout: float = 5.0,
) -> str:
    """Prepare (or with ``finish``, finish) the online upgrade of ``schema`` on ``url``;
    returns the sentence that says what was done. Raises StoreRefused naming the schema when it
    cannot be upgraded so, StoreUnavailable/StoreQueryError (password hidden) on a failure."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
    except psycopg.Error as exc:
        raise error_for(redacted(url), exc, url) from exc
    try:
        return _run(conn, schema, batch, finish, progress)
    except psycopg.Error as exc:
        text = scrub(" ".join(str(exc).split()), url)
        raise StoreQueryError(
            f"database {redacted(url)}: schema {schema}: {text}", database=redacted(url), cause=exc
        ) from exc
    finally:
        conn.close()


def _run(
    conn: psycopg.Connection,
    schema: str,
    batch: int,
    finish: bool,
    progress: Callable[[str, bool], None],
) -> str:
    target = online.native_version()
    if target is None:
        return (
            f"schema {schema}: nothing to upgrade online: this jobq's migrations "
            f"(version {schema_mod.VERSION}) convert no column to a native type"
        )
    at = _version(conn, schema)
    if at >= target:
        return f"schema {schema}: at version {at}: its columns have their native types already"
    if at < target - 1:
        raise StoreRefused(
            f"schema {schema}: at version {at}, the online upgrade starts from version "
            f"{target - 1}: run the jobq of that version once first (it migrates at start)"
        )
    if finish:
        _stopped(conn, schema)
        done = online.finish(conn, schema, NATIVE_COLUMNS, version=target, after=_after())
        return (
            f"schema {schema}: upgraded to version {target} in {done.seconds:.2f} s; "
            f"the tables were locked for {done.lock_seconds * 1000:.0f} ms"
        )
    started = time.monotonic()
    online.prepare(conn, schema, NATIVE_COLUMNS, batch=batch, progress=progress)
    return (
        f"schema {schema}: prepared in {time.monotonic() - started:.1f} s; stop the workers, "
        f"then run `{online.COMMAND} --finish` and start this version"
    )


LIVE = 60  # seconds: a process whose heartbeat is younger may still be writing


def _stopped(conn: psycopg.Connection, schema: str) -> None:
    """StoreRefused naming the processes of ``schema`` whose heartbeat is recent: the old
    workers would fail on the new column types, so finish waits for them to be stopped."""
    live = rows(
        conn,
        f"SELECT kind || ' ' || pid || '@' || host FROM {q(schema)}.processes "
        "WHERE heartbeat_at::timestamptz > statement_timestamp() - %s * interval '1 s' "
        "ORDER BY 1",
        (LIVE,),
    )
    if live:
        names = ", ".join(r[0] for r in live[:5]) + (", ..." if len(live) > 5 else "")
        raise StoreRefused(
            f"schema {schema}: jobq processes still run on it ({len(live)}: {names}): stop "
            f"them (the old workers would fail on the new column types), then run "
            f"`{online.COMMAND} --finish` again"
        )


def _version(conn: psycopg.Connection, schema: str) -> int:
    """``schema``'s ``meta.version``; StoreRefused when it holds no jobq tables."""
    if rows(conn, "SELECT to_regclass(%s)", (f"{q(schema)}.meta",))[0][0] is None:
        raise StoreRefused(
            f"schema {schema}: no jobq tables there (is [postgres] schema right?): "
            "nothing to upgrade"
        )
    return int(rows(conn, f"SELECT version FROM {q(schema)}.meta")[0][0])


def _after() -> online.After | None:
    """The migrations' SQL to run after the swap (``schema.NATIVE_AFTER``), if any."""
    sql: str | None = getattr(schema_mod, "NATIVE_AFTER", None)
    if not sql:
        return None

    def run(conn: Any) -> None:
        conn.execute(sql)

    return run
