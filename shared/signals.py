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


def _record(signum: int, frame: object) -> None:
    """Installed as the handler; the wakeup fd has already recorded ``signum``."""


class SignalQueue:
    def __init__(self, signals: Iterable[int]) -> None:
        self.signals = tuple(signals)
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._previous: dict[int, object] = {}
        self._old_fd = -1
        self.installed = False

    def install(self) -> "SignalQueue":
        """Install the handlers (main thread only)."""
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for s in self.signals:
            self._previous[s] = signal.signal(s, _record)
        self.installed = True
        return self

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

    @property
    def fileno(self) -> int:
        return self._r

    def wake(self) -> None:
        """Wake a waiter from another thread (writes a 0 byte, which ``drain`` skips)."""
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
            return [self._r]
        return ready

    def drain(self) -> list[int]:
        """The signals received since the last drain, in order."""
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
