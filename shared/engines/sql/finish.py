"""What the engines' outcome statements share (the statements themselves are each engine's own:
the hot path). An outcome's parameters, and the recognition of an outcome re-sent after a
commit whose answer was lost: its own attempt-history row is looked for, so it is reported
recorded instead of lost, never applied twice (``shared.model.job.recognised``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from shared.runtime.clock import iso
from shared.model.job import Finish, finish_times, recognised
from .dialect import Dialect

# The history rows an owner's outcomes may have left (see shared.model.job.history_row).
_HISTORY = "SELECT job_id, attempt, outcome, owner, ended_at, error FROM job_attempts WHERE owner = :owner AND {ids}"


def outcome_params(
    f: Finish,
    owner: str,
    stamp: str,
    text: Callable[[Any], Any] = lambda t: t,
    json: Callable[[Any], Any] = lambda t: t,
) -> dict[str, Any]:
    """The named parameters of one guarded outcome statement (``text``: ``dialect.text``, for
    an error; ``json``: ``dialect.json_value``, for a result and the progress)."""
    started, ended = finish_times(f, stamp)
    return {
        "id": f.job_id,
        "attempt": f.attempt,
        "owner": owner,
        "text": json(f.text) if f.kind == "completed" else text(f.text),
        "now": stamp,
        "run_at": iso(f.run_at) if f.kind == "retry" else None,
        "max": f.max_attempts,
        "started": started,
        "ended": ended,
        "progress": json(f.progress),
        "trace": f.trace,
    }


def recognise(
    dialect: Dialect, c: Any, finishes: Sequence[Finish], done: list[bool], owner: str
) -> list[bool]:
    """``done`` with True also for each outcome whose guard missed because it had committed
    before (its history row is there); reads nothing when every guard matched."""

    def history(ids: list[str]) -> list[tuple[Any, ...]]:
        where, params = dialect.member("job_id", "ids", ids, kind="id")
        rows = c.execute(
            dialect.sql(_HISTORY.format(ids=where)), {"owner": owner, **params}
        ).fetchall()
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]

    return recognised(finishes, done, owner, history, dialect.text)
