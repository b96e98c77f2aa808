"""The producer API: ``JobQueue``.

    q = JobQueue.from_config("jobq.toml")          # or JobQueue("path/to/jobq.db")
    job_id = q.enqueue("report:generate", {"reportId": "r1"}, delay=30, key="report-r1")
    ids = q.enqueue_many([("cleanup:old-data", {"retentionDays": 30})])
    job = q.get(job_id)

For tests: ``JobQueue(path, immediate=True)`` runs each job at enqueue, ``q.drain()`` runs every
due job, both in the calling process (:mod:`shared.producer.inline`; docs/testing.md).
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime
from typing import Any, Iterable

from shared.producer import cancels, duplicates
from shared.settings import config as config_mod
from shared.settings.config import Config
from shared.engines import open_store
from shared.producer.handles import JobHandle, wait_jobs
from shared.producer.inline import Handlers, InlineRunner
from shared.producer.inline import load as load_handlers
from shared.producer.newjobs import Known, Template, known_of, plain_job, template
from shared.producer.options import PLAIN, Options, split_item
from shared.model.job import Job, NewJob, new_id, new_ids
from shared.runtime.clock import SystemClock
from shared.model.queuenames import check_queue
from shared.telemetry.tracing import Tracing, active as tracing_active, context as trace_context
from shared.producer.typecheck import TypeCheck
from shared.producer.waithub import Hubs
from shared.producer.appconn import sync_conn
from shared.producer.asyncqueue import AsyncProducer
from shared.producer.threadstores import ThreadStores


class JobQueue(AsyncProducer):
    """Enqueue and inspect jobs, from any thread (each thread's calls use the store the engine
    lends it: :mod:`shared.producer.threadstores`) and from asyncio (the ``_async`` calls:
    :mod:`shared.producer.asyncqueue`)."""

    def __init__(
        self,
        database: str | None = None,
        *,
        config: Config | None = None,
        clock: Any = None,
        immediate: bool = False,
        handlers: Handlers | None = None,
    ) -> None:
        """``immediate=True`` (for tests) runs each due job inline when it is enqueued, retries
        that are due at once included, and stores its outcome. ``handlers`` (module names,
        modules or ``@handler`` functions) are what ``drain()`` and immediate mode run;
        default: the config's ``handlers`` modules, imported on first use."""
        self.config = config or Config()
        if database is not None:
            self.config = self.config.replace(database=database)
        self.clock = clock or SystemClock()
        self.store: Any = ThreadStores(open_store(self.config))  # the calling thread's store
        self.hubs = Hubs(self.config)  # the watcher that wakes this queue's waiters (on first wait)
        self.immediate = immediate
        self._handlers = handlers
        self._runner: InlineRunner | None = None
        self._types: TypeCheck | None = None  # check_types(): is each enqueued type served?
        self._tracing = Tracing()  # the producer spans' tracer (shared.telemetry.tracing)
        # job type -> (priority, queue, limit key path) of a type that passed enqueue's checks,
        # for the config it was checked under (see _know)
        self._plain: dict[str, tuple[int, str, str | None]] = {}
        self._plain_config = self.config

    @classmethod
    def from_config(
        cls,
        path: str | None = None,
        *,
        clock: Any = None,
        immediate: bool = False,
        handlers: Handlers | None = None,
    ) -> "JobQueue":
        """A queue on the config file's database that checks each job type it enqueues against
        what the running supervisors serve, importing no handler module
        (:meth:`check_types` with ``imports=False``)."""
        return cls(
            config=config_mod.load(config_mod.resolve_path(path)),
            clock=clock,
            immediate=immediate,
            handlers=handlers,
        ).check_types(imports=False)

    def check_types(self, *, imports: bool = True) -> "JobQueue":
        """From now on, a job type no handler serves is refused with ValueError when the config
        says ``strict_types = true``, else warned about once per type
        (``shared.producer.typecheck.UnservedTypeWarning``). What is served: the ``handlers`` given,
        else the config's modules, imported once at the first type not checked yet; with
        ``imports=False`` (and ``strict_types`` false), what the running supervisors recorded in
        the database, importing nothing (nothing is said while none runs). Returns this queue."""
        self._types = TypeCheck(self.config, self._handlers, None if imports else self.store)
        self._plain = {}  # the types are checked (and their handlers' queues read) again
        return self

    def close(self) -> None:
        self.hubs.close()
        self.store.close()

    def __enter__(self) -> "JobQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- enqueue --------------------------------------------------------------------------------

    def enqueue(
        self,
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
        """Add a job and return its id (or that of the kept job holding ``key`` in scope).

        ``run_at`` (an aware datetime, ISO text with a zone, or a Unix time) or ``delay`` (seconds)
        schedule it; ``priority``: higher runs first (None: the type's ``[types]`` priority, else 0);
        ``max_attempts`` None: the handler's or the config's. With ``conn`` (the application's own
        connection of the store's engine: a ``sqlite3.Connection`` on the same file, a psycopg
        connection to the same PostgreSQL database), the job is written inside the caller's
        transaction, and commits or rolls back with it. Invalid input raises and writes nothing.
        The active OpenTelemetry span's context (or ``traceparent``, W3C text, given explicitly)
        is stored with the job for its worker's span (docs/tracing.md).
        ``queue``: the named queue (docs/queues.md; None: the type's ``[types]`` queue, else its
        handler's, else ``"default"``); ``limit_key``: the key its ``[types]`` per-key limits
        count it under (None: what the type's ``key`` path finds in the payload, if it has one).
        ``after`` (job ids or handles): the job waits until they have ended (docs/workflows.md);
        ``after_failure``: what it does when one fails: "cancel" (default), "run" or "hold".
        ``unique``: how long ``key`` dedupes: "kept" (default: until the job is deleted),
        "pending" (until it starts), "active" (until it ends) or a period ("10m"); without
        ``key``, by type and payload. A deduplicated call whose options differ warns
        (DuplicateJobWarning: docs/enqueueing.md, "Uniqueness").
        """
        options = Options.of(locals())
        return self._enqueue_checked(type, payload, options, traceparent, sync_conn(conn))

    def _enqueue_checked(
        self, jtype: Any, payload: Any, options: Options, traceparent: str | None, conn: Any = None
    ) -> str:
        """:meth:`enqueue` of options already gathered (also in a worker thread, for
        ``enqueue_async`` on an engine without asyncio calls); ``conn``: a sync connection."""
        plain = options.plain and conn is None and traceparent is None
        now = self.clock.now()
        job = self._job(jtype, payload, options, now, plain)
        return self._put(job, now, conn, traceparent, plain)  # (appconn)

    def _job(self, jtype: Any, payload: Any, options: Options, now: float, plain: bool) -> NewJob:
        """The job ``enqueue`` writes, checked (shared.producer.newjobs); a ``plain`` one (no
        option, no ``conn``, no trace) of a type that passed before skips its type's checks."""
        known = self._known_before(jtype) if plain and not tracing_active() else None
        if known is not None:  # (no option to check, no template to build)
            return plain_job(self.config, known, new_id(), jtype, payload, now)
        settings = template(self.config, self._types, jtype, options, now)
        return settings.job(self.config, new_id(), jtype, payload)

    def _put(self, job: NewJob, now: float, conn: Any, traceparent: str | None, plain: bool) -> str:
        """Write the job ``enqueue`` made; the id it has (or the kept job's of its ``key``)."""
        if traceparent is not None or tracing_active():
            return self._traced([job], now, conn, traceparent)[0]
        ids = self._ran(self._write([job], now, conn), conn)
        if plain:  # the type passed every check: its next plain calls skip them
            self._know(job.type)
        return ids[0]

    def _known_before(self, jtype: Any) -> Known | None:
        """What a plain enqueue of ``jtype`` found before under this config (see :meth:`_know`),
        or None."""
        if jtype.__class__ is str and self._plain_config is self.config:
            return self._plain.get(jtype)
        return None

    def _know(self, jtype: str) -> None:
        """Remember what a plain enqueue of ``jtype`` needs that does not change per call: its
        default priority and queue, and the path of its limit key (for this config), unless it
        is known already."""
        if self._plain_config is not self.config:
            self._plain, self._plain_config = {}, self.config
        if self._known_before(jtype) is None:
            self._plain[jtype] = known_of(self.config, self._types, jtype)

    def _write(self, jobs: list[NewJob], now: float, conn: Any) -> list[str]:
        """Insert ``jobs``: the plain insert, or the workflow's when one waits for others."""
        if any(j.after for j in jobs):
            ids = self.store.enqueue_flow(jobs, now, conn=conn)
        else:
            ids = self.store.enqueue(jobs, now, conn=conn)
        if ids is not jobs and any(j.key is not None for j in jobs):
            duplicates.report(lambda i: self.store.get(i, conn), jobs, ids, now)
        return ids

    def _traced(
        self, jobs: list[NewJob], now: float, conn: Any, traceparent: str | None
    ) -> list[str]:
        """Enqueue ``jobs`` with a trace context: ``traceparent``, else that of a PRODUCER span
        opened under the active span (shared.telemetry.tracing)."""
        with (
            nullcontext()
            if traceparent is not None
            else self._tracing.producer([j.type for j in jobs])
        ):
            trace = trace_context(traceparent)
            for j in jobs:
                j.trace = trace
            return self._ran(self._write(jobs, now, conn), conn)

    def enqueue_many(
        self,
        items: Iterable[Any],
        *,
        conn: Any = None,
        batch_size: int | None = None,
        traceparent: str | None = None,
    ) -> list[str]:
        """Add many jobs in one transaction. Each item is ``(type, payload)``,
        ``(type, payload, {options})`` or a mapping with ``type``, ``payload`` and options.
        All are validated before anything is written. With ``batch_size`` (and no ``conn``) they
        are written in transactions of that many jobs, so a bulk load never holds the write lock
        for long (a failure midway leaves the earlier batches written). ``traceparent`` (W3C text)
        is stored with every job instead of the active span's context (as in :meth:`enqueue`). An
        item's ``after`` may name earlier items of the call by index: a graph in one call is one
        transaction (then ``batch_size`` is ignored)."""
        conn = sync_conn(conn)
        now = self.clock.now()
        items = list(items)
        ids = new_ids(len(items))
        seen: dict[str, Template] = {}  # job type -> the template of its plain items
        jobs = [self._build_item(i, item, now, ids, seen) for i, item in enumerate(items)]
        if not jobs:
            return []
        if traceparent is not None:  # checked before anything is written
            trace = trace_context(traceparent)
            for j in jobs:
                j.trace = trace
        elif tracing_active():  # one producer span and context for the whole call
            if batch_size is None or conn is not None or any(j.after for j in jobs):
                return self._traced(jobs, now, conn, None)
            with self._tracing.producer([j.type for j in jobs]):
                return self._batches(jobs, batch_size, trace_context())
        if batch_size is None or conn is not None or any(j.after for j in jobs):
            return self._ran(self._write(jobs, now, conn), conn)
        return self._batches(jobs, batch_size, None)

    def _batches(self, jobs: list[NewJob], batch_size: int, trace: str | None) -> list[str]:
        """Write ``jobs`` in transactions of ``batch_size`` (see :meth:`enqueue_many`)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        for j in jobs if trace is not None else ():
            j.trace = trace
        ids = []
        for i in range(0, len(jobs), batch_size):
            ids += self._write(jobs[i : i + batch_size], self.clock.now(), None)
        return self._ran(ids, None)

    # -- running in this process (tests) ----------------------------------------------------------

    def drain(
        self, types: Iterable[str] | str | None = None, max_jobs: int | None = None
    ) -> dict[str, int]:
        """Run every due job (of ``types``, if given) in this process until none is due, or
        ``max_jobs`` have run, as a worker would: retries, back-off, permanent errors, hooks and
        ``[types]`` limits apply; no supervisor is needed. A retry whose back-off has not passed
        is not due (set ``[retry] backoff_base = 0``, or advance a FakeClock and drain again).
        Returns counts by outcome: ``{"completed": n, "retried": n, "failed": n}``, and
        ``"cancelled"`` when a handler raised JobCancelled.
        """
        return self._inline().drain(
            types=None if types is None else list([types] if isinstance(types, str) else types),
            max_jobs=max_jobs,
        )

    def _inline(self) -> InlineRunner:
        if self._runner is None:
            self._runner = InlineRunner(
                self.store, self.config, load_handlers(self._handlers, self.config), self.clock
            )
        return self._runner

    def _ran(self, ids: list[str], conn: Any) -> list[str]:
        """In immediate mode, run the jobs just enqueued that are due (not through ``conn``:
        those are not committed yet; drain after the commit)."""
        if self.immediate and conn is None and ids:
            self._inline().drain(ids=ids)
        return ids

    def _build_item(
        self, index: int, item: Any, now: float, ids: list[str], seen: dict[str, Template]
    ) -> NewJob:
        """Item ``index`` of an ``enqueue_many`` call as a job. ``seen``: the template of the
        call's ``(type, payload)`` items of each type, checked at the first of them."""
        jtype, payload, options = split_item(index, item)
        plain = options is PLAIN and type(jtype) is str
        try:
            settings = seen.get(jtype) if plain else None
            if settings is None:
                settings = template(
                    self.config, self._types, jtype, options, now, ids=ids, index=index
                )
                if plain:
                    seen[jtype] = settings
            return settings.job(self.config, ids[index], jtype, payload)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"enqueue_many item {index}: {exc}") from None

    # -- inspect --------------------------------------------------------------------------------

    def get(self, job_id: str, conn: Any = None) -> Job | None:
        """The job, or None. ``conn``: read through the application's connection, as
        ``enqueue(conn=)`` writes (inside its transaction, the job it wrote there is found)."""
        return (
            self.store.get(job_id) if conn is None else self.store.get(job_id, conn=sync_conn(conn))
        )

    def handle(self, job_id: str) -> JobHandle[Any]:
        """A :class:`shared.producer.handles.JobHandle` of the job ``job_id`` on this queue
        (``.wait()`` for its result, ``.status()``, ``.get()``), enqueued by any process or any
        API."""
        return JobHandle(self, job_id)

    def wait_many(
        self, ids: Iterable[str | JobHandle[Any]], timeout: float | None = None
    ) -> list[Any]:
        """Wait until every job of ``ids`` (ids or handles) has ended; their decoded results in
        order. Then the first of them (in order) that failed or was cancelled raises JobFailed /
        JobCancelled; JobNotFound for an unknown id; TimeoutError after ``timeout`` seconds
        (None: no limit), leaving the jobs as they are (see :mod:`shared.producer.handles`)."""
        return wait_jobs(self, ids, timeout)

    def cancel(
        self, job_id: str, *, wait: bool = False, timeout: float | None = None
    ) -> cancels.CancelResult:
        """Cancel a job: a pending or waiting one ends ``cancelled`` now (``CANCELLED``); a
        running one is asked to stop (``REQUESTED``: its handler sees ``job.cancel_requested``,
        ``check_cancelled()`` raises JobCancelled, an async handler's task is cancelled; after
        ``[worker] cancel_grace`` its worker is killed) and ends ``cancelled``, never retried,
        unless it completes first. ``wait=True`` waits (at most ``timeout`` seconds) for the
        running job's outcome: ``CANCELLED``, or ``FINISHED_FIRST`` when it completed or failed
        before it stopped (``REQUESTED`` after the timeout). ``UNCHANGED`` when the job is
        missing or has already ended. The result (a :class:`shared.producer.cancels.CancelResult`)
        is truthy for ``CANCELLED`` and ``REQUESTED`` (see ``docs/cancellation.md``)."""
        return cancels.cancel(self, job_id, wait=wait, timeout=timeout)

    def counts(self) -> dict[str, int]:
        return self.store.counts()

    def pause(self, queue: str | None = None) -> None:
        """Stop every worker on this database from claiming (they finish the job in hand); with
        ``queue``, from claiming jobs of that queue only."""
        if queue is None:
            self.store.set_paused(True)
        else:
            self.store.set_queue_paused(check_queue(queue), True)

    def resume(self, queue: str | None = None) -> None:
        if queue is None:
            self.store.set_paused(False)
        else:
            self.store.set_queue_paused(check_queue(queue), False)

    def is_paused(self, queue: str | None = None) -> bool:
        """Is the whole queue paused (or, with ``queue``, that named queue)?"""
        return (
            self.store.is_paused()
            if queue is None
            else self.store.is_queue_paused(check_queue(queue))
        )
