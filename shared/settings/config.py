"""The configuration: `jobq.toml`, read with tomllib and validated strictly.

Every key is declared once, as a dataclass field made by :func:`setting`: its type, default,
range and description. The top-level keys are fields of :class:`Config` below; each table is a
dataclass of :mod:`shared.settings.sections` (re-exported here). Validation here, ``jobq config
init``'s commented file, the shipped ``jobq.toml`` and ``docs/configuration.md`` (``python -m
supervisor.gendocs``) all come from those fields, so a new key is a one-line change (a new table:
a dataclass and one :func:`section` field of :class:`Config`).

An unknown key, a wrong type or an out-of-range value raises :class:`ConfigError` naming the file,
the dotted key, the value and what was expected, so start-up stops with a message instead of
running on a typo.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shared.engines import location as database_mod
from shared.runtime import fencing

# ConfigError is defined with the checks (configschema) and imported by the rest of jobq from here.
from shared.settings.schema import (
    BOOLEAN,
    NONEMPTY_STR,
    ConfigError,
    Key,
    check_value as _check,
    choice,
    keys_of,
    list_of_str,
    named_entries,
    named_tables,
    number,
    section,
    sections_of,
    setting,
)

# The tables' dataclasses: Config's fields, and imported by the rest of jobq from here.
from shared.settings.enginesections import PostgresConfig, SqliteConfig
from shared.settings.sections import (
    QueueConfig,
    RetentionConfig,
    RetryConfig,
    ScheduleConfig,
    SupervisorConfig,
    TypeConfig,
    WorkerConfig,
)
from shared.runtime.files import write_atomic
from shared.model.queuenames import queue_name_error

_SECONDS = "(seconds)"

_NO_TYPE_SETTINGS = TypeConfig()


@dataclass(frozen=True)
class Config:
    """A validated configuration. ``database``: a SQLite file's absolute path (resolved against
    the file's folder; a ``sqlite:`` URL becomes its path) or another engine's URL."""

    database: str = setting(
        "jobq.db",
        NONEMPTY_STR,
        """The database: a SQLite file relative to
        this file's folder, sqlite:///absolute/path.db, sqlite:relative/path.db, or
        postgresql://user@host/db (the PostgreSQL engine: `pip install -e ".[postgres]"` in the jobq checkout) The environment variable JOBQ_DATABASE, when set, takes
        the place of this key (keep credentials out of this file).""",
    )
    handlers: tuple[str, ...] = setting(
        (),
        list_of_str(),
        """Python modules whose @handler
        functions the workers run, e.g. ["myapp.jobs"]; imported from the current directory or
        from this file's folder.""",
    )
    strict_types: bool = setting(
        False,
        BOOLEAN,
        """true: a producer that read this file
        (JobQueue.from_config, a task's default queue, jobq enqueue) imports the handler modules
        once (as a worker does), at the first job type it enqueues, and refuses a type none of them
        serves. false: JobQueue.from_config and tasks import nothing: they check each type against
        what the running supervisors recorded in the database and warn once per type none of them
        serves (nothing while no supervisor runs); jobq enqueue imports the modules and warns.""",
    )
    max_payload_bytes: int = setting(
        1 << 20, number(1, 1 << 30, integer=True), "Largest accepted payload, in bytes of JSON."
    )
    max_result_bytes: int = setting(
        1 << 20,
        number(1, 1 << 30, integer=True),
        """Largest result a
        handler may return, in bytes of JSON; a larger one fails its job.""",
    )
    log_level: str = setting("info", choice("debug", "info", "warning", "error"), "Log level.")
    log_format: str = setting(
        "text", choice("text", "json"), 'Log format: "text", or "json" (one object per line).'
    )
    metrics_port: int = setting(
        0,
        number(0, 65535, integer=True),
        """Prometheus metrics, served by
        the supervisor at http://metrics_host:metrics_port/metrics (0: off).""",
    )
    metrics_host: str = setting(
        "127.0.0.1",
        NONEMPTY_STR,
        """Address the metrics endpoint listens
        on: "127.0.0.1" answers this machine only; "0.0.0.0" answers on every interface.""",
    )
    supervisor: SupervisorConfig = section(SupervisorConfig, SupervisorConfig.__doc__)
    worker: WorkerConfig = section(WorkerConfig, WorkerConfig.__doc__)
    retry: RetryConfig = section(RetryConfig, RetryConfig.__doc__)
    retention: RetentionConfig = section(RetentionConfig, RetentionConfig.__doc__)
    sqlite: SqliteConfig = section(SqliteConfig, SqliteConfig.__doc__)
    postgres: PostgresConfig = section(PostgresConfig, PostgresConfig.__doc__)
    schedules: tuple[ScheduleConfig, ...] = ()
    types: dict[str, TypeConfig] = field(default_factory=dict)
    queues: dict[str, QueueConfig] = field(default_factory=dict)
    path: str | None = None  # the file this came from, if any

    def for_type(self, job_type: str) -> TypeConfig:
        """The ``[types."<job_type>"]`` settings (every field None when it has none)."""
        return self.types.get(job_type, _NO_TYPE_SETTINGS)

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def with_workers(self, n: int) -> "Config":
        return self.replace(supervisor=dataclasses.replace(self.supervisor, workers=n))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain TOML-ready data (``path`` left out)."""
        out: dict[str, Any] = {}
        for name in SCHEMA[""]:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        for name in _SECTIONS:
            out[name] = dataclasses.asdict(getattr(self, name))
        if self.schedules:
            out["schedule"] = [dataclasses.asdict(s) for s in self.schedules]
        if self.types:
            out["types"] = {
                name: {k: v for k, v in dataclasses.asdict(t).items() if v is not None}
                for name, t in self.types.items()
            }
        if self.queues:
            out["queues"] = {
                name: {k: v for k, v in dataclasses.asdict(q).items() if v is not None}
                for name, q in self.queues.items()
            }
        return out


# Derived from the fields above. table name -> its dataclass; section -> key -> Key (the
# top-level section is ""); the keys of one [[schedule]] entry and of one [types."<job type>"].
_SECTIONS: dict[str, type] = {name: cls for name, (cls, _) in sections_of(Config).items()}
SCHEMA: dict[str, dict[str, Key]] = {
    "": keys_of(Config),
    **{name: keys_of(cls) for name, cls in _SECTIONS.items()},
}
SCHEDULE_KEYS: dict[str, Key] = keys_of(ScheduleConfig)
TYPE_KEYS: dict[str, Key] = keys_of(TypeConfig)
QUEUE_KEYS: dict[str, Key] = keys_of(QueueConfig)

# Keys that moved: an old place gets an error naming the new one.
MOVED = {
    "synchronous": "sqlite.synchronous",
    "busy_timeout": "sqlite.busy_timeout",
    "supervisor.wal_checkpoint_mb": "sqlite.wal_checkpoint_mb",
}
DATABASE_ENV = "JOBQ_DATABASE"  # when set, takes the place of the file's `database`


def _section(source: str, name: str, value: Any) -> dict[str, Any]:
    """The checked keys of the section ``[name]`` (ConfigError for an unknown or invalid one)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: '{name}' must be a table ([{name}]), got {value!r}")
    out: dict[str, Any] = {}
    for k, v in value.items():
        spec = SCHEMA[name].get(k)
        if spec is None:
            _moved(source, f"{name}.{k}", v)
            raise ConfigError(
                f"{source}: unknown key '{name}.{k}' = {v!r} (known: "
                f"{', '.join(sorted(SCHEMA[name]))})"
            )
        out[k] = _check(source, f"{name}.{k}", spec, v)
    return out


def from_dict(
    data: dict[str, Any], *, source: str = "<config>", base_dir: str | None = None
) -> Config:
    """Validate raw TOML data and build a :class:`Config`."""
    top, sections, tables = _checked_keys(data, source)
    if "handlers" in top:
        top["handlers"] = tuple(top["handlers"])
    built = {name: cls(**sections.get(name, {})) for name, cls in _SECTIONS.items()}
    cfg = Config(**top, **built, **tables)
    _check_lease(cfg, source)
    try:
        return cfg.replace(database=database_mod.resolve(cfg.database, base_dir))
    except ValueError as exc:
        raise ConfigError(
            f"{source}: key 'database' = {database_mod.redacted(cfg.database)!r}: {exc}"
        ) from None


def _checked_keys(
    data: dict[str, Any], source: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]:
    """Every key of ``data`` checked, sorted into the top-level keys, the keys of each section
    (``[name]`` -> its keys) and the parsed tables of named entries (Config field -> value);
    ConfigError for an unknown or invalid one."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    tables: dict[str, Any] = {}
    for name, value in data.items():
        if name in _TABLES:
            field_name, parse = _TABLES[name]
            tables[field_name] = parse(source, value)
            continue
        if name in _SECTIONS:
            sections[name] = _section(source, name, value)
            continue
        spec = SCHEMA[""].get(name)
        if spec is None:
            _moved(source, name, value)
            known = sorted(set(SCHEMA[""]) | set(_SECTIONS) | set(_TABLES))
            raise ConfigError(
                f"{source}: unknown key '{name}' = {value!r} (known: {', '.join(known)})"
            )
        top[name] = _check(source, name, spec, value)
    return top, sections, tables


def _check_lease(cfg: Config, source: str) -> None:
    """ConfigError unless a worker can renew its lease in time: ``[worker] heartbeat_interval``
    below ``lease_timeout``, with the margin self-fencing needs (shared.runtime.fencing)."""
    if cfg.worker.heartbeat_interval >= cfg.worker.lease_timeout:
        raise ConfigError(
            f"{source}: key 'worker.heartbeat_interval' = {cfg.worker.heartbeat_interval!r}: "
            f"expected less than worker.lease_timeout ({cfg.worker.lease_timeout!r})"
        )
    fenced = fencing.check(cfg.worker.heartbeat_interval, cfg.worker.lease_timeout)
    if fenced is not None:
        raise ConfigError(
            f"{source}: key 'worker.heartbeat_interval' = {cfg.worker.heartbeat_interval!r}: {fenced}"
        )


def _moved(source: str, dotted: str, value: Any) -> None:
    """Raise for a key that moved to another table, naming its new place."""
    if dotted in MOVED:
        new = MOVED[dotted]
        section_name, key = new.split(".")
        raise ConfigError(
            f"{source}: key '{dotted}' = {value!r} has moved: write it as '{key}' "
            f"in the [{section_name}] table ({new})"
        )


# TOML name -> (Config field, parser) of the sections that hold several tables.
_TABLES: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "schedule": ("schedules", named_entries("schedule", ScheduleConfig, SCHEDULE_KEYS)),
    "types": ("types", named_tables("types", TypeConfig, TYPE_KEYS, '"report:generate"')),
    "queues": (
        "queues",
        named_tables("queues", QueueConfig, QUEUE_KEYS, "emails", queue_name_error),
    ),
}


def load(path: str | os.PathLike[str]) -> Config:
    """Read and validate a config file. Raises :class:`ConfigError` for any problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))  # a UTF-8 byte-order mark is skipped
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    source = str(p)
    if isinstance(data, dict) and os.environ.get(DATABASE_ENV):
        data["database"] = os.environ[DATABASE_ENV]  # keeps credentials out of the file
        source = f"{p} (database from ${DATABASE_ENV})"
    cfg = from_dict(data, source=source, base_dir=str(p.resolve().parent))
    return cfg.replace(path=str(p.resolve()))


def resolve_path(cli_path: str | None) -> str:
    """Which config file to use: ``--config``, else ``$JOBQ_CONFIG``, else ``./jobq.toml``."""
    return cli_path or os.environ.get("JOBQ_CONFIG") or "jobq.toml"


def write_snapshot(cfg: Config, path: str) -> None:
    """Write the effective config atomically as JSON, for workers to read (``load_snapshot``).

    The supervisor hands workers this snapshot rather than the file an operator edits, so a
    worker never starts on, or reloads, a file the supervisor rejected.
    """
    write_atomic(path, json.dumps({"path": cfg.path, "config": cfg.to_dict()}))


def load_snapshot(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read config snapshot: {exc}") from None
    return from_dict(data["config"], source=path).replace(path=data["path"])
