"""The online upgrade's state and its backfill (:mod:`.online`): the rows a table had when its
sync trigger was made are converted in short transactions (at most ``batch`` rows and about
:data:`BATCH_SECONDS` each: a writer may wait that long for a row one locks), one range of
pages each (by ``ctid``:
every table, with a primary key or none, is read by a TID range scan), each with a short
``lock_timeout`` and asked again when it waits too long. The state table
(``online_upgrade``: per table its columns, the next page, the last page, whether prepare
finished it; a run with other columns for a table starts its backfill again) is
written in the batch's own transaction, so a kill loses nothing and a rerun goes on from there.

Rows written while the backfill runs are the trigger's: an update that moves a row past the
page reached, or an insert, converts it then.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator, Sequence, TypeVar

import psycopg
from psycopg import errors as pg_errors

from shared.model.errors import StoreBusy, StoreQueryError, StoreRefused
from .native import NativeColumn
from .onlineddl import converted, q, remaining, rows, shadow

T = TypeVar("T")

STATE = "online_upgrade"
COMMAND = "jobq db upgrade"
LOCK_TIMEOUT_MS = 200  # a brief lock asked for on a live queue: never queue writers behind it
TRIES = 50
BATCH_SECONDS = 0.1  # a batch's transaction holds its rows' locks this long at most, about
ROWS_PER_PAGE = 50  # the first batch's guess; later batches size themselves on the rows seen


@contextlib.contextmanager
def exclusive(conn: psycopg.Connection, schema: str) -> Iterator[None]:
    """Hold the session's lock on ``schema``'s upgrade meanwhile: StoreRefused when another
    session (a second operator's command) holds it."""
    key = (f"jobq.online.{schema}",)
    if not rows(conn, "SELECT pg_try_advisory_lock(hashtext(%s))", key)[0][0]:
        raise StoreRefused(f"schema {schema}: another `{COMMAND}` is running on it")
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", key)


def ensure_state(conn: psycopg.Connection, schema: str) -> None:
    """The state table of ``schema`` (kept until finish)."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {q(schema)}.{STATE} (tbl text PRIMARY KEY, cols text NOT NULL, "
        "next_page bigint NOT NULL, end_page bigint NOT NULL, ready boolean NOT NULL DEFAULT false)"
    )


def states(conn: psycopg.Connection, schema: str) -> dict[str, tuple[int, int, bool]] | None:
    """(next page, end page, ready) by table; None when no upgrade was prepared."""
    if rows(conn, "SELECT to_regclass(%s)", (f"{q(schema)}.{STATE}",))[0][0] is None:
        return None
    found = rows(conn, f"SELECT tbl, next_page, end_page, ready FROM {q(schema)}.{STATE}")
    return {t: (n, e, r) for t, n, e, r in found}


def locked_tx(
    conn: psycopg.Connection,
    schema: str,
    what: str,
    step: Callable[[], T],
    *,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    tries: int = TRIES,
) -> T:
    """``step()`` in one transaction that waits at most ``lock_timeout_ms`` for any lock, run
    again (backing off) when it waited too long or deadlocked; StoreBusy naming ``what`` after
    ``tries``."""
    for attempt in range(tries):
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout_ms)}ms'")
                return step()
        except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
            time.sleep(min(1.0, 0.02 * 2**attempt))
    raise StoreBusy(
        f"schema {schema}: {what}: the locks stayed taken through {tries} tries; "
        "run the command again when the database is quieter"
    )


def backfill(
    conn: psycopg.Connection,
    schema: str,
    table: str,
    cols: Sequence[NativeColumn],
    batch: int,
    say: Callable[[str, bool], None],
) -> int:
    """Convert the rows of ``table``'s pages from its state's next page to its end page, about
    ``batch`` rows a transaction; returns the rows converted."""
    t = f"{q(schema)}.{q(table)}"
    sets = ", ".join(f"{q(shadow(c.column))} = {converted(c.using, q(c.column))}" for c in cols)
    update = (
        f"UPDATE {t} SET {sets} WHERE ctid >= %s::tid AND ctid < %s::tid AND ({remaining(cols)})"
    )
    state = f"UPDATE {q(schema)}.{STATE} SET next_page = %s WHERE tbl = %s"
    page, end, _ = (states(conn, schema) or {})[table]
    pages, done, started = max(1, batch // ROWS_PER_PAGE), 0, time.monotonic()
    while page < end:
        hi = min(end, page + pages)
        began = time.monotonic()
        n = _batch(conn, schema, table, (update, state), page, hi)
        done, page = done + n, hi
        pages = _next_size(pages, n, batch, time.monotonic() - began)
        rate = done / max(time.monotonic() - started, 1e-6)
        say(
            f"{table}: page {page:,}/{end:,} ({100 * page / max(end, 1):.0f}%), "
            f"{done:,} rows converted, {rate:,.0f} rows/s",
            True,
        )
    return done


def _batch(
    conn: psycopg.Connection, schema: str, table: str, sql: tuple[str, str], lo: int, hi: int
) -> int:
    """Convert the rows of ``table``'s pages ``lo`` to ``hi`` (not included) and record ``hi``
    as the next page, in one transaction; the rows converted."""
    update, state = sql

    def step() -> int:
        n = conn.execute(update, (f"({lo},0)", f"({hi},0)")).rowcount
        conn.execute(state, (hi, table))
        return n

    try:
        return locked_tx(conn, schema, f"converting {table} pages {lo}..{hi}", step)
    except psycopg.DataError as exc:
        raise StoreQueryError(
            f"schema {schema}: {table} pages {lo}..{hi}: a value does not convert to its "
            f"native type: {' '.join(str(exc).split())}",
            cause=exc,
        ) from exc


def _next_size(pages: int, got: int, batch: int, took: float) -> int:
    """The next batch's pages: sized on the last one's rows (at most ``batch``) and time (at
    most :data:`BATCH_SECONDS`: a writer may wait that long for a row it locks), at most
    doubled."""
    by_time = int(pages * BATCH_SECONDS / took) if took > 0 else pages * 2
    by_rows = pages * batch // got if got > 0 else pages * 2
    return max(1, min(pages * 2, by_rows, by_time))


def recheck(
    conn: psycopg.Connection, schema: str, table: str, cols: Sequence[NativeColumn]
) -> None:
    """Convert whatever is still left in ``table`` (a value the trigger could not convert
    when it was written, say) with a plain cast: one scan that blocks no writer; a value that
    does not convert fails it, named."""
    t = f"{q(schema)}.{q(table)}"
    sets = ", ".join(f"{q(shadow(c.column))} = {converted(c.using, q(c.column))}" for c in cols)
    try:
        locked_tx(
            conn,
            schema,
            f"checking {table}",
            lambda: conn.execute(f"UPDATE {t} SET {sets} WHERE {remaining(cols)}"),
        )
    except psycopg.DataError as exc:
        raise StoreQueryError(
            f"schema {schema}: {table}: a value does not convert to its native type: "
            f"{' '.join(str(exc).split())}",
            cause=exc,
        ) from exc
