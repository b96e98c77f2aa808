"""What an engine is to the rest of jobq: one :class:`Engine` object per engine package (its
``ENGINE``), and the :class:`Target` a ``database`` value resolves to.

The registry (:mod:`shared.engines`) maps URL schemes to engine packages and calls these
objects; nothing else in jobq imports an engine. An engine package must stay importable without
its driver (psycopg may be missing): its ``ENGINE`` imports the driver only inside ``open`` and
the other calls, so that a missing driver is a clear error when the database is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from shared.engines.contract import EngineStore, UpkeepTask
from shared.engines.health import HealthCheck


@dataclass(frozen=True)
class Target:
    """Where a ``database`` value points, resolved once (:func:`shared.engines.location.target`).

    ``engine``: the engine's name (``Engine.name``); ``location``: what the engine opens (a file
    path, ``:memory:``, a server URL as written); ``file``: the file that holds the database,
    watched for replacement (None for a server or an in-memory database); ``server``: the
    database is reached over sockets to a server (what the worker template checks before a fork).
    """

    engine: str
    location: str
    file: str | None = None
    server: bool = False


@dataclass(frozen=True)
class Engine:
    """One engine, as the registry sees it. Every callable is cheap to reach: the engine's
    modules (and its driver) are imported when one is called, not when the package is.

    - ``name``: what :attr:`Target.engine` says (``jobq status`` shows it)
    - ``section``: the config table of its settings (``config.<section>``, e.g. ``[postgres]``)
    - ``forms``: the ``database`` values it takes, for error messages ("... or postgresql://...")
    - ``locate(value, rest, base_dir)``: the :class:`Target` of a ``database`` value of this
      engine; ``rest`` is what follows the scheme's colon, None for a plain path (the default
      engine's); a relative file is taken against ``base_dir`` when given. ValueError (naming
      the value, never its password) for a value it cannot open
    - ``open(target, config, migrate=, upkeep=)``: a new store (raises StoreUnavailable, also
      for a missing driver)
    - ``store_class()``: the store class, for tests and tools that build one by hand
    - ``upkeep_tasks(config)``: the engine's own periodic tasks, fresh objects
    - ``driver_errors()``: its driver's exception classes (empty when the driver is missing)
    - ``commit_watch(target, config)``: a watch of jobs ending, or None (see shared.engines)
    - ``connections(target)``: this process's descriptors connected to the database
    - ``describe(target, config)``: how the engine will use the database, in a few words, for
      ``jobq config check`` (PostgreSQL: its connection mode); None when there is nothing to say
    - ``relay(target, config)``: the supervisor's listening connection, or None (SQLite): it
      hears controls (``fds()``; ``serve(ready)``: whether one came; ``live``: whether it
      listens now; ``close()``) and passes the database's news on to idle workers where they
      cannot listen themselves (PostgreSQL: pooled mode with ``listen``)
    - ``health_check(target)``: a :class:`shared.engines.health.HealthCheck` made just after the
      database was opened, or None where the engine has nothing to check
    - ``upgrade(target, config, batch=, finish=, progress=)``: ``jobq db upgrade``, the schema
      changes too slow for a store's open done on a live database (PostgreSQL: the native
      column types); returns a sentence of what was done. None: the engine has none
    - ``preload``: its modules (full names) the worker template imports once, so forked
      workers do not each import them
    """

    name: str
    section: str
    forms: str
    locate: Callable[[str, str | None, str | None], Target]
    open: Callable[..., EngineStore]
    store_class: Callable[[], type]
    upkeep_tasks: Callable[[Any], list[UpkeepTask]]
    driver_errors: Callable[[], tuple[type[BaseException], ...]]
    commit_watch: Callable[[Target, Any], Any | None]
    connections: Callable[[Target], list[str]]
    health_check: Callable[[Target], HealthCheck | None]
    preload: tuple[str, ...] = ()
    describe: Callable[[Target, Any], str | None] = lambda target, config: None
    relay: Callable[[Target, Any], Any | None] = lambda target, config: None
    upgrade: Callable[..., str] | None = None

    def settings(self, config: Any) -> Any:
        """This engine's table of ``config`` (``config.sqlite``, ``config.postgres``)."""
        return getattr(config, self.section)
