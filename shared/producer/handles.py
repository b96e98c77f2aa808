"""Job handles: waiting for a job's result (``JobHandle``, ``JobQueue.handle``/``wait_many``).

A wait reads its jobs with the queue's own store (``get``; ``statuses`` for several) and, while
they run, leaves the watching to this process's hub for the database
(:mod:`shared.producer.waithub`): one thread that reads every awaited job in one query whenever the
engine says something committed (SQLite's WAL watch) or its bounded back-off ends (PostgreSQL, which
notifies enqueues, not outcomes), and wakes the waiters whose jobs ended; each then reads its
results.

Nothing here writes: a wait that times out leaves the job alone. A waiter in another process,
or after the producer restarted, works the same way: the job's row holds the result until
retention deletes it (then :class:`JobNotFound`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from shared.model.errortext import headline
from shared.model.job import TERMINAL, Job
from shared.ops.jobs import statuses

# raised by wait; one class with the handler's
from shared.execution.stopping import JobCancelled  # noqa: F401

if TYPE_CHECKING:
    from shared.producer.cancels import CancelResult

R = TypeVar("R")


class JobFailed(Exception):
    """The job ended ``failed``. ``job``: the :class:`shared.model.job.Job` as stored;
    ``traceback``: its stored error text (the handler's traceback, or why it failed without
    running); ``error``: its final exception's type and the first line of its message
    (``ValueError: bad address``: :func:`shared.model.errortext.headline`)."""

    def __init__(self, job: Job, retrying: bool = False) -> None:
        self.job = job
        self.traceback = job.error or ""
        self.error = headline(self.traceback)
        if retrying:  # immediate mode: its retry is not due, and nothing here would run it
            super().__init__(
                f"job {job.id} ({job.type}) failed its attempt {job.attempts} and waits for a "
                f"retry at {job.run_at} (immediate mode runs only retries due at once): "
                f"{self.error}"
            )
            return
        super().__init__(
            f"job {job.id} ({job.type}) failed after {job.attempts} attempt(s): {self.error}"
        )


class JobNotFound(LookupError):
    """No job has this id on the queue's database: never enqueued there, not committed yet
    (enqueued through ``conn=``), or deleted by retention after it ended."""

    def __init__(self, job_id: str, location: str) -> None:
        self.job_id = job_id
        super().__init__(
            f"job {job_id} not found on {location}: never enqueued there, not committed "
            f"yet, or deleted by retention after it ended"
        )


def outcome(job: Job) -> Any:
    """The decoded result of an ended job; JobFailed / JobCancelled for the other endings."""
    if job.status == "failed":
        raise JobFailed(job)
    if job.status == "cancelled":
        raise JobCancelled(job)
    return job.result


class JobHandle(Generic[R]):
    """One job of one queue, by id. ``R``: what its result decodes to (a task's return type);
    ``decode``: what makes the stored JSON that (a task's return annotation), or None."""

    __slots__ = ("queue", "id", "decode")

    def __init__(self, queue: Any, job_id: str, decode: Callable[[Any], R] | None = None) -> None:
        self.queue = queue
        self.id = job_id
        self.decode = decode

    def __repr__(self) -> str:
        return f"JobHandle({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobHandle) and other.id == self.id and other.queue is self.queue

    def __hash__(self) -> int:
        return hash(self.id)

    def get(self) -> Job:
        """The job as stored now (a completed task's ``result`` as its return annotation names
        it); JobNotFound if no job has this id."""
        job: Job | None = self.queue.store.get(self.id)
        if job is None:
            raise JobNotFound(self.id, self.queue.store.location)
        if self.decode is not None and job.status == "completed":
            return replace(job, result=self.decode(job.result))
        return job

    def status(self) -> str:
        """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``."""
        return self.get().status

    async def get_async(self) -> Job:
        """:meth:`get` for asyncio: the read does not block the event loop (PostgreSQL: the
        loop's own connection; SQLite: a worker thread)."""
        job: Job | None = await self.queue.get_async(self.id)
        if job is None:
            raise JobNotFound(self.id, self.queue.store.location)
        if self.decode is not None and job.status == "completed":
            return replace(job, result=self.decode(job.result))
        return job

    async def status_async(self) -> str:
        """:meth:`status` for asyncio (see :meth:`get_async`)."""
        return (await self.get_async()).status

    def progress(self) -> Any:
        """The progress its handler last reported (``{"fraction": ..., "note": ..., ...}``, as
        stored a few times a second at most), or None."""
        return self.get().progress

    def cancel(self, *, wait: bool = False, timeout: float | None = None) -> "CancelResult":
        """``JobQueue.cancel`` of this job: a ``shared.producer.cancels.CancelResult`` (truthy when
        the job ended cancelled or, running, was asked to stop)."""
        result: CancelResult = self.queue.cancel(self.id, wait=wait, timeout=timeout)
        return result

    def wait(self, timeout: float | None = None) -> R:
        """Block until the job has ended and return its decoded result (JSON: a tuple came back
        as a list). Raises JobFailed, JobCancelled, JobNotFound, or TimeoutError after
        ``timeout`` seconds (None: no limit), leaving the job as it is."""
        return wait_jobs(self.queue, [self], timeout)[0]  # type: ignore[no-any-return]

    async def wait_async(self, timeout: float | None = None) -> R:
        """:meth:`wait` for asyncio: the event loop runs meanwhile (its few reads use the
        calling thread's store; the queue and the handle may come from any thread)."""
        return (await wait_jobs_async(self.queue, [self], timeout))[0]  # type: ignore[no-any-return]


def _running(queue: Any, ids: list[str], ended: dict[str, Job]) -> list[str]:
    """Which of ``ids`` have not ended yet (JobNotFound for one that does not exist); a job read
    whole that has ended is kept in ``ended`` for :func:`_results` (no second read)."""
    store = queue.store
    if len(ids) == 1:
        job: Job | None = store.get(ids[0])
        if job is None:
            raise JobNotFound(ids[0], store.location)
        if job.status in TERMINAL:
            ended[job.id] = job
            return []
        return ids
    states = statuses(store, ids)
    for job_id in ids:
        if job_id not in states:
            raise JobNotFound(job_id, store.location)
    return [i for i in ids if states[i] not in TERMINAL]


def _results(
    queue: Any, ids: list[str], ended: dict[str, Job], decoders: list[Any] | None = None
) -> list[Any]:
    jobs = {}
    for job_id in dict.fromkeys(ids):
        job: Job | None = ended.get(job_id) or queue.store.get(job_id)
        if job is None:
            raise JobNotFound(job_id, queue.store.location)
        jobs[job_id] = job
    results = [outcome(jobs[i]) for i in ids]
    if decoders is None:
        return results
    return [r if d is None else d(r) for r, d in zip(results, decoders)]


def _ids(ids: Iterable[Any]) -> tuple[list[str], list[Any] | None]:
    """The ids of ``ids`` (ids or handles), and the handles' result decoders (None: none has
    one)."""
    ids = list(ids)
    decoders = [getattr(i, "decode", None) for i in ids]
    return [i.id if isinstance(i, JobHandle) else i for i in ids], (
        decoders if any(decoders) else None
    )


def _stalled(queue: Any, open_ids: list[str]) -> None:
    """In immediate mode, JobFailed for a job whose attempt failed and whose retry is left for
    later: nothing in this process runs it while the caller waits, so the wait reports the
    task's error now instead of a TimeoutError."""
    for job_id in open_ids:
        job: Job | None = queue.store.get(job_id)
        if job is not None and job.status == "pending" and job.attempts and job.error:
            raise JobFailed(job, retrying=True)


def _left(deadline: float | None, timeout: float | None, open_ids: list[str]) -> float | None:
    """Seconds left before the deadline (None: no limit); TimeoutError once it passed."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(
            f"job{'s' if len(open_ids) > 1 else ''} {', '.join(open_ids)} still not ended "
            f"after {timeout:g} s"
        )
    return left


def wait_jobs(queue: Any, ids: Iterable[Any], timeout: float | None) -> list[Any]:
    """Wait for every job of ``ids`` (ids or handles) to end; their results in order (see
    :meth:`shared.producer.api.JobQueue.wait_many`)."""
    ids, decoders = _ids(ids)
    # the wait blocks for real seconds, which an injected FakeClock would never pass
    deadline = None if timeout is None else time.monotonic() + timeout
    open_ids = list(dict.fromkeys(ids))
    ended: dict[str, Job] = {}  # what _running read whole once it had ended
    while open_ids := _running(queue, open_ids, ended):
        if getattr(queue, "immediate", False):
            _stalled(queue, open_ids)
        left = _left(deadline, timeout, open_ids)
        woke = threading.Event()
        ticket = queue.hubs.get().add(open_ids, woke.set)
        try:
            woke.wait(left)
        finally:
            queue.hubs.get().remove(ticket)
    return _results(queue, ids, ended, decoders)


async def wait_jobs_async(queue: Any, ids: Iterable[Any], timeout: float | None) -> list[Any]:
    """:func:`wait_jobs` for asyncio: the loop runs while the hub watches."""
    ids, decoders = _ids(ids)
    deadline = None if timeout is None else time.monotonic() + timeout
    open_ids = list(dict.fromkeys(ids))
    ended: dict[str, Job] = {}  # what _running read whole once it had ended
    loop = asyncio.get_running_loop()
    while open_ids := _running(queue, open_ids, ended):
        if getattr(queue, "immediate", False):
            _stalled(queue, open_ids)
        left = _left(deadline, timeout, open_ids)
        woke = asyncio.Event()
        ticket = queue.hubs.get().add(open_ids, lambda: loop.call_soon_threadsafe(woke.set))
        try:
            await asyncio.wait_for(woke.wait(), left)
        except asyncio.TimeoutError:
            pass
        finally:
            queue.hubs.get().remove(ticket)
    return _results(queue, ids, ended, decoders)
