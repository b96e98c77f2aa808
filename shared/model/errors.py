"""jobq's own store errors: what every engine raises, and what supervisor, worker and ops catch.

An engine turns its driver's exceptions (``sqlite3.Error``, a PostgreSQL driver's errors) into
these, with the database (file or server) and the cause in the message, and the driver's
exception chained as ``__cause__``. Code outside the engines never names a driver's exceptions.

Two kinds, apart, so that a caller can tell waiting from fixing:

- ``StoreUnavailable`` (and its ``StoreBusy``): the database cannot be reached or used now (a
  lost connection, a server restarting, a full disk, a file that is missing, locked or not a
  database). Trying again later may work: an application may retry on it.
- ``StoreQueryError``: a statement failed on a connection that works (a table its search path
  does not find, a constraint, a value or a privilege the database refuses). Waiting does not
  heal it: the same call fails the same way, so retrying on outages must not catch it.
"""

from __future__ import annotations


class StoreError(RuntimeError):
    """A store call failed; the message names the file or server and the cause."""

    def __init__(
        self, message: str, *, database: str = "", cause: BaseException | None = None
    ) -> None:
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


class StoreQueryError(StoreError):
    """A statement failed on a working connection: the SQL, the data it was given or the
    schema it met is wrong for it (not an outage: trying again fails the same way). On
    PostgreSQL a failed statement fails the transaction it ran in: through ``conn=``, the
    application's."""
