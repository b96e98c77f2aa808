"""The async runner's jobs in the worker's progress file (``shared.execution.progress``), for the
supervisor to read if the worker dies.

The file lists a batch and how many of it were started; the supervisor charges an attempt to
every running job of the dead worker except those the file says it is not to blame for (the
batch's jobs other than the last one started). The async runner's jobs have all started, and a
death while they run (a crash, an ``os._exit`` in a handler, an out-of-memory kill) cannot be
pinned on one of them: so the file lists none, and every job in flight is charged, as a
one-at-a-time job would be (a job that kills its worker every time fails once its attempts are
used up, rather than coming back forever). Except while the loop is blocked: then the file lists
every job held with the blocking one last and started, and a kill for the block (its timeout
plus ``kill_grace``) charges that job only; the others go back with their attempts. The same
while a job runs on a second after its task was cancelled for a cancel request
(``worker.aiocancel``): a kill at ``cancel_grace`` is its doing (it ends ``cancelled``).

Written from the loop thread (after each commit: the count of jobs completed, which tells the
supervisor the worker was not crash-looping) and the loop watch's thread (a block), under one
lock.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from shared.execution.progress import ProgressWriter


class InflightProgress:
    """``ids()``: the runner's jobs now (in flight, or their outcome not committed);
    ``completed()``: the jobs the worker completed so far."""

    def __init__(
        self,
        writer: ProgressWriter | None,
        ids: Callable[[], Iterable[str]],
        completed: Callable[[], int],
    ) -> None:
        self.writer = writer
        self.ids = ids
        self.completed = completed
        self.lock = threading.Lock()
        self.blamed: str | None = None  # the job that blocks the loop
        self.defiant: str | None = None  # the job that runs on after its task was cancelled

    def committed(self) -> None:
        """Outcomes were committed (or the runner starts): the count of completed jobs, and
        none to spare, unless the loop is still blocked or a cancelled job runs on."""
        self._write()

    def blame(self, job_id: str | None) -> None:
        """``job_id`` blocks the loop: a death now is its doing (None: the block ended)."""
        self._write(blamed=job_id)

    def defied(self, job_id: str | None) -> None:
        """``job_id`` runs on after its cancel: a kill now is its doing (None: it ended)."""
        self._write(defiant=job_id)

    def _write(self, **culprit: str | None) -> None:
        if self.writer is None:
            return
        with self.lock:
            for name, job_id in culprit.items():
                setattr(self, name, job_id)
            blamed = self.blamed or self.defiant
            ids = [] if blamed is None else [*(i for i in self.ids() if i != blamed), blamed]
            self.writer.batch(ids, completed=self.completed())
            if ids:
                self.writer.started(len(ids))
