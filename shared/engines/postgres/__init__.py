"""The PostgreSQL engine: jobq's store on a PostgreSQL server, shared by many hosts. Its
``ENGINE`` is what the registry (:mod:`shared.engines`) uses; nothing else imports this package.

It needs the ``postgres`` extra (psycopg 3). The package imports without it: the driver is
imported when a store is opened, and its absence is then a clear StoreUnavailable (exit 5).
The only psycopg imports of jobq's runtime are in this package's modules:

- :mod:`.store`: :class:`PgStore`, producers', workers' and the supervisor's statements
- :mod:`.leases`: heartbeats and lease ages; :mod:`.dialect`: how it spells the shared SQL
  (:mod:`shared.engines.sql`; the operators' reads are :mod:`shared.ops`)
- :mod:`.connection`: connecting, reconnecting, errors; :mod:`.schema`: tables, migrations;
  :mod:`.refusals`: which refusals no wait heals
- :mod:`.wakeup`: how idle workers learn of new jobs (LISTEN/NOTIFY); :mod:`.relay`: the
  supervisor's listening connection, which wakes one host per job (:mod:`.turns`, :mod:`.marks`);
  :mod:`.donewatch`: waiters'
- :mod:`.upkeep`: the periodic work the supervisor runs for this engine
- :mod:`.online`: converting columns on a live queue (``jobq db upgrade``, :mod:`.onlinesteps`)
- :mod:`.peers`: which sockets lead to the server (the worker template's check)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from shared.engines.contract import EngineStore, UpkeepTask
from shared.model.errors import StoreRefused, StoreUnavailable
from ..engine import Engine, Target
from .refusals import refused

MISSING = (
    "the PostgreSQL engine needs psycopg 3, which is not installed: run "
    'pip install -e ".[postgres]" in the jobq checkout, or pip install "psycopg[binary]>=3.2"'
)


def _load(module: str) -> ModuleType:
    """This package's ``module``; StoreUnavailable (exit 5) when psycopg is missing."""
    try:
        return importlib.import_module(f"{__name__}.{module}")
    except ImportError as exc:
        if "psycopg" not in str(exc):
            raise
        raise StoreRefused(f"database engine postgresql: {MISSING}") from exc


def locate(value: str, rest: str | None, base_dir: str | None) -> Target:
    """The URL as written: the driver reads it (with ``PG*`` variables for what it leaves out)."""
    return Target("postgresql", value, server=True)


def _open(
    target: Target, config: Any, *, migrate: bool = True, upkeep: bool = False
) -> EngineStore:
    p = ENGINE.settings(config)
    try:
        store: EngineStore = _load("store").PgStore(
            target.location,
            schema=p.schema,
            connect_timeout=p.connect_timeout,
            migrate=migrate,
            lease_timeout=config.worker.lease_timeout,
            upkeep=upkeep,
            mode=p.mode,
            listen=p.listen,
        )
    except StoreUnavailable as exc:  # a refusal no wait heals is told apart (supervisor.boot)
        better = refused(exc)
        if better is exc:
            raise
        raise better from exc.cause
    return store


def _store_class() -> type:
    cls: type = _load("store").PgStore
    return cls


def _upkeep_tasks(config: Any) -> list[UpkeepTask]:
    tasks: list[UpkeepTask] = _load("upkeep").upkeep_tasks()
    return tasks


def _driver_errors() -> tuple[type[BaseException], ...]:
    try:
        from .connection import DRIVER_ERRORS
    except ImportError:
        return ()
    return DRIVER_ERRORS


def _commit_watch(target: Target, config: Any) -> Any | None:
    """A notification on the schema's done channel for each transaction that ended jobs."""
    p = ENGINE.settings(config)
    url, mode = (p.listen, "direct") if p.listen else (target.location, p.mode)
    watch = _load("donewatch").PgDoneWatch(
        url, schema=p.schema, connect_timeout=p.connect_timeout, mode=mode
    )
    if watch.pooled:  # through a pooler a LISTEN hears nothing: waiters poll instead
        watch.close()
        return None
    return watch


def _connections(target: Target) -> list[str]:
    from .peers import connections

    return connections(target.location)


def _describe(target: Target, config: Any) -> str:
    """The connection mode the URL gets: as configured, or (``auto``) as found by connecting."""
    mode = ENGINE.settings(config).mode
    if mode != "auto":
        return f"{mode} mode ([postgres] mode = {mode!r})"
    try:
        conn = _load("connection").PgConnection(
            target.location,
            schema=ENGINE.settings(config).schema,
            connect_timeout=min(5.0, ENGINE.settings(config).connect_timeout),
            migrate=False,
        )
    except (StoreUnavailable, StoreRefused) as exc:
        return f"mode not known: the server was not reached ({exc})"
    try:
        if conn.pooled:
            return "pooled mode (auto: the server refused startup options, as a pooler does)"
        return "direct mode (auto: the server took startup options)"
    finally:
        conn.close()


def _relay(target: Target, config: Any) -> Any | None:
    """The supervisor's listening connection (:mod:`.relay`): at ``listen`` if given, else at
    the database itself unless the mode is pooled (``auto`` finds out when it connects: a
    pooler's URL gives no relay, and its workers poll)."""
    p = ENGINE.settings(config)
    if p.listen:
        return _load("relay").PgRelay(p.listen, target.location, p.schema, p.connect_timeout)
    if p.mode == "pooled":
        return None
    relay = _load("relay").PgRelay
    return relay(target.location, target.location, p.schema, p.connect_timeout, mode=p.mode)


def _upgrade(target: Target, config: Any, **kw: Any) -> str:
    """``jobq db upgrade`` (:mod:`.upgrade`), on a direct session (``listen`` when pooled)."""
    p = ENGINE.settings(config)
    if p.mode == "pooled" and not p.listen:
        raise StoreRefused(
            f"schema {p.schema}: jobq db upgrade needs a direct session (it sets session "
            "settings and builds indexes concurrently): set [postgres] listen to a direct URL"
        )
    url = p.listen if p.mode == "pooled" else target.location
    done: str = _load("upgrade").upgrade(url, p.schema, connect_timeout=p.connect_timeout, **kw)
    return done


def _health_check(target: Target) -> None:
    """Nothing to check: the server is the database (a lost connection is reconnected)."""
    return None


ENGINE = Engine(
    name="postgresql",
    section="postgres",
    forms="postgresql://...",
    locate=locate,
    open=_open,
    store_class=_store_class,
    upkeep_tasks=_upkeep_tasks,
    driver_errors=_driver_errors,
    commit_watch=_commit_watch,
    connections=_connections,
    health_check=_health_check,
    # psycopg takes ~0.1-0.3 s to import; a worker's idle wait builds on the relay's module
    preload=(f"{__name__}.store", f"{__name__}.wakeup", f"{__name__}.relay"),
    describe=_describe,
    relay=_relay,
    upgrade=_upgrade,
)


def __getattr__(name: str) -> Any:
    """``PgStore`` and ``upkeep_tasks``, imported when asked for (the driver may be missing)."""
    if name == "PgStore":
        return _store_class()
    if name == "upkeep_tasks":
        return _load("upkeep").upkeep_tasks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ENGINE", "MISSING", "PgStore", "upkeep_tasks"]
