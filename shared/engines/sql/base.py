"""The mixin through which shared SQL runs on an engine's connection.

An engine's store class inherits :class:`SqlBase` (before its own connection class provides
``conn``, ``_write`` and ``_tx``) and sets ``dialect``. Shared statements then read with
:meth:`_rows` / :meth:`_row` / :meth:`_value` and write inside ``self._tx(fn)`` (one short
transaction, the engine's retries) or ``self._write(fn)`` (one statement), calling
:meth:`_run` on the connection ``fn`` is given. Rows are plain dicts on every engine.

The public methods (:meth:`read`, :meth:`write`, :meth:`transaction`, :meth:`batches`) are how
code outside the engine (the read layer, :mod:`shared.ops`) runs shared SQL: being public, the
store class's error translation wraps them (jobq's errors, PostgreSQL's per-call lock and bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from .dialect import Dialect

T = TypeVar("T")
Params = Mapping[str, Any]
Run = Callable[..., "list[dict[str, Any]]"]  # run(sql, params=None): a statement's rows
BATCH = 1000  # rows per transaction of a bulk write, to start with (the engine's pacer adapts it)


class SqlBase:
    """Helpers over ``self.conn`` for statements written with ``:name`` parameters."""

    dialect: Dialect
    conn: Any
    channel: str = ""  # where the engine notifies idle workers (``dialect.notify``), if it does
    schema: str = ""  # the engine's namespace for its locks' keys, if it has one
    # What a statement that may run on an application's connection (``conn=``: the enqueue
    # path, plain and workflows) puts before jobq's table names: ``'"jobq".'`` where that
    # connection's own search path may not find them (PostgreSQL), "" where it names the
    # same database's tables (SQLite).
    qualifier: str = ""
    # The engine's asyncio calls (``enqueue``/``get`` coroutines on the event loop's own
    # connection, PostgreSQL's shared.engines.postgres.aio), or None: then an async producer
    # runs the store's sync calls in a worker thread (shared.producer.asyncqueue).
    aio: Any = None
    if TYPE_CHECKING:  # the engine's connection class defines them (after this in the MRO)

        def _write(self, fn: Callable[[Any], T]) -> T: ...

        def _tx(self, fn: Callable[[Any], T]) -> T: ...

        def pacer(self, rows: int = ...) -> Any: ...  # the retention mixin's, or the engine's

    def _run(self, conn: Any, sql: str, params: Params | None = None) -> Any:
        """Execute one shared statement on ``conn`` (inside a ``_tx``/``_write`` callback): the cursor."""
        return conn.execute(self.dialect.sql(sql), params or {})

    def _rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        """Every row of a read (autocommit: no transaction is left open)."""
        return list(self._run(self.conn, sql, params).fetchall())

    def _rows_on(self, conn: Any, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        """Every row of a read run through an application's connection ``conn`` (in its
        transaction, if one is open: it sees that transaction's own writes), as dicts whatever
        rows the connection gives. Its tables are named with :meth:`named`."""
        cur = self._app_cursor(conn)
        try:
            cur.execute(self.dialect.sql(sql), params or {})
            names = [d[0] for d in cur.description]
            return [r if isinstance(r, dict) else dict(zip(names, r)) for r in cur.fetchall()]
        finally:
            cur.close()

    def _app_cursor(self, conn: Any) -> Any:
        """A cursor of an application's connection ``conn`` that reads values as jobq's own
        connections do (an engine whose driver converts types sets that up on the cursor,
        never on the application's connection)."""
        return conn.cursor()

    def named(self, table: str) -> str:
        """A jobq table as a statement on an application's connection names it (an engine with a
        namespace of its own qualifies it: that connection's search path need not have it)."""
        return f"{self.qualifier}{table}"

    def _row(self, sql: str, params: Params | None = None) -> dict[str, Any] | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _value(self, sql: str, params: Params | None = None, default: Any = None) -> Any:
        """The first column of the first row, or ``default``."""
        row = self._row(sql, params)
        return default if row is None else next(iter(row.values()))

    # -- public: for the read layer (guarded by the store class's error translation) -------------

    def read(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        """Every row of one read statement (``:name`` parameters); no transaction is left open."""
        return self._rows(sql, params)

    def write(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        """One write statement, its own transaction (with the engine's retries); the rows it
        returns (``RETURNING``), fetched fully before it commits."""
        rows: list[dict[str, Any]] = self._write(lambda c: _fetched(self._run(c, sql, params)))
        return rows

    def transaction(self, fn: Callable[[Run], T]) -> T:
        """``fn(run)`` in one short write transaction (the engine's: ``BEGIN IMMEDIATE`` on SQLite,
        retried on serialization failures on PostgreSQL, so ``fn`` must only run SQL);
        ``run(sql, params)`` executes a statement in it and returns its rows."""
        out: T = self._tx(
            lambda c: fn(lambda sql, params=None: _fetched(self._run(c, sql, params)))
        )
        return out

    def batches(
        self,
        sql: str,
        params: Params,
        rows: int = BATCH,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Run a batched ``... RETURNING id`` write (``:after``: the last id done, ``:batch``: rows
        to take, in id order) in short transactions paced by the engine's :attr:`pacer`, until a
        batch touches fewer rows than asked; the total. No transaction grows with the table.
        ``progress(total so far)`` is called after each batch's commit."""
        pacer, total, after = self.pacer(rows), 0, self.dialect.id_floor
        while True:
            ids, asked = pacer.chunk(
                self,
                lambda c, n: (
                    [
                        r["id"]
                        for r in self._run(
                            c, sql, {**params, "after": after, "batch": n}
                        ).fetchall()
                    ],
                    n,
                ),
            )
            total += len(ids)
            if progress is not None:
                progress(total)
            if len(ids) < asked:
                return total
            after = max(ids)

    def wake_idle(self) -> None:
        """After a write outside the claim path made jobs pending (an operator's retry): tell
        idle workers, where the engine's wake-up needs telling (nothing by default)."""

    def notify_controls(self, kind: str) -> None:
        """After a control was committed (``cancel`` of a running job, ``scale``): tell the
        supervisors, where the engine can (nothing by default: they look every round)."""

    def stats(self) -> dict[str, Any]:
        """The engine's own gauges by key (see :attr:`gauges`); a value may be None (unknown now)."""
        return {}

    # shared.engines.opsaccess.Gauge: how each key of stats() is shown
    gauges: "tuple[Any, ...]" = ()


def _fetched(cursor: Any) -> list[dict[str, Any]]:
    """All rows of ``cursor``; none for a statement that returns no rows."""
    return list(cursor.fetchall()) if cursor.description is not None else []
