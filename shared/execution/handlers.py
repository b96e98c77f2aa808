"""Handler declarations, shared by the worker (which runs them) and the supervisor (which needs
their timeouts and attempt limits to police and re-queue jobs).

``@handler`` does not register anything globally: it marks the function with a
:class:`HandlerSpec`. :func:`load_registry` imports the configured modules and collects the
marked functions, so two registries in one process never leak into each other.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterable

from shared.model.bounds import MAX_TIME, MAX_TIME_TEXT, MIN_TIME
from shared.model.queuenames import check_queue
from shared.model.retryrules import RetryRule
from shared.settings.sections import ScheduleConfig

ATTR = "__jobq_handler__"


class PermanentError(Exception):
    """Raise from a handler to fail the job at once, without retries."""


class RetryAfter(Exception):
    """Raise from a handler to run the job again after ``seconds``.

    It counts as an attempt (like Celery's ``retry(countdown=...)``): when attempts are used up
    the job fails with this error.

    ``seconds`` must be a number from 0 to ``MAX_DELAY`` (the whole range of storable times,
    shared.model.bounds), else this constructor raises ValueError: the handler then failed in the
    ordinary way (retried after the backoff, or failed once attempts are used up). A delay that
    would make the job due after 9999-12-31T23:59:59Z is the same ordinary failure.
    """

    MAX_DELAY = MAX_TIME - MIN_TIME

    def __init__(self, seconds: float, message: str = "") -> None:
        if not 0 <= seconds <= self.MAX_DELAY:  # NaN, inf, 1e300 cannot become a run_at
            raise ValueError(
                f"RetryAfter seconds must be a finite number from 0 to {self.MAX_DELAY:g} "
                f"(due by {MAX_TIME_TEXT} at the latest), got {seconds!r}"
            )
        super().__init__(message or f"retry requested after {seconds:g} s")
        self.seconds = float(seconds)


# The name a failed job's error text and tracebacks have always shown ("shared.handlers.
# PermanentError: ..."), kept where the module moved; shared.handlers is an alias of this module.
PermanentError.__module__ = RetryAfter.__module__ = "shared.handlers"


@dataclass(frozen=True)
class HandlerSpec:
    type: str
    fn: Callable[..., Any]
    max_attempts: int | None = None
    timeout: float | None = None
    is_async: bool = False
    async_concurrency: int | None = None
    queue: str | None = None  # the queue its jobs go to when enqueued without one
    # a task's own (``@task``): its retry options, periodic schedule and parameter names
    retry: RetryRule | None = None  # what it retries and how long a retry waits
    schedule: ScheduleConfig | None = None  # its [[schedule]]-like entry (schedule=)
    params: tuple[str, ...] | None = None  # its parameters, as per-key limits name them


def handler(
    job_type: str,
    *,
    max_attempts: int | None = None,
    timeout: float | None = None,
    async_concurrency: int | None = None,
    queue: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare ``fn(payload, job)`` as the handler of ``job_type``.

    ``max_attempts`` and ``timeout`` (seconds) override the config for this type;
    ``async_concurrency`` (an ``async def`` handler only): up to this many jobs of the type run
    at once on one worker's event loop (see ``shared.execution.asyncjobs``); ``queue``:
    the named queue of its jobs enqueued without one, by a producer that loaded this handler
    (``[types.X] queue`` in the config says it to every producer).
    """
    _check_options(job_type, max_attempts, timeout, async_concurrency, queue)

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, ATTR, _spec(job_type, fn, max_attempts, timeout, async_concurrency, queue))
        return fn

    return mark


def _check_options(
    job_type: Any,
    max_attempts: Any,
    timeout: Any,
    async_concurrency: Any,
    queue: Any,
) -> None:
    """ValueError saying why the first of :func:`handler`'s arguments that is not valid is
    not (checked when the decorator is made, before any function is marked)."""
    if queue is not None:
        check_queue(queue)
    if not isinstance(job_type, str) or not job_type:
        raise ValueError(f"handler type must be a non-empty string, got {job_type!r}")
    if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
        raise ValueError(
            f"handler {job_type!r}: max_attempts must be an integer >= 1, got {max_attempts!r}"
        )
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"handler {job_type!r}: timeout must be a number > 0, got {timeout!r}")
    check_async_concurrency(job_type, async_concurrency)


def _spec(
    job_type: str,
    fn: Callable[..., Any],
    max_attempts: int | None,
    timeout: float | None,
    async_concurrency: int | None,
    queue: str | None,
) -> HandlerSpec:
    """The spec :func:`handler` marks ``fn`` with; ValueError if ``async_concurrency`` is given
    for a function that is not ``async def``."""
    spec = HandlerSpec(
        job_type,
        fn,
        max_attempts,
        None if timeout is None else float(timeout),
        inspect.iscoroutinefunction(fn),
        async_concurrency,
        queue,
    )
    if async_concurrency is not None and not spec.is_async:
        raise ValueError(
            f"handler {job_type!r}: async_concurrency={async_concurrency!r} needs an "
            f"async def handler, and {_where(fn)} is not one"
        )
    return spec


def check_async_concurrency(job_type: str, value: Any) -> None:
    """ValueError naming ``job_type`` unless ``value`` is None or an integer from 1 to 10,000."""
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10_000
    ):
        raise ValueError(
            f"handler {job_type!r}: async_concurrency must be an integer from 1 to 10000, "
            f"got {value!r}"
        )


HOOK_ATTR = "__jobq_hook__"
HOOK_EVENTS = ("completed", "failed", "retry", "cancelled")


def _hook(event: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, HOOK_ATTR, event)
        return fn

    return mark


on_completed = _hook("completed")
on_completed.__doc__ = (
    "Mark ``fn(job, result)`` to run in the worker after a job's success commits."
)
on_failed = _hook("failed")
on_failed.__doc__ = "Mark ``fn(job, error)`` to run after a job is failed for good (committed)."
on_retry = _hook("retry")
on_retry.__doc__ = "Mark ``fn(job, error)`` to run after a failed attempt is re-queued (committed)."
on_cancelled = _hook("cancelled")
on_cancelled.__doc__ = (
    "Mark ``fn(job, error)`` to run in the worker after its running job ended "
    "``cancelled`` (committed; ``error``: why, as stored)."
)


class HandlerImportError(RuntimeError):
    """A handler module failed to import. ``summary``: one line naming the module, the
    ``handlers`` key (and its file, when known) and the error; ``traceback``: the import's
    traceback; ``str()``: both, summary first."""

    def __init__(self, module: str, summary: str, tb: str) -> None:
        super().__init__(f"{summary}\n{tb}")
        self.module, self.summary, self.traceback = module, summary, tb


def import_failure(
    module: str, exc: BaseException, source: str | None = None
) -> HandlerImportError:
    """The :class:`HandlerImportError` for ``module`` failing with ``exc``; ``source``: the
    config file whose ``handlers`` key names the module."""
    where = f"handlers in {source}" if source else "handlers"
    what = " ".join(
        f"{type(exc).__name__}: {exc}".split()
    )  # one line, even for a multi-line message
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return HandlerImportError(
        module, f"handler module {module!r} ({where}) failed to import: {what}", tb
    )


class Registry:
    """The handlers of one process, by job type. ``modules``: the handler modules it was loaded
    from (:func:`load_registry`), None when built by hand."""

    def __init__(self, specs: Iterable[HandlerSpec] = ()) -> None:
        self._specs: dict[str, HandlerSpec] = {}
        self.modules: tuple[str, ...] | None = None
        self.hooks: dict[str, list[Callable[..., Any]]] = {e: [] for e in HOOK_EVENTS}
        for spec in specs:
            self.add(spec)

    def add(self, spec: HandlerSpec) -> None:
        old = self._specs.get(spec.type)
        if old is not None and old.fn is not spec.fn:
            raise ValueError(
                f"job type {spec.type!r} has two handlers: {_where(old.fn)} and {_where(spec.fn)}"
            )
        self._specs[spec.type] = spec

    def get(self, job_type: str) -> HandlerSpec | None:
        return self._specs.get(job_type)

    def types(self) -> list[str]:
        return sorted(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def add_module(self, module: ModuleType) -> None:
        for value in list(vars(module).values()):
            spec = getattr(value, ATTR, None)
            if isinstance(spec, HandlerSpec):
                self.add(spec)
            hook = getattr(value, HOOK_ATTR, None)
            if hook in self.hooks and value not in self.hooks[hook]:
                self.hooks[hook].append(value)


def _where(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"


def import_path(source: str | None = None) -> None:
    """Put the current directory (as ``python -m`` users expect) and then the folder of the
    config file ``source`` (modules next to the config, as Celery and RQ users expect; also
    for the ``jobq`` script, run from anywhere) at the front of ``sys.path``, where missing."""
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    folder = os.path.dirname(os.path.abspath(source)) if source else None
    if folder and os.path.isdir(folder) and folder not in sys.path:
        sys.path.insert(1, folder)


def load_registry(modules: Iterable[str], source: str | None = None) -> Registry:
    """Import each handler module and collect its handlers, then add the built-in job types
    (shared.execution.builtin_jobs) that no module defined.

    Raises :class:`HandlerImportError` naming the module (and ``source``, the config file that
    lists it), with the traceback, if one fails. The modules are imported from the current
    directory and from ``source``'s folder (:func:`import_path`).
    """
    import_path(source)
    modules = tuple(modules)
    registry = Registry()
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except (
            BaseException
        ) as exc:  # SyntaxError, SystemExit from a module... all are boot failures
            raise import_failure(name, exc, source) from exc
        registry.add_module(mod)
    from shared.execution import builtin_jobs  # here, not at the top: it imports this module

    for spec in builtin_jobs.specs():
        if registry.get(spec.type) is None:
            registry.add(spec)
    registry.modules = modules
    return registry
