"""Many async jobs at once in one worker process: the async runner.

Job types with ``async_concurrency = N`` (``shared.execution.asyncjobs``: ``@handler``/``@task`` or
``[types."<type>"]``; ``async def`` handlers only) run as tasks of one event loop, up to N of
each type at once. The worker's loop (``worker.loop``) enters the runner whenever it holds
nothing claimed:

    claim jobs of the async types (as many as there is room for)
      none: back to the loop, which claims any job (one at a time, in batches) or waits idle
      some: run them as tasks; as each one ends, commit its outcome and claim again for the
            room it leaves (one transaction); return once none is in flight and none is due

So sync and async jobs share a worker this way: while async jobs are in flight the worker
claims only async types; with none in flight it claims anything. A sync job therefore never
blocks async ones on its worker, and async jobs wait at most one sync job's run for a worker
that is between jobs. The event loop lives as long as the worker: a client a handler keeps in a
module (an HTTP session) stays on the loop it was made on.

Every job keeps its own lease (the heartbeat renews every job the worker holds: ``Batch.running``),
attempt and outcome; outcomes commit as they finish, those that end while a commit is under way
with the next (batched), never held back by a slow sibling. Database calls run on a thread of
their own, so the loop never waits for the database. A job's timeout cancels its task only
(``worker.aiojob``), and so does a cancel request, which the heartbeat's check-in reads with
the progress of every job in flight (``worker.aiocancel``). A handler that blocks the loop is
named in a warning (``worker.looplag``); the supervisor kills the worker once that job is past
its timeout plus ``kill_grace``, charging that job only: the others go back with their attempts
(so too for a job that runs on after its cancel, killed at ``cancel_grace``). Any other death of
the worker charges every job in flight (``worker.inflight``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shared.model.errors import StoreError
from shared.model.exitcodes import ExitCode
from shared.model.job import Job
from shared.model.limits import type_limits
from shared.runtime.logs import event, get_logger
from shared.execution.outcomes import Done, after_commit_all, decide
from shared.execution.runner import JobContext, Outcome, execute

from .aiocancel import Flight
from .aiojob import run_async
from .commits import RETRY_WRITE
from .inflight import InflightProgress
from .looplag import LoopWatch

log = get_logger("worker")

POLL = 0.2  # seconds: with room left and nothing due at the last claim, claim again this often


class AsyncRunner:
    """The async runner of ``worker`` (a ``worker.loop.Worker``); see the module's doc."""

    def __init__(self, worker: Any) -> None:
        self.w = worker
        self.loop = asyncio.new_event_loop()
        self.db = ThreadPoolExecutor(1, thread_name_prefix="jobq-aio-db")
        self.store: Any = None  # the database thread's own (opened there)
        self.tasks: dict[asyncio.Task[None], Job] = {}
        self.finished: list[Done] = []
        self.progress = InflightProgress(worker.progress, self._held_ids, lambda: worker.jobs_done)
        self.alone: Job | None = None  # the job run_one runs (the worker's loop claimed it)
        self.watch = LoopWatch(self.loop, self._job_of, self._blocked, worker.owner)
        # the check-in's view of the jobs on the loop (worker.aiocancel)
        self.flight = worker.in_hand.flight = Flight(self.loop, self._defiant)
        self._limits: tuple[Any, dict[str, int]] = (None, {})
        self.watching = False

    def limits(self) -> dict[str, int]:
        """Async type -> its ``async_concurrency``, for the types this worker serves with an
        ``async def`` handler (read again after a reload replaced the policy)."""
        policy = self.w.policy
        if self._limits[0] is not policy:
            out = {}
            for name in self.w.registry.types():
                n, spec = policy.async_concurrency(name), self.w.registry.get(name)
                if n and spec is not None and spec.is_async:
                    out[name] = n
            self._limits = (policy, out)
        return self._limits[1]

    def room(self) -> dict[str, int]:
        """Async type -> how many more of its jobs may start now."""
        busy = Counter(j.type for j in self.tasks.values())
        return {t: n - busy[t] for t, n in self.limits().items() if n > busy[t]}

    # -- the worker loop's hook (main thread) -----------------------------------------------------

    def run(self) -> bool:
        """Claim async jobs and run them (and the ones that follow) until none is in flight;
        False when none was claimed (the worker's loop claims as usual)."""
        w = self.w
        if not self.limits() or w.stopping:
            return False
        if w.held.done:
            w.commit(limit=0)
        if w.wakeup is not None:
            w.wakeup.before_claim()  # (drains the commit watch: see Wakeup.before_claim)
        _, jobs = self._commit_claim(w.store, [], self.room(), first=True)
        if not jobs:
            return False
        if w.wakeup is not None:
            w.wakeup.claimed()  # an idle lead hands the lead on: we are busy now
        self._watching()
        w.holding(True)
        self.progress.committed()  # the file no longer names the last one-at-a-time batch
        self.loop.run_until_complete(self._drive(jobs))
        return True

    def run_one(self, job: Job, ctx: JobContext) -> Outcome:
        """(The worker loop, one job at a time.) Run ``job`` as ``shared.execution.runner.execute``
        does, but a job of an async type on this runner's loop, under its timeout: a client its
        handler module keeps stays on one loop, whichever way its jobs were claimed."""
        if job.type not in self.limits():
            return execute(self.w.registry, job, ctx, self.w.tracing)
        self._watching()
        self.alone = job
        try:
            return self.loop.run_until_complete(self._run_alone(job, ctx))
        finally:
            self.alone = None

    def close(self) -> None:
        """(Worker exit.) Stop the watch, the database thread and the loop."""
        self.watch.stop()
        if self.store is not None:
            self.db.submit(self.store.close).result()
        self.db.shutdown(wait=True)
        self.loop.close()

    def _watching(self) -> None:
        if not self.watching:
            self.watch.start()
            self.watching = True

    # -- on the loop ------------------------------------------------------------------------------

    async def _run_alone(self, job: Job, ctx: JobContext) -> Outcome:
        """``run_one``'s job, watched as the tasks are: a handler that blocks the loop is named
        however its job was claimed."""
        self.watch.active(True)
        try:
            return await run_async(
                self.w.registry, job, ctx, self.w.policy.timeout(job.type), self.flight
            )
        finally:
            self.watch.active(False)

    async def _drive(self, jobs: list[Job]) -> None:
        self.watch.active(True)
        try:
            self._start(jobs)
            await self._pump()
        finally:
            self.watch.active(False)

    async def _pump(self) -> None:
        """Commit outcomes as they come and claim for the room they leave, until nothing is in
        flight and nothing was due at the last claim (or the worker stops)."""
        w, last, full = self.w, time.monotonic(), True
        while True:
            w.check_process()
            w.handle_signals()
            self._recycle()
            room = {} if w.stopping else self.room()
            claim = bool(room) and (full or time.monotonic() - last >= POLL)
            if self.finished or claim:
                got = await self._commit(room if claim else {})
                if claim and got is not None:
                    last, full = time.monotonic(), len(got) >= max(room.values())
            elif not self.tasks:
                return
            else:
                wait = POLL - (time.monotonic() - last) if room else POLL
                await asyncio.wait(
                    list(self.tasks), timeout=max(wait, 0.001), return_when=asyncio.FIRST_COMPLETED
                )

    def _recycle(self) -> None:
        w = self.w
        if not w.stopping and w.should_recycle():
            w.stopping, w.exit_code = True, ExitCode.RECYCLED

    async def _commit(self, room: dict[str, int]) -> list[Job] | None:
        """Commit the finished outcomes and claim for ``room`` on the database thread; log and
        hook the outcomes, start the claimed jobs. None (outcomes kept) if the database refused."""
        w, dones, self.finished = self.w, self.finished, []
        try:
            ok, jobs = await self.loop.run_in_executor(self.db, self._db_commit, dones, room)
        except StoreError as exc:
            event(
                log,
                "worker.write_failed",
                logging.ERROR,
                slot=w.slot,
                pid=w.pid,
                outcomes=len(dones),
                error=str(exc),
            )
            self.finished[:0] = dones
            await asyncio.sleep(RETRY_WRITE)
            return None
        if dones:
            self.progress.committed()
        after_commit_all(dones, ok, w.registry, w.slot, w.pid)
        self._start(jobs)
        return jobs

    def _start(self, jobs: list[Job]) -> None:
        for job in jobs:
            task = self.loop.create_task(self._run_job(job), name=f"jobq {job.type} {job.id}")
            self.tasks[task] = job
            task.add_done_callback(lambda t: self.tasks.pop(t, None))

    async def _run_job(self, job: Job) -> None:
        w = self.w
        ctx = JobContext(job.id, job.type, job.attempts, w.policy.max_attempts(job), job.queue)
        ctx.config = w.config
        event(
            log,
            "job.started",
            logging.DEBUG,
            id=job.id,
            type=job.type,
            attempt=job.attempts,
            slot=w.slot,
            pid=w.pid,
        )
        t0 = time.perf_counter()
        outcome = await run_async(w.registry, job, ctx, w.policy.timeout(job.type), self.flight)
        self.finished.append(
            decide(job, ctx, outcome, w.policy, w.clock.now(), time.perf_counter() - t0)
        )
        w.jobs_done += 1

    # -- the database thread (and the main thread's first claim) ----------------------------------

    def _db_commit(self, dones: list[Done], room: dict[str, int]) -> tuple[list[bool], list[Job]]:
        if self.store is None:
            self.store = self.w.store.for_thread()
        return self._commit_claim(self.store, dones, room)

    def _commit_claim(
        self, store: Any, dones: list[Done], room: dict[str, int], first: bool = False
    ) -> tuple[list[bool], list[Job]]:
        """Record ``dones`` and claim jobs of the types with ``room``, in one transaction; the
        claimed jobs now count as held (renewed by the heartbeat). Jobs past their type's room
        (the claim's limit is the largest room) go back at once, their attempt returned. Only
        the ``first`` claim (nothing else held) tells the fence of a renewal: a later one
        renews only its own jobs' leases, not those in flight."""
        w = self.w
        limit = max(room.values(), default=0)
        slow = w.heartbeat.beat_soon if w.heartbeat is not None else None
        with w.held.claiming(slow):  # a beat meanwhile renews every job of ours, gives none back
            sent = w.clock.monotonic()
            ok, jobs = store.finish_and_claim(
                [d.finish for d in dones],
                w.owner,
                w.pid,
                w.clock.now,
                limit,
                type_limits(w.config),
                types=list(room) or None,
            )
            kept, extra, left = [], [], dict(room)
            for job in jobs:
                (kept if left.get(job.type, 0) > 0 else extra).append(job)
                left[job.type] = left.get(job.type, 0) - 1
            with w.held.lock:
                w.held.running.difference_update(d.finish.job_id for d in dones)
                w.held.running.update(j.id for j in kept)
        if first:
            w.renewed(sent, kept, store, len(jobs))
        if extra:
            store.release_unstarted(w.owner, [j.id for j in extra], w.clock.now())
        return ok, kept

    # -- the loop watch -------------------------------------------------------------------------

    def _held_ids(self) -> list[str]:
        with self.w.held.lock:
            return list(self.w.held.running)

    def _job_of(self, task: asyncio.Task[Any]) -> Job | None:
        return self.tasks.get(task) or self.alone

    def _blocked(self, job: Job | None) -> None:
        """A job blocks the loop (None: the block ended): named in the progress file, unless
        it runs one at a time (``run_one``: the worker's loop writes the file for its batch and
        names that job as the one in hand; so nothing is written when that block ends)."""
        job_id = job.id if job is not None else None
        if self._in_flight(job_id) and (job_id is not None or self.progress.blamed is not None):
            self.progress.blame(job_id)

    def _defiant(self, job_id: str | None) -> bool:
        """A job in flight ignores its cancel (None: it ended): named in the progress file; not
        one run one at a time (as in :meth:`_blocked`)."""
        if not self._in_flight(job_id):
            return False
        self.progress.defied(job_id)
        return True

    def _in_flight(self, job_id: str | None) -> bool:
        """``job_id`` is one of the runner's tasks (None counts: a culprit's end)."""
        return job_id is None or any(j.id == job_id for j in self.tasks.values())
