"""Running SQL for the read layer: the engine-level helper :mod:`shared.ops` uses, not part of
the store contract (:mod:`shared.engines.contract`).

The read layer (the ops commands, ``jobq status``/``top``, the metrics and the dashboard) writes
its SQL once, with ``:name`` parameters, and runs it through this helper, which every engine's
store implements (:class:`shared.engines.sql.base.SqlBase` for the statements, the engine for
its gauges and its wake-up). It is no transition with a guarantee of its own: whatever a
statement run here changes, the read layer answers for. Only :mod:`shared.ops` and the engines
import this module (``tests/unit/test_layering.py``). Rows are plain dicts; driver errors come
out as :mod:`shared.model.errors` exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol


@dataclass(frozen=True)
class Gauge:
    """How one of an engine's own gauges (a key of ``OpsAccess.stats()``) is shown: ``key`` is
    its name in ``jobq status --json`` and, as ``jobq_<key>``, in the metrics; ``label`` what
    ``status``, ``top`` and the dashboard print before it; ``help`` the metric's help text;
    ``unit`` how it is printed (``bytes``: a size; else the number)."""

    key: str
    label: str
    help: str
    unit: str = ""


class OpsAccess(Protocol):
    """A way to run the read layer's SQL (spelled by ``dialect`` where engines differ), the
    engine's gauges, and the wake-up a bulk write owes idle workers."""

    dialect: Any  # shared.engines.sql.Dialect
    gauges: "tuple[Gauge, ...]"  # how each key of stats() is shown

    def read(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every row of one read statement; no transaction is left open."""
        ...

    def write(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """One write statement in its own transaction; the rows it returns."""
        ...

    def transaction(self, fn: Callable[[Callable[..., list[dict[str, Any]]]], Any]) -> Any:
        """``fn(run)`` in one short write transaction; ``run(sql, params)`` returns a
        statement's rows."""
        ...

    def batches(
        self,
        sql: str,
        params: Mapping[str, Any],
        rows: int = 1000,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """A batched ``... RETURNING id`` write (``:after``, ``:batch``) in short transactions
        paced by the engine, until a batch comes back short; how many rows it touched.
        ``progress`` is called with the count so far after each batch commits."""
        ...

    def wake_idle(self) -> None:
        """Tell idle workers that jobs became pending (after an operator's retry)."""
        ...

    def notify_controls(self, kind: str) -> None:
        """Tell the supervisors that a control of ``kind`` was committed (``cancel``: a running
        job was asked to stop; ``scale``: a ``jobq scale`` request), where the engine notifies;
        they look for it at once instead of at their next backstop read."""
        ...

    def stats(self) -> dict[str, Any]:
        """The engine's own gauges (SQLite: ``{"wal_bytes": n}``; PostgreSQL: none), described
        by :attr:`gauges`; cheap enough for every ``status`` and metrics scrape."""
        ...
