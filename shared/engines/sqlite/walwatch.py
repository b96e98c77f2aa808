"""Wake an idle worker when the database changes, instead of polling fast.

Every commit appends frames to the WAL file, so an inotify watch on the database's folder,
filtered to the ``-wal`` file, fires for every commit by any process: enqueues through
``JobQueue``, transactional enqueues through an application's own connection, and retries all
wake the worker. The event comes as the frames are written, before the commit completes: a
woken worker claims (which waits for the write lock, so it sees the commit) rather than reads.
Where inotify is missing the worker falls back to polling every ``poll_interval``. Only the idle
lead waits on this watch (:mod:`.lead`, :mod:`.wakeup`).
"""

from __future__ import annotations

import ctypes
import os
import struct

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


class WalWatch:
    """``fileno()`` becomes readable when the database's WAL is written; ``drain()`` resets it."""

    def __init__(self, database: str) -> None:
        self.fd = -1
        self.name = os.path.basename(database) + "-wal"
        try:
            # The process's own symbols (libc among them), as shared.runtime.processes does:
            # ctypes.util.find_library runs ldconfig, 1-11 ms in every worker's start.
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        folder = os.path.dirname(os.path.abspath(database)).encode()
        if libc.inotify_add_watch(fd, folder, IN_MODIFY | IN_CREATE) < 0:
            os.close(fd)
            return
        self.fd = fd

    @property
    def available(self) -> bool:
        return self.fd >= 0

    def fileno(self) -> int:
        return self.fd

    def drain(self) -> bool:
        """Read pending events; True if any concerned the WAL."""
        hit = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, OSError):
                return hit
            if not data:
                return hit
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, _, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                hit = hit or name.decode(errors="replace") == self.name
                offset += _EVENT.size + length

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
