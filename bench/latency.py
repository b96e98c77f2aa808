"""Producers for the latency workloads, shared by jobq and Huey.

A *session* is a running system under test with a producer attached:
``submit(due)`` enqueues one job (due now when ``due`` is None) and returns its key;
``drained()`` says nothing is left to run; ``collect()`` returns key -> (start, finish) times;
``tree`` is its process tree (for CPU). Times are ``time.time()`` seconds.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Hashable

from .procs import cpu_percent_of_core, wait_for
from .stats import latency_ms

Submit = Callable[[float | None], Hashable]


def paced(submit: Submit, rate: float, seconds: float) -> dict[Hashable, float]:
    """Enqueue at a fixed ``rate`` for ``seconds``; key -> enqueue time."""
    sent: dict[Hashable, float] = {}
    start = time.monotonic()
    for i in range(int(rate * seconds)):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        t = time.time()
        sent[submit(None)] = t
    return sent


def trickle(
    submit: Submit, count: int, rng: random.Random, *, delay: tuple[float, float] | None = None
) -> dict[Hashable, float]:
    """Enqueue ``count`` jobs one at a time with random 0.1-0.9 s gaps; key -> the time it
    should start (enqueue time, or ``run_at`` for delayed jobs ``delay`` seconds ahead)."""
    sent: dict[Hashable, float] = {}
    for _ in range(count):
        time.sleep(rng.uniform(0.1, 0.9))
        t = time.time()
        due = None if delay is None else t + rng.uniform(*delay)
        sent[submit(due)] = t if due is None else due
    return sent


def lags(
    sent: dict[Hashable, float], done: dict[Hashable, tuple[float, float | None]], which: int = 0
) -> dict[str, Any]:
    """Latency summary of ``done[key][which] - sent[key]`` for every job sent."""
    xs = [done[k][which] - t for k, t in sent.items() if k in done and done[k][which] is not None]
    return latency_ms(xs, expected=len(sent))


def finish(
    session: Any, expected: int, grace: float = 3.0
) -> dict[Hashable, tuple[float, float | None]]:
    """Wait until the session has run everything, then collect its times. A queue can look
    drained while a job is between its places (Huey's scheduler moving a due task from its
    schedule to its queue; a dequeued task running), so wait up to ``grace`` more seconds for
    ``expected`` records; a job still missing then is reported missing, not waited for."""
    wait_for(session.drained, max(30.0, expected / 50), "the queue to drain", interval=0.1)
    deadline = time.monotonic() + grace
    time.sleep(0.2)
    done = session.collect()
    while len(done) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
        done = session.collect()
    return done


def steady(session: Any, rate: float, seconds: float) -> dict[str, Any]:
    """A producer at ``rate``/s for ``seconds``: enqueue-to-start and enqueue-to-finish."""
    sent = paced(session.submit, rate, seconds)
    done = finish(session, len(sent))
    return {
        "rate": rate,
        "seconds": seconds,
        "start": lags(sent, done, 0),
        "finish": lags(sent, done, 1),
    }


def idle(
    session: Any, *, settle: float, cpu_window: float, jobs: int, delayed: int, rng: random.Random
) -> dict[str, Any]:
    """Idle CPU over a quiet window, then trickled jobs (enqueue-to-start) and delayed jobs
    (start - run_at)."""
    time.sleep(settle)
    cpu = cpu_percent_of_core(session.tree, cpu_window)
    now_jobs = trickle(session.submit, jobs, rng)
    later_jobs = trickle(session.submit, delayed, rng, delay=(0.2, 0.5))
    done = finish(session, jobs + delayed)
    return {
        "cpu_pct": cpu,
        "cpu_window_s": cpu_window,
        "start": lags(now_jobs, done),
        "delayed": lags(later_jobs, done),
    }
