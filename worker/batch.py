"""A worker's batch state: the claimed jobs not started yet, the job in hand, the outcomes not
committed yet, and the batch size; shared by the main thread and the heartbeat thread under
two locks. (The loop that fills and empties it: ``worker.loop.Worker``.)

Which jobs are held matters to the heartbeat. A claim can commit on the server while its answer
never reaches the worker (the connection was cut after the statement went out): the job is then
running under the worker's owner, but the worker does not know it. The heartbeat renews only the
jobs the worker holds and gives back the rest at once (``WorkerStore.heartbeat(..., holding)``),
so such a job is neither kept alive by the worker's beats nor charged "timed out" later: it goes
back to pending, its attempt returned.

Held: the job in hand (and the last one run: harmless, its row is no longer running once its
outcome is in), the unstarted rest of the batch, and the outcomes not committed yet. The list
is read under the batch lock, and a claim starts and ends under it too (:meth:`Batch.claiming`):

- while a claim is in flight its answer may hold jobs not in the list yet, so a beat then
  renews every running job of the owner and gives nothing back;
- otherwise the heartbeat keeps the lock until its statement is done, so no claim can commit
  jobs between the reading of the list and the statement that would take them for strangers.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from shared.model.job import Job
from shared.execution.outcomes import Done

SLOW_CLAIM = 0.5  # seconds: a claim this slow may have failed and been retried (answer lost?):
# the heartbeat looks for strangers at once rather than at its next beat (so
# it does after a claim that raised, until a beat gets through)
FAST_JOB = 0.005  # seconds: jobs faster than this on average let the batch grow
BATCH_BUDGET = 0.025  # seconds: a batch grows only while it would still run in about this long, so
# a job of higher priority enqueued meanwhile waits little for a free worker
BATCH_WALL = 4 * BATCH_BUDGET  # seconds: a batch whose wall time passes this shrinks, whatever
# its own time (see Batch.resize)
SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: ns on a CPU, ns runnable waiting for one, slices


def cpu_wait() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux's schedstat;
    0.0 where it cannot be read: its time is then all wall time). About 5 us a call."""
    try:
        fd = os.open(SCHEDSTAT, os.O_RDONLY)
    except OSError:
        return 0.0
    try:
        return int(os.read(fd, 128).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0
    finally:
        os.close(fd)


class Batch:
    """The jobs and outcomes a worker holds. ``queue`` and ``current`` change under ``lock``;
    ``done`` and ``flushed`` under ``done_lock`` whenever the heartbeat thread may be at them
    (while a job runs: ``job_t0`` is set)."""

    def __init__(self) -> None:
        self.queue: deque[Job] = deque()  # claimed, not started
        self.lock = threading.Lock()  # the heartbeat thread may take the queue's rest (shed)
        self.current: Job | None = None  # the job in hand, or the last one run
        self.in_flight = False  # a claim was sent and its answer is not in the queue yet
        self.job_t0: float | None = None  # perf_counter() when the job in hand started
        self.done: list[Done] = []  # outcomes not committed yet
        # The heartbeat thread commits outcomes that would wait behind a slow job (FLUSH_AFTER):
        # it takes ``done`` under this lock while the main thread runs a job, and leaves what it
        # committed in ``flushed`` for the main thread to log and pass to hooks.
        self.done_lock = threading.Lock()
        self.flushed: list[tuple[list[Done], list[bool]]] = []
        self.size = 1  # jobs to claim next
        self.claimed = 0  # size of the current batch
        self.started = 0.0  # perf_counter() when it was claimed
        self.waited = 0.0  # cpu_wait() then
        self.done_since = 0.0  # perf_counter() when the oldest uncommitted outcome began
        # The async runner's jobs (worker.aio): in flight on its event loop, or their outcome not
        # committed yet. Changed under ``lock``; held like the rest (renewed, never given back).
        self.running: set[str] = set()

    # -- the main thread ------------------------------------------------------------------------

    @contextmanager
    def claiming(self, slow: Callable[[], None] | None = None) -> Iterator[list[Job]]:
        """Around a claim: the jobs the caller puts in the yielded list join the queue as the
        claim ends, in one step under the lock. ``slow`` is called after a claim that failed or
        took SLOW_CLAIM or longer (its answer may have been lost)."""
        with self.lock:
            self.in_flight = True
        got: list[Job] = []
        t0, failed = time.monotonic(), True
        try:
            yield got
            failed = False
        finally:
            with self.lock:
                self.queue.extend(got)
                self.in_flight = False
            if (failed or time.monotonic() - t0 >= SLOW_CLAIM) and slow is not None:
                slow()

    def claimed_now(self, n: int) -> None:
        """A claim returned ``n`` jobs: a new batch starts."""
        self.claimed = n
        self.waited = cpu_wait()
        self.started = time.perf_counter()

    def take(self) -> tuple[Job | None, int]:
        """The next job (None if the heartbeat thread gave the rest back), now in hand, and how
        many jobs of the batch have been started."""
        with self.lock:
            if not self.queue:
                return None, self.claimed
            job = self.current = self.queue.popleft()
            self.job_t0 = time.perf_counter()
            return job, self.claimed - len(self.queue)

    def give_back(self, job: Job) -> None:
        """``job`` (just taken) is not run: back to the front of the queue."""
        with self.lock:
            self.queue.appendleft(job)
            self.job_t0 = None

    def ran(self, done: Done) -> None:
        """The job in hand ended with ``done``, to be committed."""
        with self.done_lock:
            self.done.append(done)
            self.job_t0 = None

    def take_flushed(self) -> list[tuple[list[Done], list[bool]]]:
        """The outcomes the heartbeat thread committed since the last call."""
        if not self.flushed:
            return []
        with self.done_lock:
            flushed, self.flushed = self.flushed, []
        return flushed

    def take_unstarted(self) -> list[str]:
        """Empty the queue; the ids it held (to give back)."""
        with self.lock:
            ids = [j.id for j in self.queue]
            self.queue.clear()
        return ids

    def resize(self, max_batch: int) -> None:
        """Size the next claim from the batch that just ran (see :meth:`sized`): its own time is
        its wall time less what this thread spent waiting for a CPU meanwhile."""
        wall = time.perf_counter() - self.started
        own = max(wall - (cpu_wait() - self.waited), 0.0)
        self.size = self.sized(max_batch, own, wall)

    def sized(self, max_batch: int, own: float, wall: float) -> int:
        """The next claim's size after the current batch ran in ``own`` seconds of its own time
        (running, or blocked in its handlers: everything but waiting for a CPU) and ``wall``
        seconds of wall time. Grow (doubling, up to ``max_batch``) while claims come back full
        of fast jobs and twice the batch would still run within BATCH_BUDGET of its own time;
        shrink it when a batch ran longer, or took over BATCH_WALL of wall time; back to 1
        after a slow job.

        Own time, not wall time: 8 workers on 2 cores wait for a CPU several times as long as
        they run, so batches sized by wall time stayed at about a dozen jobs and the commit per
        batch was a third of a worker's CPU; waiting for a CPU is the machine's load, which the
        same work takes under any batch size. A handler that sleeps or waits for I/O is not
        waiting for a CPU: its time counts. The wall bound keeps the promise on a loaded
        machine: a job of higher priority enqueued meanwhile finds a free worker as soon as
        one worker's batch ends, which with several workers is a fraction of BATCH_WALL.

        A short claim (fewer jobs than asked: the queue ran dry) sets the size to what it got
        (halved if that batch overran the budget), not to 1: each level of a workflow graph
        ends in a short claim while the next level is being released by the same commits, and
        dropping to 1 there ran graph drains one job per transaction. What a claim got is this
        worker's share of what was due, so a lone trickled job still makes the next claim 1
        (it starts at once and hoards nothing), and among 8 workers no batch grows past what
        the queue gave it without full claims first."""
        claimed = self.claimed
        per_job = own / claimed if claimed else FAST_JOB
        over = own > BATCH_BUDGET or wall > BATCH_WALL
        if per_job >= FAST_JOB:
            return 1
        if claimed < self.size:
            return max(1, claimed // 2 if over else claimed)
        if over:
            return max(1, self.size // 2)
        if 2 * own <= BATCH_BUDGET and 2 * wall <= BATCH_WALL:
            return min(self.size * 2, max_batch)
        return self.size

    # -- the heartbeat thread -------------------------------------------------------------------

    @contextmanager
    def held_ids(self) -> Iterator[list[str] | None]:
        """The ids of the jobs held, for the duration of one heartbeat statement; None while a
        claim is in flight (renew all, give nothing back)."""
        with self.lock:
            if self.in_flight:
                ids = None
            else:
                with self.done_lock:
                    ids = [d.finish.job_id for d in self.done]
                ids += [j.id for j in self.queue]
                ids += self.running
                if self.current is not None:
                    ids.append(self.current.id)
            yield ids

    def shed(self, batch_wait: float) -> list[Job]:
        """Take the unstarted rest of the batch once the job in hand has run ``batch_wait``
        seconds; the caller gives them back to the queue."""
        with self.lock:
            t0 = self.job_t0
            if not self.queue or t0 is None or time.perf_counter() - t0 < batch_wait:
                return []
            jobs = list(self.queue)
            self.queue.clear()
            return jobs

    def flush(self, commit: Callable[[list[Done]], Any]) -> None:
        """Commit the outcomes waiting while the main thread runs a job (``commit`` returns the
        store's ``ok`` list; raises on a database error, the outcomes then stay)."""
        with self.done_lock:
            if not self.done or self.job_t0 is None:
                return  # the main thread is between jobs: it commits them itself
            dones = self.done
            ok = commit(dones)
            self.done = []
            self.flushed.append((dones, ok))
