"""The job in hand: :func:`current_job` gives the code a task runs the
:class:`shared.execution.runner.JobContext` of its job (the object a ``@handler`` gets as its
second argument): ``id``, ``attempt``, ``progress(...)``, ``cancel_requested``,
``check_cancelled()`` and ``logger``.

It is a context variable (``contextvars``): set by the task's own call (``shared.producer.tasks``)
around the function, in a worker, in ``drain()`` and in immediate mode; an ``async def`` task's
is its own asyncio task's, so jobs run at once on one event loop each see theirs, and so do the
coroutines they await. ``CURRENT`` is the variable itself (``running`` is its ``set``, ``done``
its ``reset``); no other state lives here.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from shared.execution.runner import JobContext

CURRENT: ContextVar[Any] = ContextVar("jobq_current_job", default=None)


class NoCurrentJob(RuntimeError):
    """``current_job()`` was called where no task runs."""


NoCurrentJob.__module__ = "jobq"  # how tracebacks and users name it


def current_job() -> "JobContext":
    """The job whose task is running here (its ``JobContext``); :class:`NoCurrentJob` outside
    one: in a ``@handler`` the job is its second argument, and nothing else runs in a job."""
    job = CURRENT.get()
    if job is None:
        raise NoCurrentJob(
            "jobq.current_job() is called outside a job: only the code of a @task has one, "
            "while it runs (in a worker, drain() or immediate mode); a @handler gets its job "
            "as its second argument"
        )
    return job  # type: ignore[no-any-return]


# ``running(job)`` makes ``job`` the current job here and gives the token ``done(token)`` takes
# back (the current job as it was before): the variable's own methods, as every job's path
# calls them and a function around each would cost as much again.
running: Callable[[Any], Token[Any]] = CURRENT.set
done: Callable[[Token[Any]], None] = CURRENT.reset
