"""The common shapes of a workflow, built on ``after=``: ``chain``, ``group`` and
``chord`` of task signatures (``task.s(*args, **kwargs)``).

    chain(extract.s(url), transform.s(), load.s()).enqueue()          # one after the other
    group(transform.s(part) for part in parts).enqueue()                # side by side
    chord(group(transform.s(p) for p in parts), load.s()).enqueue()   # fan-out, then fan-in

The names are Celery's canvas, which most Python users of job queues know (Oban Pro and pg-boss
say workflow and flow for the same graphs). Unlike Celery's, a step does not get its parent's
result prepended to its arguments: a task that wants its parents' results declares a parameter
named ``parent_results`` (parent id -> result, in the order given), so the same task runs alike
inside and outside a flow. A flow is written by one ``enqueue_many``: one transaction, whole or
not at all (``conn=`` joins the application's own).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from shared.producer import taskoptions
from shared.producer.handles import JobHandle

__all__ = ["Flow", "Signature", "chain", "chord", "group"]


class Flow:
    """A graph of task runs not written yet; :meth:`enqueue` writes it."""

    def _build(self, items: list[dict[str, Any]], after: list[int]) -> list[int]:
        """Append this flow's jobs to ``items`` (each waiting for the items ``after``, by index);
        the indices of its last jobs (what a step after it waits for)."""
        raise NotImplementedError

    def enqueue(self, queue: Any = None, *, conn: Any = None) -> "FlowRun":
        """Write the whole graph in one transaction (``conn``: the application's); its handles.
        ``queue``: default, the first task's (``.using(queue=...)``), else the tasks' default."""
        items: list[dict[str, Any]] = []
        last = self._build(items, [])
        if queue is None:
            queue = next((i.pop("_queue") for i in items if i.get("_queue") is not None), None)
        if queue is None:
            from shared.producer.tasks import default_queue

            queue = default_queue()
        decoders = [i.pop("_decode", None) for i in items]  # each task's result by its annotation
        for i in items:
            i.pop("_queue", None)
            task, args, kwargs = i.pop("_task")  # its options in code: shared.producer.taskoptions
            i["payload"] = taskoptions.prepare(
                task, getattr(queue, "config", None), i, (args, kwargs), i["payload"]
            )
        ids = queue.enqueue_many(items, conn=conn)
        return FlowRun([JobHandle(queue, j, d) for j, d in zip(ids, decoders)], last)


class FlowRun:
    """A written flow: ``handles`` of every job in build order; ``last``: the handles of its
    final jobs; ``wait()``: their results (one result for a single final job)."""

    def __init__(self, handles: list[JobHandle[Any]], last: Sequence[int]) -> None:
        self.handles = handles
        self.last = [handles[i] for i in last]

    def wait(self, timeout: float | None = None) -> Any:
        results = self.last[0].queue.wait_many(self.last, timeout=timeout) if self.last else []
        return results[0] if len(results) == 1 else results


class Signature(Flow):
    """One run of a task with its arguments (``task.s(...)``), enqueued as part of a flow."""

    def __init__(self, task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.task, self.args, self.kwargs = task, args, kwargs
        self.payload = task.binder.payload(args, kwargs)  # checked now

    def __repr__(self) -> str:
        return f"{self.task.name}.s(*{self.args!r}, **{self.kwargs!r})"

    def _build(self, items: list[dict[str, Any]], after: list[int]) -> list[int]:
        opts = dict(self.task.options)
        extra = opts.pop("after", None) or []
        opts.pop("conn", None)
        if self.task.priority is not None:
            opts.setdefault("priority", self.task.priority)
        unique = getattr(self.task, "unique", None)  # (a task-like object may have none)
        if unique is not None:  # a deduplicated step: the kept job stands in for it
            opts.setdefault("unique", unique)
        items.append(
            {
                "type": self.task.name,
                "payload": self.payload,
                "_queue": opts.pop("queue", None),
                "_decode": getattr(self.task, "result_of", None),
                "_task": (self.task, self.args, self.kwargs),
                "after": list(after) + list(extra),
                **opts,
            }
        )
        return [len(items) - 1]


class _Chain(Flow):
    def __init__(self, parts: Sequence[Flow]) -> None:
        self.parts = list(parts)

    def _build(self, items: list[dict[str, Any]], after: list[int]) -> list[int]:
        for part in self.parts:
            after = part._build(items, after)
        return after


class _Group(Flow):
    def __init__(self, parts: Sequence[Flow]) -> None:
        self.parts = list(parts)

    def _build(self, items: list[dict[str, Any]], after: list[int]) -> list[int]:
        return [i for part in self.parts for i in part._build(items, after)]


def _flows(parts: Iterable[Any], what: str) -> list[Flow]:
    out = list(parts)
    bad = [p for p in out if not isinstance(p, Flow)]
    if bad:
        raise TypeError(f"{what}: expected signatures (task.s(...)) or flows, got {bad[0]!r}")
    if not out:
        raise ValueError(f"{what}: needs at least one step")
    return out


def chain(*steps: Flow) -> Flow:
    """Each step waits for the one before (its final jobs, for a group)."""
    return _Chain(_flows(steps, "chain"))


def group(*steps: Flow | Iterable[Flow]) -> Flow:
    """The steps side by side: ``group(a.s(), b.s())`` or ``group(t.s(x) for x in xs)``; a step
    after the group waits for all of them."""
    flat = list(steps[0]) if len(steps) == 1 and not isinstance(steps[0], Flow) else list(steps)
    return _Group(_flows(flat, "group"))


def chord(header: Flow | Iterable[Flow], callback: Flow) -> Flow:
    """Celery's fan-in: ``callback`` runs once after every job of ``header`` (a group) ended."""
    return chain(header if isinstance(header, Flow) else group(header), callback)
