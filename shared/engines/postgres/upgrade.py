"""``jobq db upgrade`` on PostgreSQL: the online steps (:mod:`.onlinesteps`: the native types,
then the job ids as uuid) run on a queue too large to run them when a store opens
(:func:`.online.guard_step`), one step per prepare and ``--finish``.

Each run takes the first online step above the schema's version. Prepare runs the small steps
between first, in place (:func:`.migration.migrate_to`), but only when no jobq process runs on
the schema: the workers that run during a step's prepare are those of the version just before
it, and a worker of an older version may fail on the steps it does not know. Finish needs the
workers stopped, swaps the step in and says which online step is left. The session is a direct
one (``[postgres] listen`` in pooled mode): it sets session settings and builds indexes
concurrently, which a transaction pooler would break.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import psycopg

from shared.engines.location import redacted, scrub
from shared.model.errors import StoreQueryError, StoreRefused
from . import online, onlinesteps
from .errors import error_for
from .migration import migrate_to
from .onlineddl import q, rows
from .onlinesteps import OnlineStep


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
    """The next online step above the schema's version, prepared or finished."""
    at = _version(conn, schema)
    step = onlinesteps.next_above(at)
    if step is None:
        listed = ", ".join(onlinesteps.named(s) for s in onlinesteps.steps())
        return (
            f"schema {schema}: at version {at}: no online step left ({listed}); a store of "
            "this jobq runs the rest as it opens"
        )
    if finish:
        return _finish(conn, schema, at, step)
    return _prepare(conn, schema, at, step, batch, progress)


def _prepare(
    conn: psycopg.Connection,
    schema: str,
    at: int,
    step: OnlineStep,
    batch: int,
    progress: Callable[[str, bool], None],
) -> str:
    """``step`` prepared, after the small steps before it run in place (only with no jobq
    process running: those of the schema's version do not know them)."""
    if at < step.version - 1:
        small = _span(at + 1, step.version - 1)
        _stopped(
            conn,
            schema,
            f"{small} in place before {onlinesteps.named(step)} is prepared, and processes of "
            f"a version-{at} jobq may fail on it",
            f"`{online.COMMAND}` again (workers of a version-{step.version - 1} jobq may run "
            "while it prepares)",
        )
        migrate_to(conn, schema, step.version - 1)
        progress(f"schema {schema}: {small} in place", False)
    progress(f"schema {schema}: preparing {onlinesteps.named(step)}: {step.what}", False)
    started = time.monotonic()
    online.prepare(conn, schema, step.columns, batch=batch, progress=progress)
    following = onlinesteps.next_above(step.version)
    return (
        f"schema {schema}: {onlinesteps.named(step)} prepared in "
        f"{time.monotonic() - started:.1f} s; stop the workers, then run "
        f"`{online.COMMAND} --finish`"
        + (f"; {onlinesteps.named(following)} follows" if following else " and start this version")
    )


def _finish(conn: psycopg.Connection, schema: str, at: int, step: OnlineStep) -> str:
    """``step`` finished (the workers stopped); the sentence says what is left."""
    if at < step.version - 1:
        raise StoreRefused(
            f"schema {schema}: at version {at}: {onlinesteps.named(step)} was not prepared: "
            f"run `{online.COMMAND}` first"
        )
    _stopped(
        conn,
        schema,
        "the old workers would fail on the new column types",
        f"`{online.COMMAND} --finish` again",
    )
    done = online.finish(conn, schema, step.columns, version=step.version, after=_after(step))
    following = onlinesteps.next_above(step.version)
    left = (
        f"left: {onlinesteps.named(following)}: run `{online.COMMAND}` (with no workers, or "
        f"those of a version-{following.version - 1} jobq), stop them, then "
        f"`{online.COMMAND} --finish`, then start this version"
        if following
        else "start this version"
    )
    return (
        f"schema {schema}: {onlinesteps.named(step)} finished: upgraded to version "
        f"{step.version} in {done.seconds:.2f} s; the tables were locked for "
        f"{done.lock_seconds * 1000:.0f} ms; {left}"
    )


def _span(first: int, last: int) -> str:
    """The small steps ``first`` to ``last`` and their verb: ``step 12 runs``."""
    return f"step {first} runs" if first == last else f"steps {first} to {last} run"


LIVE = 60  # seconds: a process whose heartbeat is younger may still be writing


def _stopped(conn: psycopg.Connection, schema: str, why: str, then: str) -> None:
    """StoreRefused naming the processes of ``schema`` whose heartbeat is recent, ``why`` they
    must be stopped and the command to run ``then``."""
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
            f"them ({why}), then run {then}"
        )


def _version(conn: psycopg.Connection, schema: str) -> int:
    """``schema``'s ``meta.version``; StoreRefused when it holds no jobq tables."""
    if rows(conn, "SELECT to_regclass(%s)", (f"{q(schema)}.meta",))[0][0] is None:
        raise StoreRefused(
            f"schema {schema}: no jobq tables there (is [postgres] schema right?): "
            "nothing to upgrade"
        )
    return int(rows(conn, f"SELECT version FROM {q(schema)}.meta")[0][0])


def _after(step: OnlineStep) -> online.After | None:
    """The SQL to run after ``step``'s swap (``step.after``), if any."""
    sql = step.after
    if not sql:
        return None

    def run(conn: Any) -> None:
        conn.execute(sql)

    return run
