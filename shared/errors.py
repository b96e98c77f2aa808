"""jobq's own store errors: what every engine raises, and what supervisor, worker and ops catch.

An engine turns its driver's exceptions (``sqlite3.Error``, a PostgreSQL driver's errors) into
these, with the database (file or server) and the cause in the message, and the driver's
exception chained as ``__cause__``. Code outside the engines never names a driver's exceptions.
"""
from __future__ import annotations


class StoreError(RuntimeError):
    """The database cannot be used; the message names the file or server and the cause."""

    def __init__(self, message: str, *, database: str = "", cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.database = database
        self.cause = cause


class StoreUnavailable(StoreError):
    """The database cannot be opened, read or written (missing, read-only, full, corrupt,
    not reachable, or an engine that is not available)."""


class StoreRefused(StoreUnavailable):
    """The database cannot be used and waiting will not change that: a malformed URL, refused
    authentication, a role or database that does not exist, a schema newer than this code, an
    unknown engine or a missing driver; for a file, anything but its lock (a missing folder, a
    read-only file, a file that is not a database). Every other ``StoreUnavailable`` (a server
    restarting or out of reach, a dropped connection, a lock held) may heal by waiting: the
    supervisor's boot retries those and ends on this one."""


class StoreBusy(StoreUnavailable):
    """The database stayed locked by other connections past every wait and retry."""
