"""Which of the server's refusals no wait heals: a supervisor's boot retries the others
(:class:`shared.errors.StoreRefused`, and ``supervisor.boot``).

Opening a store fails for reasons of two kinds. A server restarting, failing over, out of reach
or ending our session (``57P01``, ``57P03``, a refused or reset TCP connection, too many clients)
heals by itself; a wrong password, a role or database that does not exist, or a missing
privilege needs a person. psycopg gives no SQLSTATE for what the server says while a connection
is being made, so those are known by libpq's and the server's words (in English, as the server's
``lc_messages`` defaults).
"""

from __future__ import annotations

import re

from shared.model.errors import StoreRefused, StoreUnavailable

# authentication (class 28), no such database, no privilege (CREATE on the database: migrating)
_LASTING_STATES = ("28", "3D000", "42501")
_LASTING_AT_CONNECT = re.compile(
    r"authentication failed|no pg_hba\.conf entry|role \S+ does not exist|"
    r"database \S+ does not exist|permission denied for database|no password supplied|"
    r"password is required|SSL was required|does not support SSL",
    re.IGNORECASE,
)


def lasting(exc: BaseException | None) -> bool:
    """Whether the driver's error ``exc`` is a refusal that waiting will not change (also a
    URL that does not parse: psycopg's ``ProgrammingError`` while connecting)."""
    if exc is None:
        return False
    import psycopg  # here: this package imports without it (a store failed: it is there)

    if isinstance(exc, psycopg.ProgrammingError) and not getattr(exc, "sqlstate", None):
        return True
    state = getattr(exc, "sqlstate", None)
    if state:
        return str(state).startswith(_LASTING_STATES)
    return bool(_LASTING_AT_CONNECT.search(str(exc)))


def refused(exc: StoreUnavailable) -> StoreUnavailable:
    """``exc`` as a :class:`StoreRefused` (same message and cause) when its cause is lasting."""
    if isinstance(exc, StoreRefused) or not lasting(exc.cause or exc.__cause__):
        return exc
    return StoreRefused(str(exc), database=exc.database, cause=exc.cause or exc.__cause__)
