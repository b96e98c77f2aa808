"""Workflows: jobs that wait for other jobs, and the common shapes built on ``after=``.

    q.enqueue("load", {...}, after=[h1, h2])               # runs once both have completed
    chain(extract.s(url), transform.s(), load.s()).enqueue()   # shared.producer.canvas
    chord(group(transform.s(p) for p in parts), load.s()).enqueue()

A child is ``waiting`` until every parent has ended; the statement that ends its last parent makes
it ``pending`` (the schema's triggers: no code path can forget it). ``after_failure`` is the
child's policy for a parent that fails or is cancelled: ``"cancel"`` (the default: the child and
its own dependants end ``cancelled``, the error naming the parent), ``"run"`` (run anyway, the
failed parents' errors in ``job.parent_errors``) or ``"hold"`` (wait for an operator: ``jobq
retry`` of the parent lets it go on, ``jobq cancel`` of the parent cancels it). A handler reads
its parents' results as ``job.parent_results``; a task receives them in a parameter named
``parent_results``. The names are Celery's canvas (``chain``, ``group``, ``chord``, ``.s()``):
the vocabulary most Python users of job queues already know. See docs/workflows.md.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

POLICIES = ("cancel", "run", "hold")


class FlowError(ValueError):
    """A graph refused before anything was written: an unknown parent, a parent not written
    before its child (which is how a cycle shows), or a bad policy."""


def parent_ids(after: Any, ids: Sequence[str] = (), index: int | None = None) -> tuple[str, ...]:
    """``after`` (ids, handles, or in ``enqueue_many`` the index of an earlier item) as parent
    ids, in order, each once. TypeError/ValueError naming the bad entry."""
    if after is None:
        return ()
    if isinstance(after, (str, bytes)) or not isinstance(after, Iterable):
        after = [after]
    out: dict[str, None] = {}
    for p in after:
        if isinstance(p, int) and not isinstance(p, bool) and index is not None:
            if not 0 <= p < index:
                raise FlowError(
                    f"after={p}: an item can wait only for an earlier item of the same call "
                    f"(0 to {index - 1}); a later one or itself would be a cycle"
                )
            out[ids[p]] = None
            continue
        pid = getattr(p, "id", p)
        if not isinstance(pid, str) or not pid:
            raise TypeError(f"after: expected job ids or handles, got {p!r}")
        out[pid] = None
    return tuple(out)


def policy(after_failure: Any) -> str | None:
    """``after_failure`` checked: one of :data:`POLICIES` or None (the default, cancel)."""
    if after_failure is not None and after_failure not in POLICIES:
        raise ValueError(
            f"after_failure must be one of {', '.join(POLICIES)}, got {after_failure!r}"
        )
    return after_failure
