"""Which claimed jobs a worker holds, for its heartbeat (a mixin of ``worker.loop.Worker``).

A claim can commit on the server while its answer never reaches the worker (the connection
was cut after the statement went out): the job is then running under the worker's owner, but
the worker does not know it. The heartbeat renews only the jobs the worker holds and gives
back the rest at once (``WorkerStore.heartbeat(..., holding)``), so such a job is neither kept
alive by the worker's beats nor charged "timed out" later: it goes back to pending, its
attempt returned.

Held: the job in hand (and the last one run: harmless, its row is no longer running once its
outcome is in), the unstarted rest of the batch, and the outcomes not committed yet. The list
is read under the batch lock, and a claim starts and ends under it too (:meth:`claiming`):

- while a claim is in flight its answer may hold jobs not in the list yet, so a beat then
  renews every running job of the owner and gives nothing back;
- otherwise the heartbeat keeps the lock until its statement is done, so no claim can commit
  jobs between the reading of the list and the statement that would take them for strangers.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Iterator

from shared.job import Job

SLOW_CLAIM = 0.5  # seconds: a claim this slow may have failed and been retried (answer lost?):
                  # the heartbeat looks for strangers at once rather than at its next beat (so
                  # it does after a claim that raised, until a beat gets through)


class Holding:
    """The held jobs' ids for the heartbeat thread; the claim's bracket for the main thread."""

    batch: deque[Job]
    batch_lock: threading.Lock
    done: list[Any]
    done_lock: threading.Lock
    job_t0: float | None
    config: Any
    heartbeat: Any
    current: Job | None = None   # the job in hand, or the last one run
    in_flight: bool = False      # a claim was sent and its answer is not in the batch yet

    @contextmanager
    def held_ids(self) -> Iterator[list[str] | None]:
        """(Heartbeat thread.) The ids of the jobs held, for the duration of one heartbeat
        statement; None while a claim is in flight (renew all, give nothing back)."""
        with self.batch_lock:
            if self.in_flight:
                ids = None
            else:
                with self.done_lock:
                    ids = [d.finish.job_id for d in self.done]
                ids += [j.id for j in self.batch]
                if self.current is not None:
                    ids.append(self.current.id)
            yield ids

    @contextmanager
    def claiming(self) -> Iterator[list[Job]]:
        """(Main thread.) Around a claim: the jobs the caller puts in the yielded list join the
        batch as the claim ends, in one step under the batch lock."""
        with self.batch_lock:
            self.in_flight = True
        got: list[Job] = []
        t0, failed = time.monotonic(), True
        try:
            yield got
            failed = False
        finally:
            with self.batch_lock:
                self.batch.extend(got)
                self.in_flight = False
            if (failed or time.monotonic() - t0 >= SLOW_CLAIM) and self.heartbeat is not None:
                self.heartbeat.beat_soon()

    def shed(self) -> list[Job]:
        """(Heartbeat thread.) Take the unstarted rest of the batch once the job in hand has run
        ``batch_wait`` seconds; the caller gives them back to the queue."""
        with self.batch_lock:
            t0 = self.job_t0
            if not self.batch or t0 is None or \
                    time.perf_counter() - t0 < self.config.worker.batch_wait:
                return []
            jobs = list(self.batch)
            self.batch.clear()
            return jobs
