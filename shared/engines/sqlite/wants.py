"""Who wants the write lock: a signal from jobq's writers to a bulk write.

SQLite does not tell a connection that another one waits for its lock (a waiter sleeps in its
own busy handler), so a bulk write that paused after every chunk "in case" ran at half speed,
and far slower on a loaded machine, where each pause stretches. Instead every jobq write on the
database stamps two times in a small shared file next to it (``<database>-wants``, mapped in
memory, written without a system call): when it began asking for the lock (``want``) and when
it was done (``done``), in its connection's own slot (SLOTS slots, picked by thread id,
so two waiters rarely share one). A bulk write (``bulk.Pacer``) then runs chunk after chunk
while no slot shows a write that began and has not ended, and pauses, until the writers are
through, only when one does. Times are ``time.monotonic()``: one clock for every process of
the host.

The file is opened with the connection and closed with it (nothing crosses ``fork()``). Where it
cannot be made (a read-only folder) there is no signal: writers stamp nothing and a bulk write
paces itself blindly (see ``bulk``). Racing stamps are harmless: a lost one delays a pause by one
chunk, or a stale one (a writer killed while waiting) makes a bulk write's pauses run to their
cap until that slot's next write.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time

SUFFIX = "-wants"
SLOTS = 256
_STAMP = struct.Struct("d")
_ALL = struct.Struct(f"{2 * SLOTS}d")  # per slot: want, done


class Wants:
    """The shared stamps of one database file (``path``); inert if the file cannot be made
    (or ``path`` is None: an in-memory database)."""

    def __init__(self, path: str | None) -> None:
        self.map: mmap.mmap | None = None
        # This connection's slot, by its thread's kernel id: the processes and threads of one
        # host's jobq were mostly started close together, and ids are handed out in turn, so
        # they seldom meet modulo SLOTS (a random hash would pair two of 25 connections 2 times in 3).
        self.at = 16 * (threading.get_native_id() % SLOTS)
        if path is None:
            return
        try:
            fd = os.open(path + SUFFIX, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size < _ALL.size:
                os.ftruncate(fd, _ALL.size)
            self.map = mmap.mmap(fd, _ALL.size)
        except (OSError, ValueError):
            self.map = None
        finally:
            os.close(fd)

    def want(self) -> None:
        """A write begins asking for the lock."""
        if self.map is not None:
            _STAMP.pack_into(self.map, self.at, time.monotonic())

    def done(self) -> None:
        """A write ended (committed, rolled back or given up)."""
        if self.map is not None:
            _STAMP.pack_into(self.map, self.at + 8, time.monotonic())

    def waiting(self) -> bool:
        """Has a write begun asking for the lock and not ended, in any slot? (False without the file)"""
        if self.map is None:
            return False
        stamps = _ALL.unpack_from(self.map, 0)
        return any(want > done for want, done in zip(stamps[0::2], stamps[1::2]))

    @property
    def available(self) -> bool:
        return self.map is not None

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
