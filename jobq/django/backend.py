"""``jobq.django.JobqBackend``: Django's task backend on a jobq queue.

    TASKS = {"default": {"BACKEND": "jobq.django.JobqBackend",
                         "OPTIONS": {"config": BASE_DIR / "jobq.toml"}}}

``OPTIONS``: ``config`` (a jobq.toml), or ``database`` (a jobq database value, the defaults for
the rest), else ``$JOBQ_CONFIG``, else ``./jobq.toml``; ``using``: the Django database alias
the backend writes through (default ``"default"``).

A task's ``queue_name`` (one of ``QUEUES``) is its job's jobq queue; its priority and
``run_after`` are the job's. ``enqueue`` and ``get_result`` build the ``TaskResult`` from the
stored row alike.

When that alias is the jobq database, ``enqueue`` writes the job through Django's own
connection, in the caller's transaction: a rolled-back ``atomic()`` leaves no job, a committed
one has it. Otherwise the job is written when the transaction commits (``on_commit``; the result
gets its id then), and ``check`` says so.

Each thread has its own ``JobQueue`` (a queue's connection belongs to the thread that opened
it; Django keeps a backend per thread, but an async context can carry one into another thread),
opened on first use, or as soon as the thread connects to the jobq database through Django
(:meth:`prepare`), so that it is never opened inside the caller's transaction.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from shared.producer.api import JobQueue
from shared.settings.config import Config
from shared.settings.config import load as load_config
from shared.settings.config import resolve_path
from shared.engines.location import redacted
from shared.model.queuenames import queue_name_error

from . import compat
from .databases import same_database
from .results import PAYLOAD_RUN_AFTER, STATUS, history, task_result
from .task import JobqTask

WORKER_MODULE = "jobq.django.worker"
# what enqueue's result takes from the stored row (all but the arguments, as given)
_RESULT_FIELDS = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "last_attempted_at",
    "finished_at",
    "errors",
    "worker_ids",
)


class JobqBackend(compat.BaseTaskBackend):  # type: ignore[misc, valid-type]
    """One ``TASKS`` entry on a jobq queue: its tasks are jobs whose type is the task's module
    path and whose payload is ``{"args": [...], "kwargs": {...}}``; results are read back from
    the jobs and their attempt history."""

    task_class = JobqTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.using: str = self.options.get("using", "default")
        self._config: Config | None = None
        self._local = threading.local()  # .queue: this thread's JobQueue
        self._same: bool | None = None

    # -- configuration --------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The jobq config (ConfigError if the file is missing or wrong), read once."""
        if self._config is None:
            database = self.options.get("database")
            path = self.options.get("config")
            if path is None and database is not None:
                self._config = Config().replace(database=str(database))
            else:
                self._config = load_config(resolve_path(None if path is None else str(path)))
        return self._config

    def in_transaction_writes(self) -> bool:
        """Is the ``using`` alias the jobq database (jobs written in Django's transaction)?"""
        if self._same is None:
            conn = connections[self.using]
            self._same = same_database(conn.settings_dict, conn.vendor, self.config.database)
        return self._same

    def queue(self) -> JobQueue:
        """This thread's queue on the jobq database (opened, and its schema made, on first use)."""
        queue: JobQueue | None = getattr(self._local, "queue", None)
        if queue is None:
            queue = self._local.queue = JobQueue(config=self.config)
        return queue

    def prepare(self) -> None:
        """Open the queue now if jobs go through Django's connection (called when this thread
        connects, before any transaction: opening checks jobq's schema, which must not wait for
        the write lock of the caller's own transaction)."""
        if self.in_transaction_writes():
            self.queue()

    # -- enqueue -----------------------------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """Django's checks (``queue_name`` in ``QUEUES`` among them), and the queue name's
        being one jobq can name a queue with (InvalidTask naming it)."""
        super().validate_task(task)
        why = queue_name_error(task.queue_name)
        if why is not None:
            raise compat.InvalidTask(f"task {task.module_path}: {why}")

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Queue a run of ``task`` on the jobq queue of its ``queue_name``; its READY
        ``TaskResult``, read back from the stored row (what ``get_result`` gives). Through
        Django's connection when it is the jobq database (in the caller's transaction, if any:
        the id is known at once), else when the transaction commits (the id is set then).
        Arguments that are not JSON, and an invalid task, raise before anything is written;
        ``task_enqueued`` is sent once the job is written."""
        self.validate_task(task)
        args, kwargs = compat.normalize_json(list(args)), compat.normalize_json(dict(kwargs))
        payload, options = _job_fields(task, args, kwargs)
        result = _ready_result(task, args, kwargs, self.alias)

        def write(conn: Any = None) -> None:
            self._write(task, payload, options, result, conn)

        if self.in_transaction_writes():
            self.queue()  # before touching Django's connection (see prepare)
            django_conn = connections[self.using]
            django_conn.ensure_connection()
            write(django_conn.connection)
        else:
            transaction.on_commit(write, using=self.using)  # at once outside a transaction
        return result

    def _write(
        self, task: Any, payload: dict[str, Any], options: dict[str, Any], result: Any, conn: Any
    ) -> None:
        """Enqueue ``task``'s job (through ``conn``, else this thread's queue's own
        connection), fill ``result`` in from the stored row, and send ``task_enqueued``."""
        jobs = self.queue()
        job_id = jobs.enqueue(task.module_path, payload, conn=conn, **options)
        job = jobs.get(job_id, conn=conn)
        if job is not None:  # (None: a retention purge in between, outside a transaction)
            stored = task_result(task, job, [], self.alias)
            for name in _RESULT_FIELDS:
                object.__setattr__(result, name, getattr(stored, name))
        compat.task_enqueued.send(type(self), task_result=result)

    # -- results -----------------------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        """The ``TaskResult`` of the job ``result_id`` as stored now, read from any process;
        ``TaskResultDoesNotExist`` when there is no such job (never enqueued, not committed
        yet, deleted by retention) or it is not a Django task's (its type imports no Task).
        Inside a transaction of Django's connection to the jobq database the job is read
        through that connection, which sees the jobs it enqueued and has not committed."""
        queue = self.queue()
        job = queue.get(str(result_id), conn=self._open_transaction())
        if job is None:
            raise compat.TaskResultDoesNotExist(result_id)
        try:
            task = import_string(job.type)
        except ImportError:
            task = None
        if not isinstance(task, compat.Task) or job.status not in STATUS:
            raise compat.TaskResultDoesNotExist(
                f"{result_id} is a jobq job of type {job.type!r}, not a Django task"
            )
        attempts = history(queue.store, job.id) if job.attempts else []  # none before a first try
        return task_result(task, job, attempts, self.alias)

    def _open_transaction(self) -> Any:
        """Django's connection to the jobq database (its driver's) when this thread holds a
        transaction open on it, else None."""
        if not self.in_transaction_writes():
            return None
        django_conn = connections[self.using]
        if not django_conn.in_atomic_block or django_conn.connection is None:
            return None
        return django_conn.connection

    # -- checks ------------------------------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[Any]:
        from .checks import backend_messages

        return list(super().check(**kwargs)) + backend_messages(self)


def _job_fields(task: Any, args: Any, kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The payload of ``task``'s job, and the ``run_at``, ``priority`` and ``queue`` it is
    enqueued with."""
    payload: dict[str, Any] = {"args": args, "kwargs": kwargs}
    run_at = _aware(task.run_after)
    if run_at is not None:
        payload[PAYLOAD_RUN_AFTER] = run_at.isoformat()
    # the defaults leave the type's [types] priority and queue
    priority = None if task.priority == compat.DEFAULT_TASK_PRIORITY else task.priority
    queue = None if task.queue_name == compat.DEFAULT_TASK_QUEUE_NAME else task.queue_name
    return payload, {"run_at": run_at, "priority": priority, "queue": queue}


def _ready_result(task: Any, args: Any, kwargs: Any, alias: str) -> Any:
    """The READY ``TaskResult`` of a run of ``task`` not written yet (its id, times and
    status are filled in from the stored row once it is)."""
    return compat.TaskResult(
        task=task,
        id="",
        status=compat.TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        last_attempted_at=None,
        finished_at=None,
        args=args,
        kwargs=kwargs,
        backend=alias,
        errors=[],
        worker_ids=[],
    )


def _aware(moment: datetime | None) -> datetime | None:
    """``run_after`` for jobq (an aware time): a naive one (``USE_TZ = False``) is local time."""
    if moment is None or timezone.is_aware(moment):
        return moment
    return timezone.make_aware(moment)


def location(backend: JobqBackend) -> str:
    """The jobq database as shown to people (a URL's password hidden)."""
    return redacted(backend.config.database)
