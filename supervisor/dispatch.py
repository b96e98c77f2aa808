"""What each signal asks of the supervisor (the handlers themselves only record it:
``shared.runtime.signals``; the arbiter's loop drains the record and calls :func:`dispatch`).

    SIGTERM, SIGINT   stop gracefully; a second one halts (kill every worker now)
    SIGHUP            reload jobq.toml
    SIGUSR1, SIGUSR2  pause, resume the queue
    SIGTTIN, SIGTTOU  one worker more, one fewer
    SIGCHLD           nothing here: it only wakes the loop, which reaps

SIGTSTP and SIGCONT keep their defaults (the terminal stops and continues the supervisor).
"""

from __future__ import annotations

import signal
from typing import Iterable, Protocol

HANDLED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTTIN,
    signal.SIGTTOU,
    signal.SIGCHLD,
)


class Controls(Protocol):
    """What a signal can ask of the supervisor (the arbiter implements it)."""

    @property
    def target(self) -> int: ...
    def stop(self, why: str) -> None: ...
    def set_paused(self, paused: bool) -> None: ...
    def reload(self, why: str) -> None: ...
    def scale(self, n: int, why: str) -> None: ...


def dispatch(signums: Iterable[int], to: Controls) -> None:
    """Act on the recorded signals, in the order they came."""
    for signum in signums:
        why = signal.Signals(signum).name
        if signum in (signal.SIGTERM, signal.SIGINT):
            to.stop(why)
        elif signum in (signal.SIGUSR1, signal.SIGUSR2):
            to.set_paused(signum == signal.SIGUSR1)
        elif signum == signal.SIGHUP:
            to.reload(why)
        elif signum == signal.SIGTTIN:
            to.scale(to.target + 1, why)
        elif signum == signal.SIGTTOU:
            to.scale(max(to.target - 1, 0), why)
