"""Queues no worker serves (docs/queues.md): decided from the config alone.

A job waits on its queue until a worker of some pool claims it. The pools come from the config's
``[queues]`` tables (``shared.model.queues.plan``): without tables one pool serves every queue; with
them, a queue with ``workers`` has a pool of its own, and the shared pool (what is left of
``[supervisor] workers``) serves the tables without ``workers`` and ``default`` when it has no
table. So a queue is *unserved* when no pool of the config takes jobs from it: a queue with no
table while some table exists (``default`` aside), a queue whose own pool has ``workers = 0``, or
a queue of the shared pool when the own pools leave it no worker. Its jobs stay pending, silently,
unless someone says so: the producer at enqueue (:func:`warn_unserved`), the supervisor at boot
and reload, ``jobq status``, ``jobq top``, the dashboard and the metrics
(:func:`sentence`).

Two things do not make a queue unserved here: a pause (``paused = true`` or ``jobq pause``: a
state of its own, shown as such), and ``[supervisor] queues`` (``--queues``), which narrows one
host to a part of the work that other hosts may serve. No handler module is imported.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType, SimpleNamespace
from typing import Any, Iterable

from shared.model.queues import plan

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # shared/, all rooms


class UnservedQueueWarning(UserWarning):
    """A job was enqueued on a queue that no pool of the config serves."""


def served_queues(config: Any) -> frozenset[str] | None:
    """The queues some pool of ``config`` (with at least one worker) takes jobs from; None: every
    queue. Pauses and ``[supervisor] queues`` are left out of the question (see the module)."""
    if not getattr(config, "queues", None):  # one pool for every queue (the common case, fast)
        return None if config.supervisor.workers > 0 else frozenset()
    served: set[str] = set()
    for pool in _pools(config):
        if pool.queues is None:
            return None
        served.update(n for n, _ in pool.queues)
    return frozenset(served)


def _pools(config: Any) -> list[Any]:
    """The pools of ``config`` that have workers, for every host: no narrowing, no pause."""
    tables = getattr(config, "queues", None) or {}
    whole = SimpleNamespace(
        supervisor=SimpleNamespace(queues=(), workers=config.supervisor.workers),
        queues={
            n: SimpleNamespace(workers=q.workers, weight=q.weight, paused=False)
            for n, q in tables.items()
        },
    )
    return [p for p in plan(whole) if p.workers > 0]


def unserved(config: Any, names: Iterable[str]) -> list[str]:
    """The ``names`` no pool of ``config`` serves, in their order."""
    served = served_queues(config)
    return [] if served is None else [n for n in names if n not in served]


def sentence(queue: str, pending: int) -> str:
    """What every place that shows an unserved queue says of it."""
    return f"no worker serves queue {queue}: {pending} pending"


def warn_unserved(config: Any, queue: str) -> str:
    """Warn (:class:`UnservedQueueWarning`, pointed at the caller outside jobq) when no pool of
    ``config`` serves ``queue``; return ``queue``. Python's default filter shows the warning once
    per queue and call site."""
    if not unserved(config, (queue,)):
        return queue
    where = getattr(config, "path", None) or "the config"
    pools = (
        "; ".join(
            f"{p.name or 'shared'}={p.workers} ({', '.join(n for n, _ in p.queues or ())})"
            for p in _pools(config)
        )
        or "none with workers"
    )
    warnings.warn(
        f"no worker serves queue {queue!r}: no pool of {where} takes jobs from it "
        f"(its pools: {pools}); its jobs stay pending until a pool with workers "
        f"serves it",
        UnservedQueueWarning,
        stacklevel=caller_level(),
    )
    return queue


def caller_level() -> int:
    """The stack level, for a ``warnings.warn`` made by the function that calls this one, of
    the first frame outside jobq's shared package (the application's enqueue, a task's, the
    CLI's): the line Python's default filter shows the warning once for."""
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_HERE):
        frame, level = frame.f_back, level + 1
    return level
