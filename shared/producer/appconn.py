"""The application's own connection or session given as ``conn=`` (``JobQueue.enqueue``,
``enqueue_many``, ``get`` and their ``_async`` twins; a task's ``.using(conn=...)``), made into
what the store writes through, so that the job commits or rolls back with the application's
transaction.

Accepted, recognised by their type's module and their methods (nothing here imports
SQLAlchemy or a driver: an object is only ever SQLAlchemy's when SQLAlchemy made it):

- a driver connection of the queue's engine: ``sqlite3.Connection``, psycopg 3's
  ``Connection`` and ``AsyncConnection`` (used as they are);
- SQLAlchemy 2's ``Session`` (also a ``scoped_session``, Flask-SQLAlchemy's ``db.session``)
  and ``Connection``: the session's connection, its transaction begun if it was not, and that
  connection's DBAPI connection (``Connection.connection.dbapi_connection``);
- SQLAlchemy's ``AsyncSession`` and ``AsyncConnection`` (async calls only): on psycopg, its
  ``AsyncConnection`` (no thread, no greenlet); on another driver (aiosqlite), the sync call
  run inside ``AsyncConnection.run_sync`` on the DBAPI connection SQLAlchemy adapts.

psycopg2 and asyncpg connections are refused with a TypeError naming the fix (jobq's
PostgreSQL engine speaks psycopg 3: ``postgresql+psycopg://`` in SQLAlchemy's URL); so is an
async connection given to a sync call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PSYCOPG2 = (
    "conn= is a psycopg2 connection; jobq's PostgreSQL engine writes through psycopg 3: "
    "pip install 'psycopg[binary]' and open the application's connection with psycopg "
    "(SQLAlchemy: a postgresql+psycopg:// URL instead of postgresql:// or "
    "postgresql+psycopg2://)"
)
ASYNCPG = (
    "conn= is an asyncpg connection; jobq's PostgreSQL engine writes through psycopg 3: "
    "pip install 'psycopg[binary]' and use SQLAlchemy's postgresql+psycopg:// URL (psycopg's "
    "async driver) instead of postgresql+asyncpg://"
)


def _module(obj: Any) -> str:
    return type(obj).__module__ or ""


def _refused(obj: Any) -> str | None:
    """Why a driver connection cannot be written through, or None."""
    module = _module(obj)
    if module.startswith("psycopg2"):
        return PSYCOPG2
    if module.startswith("asyncpg") or "asyncpg" in type(obj).__name__.lower():
        return ASYNCPG
    return None


def _is_sqlalchemy(obj: Any) -> bool:
    """Made by SQLAlchemy (or a subclass of one of its classes: Flask-SQLAlchemy's session)."""
    return any((c.__module__ or "").startswith("sqlalchemy.") for c in type(obj).__mro__)


def _is_async(obj: Any) -> bool:
    """An asyncio connection or session (SQLAlchemy's or psycopg's)."""
    if _is_sqlalchemy(obj):
        return hasattr(obj, "run_sync")
    return _module(obj).startswith("psycopg") and type(obj).__name__ == "AsyncConnection"


def sync_conn(conn: Any) -> Any:
    """The driver connection a sync call writes through for ``conn`` (None: the store's own).
    TypeError naming the fix for an object it cannot write through."""
    if conn is None:
        return None
    if _is_async(conn):
        raise TypeError(
            f"conn= is an asyncio connection ({type(conn).__name__}): pass it to the async "
            "call instead (await queue.enqueue_async(..., conn=...), "
            "await task.using(conn=...).enqueue_async(...))"
        )
    if _is_sqlalchemy(conn):
        conn = _dbapi(conn)
    why = _refused(conn)
    if why is not None:
        raise TypeError(why)
    return conn


def _dbapi(conn: Any) -> Any:
    """The DBAPI connection under a SQLAlchemy ``Session`` or ``Connection``, in a transaction
    that SQLAlchemy commits or rolls back (begun here if it was not: SQLAlchemy's own
    commit would otherwise find nothing to commit, and the pool would roll the job back)."""
    if not hasattr(conn, "in_transaction") or not hasattr(conn, "dialect"):
        conn = conn.connection()  # a Session (or scoped_session): its connection, begun
    if not conn.in_transaction():
        conn.begin()
    return conn.connection.dbapi_connection


@dataclass(frozen=True)
class AsyncTarget:
    """How an async call writes through an application's connection: ``native`` (a psycopg
    ``AsyncConnection``: the engine's asyncio calls), ``greenlet`` (a SQLAlchemy
    ``AsyncConnection`` whose ``run_sync`` runs the sync call) or ``sync`` (a sync driver
    connection, written through in the calling thread)."""

    how: str
    driver: Any  # what is written through: see how


async def async_target(conn: Any) -> AsyncTarget:
    """The :class:`AsyncTarget` of ``conn`` for an async call (see the module's docstring)."""
    if not _is_async(conn):
        return AsyncTarget("sync", sync_conn(conn))
    if not _is_sqlalchemy(conn):
        return AsyncTarget("native", conn)
    aconn = conn if hasattr(conn, "sync_connection") else await conn.connection()
    if not aconn.in_transaction():
        await aconn.begin()
    raw = await aconn.get_raw_connection()
    driver = raw.driver_connection
    why = _refused(driver)
    if why is not None:
        raise TypeError(why)
    if _is_async(driver):
        return AsyncTarget("native", driver)
    return AsyncTarget("greenlet", aconn)
