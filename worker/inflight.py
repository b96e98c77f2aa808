"""The async runner's jobs in the worker's progress file (``shared.progress``), for the
supervisor to read if the worker dies.

The file lists a batch and how many of it were started; the supervisor charges an attempt only
to the last one started (the job in hand), and gives the rest back with theirs. The async runner
has no job in hand: many are in flight at once, none to blame for a death. So the file lists
them all with none started (a death charges none of them: they go back as they were), except
while the loop is blocked: then the blocking job is listed last and counted started, and a kill
for the block (its timeout plus ``kill_grace``) charges that job only.

Written from the runner's database thread (at each claim) and the loop watch's thread (a block),
under one lock.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable

from shared.progress import ProgressWriter


class InflightProgress:
    """``ids()``: the runner's jobs now (in flight, or their outcome not committed);
    ``completed()``: the jobs the worker completed so far."""

    def __init__(self, writer: ProgressWriter | None, ids: Callable[[], Iterable[str]],
                 completed: Callable[[], int]) -> None:
        self.writer = writer
        self.ids = ids
        self.completed = completed
        self.lock = threading.Lock()
        self.blamed: str | None = None

    def claimed(self) -> None:
        """Jobs were claimed (or the block ended): list every job held, none to blame, unless
        the blocked one is still held."""
        self._write(self.blamed)

    def blame(self, job_id: str) -> None:
        """``job_id`` blocks the loop: a death now is its doing."""
        self._write(job_id)

    def unblamed(self) -> None:
        """The block ended."""
        self.blamed = None
        self._write(None)

    def _write(self, blamed: str | None) -> None:
        if self.writer is None:
            return
        with self.lock:
            ids = [i for i in self.ids() if i != blamed]
            self.blamed = blamed
            if blamed is not None:
                ids.append(blamed)
            self.writer.batch(ids, completed=self.completed())
            if blamed is not None:
                self.writer.started(len(ids))
