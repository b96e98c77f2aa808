"""What the processes of one host tell each other about a relay (:mod:`.relay`) without a word:
read locks on bytes of one small file beside the relay's file, tested with ``F_GETLK``.

- byte :data:`RELAY`: held by a supervisor whose relay listens for this schema. A direct-mode
  worker then waits for the relay's file instead of listening on its own connection.
- byte :data:`IDLE`: held by an idle lead of this host. A relay whose host holds none on its
  turn passes the turn on (:mod:`.turns`): nobody here would claim the job soon.

Read locks never exclude each other (several pools' leads, or two supervisors on one host, hold
one at once); a test asks whether a write lock would conflict, which takes nothing. A process's
own locks never conflict with its own test, so each side only tests the byte the other holds.
POSIX record locks end when the process closes any descriptor of the file: each process opens
it once. Where locks fail (no such file system), a test answers ``unknown``: the callers then
act as if no relay listens and every host were idle (the old behaviour).
"""

from __future__ import annotations

import fcntl
import os
import struct

RELAY = 0
IDLE = 1
_FLOCK = "hhqqi4x"  # struct flock on Linux: type, whence, start, len, pid (and padding)


class Marks:
    """This process's handle on the marks file at ``path`` (made if need be)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.held: set[int] = set()
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            self.fd = -1

    def hold(self, byte: int) -> None:
        """Hold a read lock on ``byte`` (idempotent; never waits: nobody takes write locks)."""
        if self.fd < 0 or byte in self.held:
            return
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, byte)
        except OSError:
            return
        self.held.add(byte)

    def release(self, byte: int) -> None:
        if self.fd >= 0 and byte in self.held:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, byte)
            self.held.discard(byte)

    def elsewhere(self, byte: int) -> bool | None:
        """Whether another process holds ``byte`` (None: unknown, locks unavailable)."""
        if self.fd < 0:
            return None
        ask = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
        try:
            got = fcntl.fcntl(self.fd, fcntl.F_GETLK, ask)
        except OSError:
            return None
        return struct.unpack(_FLOCK, got)[0] != fcntl.F_UNLCK

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # (ends every lock of ours on the file)
            self.fd = -1
            self.held.clear()
