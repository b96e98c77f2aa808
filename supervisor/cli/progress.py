"""The progress line of a long command (``copy``, ``purge``, ``retry --failed``, ``cancel``
of many jobs): rows done, the rate, and the time left when the total is known, on stderr, one
line drawn after the first chunk and rewritten in place at most every ``EVERY`` seconds, erased
at the end so the command's result stands alone.

Shown only to a person: on a terminal (stderr is a tty) and without ``--json``; piped or
redirected, nothing extra is written. The caller counts the total only when :attr:`shown`.
"""

from __future__ import annotations

import time
from typing import Any, Callable

EVERY = 0.5  # seconds between two redraws of the line


def wanted(ctx: Any) -> bool:
    """Would a progress line be shown for this command (a terminal, no ``--json``)?"""
    isatty = getattr(ctx.err, "isatty", None)
    return not ctx.json and bool(isatty and isatty())


class Progress:
    """``update(done)`` after each chunk; ``close()`` (or ``with``) at the end.

    ``what`` names the command (``jobq purge``), ``unit`` what it counts (``jobs deleted``);
    ``total`` (None: unknown) gives the percentage and the time left. ``clock`` is injected
    (``time.monotonic``) so tests can give the times."""

    def __init__(
        self,
        ctx: Any,
        what: str,
        unit: str,
        total: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        every: float = EVERY,
    ) -> None:
        self.ctx, self.what, self.unit, self.total = ctx, what, unit, total
        self.clock, self.every = clock, every
        self.shown = wanted(ctx)
        self.start = clock()
        self.said = float("-inf")  # the first chunk draws the line at once
        self.drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, done: int, detail: str = "") -> None:
        """``done`` rows so far (``detail``: more to show after them, e.g. a last id)."""
        now = self.clock()
        if not self.shown or now - self.said < self.every:
            return
        self.said = now
        self.ctx.err.write("\r" + self.line(done, now - self.start, detail) + "\x1b[K")
        self.ctx.err.flush()
        self.drawn = True

    def line(self, done: int, took: float, detail: str = "") -> str:
        """``jobq purge: 120000 of 500000 jobs deleted (24%), 12000/s, 32 s left``."""
        rate = done / took if took > 0 else 0.0
        text = f"{self.what}: {done}"
        if self.total:
            text += f" of {self.total} {self.unit} ({min(100, 100 * done // self.total)}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate:.0f}/s"
        if self.total and rate > 0:
            text += f", {_span(max(0, self.total - done) / rate)} left"
        return text + (f", {detail}" if detail else "")

    def close(self) -> None:
        """Erase the line, if one was drawn."""
        if self.drawn:
            self.ctx.err.write("\r\x1b[K")
            self.ctx.err.flush()
            self.drawn = False


def _span(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
