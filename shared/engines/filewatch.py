"""Wake a process when one file is written: an inotify watch on the file's folder, filtered
to the file's name (a watch on the folder, not the file, also sees the file made again or made
for the first time). ``fileno()`` becomes readable on an event; ``drain()`` reads the events
and says whether one concerned the file. Where inotify is missing, ``available`` is False and
the caller polls.

Used by SQLite's WAL watch (every commit writes the WAL) and by PostgreSQL's relayed wake-ups
in pooled mode (the supervisor writes a file when a notification comes).
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


class FileWatch:
    """``fileno()`` becomes readable when ``path`` is written; ``drain()`` resets it."""

    def __init__(self, path: str) -> None:
        self.fd = -1
        self.name = os.path.basename(path)
        try:
            # The process's own symbols (libc among them), as shared.runtime.processes does:
            # ctypes.util.find_library runs ldconfig, 1-11 ms in every worker's start.
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        folder = os.path.dirname(os.path.abspath(path)).encode()
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
        """Read pending events; True if any concerned the file."""
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
