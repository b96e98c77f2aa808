"""The mixin through which shared SQL runs on an engine's connection.

An engine's store class inherits :class:`SqlBase` (before its own connection class provides
``conn``, ``_write`` and ``_tx``) and sets ``dialect``. Shared statements then read with
:meth:`_rows` / :meth:`_row` / :meth:`_value` and write inside ``self._tx(fn)`` (one short
transaction, the engine's retries) or ``self._write(fn)`` (one statement), calling
:meth:`_run` on the connection ``fn`` is given. Rows are plain dicts on every engine.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from .dialect import Dialect

T = TypeVar("T")
Params = Mapping[str, Any]


class SqlBase:
    """Helpers over ``self.conn`` for statements written with ``:name`` parameters."""

    dialect: Dialect
    conn: Any
    channel: str = ""  # where the engine notifies idle workers (``dialect.notify``), if it does
    schema: str = ""   # the engine's namespace for its locks' keys, if it has one
    if TYPE_CHECKING:  # the engine's connection class defines them (after this in the MRO)
        def _write(self, fn: Callable[[Any], T]) -> T: ...

        def _tx(self, fn: Callable[[Any], T]) -> T: ...

    def _run(self, conn: Any, sql: str, params: Params | None = None) -> Any:
        """Execute one shared statement on ``conn`` (inside a ``_tx``/``_write`` callback): the cursor."""
        return conn.execute(self.dialect.sql(sql), params or {})

    def _rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        """Every row of a read (autocommit: no transaction is left open)."""
        return list(self._run(self.conn, sql, params).fetchall())

    def _row(self, sql: str, params: Params | None = None) -> dict[str, Any] | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _value(self, sql: str, params: Params | None = None, default: Any = None) -> Any:
        """The first column of the first row, or ``default``."""
        row = self._row(sql, params)
        return default if row is None else next(iter(row.values()))
