"""Job handles: waiting for a job's result (``JobHandle``, ``JobQueue.handle``/``wait_many``).

A wait reads the job with the store's ``get`` (``statuses`` for several) until it has ended,
sleeping between reads until the engine says something committed, or a bounded back-off ends:

- SQLite: the WAL watch (``shared.engines.commit_watch``): every commit by any process writes the
  WAL, so a waiter reads again as soon as anything committed, and otherwise every
  ``WATCHED_CAP`` seconds at most. The watch fires as the frames are written, just before the
  commit completes: after a wake the back-off restarts at ``SETTLE`` seconds, in case this read
  came too early.
- PostgreSQL: the engine notifies enqueues and retries, not outcomes, so a waiter re-reads on a
  back-off from ``FIRST`` to ``POLL_CAP`` seconds.

Nothing here writes: a wait that times out leaves the job alone. A waiter in another process,
or after the producer restarted, works the same way: the job's row holds the result until
retention deletes it (then :class:`JobNotFound`).
"""
from __future__ import annotations

import asyncio
import select
import time
from typing import Any, Generic, Iterable, TypeVar

from .engines import commit_watch
from .job import TERMINAL, Job

R = TypeVar("R")

FIRST = 0.001       # seconds: the first pause
SETTLE = 0.001      # the pause after a wake whose read came too early (the commit was completing)
WATCHED_CAP = 5.0   # longest pause while the commit watch works (a fallback: every commit wakes us;
                    # idle workers use the same, shared.engines.sqlite.wakeup.WATCHED_SLEEP)
POLL_CAP = 0.5      # longest pause without a watch (PostgreSQL): bounds latency and idle reads


class JobFailed(Exception):
    """The job ended ``failed``. ``job``: the :class:`shared.job.Job` as stored;
    ``traceback``: its stored error text (the handler's traceback, or why it failed without
    running); ``error``: that text's last line (``ValueError: bad address``)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.traceback = job.error or ""
        lines = [line for line in self.traceback.splitlines() if line.strip()]
        self.error = lines[-1].strip() if lines else ""
        super().__init__(f"job {job.id} ({job.type}) failed after {job.attempts} attempt(s): {self.error}")


class JobCancelled(Exception):
    """The job was cancelled (``jobq cancel``, the dashboard) before it ran. ``job``: as stored."""

    def __init__(self, job: Job) -> None:
        self.job = job
        super().__init__(f"job {job.id} ({job.type}) was cancelled")


class JobNotFound(LookupError):
    """No job has this id on the queue's database: never enqueued there, not committed yet
    (enqueued through ``conn=``), or deleted by retention after it ended."""

    def __init__(self, job_id: str, location: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} not found on {location}: never enqueued there, not committed "
                         f"yet, or deleted by retention after it ended")


def outcome(job: Job) -> Any:
    """The decoded result of an ended job; JobFailed / JobCancelled for the other endings."""
    if job.status == "failed":
        raise JobFailed(job)
    if job.status == "cancelled":
        raise JobCancelled(job)
    return job.result


class JobHandle(Generic[R]):
    """One job of one queue, by id. ``R``: what its result decodes to (a task's return type)."""

    __slots__ = ("queue", "id")

    def __init__(self, queue: Any, job_id: str) -> None:
        self.queue = queue
        self.id = job_id

    def __repr__(self) -> str:
        return f"JobHandle({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobHandle) and other.id == self.id and other.queue is self.queue

    def __hash__(self) -> int:
        return hash(self.id)

    def get(self) -> Job:
        """The job as stored now; JobNotFound if no job has this id."""
        job: Job | None = self.queue.store.get(self.id)
        if job is None:
            raise JobNotFound(self.id, self.queue.store.location)
        return job

    def status(self) -> str:
        """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``."""
        return self.get().status

    def wait(self, timeout: float | None = None) -> R:
        """Block until the job has ended and return its decoded result (JSON: a tuple came back
        as a list). Raises JobFailed, JobCancelled, JobNotFound, or TimeoutError after
        ``timeout`` seconds (None: no limit), leaving the job as it is."""
        return wait_jobs(self.queue, [self.id], timeout)[0]  # type: ignore[no-any-return]

    async def wait_async(self, timeout: float | None = None) -> R:
        """:meth:`wait` for asyncio: the event loop runs meanwhile (the reads use the queue's
        connection, in the loop's thread: open the queue in that thread)."""
        return (await wait_jobs_async(self.queue, [self.id], timeout))[0]  # type: ignore[no-any-return]


class _Waiting:
    """The state of one wait: which jobs are still running, the deadline, the next pause."""

    def __init__(self, queue: Any, ids: Iterable[Any], timeout: float | None) -> None:
        self.store = queue.store
        self.ids = [i.id if isinstance(i, JobHandle) else i for i in ids]
        # the wait blocks for real seconds (select), which an injected FakeClock would never pass
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timeout = timeout
        self.watch = commit_watch(queue.config)  # made before the first read: no commit is missed
        self.pause = FIRST
        self.open = list(dict.fromkeys(self.ids))

    def done(self) -> list[Any] | None:
        """Read the jobs not yet seen ended; the results in order once all have ended."""
        ended: dict[str, Job] = {}
        if len(self.open) == 1:  # one job: one read, which also brings its result
            job = self._get(self.open[0])
            if job.status in TERMINAL:
                ended[job.id] = job
                self.open = []
        else:
            states = self.store.statuses(self.open)
            for job_id in self.open:
                if job_id not in states:
                    raise JobNotFound(job_id, self.store.location)
            self.open = [i for i in self.open if states[i] not in TERMINAL]
        if self.open:
            return None
        return [outcome(ended.get(i) or self._get(i)) for i in self.ids]

    def _get(self, job_id: str) -> Job:
        job: Job | None = self.store.get(job_id)
        if job is None:
            raise JobNotFound(job_id, self.store.location)
        return job

    def next_pause(self) -> float:
        """How long to sleep before the next read; TimeoutError once the deadline passed."""
        pause = self.pause
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job{'s' if len(self.open) > 1 else ''} {', '.join(self.open)} "
                                   f"still not ended after {self.timeout:g} s")
            pause = min(pause, left)
        return pause

    def slept(self, woke: bool) -> None:
        """After a pause: a commit restarts the back-off (its rows may land just after the
        read), a quiet pause doubles it up to the cap."""
        if woke and self.watch is not None and self.watch.drain():
            self.pause = SETTLE
        else:
            self.pause = min(self.pause * 2, WATCHED_CAP if self.watch is not None else POLL_CAP)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()


def wait_jobs(queue: Any, ids: Iterable[Any], timeout: float | None) -> list[Any]:
    """Wait for every job of ``ids`` (ids or handles) to end; their results in order (see
    :meth:`shared.api.JobQueue.wait_many`)."""
    w = _Waiting(queue, ids, timeout)
    try:
        while (results := w.done()) is None:
            pause = w.next_pause()
            if w.watch is None:
                time.sleep(pause)
                w.slept(False)
            else:
                ready, _, _ = select.select([w.watch.fileno()], [], [], pause)
                w.slept(bool(ready))
        return results
    finally:
        w.close()


async def wait_jobs_async(queue: Any, ids: Iterable[Any], timeout: float | None) -> list[Any]:
    """:func:`wait_jobs` on the running event loop (the watch through ``add_reader``)."""
    w = _Waiting(queue, ids, timeout)
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    if w.watch is not None:
        loop.add_reader(w.watch.fileno(), event.set)
    try:
        while (results := w.done()) is None:
            pause = w.next_pause()
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), pause)
            except asyncio.TimeoutError:
                pass
            w.slept(event.is_set())
        return results
    finally:
        if w.watch is not None:
            loop.remove_reader(w.watch.fileno())
        w.close()
