"""A supervisor's word to its busy workers that a control came (a cancel of a running job):
a file beside the workers' config snapshot, ``controls``.

The supervisor listens for controls (``supervisor.controls``, where its engine notifies them).
While it listens the file exists, and at each control it is replaced (a new inode); a busy
worker's check-in (``worker.checkin``) then reads its cancel requests only when the file changed,
or every ``[supervisor] control_poll_interval`` as a backstop, instead of a few times a second.
No file (no supervisor, an engine without notifications, a listening connection that is down):
the worker reads at every check-in, as it always did. A ``stat`` per check-in, no database.
"""

from __future__ import annotations

import os
from typing import Callable

NAME = "controls"


def control_path(folder: str) -> str:
    """The file in the supervisor's folder ``folder`` (the config snapshot's)."""
    return os.path.join(folder, NAME)


def poke(folder: str) -> None:
    """(The supervisor.) Write the file anew: a new inode, which every reader tells apart."""
    path = control_path(folder)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.close(fd)
    os.replace(tmp, path)


def withdraw(folder: str) -> None:
    """(The supervisor.) It no longer listens: its workers read at every check-in again."""
    try:
        os.unlink(control_path(folder))
    except FileNotFoundError:
        pass


class ControlMark:
    """(A worker.) Whether to read the cancel requests now (:meth:`look`): the file ``path``
    changed since the last look, or ``every()`` seconds passed, or there is no file (or no
    ``path``: a worker without a supervisor)."""

    def __init__(self, path: str | None, every: Callable[[], float]) -> None:
        self.path = path
        self.every = every
        self.seen: tuple[int, int] | None = None
        self.next_at = 0.0

    def look(self, now: float) -> bool:
        """``now``: monotonic seconds."""
        if self.path is None:
            return True
        try:
            st = os.stat(self.path)
        except OSError:  # no supervisor listens for controls: every check-in reads
            self.seen = None
            return True
        mark = (st.st_ino, st.st_mtime_ns)
        if mark == self.seen and now < self.next_at:
            return False
        self.seen, self.next_at = mark, now + self.every()
        return True
