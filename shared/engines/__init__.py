"""The engine factory: the one place that imports an engine module.

``open_store(config)`` reads the config's ``database`` (a path or a URL, see
:mod:`shared.database`) and returns that engine's store, which implements every protocol of
:mod:`shared.contract`; ``upkeep_tasks(config)`` is the engine's own periodic work for the
supervisor. Everything else in jobq imports this module, never an engine's.
"""
from __future__ import annotations

from typing import Any

from .. import database as database_mod
from ..contract import Store, UpkeepTask
from ..errors import StoreUnavailable

POSTGRES_MISSING = ("the PostgreSQL engine needs psycopg 3, which is not installed: run "
                    'pip install -e ".[postgres]" in the jobq checkout, or pip install "psycopg[binary]>=3.2"')


def open_store(config: Any, *, migrate: bool = True, upkeep: bool = False) -> Store:
    """A new store on ``config.database`` (the caller closes it). With ``migrate`` the schema
    is created or upgraded first. ``upkeep``: the supervisor's store, whose calls must never
    wait long (a server engine bounds its statements and lock waits). Raises
    :class:`shared.errors.StoreUnavailable`."""
    target = _target(config.database)
    if target.engine == "postgresql":
        p = config.postgres
        return _postgres().PgStore(target.location, schema=p.schema, connect_timeout=p.connect_timeout,
                                   migrate=migrate, lease_timeout=config.worker.lease_timeout, upkeep=upkeep)
    from .sqlite import SqliteStore
    s = config.sqlite
    return SqliteStore(target.location, synchronous=s.synchronous, busy_timeout=s.busy_timeout,
                       migrate=migrate)


def _postgres() -> Any:
    """The PostgreSQL engine package (StoreUnavailable, exit 5, when psycopg is missing)."""
    try:
        from . import postgres
    except ImportError as exc:
        if "psycopg" not in str(exc):
            raise
        raise StoreUnavailable(f"database engine postgresql: {POSTGRES_MISSING}") from exc
    return postgres


def upkeep_tasks(config: Any) -> list[UpkeepTask]:
    """The engine's own upkeep tasks (SQLite: the WAL checkpoint), run by the supervisor after
    its own recovery task. Fresh objects: they keep per-supervisor state."""
    if _target(config.database).engine == "postgresql":
        return _postgres().upkeep_tasks()
    from .sqlite.upkeep import checkpoint_task
    return [checkpoint_task()]


def preload(database: str) -> None:
    """Import the modules a worker on ``database`` will use, without connecting: the fork
    server's template calls it, so forked workers do not each import the engine's driver
    (psycopg: about 0.3 s). A database value that does not parse, or a driver that is not
    installed, is left for the worker to report."""
    try:
        engine = database_mod.parse(database).engine
    except ValueError:
        return
    if engine == "postgresql":
        try:
            import importlib
            importlib.import_module(f"{__name__}.postgres.wakeup")
        except ImportError:
            return


def engine_name(database: str) -> str:
    """'sqlite' or 'postgresql' for a ``database`` value (ValueError for an unknown scheme)."""
    return database_mod.parse(database).engine


def store_class(engine: str = "sqlite") -> type:
    """An engine's store class (for tests and tools that build a store from a bare path)."""
    if engine == "postgresql":
        return _postgres().PgStore
    if engine != "sqlite":
        raise StoreUnavailable(f"database engine {engine!r}: unknown")
    from .sqlite import SqliteStore
    return SqliteStore


def _target(database: str) -> database_mod.Target:
    try:
        target = database_mod.parse(database)
    except ValueError as exc:
        raise StoreUnavailable(str(exc), database=database) from None
    return target


def driver_errors() -> tuple[type[BaseException], ...]:
    """The exception classes the engines' drivers raise (``sqlite3.Error``, psycopg's when it
    is installed), for code that runs an engine's raw SQL outside its store methods and must
    show those errors as database errors (the dashboard's error page)."""
    from .sqlite.connection import DRIVER_ERRORS
    try:
        from .postgres.connection import DRIVER_ERRORS as PG_ERRORS
    except ImportError:
        return DRIVER_ERRORS
    return DRIVER_ERRORS + PG_ERRORS


def database_file(config: Any) -> str | None:
    """The file that holds the database, for engines that keep one (SQLite: its path, None for
    ``:memory:``), else None (``jobq copy`` compares source and destination by it)."""
    target = _target(config.database)
    if target.engine != "sqlite":
        return None
    return None if target.location in ("", ":memory:") else target.location


def commit_watch(config: Any) -> Any | None:
    """A watch of jobs ending on ``config.database``, by any process, for code that waits for a
    job's outcome (:mod:`shared.handles`): ``fileno()`` (None while unavailable) becomes readable
    when a transaction that ended jobs commits (SQLite: any commit, seen by its WAL being written
    just before the commit completes; PostgreSQL: a notification on the schema's done channel),
    ``drain()`` resets it and says whether one was seen, ``close()``. None where no watch can be
    made (no inotify, ``:memory:``): the waiter then re-reads on a back-off."""
    target = _target(config.database)
    if target.engine == "postgresql":
        from .postgres.donewatch import PgDoneWatch
        return PgDoneWatch(target.location, schema=config.postgres.schema,
                           connect_timeout=config.postgres.connect_timeout)
    if target.location in ("", ":memory:"):
        return None
    from .sqlite.walwatch import WalWatch
    watch = WalWatch(target.location)
    return watch if watch.available else None


# -- the engine health check (issue 22; kept in one block for the registry to take over) --------

import os  # noqa: E402 - this block's imports stay in it, for the merge

from .health import HealthCheck  # noqa: E402


def health_check(config: Any) -> HealthCheck | None:
    """A check, made just after ``config.database`` was opened, that it is still the database
    this process opened (:class:`shared.engines.health.HealthCheck`); None where the engine has
    nothing to check. SQLite: the file's identity (deleted or replaced at its path); PostgreSQL:
    none (the server is the database)."""
    path = database_file(config)
    if path is None:
        return None
    from .sqlite.health import DatabaseFile
    return DatabaseFile(path)


def database_missing(config: Any) -> str | None:
    """A sentence if ``config.database`` lives in a file that does not exist, else None: a
    worker of a supervisor (which created it at boot) must never open a new one in its place."""
    path = database_file(config)
    if path is None or os.path.exists(path):
        return None
    return f"database {path} does not exist (deleted?)"
