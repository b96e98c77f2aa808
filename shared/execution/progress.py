"""A worker's batch progress, in a small file its supervisor reads after the worker dies.

A worker may claim several jobs in one transaction. If it dies, the jobs it had not started yet
must go back without losing an attempt, and only the supervisor can do that. Before starting each
job the worker overwrites a fixed-size counter; at each claim it writes the batch's ids:

    line 1: the number of jobs of this batch started so far (zero-padded, fixed width), a
            space, and the number of jobs the worker completed before this batch (committed)
    lines 2..: the batch's job ids, in the order the worker runs them

The second count tells the supervisor whether a dead worker had run jobs (it is then replaced
at once, whatever killed it) or died without completing one (a crash loop: back off).

Writes are plain ``pwrite`` calls and, for the count, a shared mapping of it (no fsync): the file only has to survive the worker's death,
not the machine's.

Beside it, ``<progress>.stopped`` is created by a worker that has committed its last outcomes and
closed the database, just before it exits: a worker that said so and is still alive after
``kill_grace`` is stuck on its way out (a handler's thread, an exit hook) and its supervisor
kills it.
"""

from __future__ import annotations

import mmap
import os
from typing import Sequence

WIDTH = 8


class ProgressWriter:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.head: mmap.mmap | None = None  # the count, mapped once the file holds a batch

    def batch(self, job_ids: Sequence[str], completed: int = 0) -> None:
        """A new batch was claimed; none of it started yet; ``completed`` jobs ran before it."""
        data = (
            f"{0:0{WIDTH}d} {completed:0{WIDTH}d}\n" + "".join(f"{j}\n" for j in job_ids)
        ).encode()
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))
        if self.head is None:
            self.head = mmap.mmap(self.fd, WIDTH)  # the file never shrinks below the count again

    def started(self, count: int) -> None:
        """``count`` jobs of the batch have been started (the one starting now included). Once a
        batch was written, into a shared mapping of the count: no system call on every job's
        path, and the page cache, which a reader's ``read`` sees, holds it at once."""
        if self.head is None:
            os.pwrite(self.fd, b"%0*d" % (WIDTH, count), 0)
        else:
            self.head[:WIDTH] = b"%0*d" % (WIDTH, count)

    def close(self) -> None:
        if self.head is not None:
            self.head.close()
        os.close(self.fd)


def unstarted(path: str) -> list[str]:
    """Ids of the last batch that the worker never started ([] if unknown)."""
    ids, count = _read(path)
    return ids[count:]


def not_in_hand(path: str) -> list[str]:
    """Ids of the last batch except the job the worker was running (the last one started): the
    jobs its death is not to blame on. Those before it had returned (their outcomes may not have
    been committed yet), those after it never started. [] if unknown."""
    ids, count = _read(path)
    return ids[: count - 1] + ids[count:] if count >= 1 else ids


def _read(path: str) -> tuple[list[str], int]:
    """(the batch's ids, how many were started); ([], 0) if unknown."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return [], 0
    try:
        count = int(lines[0].split()[0])
    except (ValueError, IndexError):
        return [], 0
    return [line for line in lines[1:] if line], max(count, 0)


def counts(path: str) -> tuple[int, int]:
    """(jobs of the last batch started, jobs completed before it); (0, 0) if unknown."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
        return int(fields[0]), int(fields[1]) if len(fields) > 1 else 0
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        return 0, 0


STOPPED = ".stopped"


def mark_stopped(path: str) -> None:
    """(Worker.) Say that this worker is done with the database and is exiting now."""
    try:
        os.close(os.open(path + STOPPED, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError:
        pass  # the supervisor's folder is gone: the supervisor is too


def said_stopped(path: str) -> bool:
    """(Supervisor.) Has the worker of this progress file said it is exiting?"""
    return os.path.exists(path + STOPPED)


def clear_stopped(path: str) -> None:
    """(Supervisor, before starting a slot's worker.) Forget the last worker's word."""
    try:
        os.unlink(path + STOPPED)
    except FileNotFoundError:
        pass
