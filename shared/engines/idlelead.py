"""Of the idle workers on one database, one at a time (the lead) waits for new work.

Used by both engines' wake-ups (SQLite: the WAL watch; PostgreSQL: LISTEN), with a lock file
beside the database file or, for a server, one file per server and database in this host's
temporary folder, in which each queue (schema) locks a byte of its own (``slot``), so the files
left there do not grow with the schemas ever used. The SQLite story:
every commit wakes every process that watches the WAL. With eight idle workers all eight then
queued for SQLite's write lock to claim the one new job, and the losers slept in SQLite's busy
handler (1, 2, 5, 10 ms...), pushing the p99 of an idle job's start past 10 ms at
``synchronous = "full"``. So idle workers elect a lead with a lock on ``<database>-lead``:

- the lead waits on the WAL watch and on the next delayed job's time, as every idle worker did;
- a follower's helper thread blocks in ``lockf``, so the kernel queues the followers and wakes
  one when the lead unlocks; the thread then writes to a pipe the worker's idle wait watches;
- a lead that claims a job resigns (unlocks); the next lead claims at once, so jobs that came
  during the hand-over, or behind the last lead's job, are not left waiting;
- a lead that dies releases the lock with its process.

The lock is a POSIX record lock (``fcntl.lockf``: ``F_SETLK``/``F_SETLKW``), owned by the
process, not a ``flock`` (or an OFD lock), which belongs to the open file description: a handler
that forks without exec (``multiprocessing``'s fork start, a C library's daemon) shares that
description, so a ``flock`` stayed held by the child for as long as it lived after the lead died,
and every job then waited for a follower's ``WATCHED_SLEEP``. A record lock is never
inherited by ``fork`` and ends with its process, whatever its children do. The costs, none of
which matters here: two leads in one process do not exclude each other (both lead, as where
locks are refused), and closing any descriptor of the file in the process drops the lock (only
this class opens it).

This only decides who waits. It never gates SQLite: claims, heartbeats, the supervisor and
producers never touch this lock, so nothing can wedge on it. Where the file cannot be opened (a
read-only folder) or locks are refused, every idle worker leads, as before.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading

FREE, WAITING, HELD = "free", "waiting", "held"


class IdleLead:
    """``take()`` leads if it can (else queues for the lead); ``fileno()`` becomes readable when
    a queued ``take()`` may now succeed; ``resign()`` hands the lead on."""

    def __init__(self, database: str, slot: int = 0) -> None:
        self.path = database + "-lead"  # beside the database file (or a server's stand-in)
        self.slot = slot  # the byte of the file locked: queues sharing one file lock their own
        self.state = FREE
        self.cancelled = False  # resigned while queued: the helper gives the lock straight back
        self.closed = False
        self.blocking = False  # the helper is inside lockf(): it owns the file until it returns
        self.mutex = threading.Lock()
        self.wanted = threading.Event()
        self.thread: threading.Thread | None = None
        self.r = self.w = -1
        self.fd = -1
        if database in ("", ":memory:"):
            return  # nothing on disk to share: nothing to lead
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)

    @property
    def available(self) -> bool:
        return self.fd >= 0

    @property
    def held(self) -> bool:
        return self.state == HELD

    def fileno(self) -> int:
        return self.r

    def take(self) -> bool:
        """True if this worker leads (always, where unavailable). Otherwise the helper thread
        queues for the lock, and ``fileno()`` becomes readable once it has it."""
        if not self.available:
            return True
        self._read_pipe()
        with self.mutex:
            if self.state == HELD:
                return True
            self.cancelled = False
            if self.state == WAITING:
                return False
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.slot)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    os.close(self.fd)  # locks refused here (a network file system): everyone leads
                    self.fd = -1
                    return True
                self.state = WAITING
                self._start_helper()
                self.wanted.set()
                return False
            self.state = HELD
            return True

    def resign(self) -> None:
        """Hand the lead on; a queued request is cancelled. A no-op when neither."""
        with self.mutex:
            if self.state == HELD:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.slot)
                self.state = FREE
            elif self.state == WAITING:
                self.cancelled = True

    def close(self) -> None:
        """Release the lead. A helper still queued in ``lockf`` closes the file once it gets it."""
        with self.mutex:
            self.closed = True
            if self.fd >= 0 and not self.blocking:
                os.close(self.fd)
            self.fd = -1
            for fd in (self.r, self.w):
                if fd >= 0:
                    os.close(fd)
            self.r = self.w = -1
            self.wanted.set()

    # -- the helper thread ---------------------------------------------------------------------

    def _start_helper(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._queue, name="jobq-lead", daemon=True)
            self.thread.start()

    def _queue(self) -> None:
        """Block in ``lockf`` whenever the worker queues; report the lock through the pipe, or
        give it straight back if the worker resigned or closed meanwhile. If the wait fails
        (``EDEADLK``, ``ENOLCK``) this worker leads without the lock, as where locks are refused."""
        while True:
            self.wanted.wait()
            self.wanted.clear()
            with self.mutex:
                if self.closed:
                    return
                fd, self.blocking = self.fd, True
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX, 1, self.slot)
            except OSError:
                pass
            with self.mutex:
                self.blocking = False
                if self.closed:
                    os.close(fd)
                    return
                if self.cancelled:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, self.slot)
                    self.state, self.cancelled = FREE, False
                    continue
                self.state = HELD
                os.write(self.w, b"\0")

    def _read_pipe(self) -> None:
        try:
            while os.read(self.r, 64):
                pass
        except (BlockingIOError, OSError):
            pass
