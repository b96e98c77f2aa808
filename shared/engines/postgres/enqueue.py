"""The PostgreSQL engine's enqueue (``shared.engines.contract.ProducerTransitions.enqueue``):
jobs inserted and idle workers notified in one statement, their count deltas written by that
statement too.

The commonest call, one job without a key on the store's own connection, is one prepared
statement with its parameters as text (``_run_prepared``: no arrays, no cursor); any other batch
is one statement over arrays (``unnest``), whatever its size. A job whose ``key`` a kept job
already has is skipped, and that job's id stands for it; a key held outside the new job's
uniqueness scope is freed first, in the same transaction (shared.engines.sql.uniquescope).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from psycopg.rows import tuple_row

from shared.runtime.clock import iso
from shared.model.job import NewJob
from shared.engines.sql.uniquescope import free_keys, scoped
from .dialect import pg_json
from .loaders import register_native
from .turns import lanes, wake, wake_one

_INSERT_COLUMNS = (
    "(id, type, status, payload, attempts, max_attempts, priority, run_at, created_at, "
    "updated_at, key, trace, queue, limit_key, tally)"
)


def _count_inserted(table: str) -> str:
    """The inserted rows' count deltas, written by the insert's own statement (its rows are
    marked tally = 1: the insert trigger skips them; see schema.COUNTED_INSERTS). Qualified like
    ``table``: the statement may run on the application's connection."""
    deltas = table[: -len("jobs")] + "job_count_deltas"
    return (
        f"counted AS (INSERT INTO {deltas} (type, status, n) "
        "SELECT type, 'pending', count(*) FROM ins GROUP BY type "
        "UNION ALL SELECT type, 'delayed', count(*) FROM ins WHERE later GROUP BY type)"
    )


# Many rows as arrays: one statement, one round trip, whatever the batch size.
_INSERT_ROWS = (
    "SELECT * FROM unnest(%(ids)s::uuid[], %(types)s::text[], %(payloads)s::jsonb[], "
    "%(max)s::int[], %(priority)s::int[], %(run_at)s::timestamptz[], %(keys)s::text[], %(traces)s::text[], "
    "%(queues)s::text[], %(limit_keys)s::text[]) "
    "AS r(id, type, payload, max_attempts, priority, run_at, key, trace, queue, limit_key)"
)


def _insert_sql(table: str) -> str:
    """Insert the unnested rows and notify once, in one statement (the notification is sent at
    commit; PostgreSQL folds identical ones within a transaction; its payload, :mod:`.turns`:
    one job's number, or empty for a batch, which wakes every host). Rows whose key a kept job
    already has are skipped (``ON CONFLICT``); the statement returns the ids inserted (and one
    NULL row from the notify)."""
    return (
        f"WITH ins AS (INSERT INTO {table} {_INSERT_COLUMNS} "
        f"SELECT id, type, 'pending', payload, 0, max_attempts, priority, run_at, %(now)s, %(now)s, key, trace, queue, limit_key, 1 "
        f"FROM ({_INSERT_ROWS}) r ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING "
        f"RETURNING id, type, run_at > created_at AS later), {_count_inserted(table)}, "
        "n AS (SELECT pg_notify(%(channel)s, %(wake)s) FROM (SELECT 1 FROM ins LIMIT 1) x) "
        "SELECT id FROM ins UNION ALL SELECT NULL FROM n"
    )


def _insert_one_sql(table: str, later: bool) -> str:
    """One job without a key: a plain VALUES row (no arrays to build), its count deltas as
    VALUES too (``later``: its ``run_at`` is after its ``created_at``, so it also counts as
    delayed) and its notification (with the job's number: one host's turn, :mod:`.turns`) (``$n`` placeholders: a prepared statement of the store's, see
    ``_run_prepared``). Without a key the row is always inserted (or the statement fails), so
    nothing is read back: a RETURNING row set and its per-type aggregates cost a quarter of
    the statement's server time (EXPLAIN ANALYZE: 132 against 99 us)."""
    deltas = table[: -len("jobs")] + "job_count_deltas"
    counts = "($2, 'pending', 1), ($2, 'delayed', 1)" if later else "($2, 'pending', 1)"
    return (
        f"WITH ins AS (INSERT INTO {table} {_INSERT_COLUMNS} VALUES "
        "($1, $2, 'pending', $3, 0, $4, $5, $6, $7, $7, NULL, $8, $9, $10, 1)), "
        f"counted AS (INSERT INTO {deltas} (type, status, n) VALUES {counts}) "
        "SELECT pg_notify($11, $12)"
    )


def _storable(j: NewJob) -> bool:
    """Whether the queue and limit key are free of NUL (the API refuses one; a caller below it
    may not): the prepared path's parameters are C strings, and psycopg's path refuses a NUL
    with its own error."""
    return "\x00" not in j.queue and (j.limit_key is None or "\x00" not in j.limit_key)


def _refuse_nul_keys(jobs: Sequence[NewJob]) -> None:
    """ValueError for a job whose key holds a NUL: the one text PostgreSQL cannot store that the
    API lets through."""
    for j in jobs:
        if j.key is not None and "\x00" in j.key:
            raise ValueError(
                f"job {j.id}: idempotency key {j.key!r} contains NUL, which "
                "PostgreSQL text cannot hold"
            )


def _insert_params(jobs: Sequence[NewJob], now: float, stamp: str, channel: str) -> dict:
    """The parameters of :func:`_insert_sql` for ``jobs`` (``stamp``: ``now`` as text;
    ``channel``: the schema's; one job's notification goes to its lane, :mod:`.turns`)."""
    channel, number = wake(channel, [j.id for j in jobs])  # (a batch wakes every host)
    return {
        "now": stamp,
        "channel": channel,
        "wake": number,
        "ids": [j.id for j in jobs],
        "types": [j.type for j in jobs],
        "payloads": [pg_json(j.payload) for j in jobs],
        "max": [j.max_attempts for j in jobs],
        "priority": [j.priority for j in jobs],
        "run_at": [stamp if j.run_at == now else iso(j.run_at) for j in jobs],
        "keys": [j.key for j in jobs],
        "traces": [j.trace for j in jobs],
        "queues": [j.queue for j in jobs],
        "limit_keys": [j.limit_key for j in jobs],
    }


def one_row(
    j: NewJob, now: float, stamp: str, lanes: Sequence[str]
) -> tuple[bool, list[str | None]]:
    """A job without a key as the one-row statements take it: whether it is for later (its
    ``run_at`` after ``stamp``: fixed-width ISO texts compare as their times), and the
    statement's parameters as text, in order (the last: the notification's channel, the job's
    lane of the schema's ``lanes`` (:func:`.turns.lanes`), and its payload)."""
    run_at = stamp if j.run_at == now else iso(j.run_at)
    channel, number = wake_one(lanes, j.id)
    return run_at > stamp, [
        j.id,
        j.type,
        pg_json(j.payload),
        None if j.max_attempts is None else str(j.max_attempts),
        str(j.priority),
        run_at,
        stamp,
        j.trace,
        j.queue,
        j.limit_key,
        channel,
        number,
    ]


class PgEnqueue:
    """Mixin of :class:`.store.PgStore` (uses its connection's ``conn``, ``table``, ``channel``,
    ``_run_prepared`` and ``_tx``): ``enqueue``."""

    conn: Any
    table: str
    channel: str

    @functools.cached_property
    def lanes(self) -> tuple[str, ...]:
        """The channels of the schema's lanes (:func:`.turns.lanes`), named once."""
        return lanes(self.channel)

    @functools.cached_property
    def _insert_one(self) -> str:
        return _insert_one_sql(self.table, later=False)

    @functools.cached_property
    def _insert_one_later(self) -> str:
        return _insert_one_sql(self.table, later=True)

    @functools.cached_property
    def _insert_many(self) -> str:
        return _insert_sql(self.table)

    def enqueue(self, jobs: Sequence[NewJob], now: float, conn: Any = None) -> list[str]:
        """Insert jobs and notify, in one statement; their ids in order (a kept job's id where
        a job's ``key`` is taken). With ``conn`` (the application's psycopg connection) the
        rows join its transaction: nothing is committed here, and the notification goes out
        when the application commits."""
        if not jobs:
            return []
        _refuse_nul_keys(jobs)
        stamp = iso(now)
        if conn is None and len(jobs) == 1 and jobs[0].key is None and _storable(jobs[0]):
            return [self._enqueue_one(jobs[0], now, stamp)]
        c = self.conn if conn is None else conn
        params = _insert_params(jobs, now, stamp, self.channel)
        sql = self._insert_many
        if conn is None and (
            len(jobs) > 1 and any(j.key is not None for j in jobs) or scoped(jobs)
        ):
            # a keyed batch, or a key that may be freed first: one transaction
            return self._tx(lambda tx: self._insert(tx, sql, params, jobs, now))  # type: ignore[attr-defined]
        return self._insert(c, sql, params, jobs, now)

    def _enqueue_one(self, j: NewJob, now: float, stamp: str) -> str:
        """The commonest call: one job without a key, one prepared statement, no arrays, no
        cursor. Its id."""
        later, values = one_row(j, now, stamp, self.lanes)
        self._run_prepared(  # type: ignore[attr-defined]
            b"jobq_enqueue_later" if later else b"jobq_enqueue_one",
            self._insert_one_later if later else self._insert_one,
            values,
        )
        return j.id

    def _insert(
        self, c: Any, sql: str, params: dict, jobs: Sequence[NewJob], now: float
    ) -> list[str]:
        with c.cursor(row_factory=tuple_row) as cur:
            register_native(cur.adapters)  # the application's connection: this cursor's only
            # keys held outside their jobs' uniqueness scopes are freed first (shared.engines.sql.uniquescope)
            free_keys(
                lambda q, p: cur.execute(self.dialect.sql(q), p),  # type: ignore[attr-defined]
                self.table,
                jobs,
                now,
            )
            inserted = {r[0] for r in cur.execute(sql, params).fetchall() if r[0] is not None}
            missing = [j.key for j in jobs if j.id not in inserted and j.key is not None]
            if not missing:
                return [j.id for j in jobs]
            found = dict(
                cur.execute(
                    f"SELECT key, id FROM {self.table} WHERE key = ANY(%s)", (missing,)
                ).fetchall()
            )
        return [j.id if j.id in inserted else found.get(j.key, j.id) for j in jobs]
