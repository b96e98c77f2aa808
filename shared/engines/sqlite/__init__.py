"""The SQLite engine: jobq's store on one SQLite file in WAL mode. Its ``ENGINE`` is what the
registry (:mod:`shared.engines`) uses; nothing else imports this package.

The only ``sqlite3`` imports of jobq's runtime are in this package's modules:

- :mod:`.store`: :class:`SqliteStore`, producers', workers' and the supervisor's statements
- :mod:`.leases`: heartbeats and lease ages; :mod:`.dialect`: how it spells the shared SQL
  (:mod:`shared.engines.sql`; the operators' reads are :mod:`shared.ops`)
- :mod:`.connection`: opening, pragmas, busy retries, errors; :mod:`.schema`: tables, migrations
  (:mod:`.flowschema`: the workflow tables and triggers)
- :mod:`.wakeup`, :mod:`.walwatch` (and :mod:`shared.engines.idlelead`): how idle workers learn of new jobs
- :mod:`.upkeep`: the WAL checkpoint task the supervisor runs
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.engines.contract import EngineStore, UpkeepTask
from .. import forkaware
from ..engine import Engine, Target
from ..health import HealthCheck

MEMORY = ":memory:"
FORMS = "a SQLite file path, sqlite:///absolute/path.db, sqlite:relative/path.db"


def locate(value: str, rest: str | None, base_dir: str | None) -> Target:
    """A file path as it is, ``sqlite:///abs/path.db`` as ``/abs/path.db``, ``sqlite:rel.db``
    as ``rel.db``; a relative path is made absolute against ``base_dir`` when given."""
    path = value if rest is None else _url_path(value, rest)
    if path not in ("", MEMORY) and base_dir is not None:
        path = str(Path(base_dir, path).resolve())
    return Target("sqlite", path, file=None if path in ("", MEMORY) else path)


def _url_path(value: str, rest: str) -> str:
    from shared.engines.location import redacted

    path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs -> /abs; sqlite:rel -> rel
    if rest.startswith("//") and not path.startswith("/"):
        raise ValueError(
            f"database {redacted(value)!r}: a sqlite:// URL needs an absolute path "
            "(sqlite:///abs/path.db) or use sqlite:relative/path.db"
        )
    if not path:
        raise ValueError(
            f"database {redacted(value)!r}: no file path after 'sqlite:' (expected {_expected()})"
        )
    return path


def _expected() -> str:
    from shared.engines.location import expected

    return expected()


def _open(
    target: Target, config: Any, *, migrate: bool = True, upkeep: bool = False
) -> EngineStore:
    from .connection import BUSY_RETRIES, upkeep_busy
    from .store import SqliteStore

    s = ENGINE.settings(config)
    # the supervisor's store: never a long wait for the write lock
    busy, retries = (
        (upkeep_busy(s.busy_timeout, config.worker.lease_timeout), 0)
        if upkeep
        else (s.busy_timeout, BUSY_RETRIES)
    )
    return SqliteStore(
        target.location,
        synchronous=s.synchronous,
        busy_timeout=busy,
        busy_retries=retries,
        migrate=migrate,
    )


def _store_class() -> type:
    from .store import SqliteStore

    return SqliteStore


def _upkeep_tasks(config: Any) -> list[UpkeepTask]:
    from .upkeep import checkpoint_task

    return [checkpoint_task()]


def _driver_errors() -> tuple[type[BaseException], ...]:
    from .connection import DRIVER_ERRORS

    return DRIVER_ERRORS


def _commit_watch(target: Target, config: Any) -> Any | None:
    """Every commit by any process writes the WAL file just before it completes."""
    if target.file is None:
        return None
    from .walwatch import WalWatch

    watch = WalWatch(target.file)
    return watch if watch.available else None


def _connections(target: Target) -> list[str]:
    """The database file's descriptors (its -wal and -shm files too: they share its name)."""
    return [] if target.file is None else forkaware.file_handles(target.file)


def _health_check(target: Target) -> HealthCheck | None:
    """The database file's identity (deleted or replaced at its path); None in memory."""
    if target.file is None:
        return None
    from .health import DatabaseFile

    return DatabaseFile(target.file)


ENGINE = Engine(
    name="sqlite",
    section="sqlite",
    forms=FORMS,
    locate=locate,
    open=_open,
    store_class=_store_class,
    upkeep_tasks=_upkeep_tasks,
    driver_errors=_driver_errors,
    commit_watch=_commit_watch,
    connections=_connections,
    health_check=_health_check,
    # a worker's wake-up and health check too: imported after each fork, they (ctypes.util,
    # subprocess) took 80-110 ms per worker on a loaded machine
    preload=(f"{__name__}.store", f"{__name__}.wakeup", f"{__name__}.health"),
)


def __getattr__(name: str) -> Any:
    """``SqliteStore``, imported when asked for (the package itself stays light)."""
    if name == "SqliteStore":
        return _store_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ENGINE", "SqliteStore"]
