"""Signal recording with a self-pipe.

The handlers installed here do nothing; ``signal.set_wakeup_fd`` makes the interpreter write each
signal's number into a pipe. The owner's loop waits on that pipe (``wait``) and reads the numbers
(``drain``) when it is ready to act, so no work ever happens inside a signal handler.
"""

from __future__ import annotations

import os
import select
import signal
from typing import Iterable


class SignalQueue:
    def __init__(self, signals: Iterable[int]) -> None:
        self.signals = tuple(signals)
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._previous: dict[int, object] = {}
        self._old_fd = -1
        self.installed = False
        self.pending = True  # something may be in the pipe: ``drain`` reads it only then
        self._identity = self._pipe_identity()

    def install(self) -> "SignalQueue":
        """Install the handlers (main thread only)."""
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for s in self.signals:
            self._previous[s] = signal.signal(s, self._record)
        # A process started with these blocked (a worker forked by the template, so a signal
        # before this point is not lost nor fatal) receives them from now on.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.signals)
        self.installed = True
        return self

    def _record(self, signum: int, frame: object) -> None:
        """The handler: the wakeup fd has recorded ``signum``; note that the pipe needs reading
        (so that ``drain``, called between every two jobs, costs no system call otherwise)."""
        self.pending = True

    def uninstall(self) -> None:
        if not self.installed:
            return
        for s, h in self._previous.items():
            signal.signal(s, h)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._old_fd)
        self.installed = False

    def close(self) -> None:
        self.uninstall()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _pipe_identity(self) -> tuple[int, int]:
        st = os.fstat(self._r)  # both ends of a pipe share its inode
        return st.st_ino, st.st_dev

    def intact(self, both: bool = True) -> bool:
        """Are both ends of the pipe still open, and still this pipe? False once something
        closed them (a handler's ``os.closerange``), even if their numbers were reused since:
        the pipe then stands for every descriptor its owner opened. ``both=False`` looks at the
        read end only (one ``fstat``: this is on every job's path, and a ``closerange`` over
        the pipe closes both ends)."""
        ino, dev = self._identity
        try:
            st = os.fstat(self._r)
            if st.st_ino != ino or st.st_dev != dev:
                return False
            if not both:
                return True
            st = os.fstat(self._w)
            return st.st_ino == ino and st.st_dev == dev
        except OSError:
            return False

    @property
    def fileno(self) -> int:
        return self._r

    def wake(self) -> None:
        """Wake a waiter from another thread (writes a 0 byte, which ``drain`` skips)."""
        self.pending = True
        try:
            os.write(self._w, b"\0")
        except (BlockingIOError, OSError):
            pass

    def wait(self, timeout: float | None, extra: Iterable[int] = ()) -> list[int]:
        """Block until a signal, a ``wake`` or a readable ``extra`` fd, or ``timeout`` seconds.
        Returns the ready fds."""
        fds = [self._r, *extra]
        try:
            ready, _, _ = select.select(fds, [], [], None if timeout is None else max(timeout, 0.0))
        except InterruptedError:
            ready = [self._r]
        if self._r in ready:
            self.pending = True  # e.g. a byte written before install(): read it at the next drain
        return ready

    def drain(self) -> list[int]:
        """The signals received since the last drain, in order."""
        if not self.pending:
            return []
        self.pending = False
        out: list[int] = []
        while True:
            try:
                data = os.read(self._r, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            out.extend(b for b in data if b)
        return out
