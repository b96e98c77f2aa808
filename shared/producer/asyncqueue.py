"""The asyncio side of :class:`shared.producer.api.JobQueue`: ``enqueue_async``,
``enqueue_many_async`` and ``get_async`` (a mixin of the queue).

The job is built and checked as the sync call builds it (one path:
:mod:`shared.producer.newjobs`), then written:

- where the engine has asyncio calls (``store.aio``: PostgreSQL, psycopg's ``AsyncConnection``,
  one per event loop), on the event loop itself: no thread hop;
- elsewhere (SQLite, whose driver has no asyncio side), by the sync call run in a worker thread
  (``asyncio.to_thread``: the loop's default executor), on that thread's own connection
  (:mod:`shared.producer.threadstores`);
- through the application's connection (``conn=``, see :mod:`shared.producer.appconn`): a
  psycopg ``AsyncConnection`` (SQLAlchemy's ``AsyncSession``/``AsyncConnection`` on psycopg
  included) by the engine's asyncio calls; a SQLAlchemy ``AsyncConnection`` on another driver
  (aiosqlite) by the sync call inside its ``run_sync``; a sync connection in the calling thread.

A workflow's jobs (``after=``) are written by the sync call in a worker thread (none through an
async connection: TypeError).
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from shared.model.job import Job, NewJob, new_ids
from shared.producer import duplicates
from shared.producer.handles import wait_jobs_async
from shared.producer.appconn import async_target, sync_conn
from shared.producer.newjobs import Template
from shared.producer.options import Options
from shared.telemetry.tracing import active as tracing_active, context as trace_context

if TYPE_CHECKING:
    from shared.producer.api import JobQueue


class AsyncProducer:
    """The queue's async calls (see the module's docstring)."""

    async def enqueue_async(
        self: "JobQueue",
        type: str,
        payload: Any = None,
        *,
        run_at: datetime | float | str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        key: str | None = None,
        conn: Any = None,
        traceparent: str | None = None,
        queue: str | None = None,
        limit_key: str | None = None,
        after: Iterable[Any] | None = None,
        after_failure: str | None = None,
        unique: str | float | None = None,
    ) -> str:
        """:meth:`enqueue` for asyncio, the same arguments, checks and result (see the module
        for how each engine writes it without blocking the event loop)."""
        options = Options.of(locals())
        if self.store.aio is None and conn is None:  # SQLite: the sync call, in a thread
            return await asyncio.to_thread(
                self._enqueue_checked, type, payload, options, traceparent
            )
        plain = options.plain and conn is None and traceparent is None
        now = self.clock.now()
        job = self._job(type, payload, options, now, plain)
        ids = await self._put_async([job], now, conn, traceparent)
        if plain and traceparent is None and not tracing_active():
            self._know(job.type)
        return ids[0]

    async def enqueue_many_async(
        self: "JobQueue",
        items: Iterable[Any],
        *,
        conn: Any = None,
        batch_size: int | None = None,
        traceparent: str | None = None,
    ) -> list[str]:
        """:meth:`enqueue_many` for asyncio: the same arguments, checks and result."""
        if self.store.aio is None and conn is None:
            return await asyncio.to_thread(
                self.enqueue_many, items, batch_size=batch_size, traceparent=traceparent
            )
        now = self.clock.now()
        items = list(items)
        ids = new_ids(len(items))
        seen: dict[str, Template] = {}
        jobs = [self._build_item(i, item, now, ids, seen) for i, item in enumerate(items)]
        if not jobs:
            return []
        if batch_size is None or conn is not None or any(j.after for j in jobs):
            return await self._put_async(jobs, now, conn, traceparent)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        out: list[str] = []
        for i in range(0, len(jobs), batch_size):
            out += await self._put_async(
                jobs[i : i + batch_size], self.clock.now(), None, traceparent
            )
        return out

    async def get_async(self: "JobQueue", job_id: str, conn: Any = None) -> Job | None:
        """:meth:`get` for asyncio (through ``conn``, in its transaction, when given)."""
        aio = self.store.aio
        if conn is None:
            if aio is None:
                return await asyncio.to_thread(self.get, job_id)
            found: Job | None = await aio.get(job_id)
            return found
        target = await async_target(conn)
        if target.how == "native":
            return await self._aio_for(target.driver).get(job_id, conn=target.driver)  # type: ignore[no-any-return]
        if target.how == "greenlet":
            return await target.driver.run_sync(lambda c: self.get(job_id, conn=c))  # type: ignore[no-any-return]
        return self.get(job_id, conn=target.driver)

    async def wait_many_async(
        self: "JobQueue", ids: Iterable[Any], timeout: float | None = None
    ) -> list[Any]:
        """:meth:`wait_many` for asyncio: the event loop runs while the jobs run."""
        return await wait_jobs_async(self, ids, timeout)

    # -- writing --------------------------------------------------------------------------------

    async def _put_async(
        self: "JobQueue", jobs: list[NewJob], now: float, conn: Any, traceparent: str | None
    ) -> list[str]:
        """Write checked ``jobs`` (with their trace context, as :meth:`_traced` does)."""
        if traceparent is None and not tracing_active():
            return self._ran(await self._write_async(jobs, now, conn), conn)
        with (
            nullcontext()
            if traceparent is not None
            else self._tracing.producer([j.type for j in jobs])
        ):
            trace = trace_context(traceparent)
            for j in jobs:
                j.trace = trace
            return self._ran(await self._write_async(jobs, now, conn), conn)

    async def _write_async(
        self: "JobQueue", jobs: list[NewJob], now: float, conn: Any
    ) -> list[str]:
        """Insert ``jobs`` without blocking the loop: see the module's docstring."""
        flow = any(j.after for j in jobs)
        if conn is None:
            if flow or self.store.aio is None:
                return await asyncio.to_thread(self._write, jobs, now, None)
            return await _reported(self.store.aio, jobs, now, None)
        target = await async_target(conn)
        if target.how == "greenlet":
            return await target.driver.run_sync(lambda c: self._write(jobs, now, sync_conn(c)))  # type: ignore[no-any-return]
        if target.how == "sync":
            return self._write(jobs, now, target.driver)
        if flow:
            raise TypeError(
                "after= through an async connection (conn=) is not supported: enqueue the "
                "workflow without conn=, or through the application's sync connection"
            )
        return await _reported(self._aio_for(target.driver), jobs, now, target.driver)

    def _aio_for(self: "JobQueue", conn: Any) -> Any:
        """The engine's asyncio calls, for an application's async connection ``conn``;
        TypeError when the queue's engine has none (a psycopg connection given to a queue on
        SQLite)."""
        aio = self.store.aio
        if aio is None:
            raise TypeError(
                f"conn= is an asyncio {type(conn).__name__} of another database engine than "
                f"the queue's ({self.store.location}): give a connection to the queue's database"
            )
        return aio


async def _reported(aio: Any, jobs: list[NewJob], now: float, conn: Any) -> list[str]:
    """``jobs`` enqueued through the engine's asyncio calls ``aio`` (on ``conn``, if given);
    a deduplicated one whose options differ warns (shared.producer.duplicates)."""
    ids: list[str] = await aio.enqueue(jobs, now, conn=conn)
    kept = {i: await aio.get(i, conn) for i in duplicates.answered(jobs, ids)}
    if kept:
        duplicates.report(kept.get, jobs, ids, now)
    return ids
