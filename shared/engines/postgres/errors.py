"""psycopg's errors as jobq's own (:mod:`shared.model.errors`), for the PostgreSQL store.

- An error of the connection (lost, cut by the client-side bound, a server shutting down, a
  resource it ran out of: psycopg's ``OperationalError`` and ``InterfaceError``, or a call on a
  connection found broken) is ``StoreUnavailable``; a lock or statement timeout ``StoreBusy``.
- An error of the statement on a working connection (a relation its search path does not find,
  a constraint, a value or privilege the server refuses: psycopg's other ``DatabaseError``
  kinds) is ``StoreQueryError``: not an outage, which a caller retrying on outages would loop
  on. Data corruption the server reports (SQLSTATE class XX) stays an outage.
- Opening a store (:func:`error_for`, its own connection and schema) reports everything as
  ``StoreUnavailable``: the database cannot be used, whatever the reason.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import psycopg
from psycopg import errors as pg_errors

from shared.engines.location import scrub
from shared.model.errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
from ..guard import guard_public_methods

T = TypeVar("T")
LOST = (psycopg.OperationalError, psycopg.InterfaceError)


def error_for(location: str, exc: BaseException, url: str = "") -> StoreError:
    """jobq's error for a psycopg error on the server ``location`` while opening a store or
    without a working connection; with ``url``, any secret of that URL the driver's message
    quotes is hidden."""
    kind = (
        StoreBusy
        if isinstance(exc, (pg_errors.LockNotAvailable, pg_errors.QueryCanceled))
        else StoreUnavailable
    )
    return kind(
        f"database {location}: {scrub(_explain(exc), url) if url else _explain(exc)}",
        database=location,
        cause=exc,
    )


def call_error(location: str, exc: BaseException, lost: bool) -> StoreError:
    """jobq's error for a psycopg error of a store call; ``lost``: the connection it ran on is
    gone (then it is an outage, whatever the error)."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if (
        lost
        or isinstance(exc, LOST)
        or not isinstance(exc, psycopg.Error)
        or sqlstate.startswith("XX")
    ):
        return error_for(location, exc)
    return StoreQueryError(f"database {location}: {_explain(exc)}", database=location, cause=exc)


def _explain(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return f"{msg} (the user needs CREATE on the database, or USAGE on jobq's schema)"
    return msg


def translate_errors(cls: type) -> type:
    """Class decorator: every public method of ``cls`` (and its bases) raises jobq's errors
    instead of psycopg's; a lost connection is dropped, to be made again by the next call."""
    return guard_public_methods(cls, _guarded)


def _guarded(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            with self.lock, self._bounded():
                return fn(self, *args, **kwargs)
        except psycopg.Error as exc:
            broken = self._conn is not None and self._conn.broken
            if isinstance(exc, LOST) or broken:
                with self.lock:
                    self._drop()
            if self.severed:
                cut = (
                    f"no answer within {self.call_limit:g} s (call cut; the next one connects "
                    "again)"
                )
                raise StoreUnavailable(
                    f"database {self.location}: {cut}", database=self.location, cause=exc
                ) from exc
            raise call_error(self.location, exc, broken) from exc

    return method
