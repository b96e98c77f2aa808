"""The engine health check: is the database still the one this process opened?

A long-running process (the supervisor, a worker) keeps the database it opened. An engine whose
database can be swapped under it without it noticing (SQLite: the file deleted, or replaced at
the same path by a restored backup) gives a :class:`HealthCheck` (``shared.engines.health_check``);
the process asks it now and then and, on a problem, says so and stops rather than serve a
database nobody else sees. An engine with nothing to check (PostgreSQL: the server is the
database; a lost connection is reconnected) gives none.
"""

from __future__ import annotations

from typing import Protocol


class HealthCheck(Protocol):
    """Made just after the database was opened; cheap enough to ask every loop round."""

    def problem(self) -> str | None:
        """None while the database is the one opened, else a sentence saying what changed
        (naming where the database is, never a password) and that the process stops."""
        ...
