"""Tasks: jobs declared as Python functions (``@task``), enqueued with the function's own
arguments, their results awaited through a typed :class:`shared.producer.handles.JobHandle`.

A task is an ordinary job type on top of the string-and-dict API: its type is its name
(``"<module>.<qualname>"`` by default), its payload ``{"args": [...], "kwargs": {...}}``. The
:class:`Task` object carries a :class:`shared.execution.handlers.HandlerSpec` like an ``@handler``
function, so a worker that imports the task's module (``handlers = [...]``) serves it with no
import of the ``jobq`` package; the spec's function unpacks the payload and calls the task.

The default queue of ``.enqueue()`` is the one given to :func:`configure`, else one opened from
``$JOBQ_CONFIG`` or ``./jobq.toml`` per thread and process (its connection never crosses a
fork; a configured queue works from any thread: shared.producer.threadstores).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
from typing import (
    Any,
    Callable,
    Coroutine,
    Generic,
    Iterable,
    Mapping,
    ParamSpec,
    Self,
    Sequence,
    TypeVar,
    overload,
)

from shared.execution.handlers import (
    ATTR,
    HandlerSpec,
    check_async_concurrency,
    handler,
)
from shared.producer.canvas import Signature
from shared.producer.handles import JobHandle
from shared.model.queuenames import check_queue
from shared.producer import taskoptions
from shared.producer.taskargs import Binder
from shared.producer.taskrun import PARENT_RESULTS, own_signature, runner  # noqa: F401 (kept here)

P = ParamSpec("P")
R = TypeVar("R")

_USING = (
    "queue",
    "delay",
    "run_at",
    "priority",
    "key",
    "max_attempts",
    "conn",
    "after",
    "after_failure",
    "unique",
    *taskoptions.USING,
)
ExcClasses = type[BaseException] | tuple[type[BaseException], ...]  # retry_for=, no_retry_for=


class _Default(threading.local):
    queue: Any = None
    pid: int = 0


_configured: Any = None
_opened = _Default()


def configure(queue: Any) -> None:
    """Make ``queue`` (a :class:`shared.producer.api.JobQueue`) the default of every task's
    ``.enqueue()`` (None: back to the config file's), from any thread."""
    global _configured
    _configured = queue


def default_queue() -> Any:
    """The queue given to :func:`configure`, else this thread's queue on ``$JOBQ_CONFIG`` or
    ``./jobq.toml`` (``$JOBQ_DATABASE`` overrides its database), opened on first use."""
    if _configured is not None:
        return _configured
    if _opened.queue is None or _opened.pid != os.getpid():  # a parent's connection is not ours
        from shared.producer.api import JobQueue
        from shared.settings.config import ConfigError

        try:
            _opened.queue, _opened.pid = JobQueue.from_config(), os.getpid()
        except ConfigError as exc:
            raise ConfigError(
                f"no default queue for tasks: jobq.configure(JobQueue(...)) was not called, "
                f"and the config file cannot be used: {exc}"
            ) from None
    return _opened.queue


class BaseTask(Generic[P, R]):
    """What ``@task`` makes of a function: ``name`` (the job type), ``fn``, and the ways to
    enqueue it. Options set with :meth:`using` apply to the enqueues of the copy it returns."""

    limit_key: Any = None  # @task(limit_key=): a value, or a function of the arguments
    unique: Any = None  # @task(unique=): how long a key dedupes (shared.model.uniqueness)

    def __init__(
        self, fn: Callable[..., Any], name: str, spec: HandlerSpec, priority: int | None
    ) -> None:
        self.fn = fn
        self.name = name
        self.priority = priority
        self.signature = own_signature(inspect.signature(fn))  # without parent_results
        self.binder = Binder(name, self.signature, fn)  # binds a plain call without .bind
        self.options: dict[str, Any] = {}  # set by using() on copies
        setattr(self, ATTR, spec)  # what Registry.add_module looks for: workers serve the task
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<task {self.name}>"

    def using(
        self,
        *,
        queue: Any = None,
        delay: float | None = None,
        run_at: Any = None,
        priority: int | None = None,
        key: str | None = None,
        max_attempts: int | None = None,
        conn: Any = None,
        after: Any = None,
        after_failure: str | None = None,
        retry_for: ExcClasses | None = None,
        no_retry_for: ExcClasses | None = None,
        backoff: float | None = None,
        jitter: float | bool | None = None,
        max_delay: float | None = None,
        limit_key: str | int | Callable[..., str | int | None] | None = None,
        unique: str | float | None = None,
    ) -> Self:
        """A copy whose enqueues use these options (those given here replace this task's):
        ``queue``: a named queue (a string: docs/queues.md), or the ``JobQueue`` to enqueue on
        (default :func:`default_queue`); ``delay``/``run_at``,
        ``priority``, ``key``, ``max_attempts``, ``conn`` (the caller's own connection, whose
        transaction the job joins), ``after`` (ids or handles of the jobs to wait for) and
        ``after_failure``, as :meth:`shared.producer.api.JobQueue.enqueue` takes them; and
        the task's own options of :func:`task` (``retry_for`` to ``max_delay``: these jobs'
        own, stored with them; ``limit_key``; ``unique``: how long the key dedupes), replacing
        ``@task``'s."""
        given = {k: v for k, v in locals().items() if k in _USING and v is not None}
        taskoptions.check_keys(self.name, limit_key, unique)  # checked here, where given
        rule = taskoptions.using_rule(self, given)
        if rule is not None:
            given["retry"] = rule
        if isinstance(queue, str):  # a named queue, not the JobQueue to write to
            given["queue_name"] = check_queue(given.pop("queue"))
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.options = {**self.options, **given}
        return copy

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of one run with these arguments, for a workflow (``chain``, ``group``,
        ``chord``: shared.producer.canvas); checked now, enqueued with its flow."""
        return Signature(self, args, kwargs)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Enqueue one run with these arguments; its handle (whose ``wait()`` gives the result
        as the return annotation names it). The arguments are bound to the signature and
        encoded by their annotations (shared.model.taskcodecs); one that does not fit its
        annotation, or JSON would change, raises TypeError/ValueError naming the task and the
        argument, and nothing is written."""
        queue, opts = self._target()
        payload = self._payload(queue, opts, args, kwargs)
        return JobHandle(queue, queue.enqueue(self.name, payload, **opts), self.result_of)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """:meth:`enqueue` for asyncio (``JobQueue.enqueue_async``: the event loop is not
        blocked); the same checks and handle."""
        queue, opts = self._target()
        payload = self._payload(queue, opts, args, kwargs)
        job_id = await queue.enqueue_async(self.name, payload, **opts)
        return JobHandle(queue, job_id, self.result_of)

    def enqueue_many(
        self, calls: Iterable[tuple[tuple[Any, ...], dict[str, Any]]]
    ) -> list[JobHandle[R]]:
        """Enqueue one run per ``(args, kwargs)`` in one transaction (every call is checked
        first: nothing is written if one is wrong); their handles in order."""
        queue, opts = self._target()
        conn = opts.pop("conn", None)
        items = []
        for i, call in enumerate(calls):
            if not (isinstance(call, tuple) and len(call) == 2):
                raise TypeError(
                    f"task {self.name!r}: enqueue_many item {i} must be (args, kwargs), got {call!r}"
                )
            args, kwargs = call
            mine = dict(opts)
            items.append((self.name, self._payload(queue, mine, tuple(args), dict(kwargs)), mine))
        ids = queue.enqueue_many(items, conn=conn)
        return [JobHandle(queue, job_id, self.result_of) for job_id in ids]

    def result_of(self, data: Any) -> R:
        """A stored result of this task as its return annotation names it."""
        return self.binder.codecs.decode_result(data)  # type: ignore[no-any-return]

    def _payload(
        self, queue: Any, opts: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The payload of one call, ``opts`` given its limit key (shared.producer.taskoptions)."""
        payload = self.binder.payload(args, kwargs)
        return taskoptions.prepare(self, queue.config, opts, (args, kwargs), payload)

    def _target(self) -> tuple[Any, dict[str, Any]]:
        opts = dict(self.options)
        queue = opts.pop("queue", None) or default_queue()
        named = opts.pop("queue_name", None) or getattr(self, ATTR).queue
        if named is not None:
            opts["queue"] = named
        if self.priority is not None:
            opts.setdefault("priority", self.priority)
        if self.unique is not None:
            opts.setdefault("unique", self.unique)
        return queue, opts


class Task(BaseTask[P, R]):
    """A task of a plain function; calling it calls the function."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)  # type: ignore[no-any-return]


class AsyncTask(BaseTask[P, R]):
    """A task of an ``async def`` function; calling it returns the coroutine."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.fn(*args, **kwargs)  # type: ignore[no-any-return]


class _Decorator:
    """``@task(...)`` with options: makes the task of the function it decorates."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]]) -> AsyncTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def __call__(self, fn: Callable[P, R]) -> Task[P, R]: ...

    def __call__(self, fn: Callable[..., Any]) -> Any:
        return _make(fn, **self.options)


@overload  # a coroutine function is also a Callable[P, R]: the first match wins, as intended
def task(fn: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...  # type: ignore[overload-overlap]


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    priority: int | None = None,
    async_concurrency: int | None = None,
    queue: str | None = None,
    retry_for: ExcClasses | None = None,
    no_retry_for: ExcClasses | None = None,
    backoff: float | None = None,
    jitter: float | bool | None = None,
    max_delay: float | None = None,
    limit_key: str | int | Callable[..., str | int | None] | None = None,
    unique: str | float | None = None,
    schedule: str | None = None,
    tz: str | None = None,
    schedule_args: Sequence[Any] | Mapping[str, Any] | None = None,
) -> _Decorator: ...


def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    priority: int | None = None,
    async_concurrency: int | None = None,
    queue: str | None = None,
    retry_for: ExcClasses | None = None,
    no_retry_for: ExcClasses | None = None,
    backoff: float | None = None,
    jitter: float | bool | None = None,
    max_delay: float | None = None,
    limit_key: str | int | Callable[..., str | int | None] | None = None,
    unique: str | float | None = None,
    schedule: str | None = None,
    tz: str | None = None,
    schedule_args: Sequence[Any] | Mapping[str, Any] | None = None,
) -> Any:
    """Declare a function (plain or ``async def``) as a task: ``@task`` or ``@task(...)``.

    ``name``: its job type (default ``"<module>.<qualname>"``); ``max_attempts`` and
    ``timeout`` (seconds) override the config for it, as ``@handler``'s do; ``priority``: the
    default priority of its enqueues (None: the type's ``[types]`` priority, else 0);
    ``async_concurrency`` (``async def`` only): jobs of it one worker runs at once; ``queue``:
    the named queue of its enqueues (None: the type's ``[types]`` queue, else "default"). Calling
    the task calls the function; ``.enqueue(...)`` queues a run (see :class:`BaseTask`).

    Options in code (docs/tasks.md, "Options in code"; precedence in
    shared.producer.taskoptions): ``retry_for``/``no_retry_for`` (exception classes: what is
    retried, what fails the job at once), ``backoff``/``jitter``/``max_delay`` (the retry
    back-off's base, random fraction and cap), ``limit_key`` (a value, or a function called
    with the task's arguments), ``unique`` (how long a key dedupes its enqueues: "pending",
    "active", "kept" or a period; without ``key=``, calls with the same arguments are one
    job), ``schedule`` (cron) with ``tz`` and ``schedule_args``.
    """
    options = {k: v for k, v in locals().items() if k != "fn" and v is not None}
    return _Decorator(options) if fn is None else _make(fn, **options)


def _make(
    fn: Callable[..., Any],
    name: str | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    priority: int | None = None,
    async_concurrency: int | None = None,
    queue: str | None = None,
    limit_key: Any = None,
    unique: Any = None,
    **code: Any,
) -> BaseTask[Any, Any]:
    if isinstance(fn, BaseTask) or not callable(fn):
        raise TypeError(f"@task decorates a function, got {fn!r}")
    if name is None:
        name = f"{fn.__module__}.{fn.__qualname__}"
        if "<locals>" in name:
            raise ValueError(
                f"@task on {name}: a function defined inside another one has no stable "
                f"import path; define it at module level or give it a name="
            )
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise TypeError(f"task {name!r}: priority must be an integer, got {priority!r}")
    is_async = inspect.iscoroutinefunction(fn)
    check_async_concurrency(name, async_concurrency)
    if async_concurrency is not None and not is_async:
        raise ValueError(
            f"task {name!r}: async_concurrency={async_concurrency!r} needs an async def function"
        )
    run = handler(name, max_attempts=max_attempts, timeout=timeout, queue=queue)(
        runner(fn, name, inspect.signature(fn))
    )
    spec = dataclasses.replace(
        getattr(run, ATTR),
        is_async=is_async,  # checked by @handler
        async_concurrency=async_concurrency,
    )
    cls = AsyncTask if is_async else Task
    return _with_code_options(cls(fn, name, spec, priority), limit_key, unique, code)


def _with_code_options(
    made: BaseTask[Any, Any], limit_key: Any, unique: Any, code: dict[str, Any]
) -> Any:
    """``made`` with its options in code: the retry rule, schedule and parameter names on its
    handler spec (what workers and supervisors read), the limit key and uniqueness scope on
    the task."""
    made.unique = taskoptions.check_keys(made.name, limit_key, unique)
    retry = {k: code.pop(k) for k in taskoptions.RETRY if k in code}
    fields = taskoptions.spec_fields(made.name, made.binder, retry, **code)
    setattr(made, ATTR, dataclasses.replace(getattr(made, ATTR), **fields))
    made.limit_key = limit_key
    return made
