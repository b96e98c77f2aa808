"""The SQLite engine's health check (``shared.engines.health``): does the database path still
name the file this process opened?

A process keeps the file it opened even after the file is deleted, or replaced at the same path
(a restored backup, ``mv new.db jobq.db``): producers then write into the new file while the
supervisor and workers keep serving the old one, and nothing says so. Each long-running process
notes the file's identity (device and inode) when it opens the database and compares it with
``os.stat(path)`` now and then (the supervisor at each maintenance round, a worker in its idle
loop). A ``stat`` only: opening and closing the database file ourselves would drop SQLite's POSIX
locks on it.
"""

from __future__ import annotations

import os


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class DatabaseFile:
    """A :class:`shared.engines.health.HealthCheck`: the identity of the file ``path`` named at
    construction (just after the database was opened); ``problem()`` says, in a sentence naming
    the path, if it no longer does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.watched = path not in ("", ":memory:") and not path.startswith("file:")
        self.identity = _identity(path) if self.watched else None

    def problem(self) -> str | None:
        """None while ``path`` names the opened file (or nothing is watched), else what changed."""
        if self.identity is None:
            return None
        now = _identity(self.path)
        if now == self.identity:
            return None
        what = (
            "was deleted"
            if now is None
            else f"was replaced by another file (inode {self.identity[1]} -> {now[1]})"
        )
        return (
            f"database {self.path} {what} while this process had it open; "
            "it stops rather than serve a file nobody else sees: restart jobq on the right file"
        )
