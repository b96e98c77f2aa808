"""Bulk writes that let other writers in.

SQLite has one write lock and does not serve its waiters in turn: a waiter sleeps in its busy
handler (1, 2, 5, 10, 15, 20, 25 ... 100 ms) and tries again, so a loop that commits a chunk and
at once begins the next one wins the lock nearly every time. A purge of 500,000 rows in chunks
of 1,000 statements ran back to back for 41 s, while an enqueue waited 7.2 s (past
``busy_timeout``) and jobs took up to 7.3 s from enqueue to completion.

:class:`Pacer` runs a bulk write as many short ``BEGIN IMMEDIATE`` transactions. The chunk size
adapts so that one transaction holds the lock about ``hold`` seconds (10 ms), so a writer that
comes during a chunk waits about that long. Between chunks:

- jobq's writers say when they want the lock (:mod:`.wants`): while none waits the chunks run
  back to back, at full speed however loaded the machine; when one does, the bulk write pauses
  until every waiting writer is through (at most MOST_PAUSE). Every PROBE_EVERY seconds of
  unpaused work it pauses PROBE seconds anyway, so a writer that does not say so (a tool
  around jobq) gets in within a few of its busy handler's retries (1, 2, 5 ... 100 ms apart).
- without the signal (the ``-wants`` file cannot be made) it leaves the lock free after each
  chunk for at least as long as it held it (and at least ``hold``): about half speed.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")

HOLD = 0.010  # seconds: the longest one chunk should hold the write lock
LEAST, MOST = 50, 2000  # rows per chunk, whatever the timing says
STEP = 0.0005  # seconds between two looks at the writers while paused for them
MOST_PAUSE = 0.050  # seconds: the longest pause for writers that said they wait
PROBE_EVERY, PROBE = 0.250, 0.020  # seconds: a pause for writers that cannot say so


class Pacer:
    """Sizes and spaces the chunks of one bulk write. ``sleep`` and ``timer`` are injected
    (``time.sleep`` and ``time.perf_counter`` by default) so tests can watch the pauses."""

    def __init__(
        self,
        rows: int = 500,
        *,
        hold: float = HOLD,
        least: int = LEAST,
        most: int = MOST,
        sleep: Callable[[float], Any] = time.sleep,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.least, self.most = min(least, most), max(least, most)
        self.rows = max(self.least, min(rows, self.most))
        self.hold = hold
        self.sleep, self.timer = sleep, timer
        self.held: list[float] = []  # seconds each chunk held the write lock (for tests, benches)
        self.paused: list[float] = []  # seconds of each pause after a chunk (for tests, benches)
        self.unpaused = 0.0  # seconds of chunks since the last pause (probe_every)

    def chunk(self, store: Any, fn: Callable[[sqlite3.Connection, int], T]) -> T:
        """Run ``fn(conn, rows)`` in one ``BEGIN IMMEDIATE`` transaction of ``store`` (its ``_paced``, waiting for
        the lock like any writer), then pause as the writers need; returns what ``fn`` returned.
        ``rows`` is the chunk size to use this time; read it from ``fn``'s argument, not from
        ``self.rows``, which is already the next chunk's size when ``chunk`` returns."""
        rows = self.rows
        began: list[float] = []

        def timed(conn: sqlite3.Connection) -> T:
            began.append(self.timer())  # the lock is ours from here (BEGIN IMMEDIATE returned)
            return fn(conn, rows)

        out = store._paced(timed)  # one BEGIN IMMEDIATE, its errors translated
        held = self.timer() - began[-1]
        self.held.append(held)
        if held > self.hold:
            self.rows = max(self.least, self.rows // 2)
        elif held < self.hold / 2:
            self.rows = min(self.most, self.rows * 2)
        self.paused.append(self._pause(getattr(store, "wants", None), held))
        return out

    def _pause(self, wants: Any, held: float) -> float:
        """Leave the lock to the writers that need it; the seconds paused."""
        if wants is None or not wants.available:
            self.sleep(max(held, self.hold))
            return max(held, self.hold)
        self.unpaused += held
        t0 = self.timer()
        if self.unpaused >= PROBE_EVERY:
            self.sleep(PROBE)
        while wants.waiting() and self.timer() - t0 < MOST_PAUSE:
            self.sleep(STEP)
        paused = self.timer() - t0
        if paused > 0:
            self.unpaused = 0.0
        return paused
