"""A task in a worker: the handler (``(payload, job) -> result``) a worker calls for a task,
made of its stored payload (the arguments decoded by the function's annotations, its result
encoded by them), the job the current one (:func:`shared.execution.current.current_job`) while
the function runs. What does not fit fails the job at once (PermanentError).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from shared.execution.current import done, running
from shared.execution.handlers import PermanentError
from shared.model.codecbook import BOOK
from shared.producer.taskargs import Binder, unpack

PARENT_RESULTS = "parent_results"  # a task parameter of this name receives its parents' results


def own_signature(signature: inspect.Signature) -> inspect.Signature:
    """A task's signature as its callers fill it: without the ``parent_results`` parameter,
    which the worker fills with the results of the jobs the task's job waited for."""
    if PARENT_RESULTS not in signature.parameters:
        return signature
    return signature.replace(
        parameters=[p for p in signature.parameters.values() if p.name != PARENT_RESULTS]
    )


class _Call:
    """A task's call in a worker, made of its stored payload: the arguments decoded by the
    function's annotations and its result encoded by them. What does not fit fails the job at
    once (PermanentError: no retry would fix it), naming the job and the task."""

    def __init__(self, fn: Callable[..., Any], name: str, signature: inspect.Signature) -> None:
        self.name, self.own = name, own_signature(signature)
        self.binder = Binder(name, self.own, fn)
        self.wants_parents = PARENT_RESULTS in signature.parameters

    def arguments(self, payload: Any, job: Any) -> tuple[list[Any], dict[str, Any]]:
        try:
            args, kwargs = unpack(self.name, self.own, payload, self.binder)
            # a plain signature that bound fits plainly (Binder.fits), any other never does
            args, kwargs = self.binder.decode(args, kwargs, self.binder.plain)
        except (TypeError, ValueError) as exc:
            raise PermanentError(f"job {job.id}: {exc}") from None
        if self.wants_parents:  # a workflow's child: its parents' results (shared.model.flows)
            kwargs[PARENT_RESULTS] = job.parent_results
        return args, kwargs

    def result(self, value: Any, job: Any) -> Any:
        c = self.binder.codecs.compiled
        if c is not None and c.result.plain and c.generation == BOOK.generation:
            return value  # the common case, kept cheap: a plain result goes to JSON as it is
        try:
            return self.binder.codecs.encode_result(value)
        except (TypeError, ValueError) as exc:
            raise PermanentError(f"job {job.id}: {exc}") from None


def runner(
    fn: Callable[..., Any], name: str, signature: inspect.Signature
) -> Callable[[Any, Any], Any]:
    """The handler a worker calls for the task: ``(payload, job) -> fn(*args, **kwargs)`` (see
    :class:`_Call`), the job the current one (:func:`shared.execution.current.current_job`)
    while the function runs."""
    call = _Call(fn, name, signature)

    def run(payload: Any, job: Any) -> Any:
        args, kwargs = call.arguments(payload, job)
        token = running(job)
        try:
            value = fn(*args, **kwargs)
        finally:
            done(token)
        return call.result(value, job)

    async def run_async(payload: Any, job: Any) -> Any:
        args, kwargs = call.arguments(payload, job)
        token = running(job)  # this asyncio task's own context: its siblings keep theirs
        try:
            value = await fn(*args, **kwargs)
        finally:
            done(token)
        return call.result(value, job)

    chosen = run_async if inspect.iscoroutinefunction(fn) else run
    chosen.__name__ = chosen.__qualname__ = getattr(fn, "__qualname__", name)
    chosen.__module__ = getattr(fn, "__module__", "?")
    return chosen
