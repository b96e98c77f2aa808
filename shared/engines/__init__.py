"""The engine registry: the one place that imports an engine package.

:data:`ENGINES` maps a ``database`` URL's scheme to the package of its engine; each package
exports one :class:`~shared.engines.engine.Engine`, its ``ENGINE``. A value with no scheme (a
file path) belongs to :data:`DEFAULT`. :func:`shared.engines.location.target` resolves a
``database`` value once into a :class:`~shared.engines.engine.Target` through :func:`engine_for`;
the functions below are thin calls of the target's engine, so that callers name no engine:
``open_store(config)`` returns a store that implements every protocol of
:mod:`shared.engines.contract`, ``upkeep_tasks(config)`` is the engine's own periodic work for the
supervisor, and so on. Adding an engine is one line in :data:`ENGINES` and a package.
"""

from __future__ import annotations

import os
import importlib
from types import MappingProxyType
from typing import Any, Mapping

from shared.engines.contract import EngineStore, UpkeepTask
from shared.model.errors import StoreRefused, StoreUnavailable
from .engine import Engine, Target
from .health import HealthCheck

ENGINES: Mapping[str, str] = MappingProxyType(
    {
        "sqlite": "shared.engines.sqlite",
        "postgresql": "shared.engines.postgres",
        "postgres": "shared.engines.postgres",
    }
)
DEFAULT = "sqlite"  # the engine of a plain file path

__all__ = [
    "ENGINES",
    "DEFAULT",
    "Engine",
    "Target",
    "engine_for",
    "engines",
    "target",
    "open_store",
    "upkeep_tasks",
    "preload",
    "engine_name",
    "store_class",
    "driver_errors",
    "database_file",
    "commit_watch",
    "describe",
    "relay",
    "upgrade",
]


def engine_for(scheme: str | None) -> Engine:
    """The engine of a URL scheme (case-insensitive, ``postgresql+psycopg`` as ``postgresql``),
    or of a plain path (None). KeyError for a scheme no engine takes."""
    key = DEFAULT if scheme is None else scheme.lower().split("+")[0]
    return importlib.import_module(ENGINES[key]).ENGINE


def engines() -> list[Engine]:
    """Every registered engine, once each, in :data:`ENGINES` order."""
    found: dict[str, Engine] = {}
    for module in ENGINES.values():
        found.setdefault(module, importlib.import_module(module).ENGINE)
    return list(found.values())


def by_name(name: str) -> Engine:
    """The engine whose ``name`` is ``name`` (StoreUnavailable when none is)."""
    if name in ENGINES and engine_for(name).name == name:  # an engine's name is one of its schemes
        return engine_for(name)
    for engine in engines():
        if engine.name == name:
            return engine
    raise StoreRefused(f"database engine {name!r}: unknown")


def describe(config: Any) -> str | None:
    """How the engine of ``config.database`` will use it (``Engine.describe``), or None."""
    t = target(config.database)
    return by_name(t.engine).describe(t, config)


def relay(config: Any) -> Any | None:
    """The supervisor's relay of the database's news to idle workers (``Engine.relay``)."""
    t = target(config.database)
    return by_name(t.engine).relay(t, config)


def upgrade(config: Any, *, batch: int, finish: bool, progress: Any) -> str:
    """``jobq db upgrade`` on ``config.database`` (``Engine.upgrade``): the engine's schema
    changes made on a live database; ``progress(text, batch_line)`` hears each step. Returns a
    sentence saying what was done (nothing, for an engine that has no such changes)."""
    engine, where = _of(config.database)
    if engine.upgrade is None:
        return f"{engine.name} database: nothing to upgrade online (a store migrates as it opens)"
    return engine.upgrade(where, config, batch=batch, finish=finish, progress=progress)


def target(database: str | Target) -> Target:
    """The :class:`Target` of a ``database`` value (:func:`shared.engines.location.target`); a
    Target is returned as it is. Raises StoreUnavailable (naming the value, never its password) for
    a value no engine takes."""
    if isinstance(database, Target):
        return database
    # here: shared.engines.location asks this module for engines
    from shared.engines import location as database_mod

    try:
        return database_mod.target(database)
    except ValueError as exc:
        raise StoreRefused(str(exc), database=database) from None


def _of(database: str | Target) -> tuple[Engine, Target]:
    where = target(database)
    return by_name(where.engine), where


def open_store(config: Any, *, migrate: bool = True, upkeep: bool = False) -> EngineStore:
    """A new store on ``config.database`` (the caller closes it). With ``migrate`` the schema
    is created or upgraded first. ``upkeep``: the supervisor's store, whose calls must never
    wait long (a server engine bounds its statements and lock waits). Raises
    :class:`shared.model.errors.StoreUnavailable` (also when the engine's driver is not
    installed)."""
    engine, where = _of(config.database)
    return engine.open(where, config, migrate=migrate, upkeep=upkeep)


def upkeep_tasks(config: Any) -> list[UpkeepTask]:
    """The engine's own upkeep tasks (e.g. a checkpoint of the database's log), run by the
    supervisor after its own recovery task. Fresh objects: they keep per-supervisor state."""
    return _of(config.database)[0].upkeep_tasks(config)


def preload(database: str | Target) -> None:
    """Import the modules a worker on ``database`` will use, without connecting: the fork
    server's template calls it, so forked workers do not each import the engine's driver
    (about 0.3 s for some). A value no engine takes, or a driver that is not installed, is
    left for the worker to report."""
    try:
        engine, _ = _of(database)
    except StoreUnavailable:
        return
    for module in engine.preload:
        try:
            importlib.import_module(module)
        except ImportError:
            return


def engine_name(database: str) -> str:
    """The engine's name for a ``database`` value ('sqlite', 'postgresql'; ValueError for a
    scheme no engine takes)."""
    from shared.engines import location as database_mod

    return database_mod.target(database).engine


def store_class(engine: str = DEFAULT) -> type:
    """An engine's store class, by engine name (for tests and tools that build a store from a
    bare path). StoreUnavailable for an unknown engine or a missing driver."""
    return by_name(engine).store_class()


def driver_errors() -> tuple[type[BaseException], ...]:
    """The exception classes the engines' drivers raise (those installed), for code that runs
    an engine's raw SQL outside its store methods and must show those errors as database
    errors (the dashboard's error page)."""
    return tuple(e for engine in engines() for e in engine.driver_errors())


def database_file(config: Any) -> str | None:
    """The file that holds the database, for engines that keep one (None for a server or an
    in-memory database): what :class:`shared.engines.sqlite.health.DatabaseFile` watches for
    replacement."""
    return target(config.database).file


def commit_watch(config: Any) -> Any | None:
    """A watch of jobs ending on ``config.database``, by any process, for code that waits for a
    job's outcome (:mod:`shared.producer.handles`): ``fileno()`` (None while unavailable) becomes
    readable when a transaction that ended jobs commits (a file engine: its log being written just
    before the commit completes; a server engine: a notification on the schema's done channel),
    ``drain()`` resets it and says whether one was seen, ``close()``. None where no watch can be
    made (no inotify, an in-memory database): the waiter then re-reads on a back-off."""
    engine, where = _of(config.database)
    return engine.commit_watch(where, config)


def __getattr__(name: str) -> Any:
    """``POSTGRES_MISSING``, the message of a missing driver, kept where it was."""
    if name == "POSTGRES_MISSING":
        return importlib.import_module(ENGINES["postgresql"]).MISSING
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the engine health check ---------------------------------------------------------------------


def health_check(config: Any) -> HealthCheck | None:
    """A check, made just after ``config.database`` was opened, that it is still the database
    this process opened (:class:`shared.engines.health.HealthCheck`); None where the engine has
    nothing to check. A database held in a file: the file's identity (deleted or replaced at its
    path); a server: none (the server is the database)."""
    engine, where = _of(config.database)
    return engine.health_check(where)


def database_missing(config: Any) -> str | None:
    """A sentence if ``config.database`` lives in a file that does not exist, else None: a
    worker of a supervisor (which created it at boot) must never open a new one in its place."""
    path = target(config.database).file
    if path is None or os.path.exists(path):
        return None
    return f"database {path} does not exist (deleted?)"
