"""The configuration: `jobq.toml`, read with tomllib and validated strictly.

Every key has a type, a default and a range. An unknown key, a wrong type or an out-of-range value
raises :class:`ConfigError` naming the file, the dotted key, the value and what was expected, so
start-up stops with a message instead of running on a typo.
"""
from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import cron, durations


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file, key, value and expectation."""


@dataclass(frozen=True)
class Key:
    """How one key is checked: accepted Python types, a range/choice check, and its meaning."""
    types: tuple[type, ...]
    expected: str
    check: Callable[[Any], bool] = lambda v: True
    doc: str = ""


def _num(lo: float | None = None, hi: float | None = None, *, integer: bool = False,
         open_lo: bool = False) -> Key:
    types: tuple[type, ...] = (int,) if integer else (int, float)
    words = "an integer" if integer else "a number"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if open_lo else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    expected = words + (" " + " and ".join(parts) if parts else "")

    def check(v: Any) -> bool:
        if lo is not None and (v <= lo if open_lo else v < lo):
            return False
        return hi is None or v <= hi
    return Key(types, expected, check)


def _choice(*options: str) -> Key:
    return Key((str,), "one of " + ", ".join(repr(o) for o in options), lambda v: v in options)


def _list_of_str() -> Key:
    return Key((list,), "a list of module names (strings)",
               lambda v: all(isinstance(x, str) and x for x in v))


_NONEMPTY_STR = Key((str,), "a non-empty string", lambda v: bool(v))
_DURATION = Key((str,), durations.DURATION_EXPECTED, durations.is_duration)


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True

# section -> key -> Key. The top-level section is "".
SCHEMA: dict[str, dict[str, Key]] = {
    "": {
        "database": _NONEMPTY_STR,
        "handlers": _list_of_str(),
        "synchronous": _choice("normal", "full"),
        "busy_timeout": _num(0, 600),
        "max_payload_bytes": _num(1, 1 << 30, integer=True),
        "max_result_bytes": _num(1, 1 << 30, integer=True),
        "log_level": _choice("debug", "info", "warning", "error"),
        "log_format": _choice("text", "json"),
        "metrics_port": _num(0, 65535, integer=True),
        "metrics_host": _NONEMPTY_STR,
    },
    "supervisor": {
        "workers": _num(0, 256, integer=True),
        "shutdown_timeout": _num(0, 86400),
        "kill_grace": _num(0, 3600),
        "maintenance_interval": _num(0.01, 60),
        "restart_backoff_max": _num(0, 3600),
        "wal_checkpoint_mb": _num(1, 1 << 20),
        "config_poll_interval": _num(0, 3600),
    },
    "worker": {
        "poll_interval": _num(0.001, 3600),
        "job_timeout": _num(0, 7 * 86400, open_lo=True),
        "heartbeat_interval": _num(0.05, 3600),
        "lease_timeout": _num(0.1, 86400),
        "max_jobs": _num(0, None, integer=True),
        "max_memory_mb": _num(0, None, integer=True),
        "max_batch": _num(1, 1000, integer=True),
        "batch_wait": _num(0.05, 86400),
    },
    "retry": {
        "max_attempts": _num(1, 1000, integer=True),
        "backoff_base": _num(0, 86400),
        "backoff_max": _num(0, 7 * 86400),
    },
    "retention": {
        "completed_after": _DURATION,
        "failed_after": _DURATION,
    },
}

# The keys of one [[schedule]] entry (name, type and cron are required) and of one
# [types."<job type>"] table (all optional: unset keys fall back to the global settings).
SCHEDULE_KEYS: dict[str, Key] = {
    "name": _NONEMPTY_STR,
    "type": _NONEMPTY_STR,
    "cron": Key((str,), cron.CRON_EXPECTED, lambda v: cron.cron_error(v) is None),
    "timezone": Key((str,), cron.ZONE_EXPECTED, cron.is_zone),
    "payload": Key((dict,), "a table of JSON values (no TOML dates or times)", _json_ok),
    "catch_up": _choice("latest", "none", "all"),
}
_SCHEDULE_REQUIRED = ("name", "type", "cron")
TYPE_KEYS: dict[str, Key] = {
    "concurrency": _num(1, 100_000, integer=True),
    "rate": Key((str,), durations.RATE_EXPECTED, durations.is_rate),
    "max_attempts": _num(1, 1000, integer=True),
    "timeout": _num(0, 7 * 86400, open_lo=True),
    "priority": _num(None, None, integer=True),
    "backoff_base": _num(0, 86400),
    "backoff_max": _num(0, 7 * 86400),
}


@dataclass(frozen=True)
class SupervisorConfig:
    workers: int = 2
    shutdown_timeout: float = 30.0
    kill_grace: float = 5.0
    maintenance_interval: float = 1.0
    restart_backoff_max: float = 30.0
    wal_checkpoint_mb: float = 64.0
    config_poll_interval: float = 2.0


@dataclass(frozen=True)
class WorkerConfig:
    poll_interval: float = 1.0
    job_timeout: float = 300.0
    heartbeat_interval: float = 2.0
    lease_timeout: float = 30.0
    max_jobs: int = 0
    max_memory_mb: int = 0
    max_batch: int = 512
    batch_wait: float = 0.5


@dataclass(frozen=True)
class RetryConfig:
    max_attempts: int = 3
    backoff_base: float = 1.0
    backoff_max: float = 60.0


@dataclass(frozen=True)
class RetentionConfig:
    """How long finished jobs are kept before ``cleanup:old-data`` deletes them (durations like
    "7d", or "never"). Cancelled jobs follow ``completed_after``."""
    completed_after: str = "7d"
    failed_after: str = "never"


@dataclass(frozen=True)
class ScheduleConfig:
    """One ``[[schedule]]`` entry: enqueue ``type`` with ``payload`` at each tick of ``cron``
    in ``timezone``. ``catch_up``: what to do with ticks missed while no supervisor ran."""
    name: str
    type: str
    cron: str
    timezone: str = "UTC"
    payload: dict = field(default_factory=dict)
    catch_up: str = "latest"


@dataclass(frozen=True)
class TypeConfig:
    """``[types."<job type>"]``: limits and per-type defaults; None means "not set here"."""
    concurrency: int | None = None
    rate: str | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    priority: int | None = None
    backoff_base: float | None = None
    backoff_max: float | None = None


_NO_TYPE_SETTINGS = TypeConfig()


@dataclass(frozen=True)
class Config:
    """A validated configuration. ``database`` is absolute (resolved against the file's folder)."""
    database: str = "jobq.db"
    handlers: tuple[str, ...] = ()
    synchronous: str = "normal"
    busy_timeout: float = 5.0
    max_payload_bytes: int = 1 << 20
    max_result_bytes: int = 1 << 20
    log_level: str = "info"
    log_format: str = "text"
    metrics_port: int = 0          # 0: no Prometheus endpoint
    metrics_host: str = "127.0.0.1"
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    schedules: tuple[ScheduleConfig, ...] = ()
    types: dict[str, TypeConfig] = field(default_factory=dict)
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
        for section in ("supervisor", "worker", "retry"):
            out[section] = dataclasses.asdict(getattr(self, section))
        out["retention"] = dataclasses.asdict(self.retention)
        if self.schedules:
            out["schedule"] = [dataclasses.asdict(s) for s in self.schedules]
        if self.types:
            out["types"] = {name: {k: v for k, v in dataclasses.asdict(t).items() if v is not None}
                            for name, t in self.types.items()}
        return out


_SECTIONS = {"supervisor": SupervisorConfig, "worker": WorkerConfig, "retry": RetryConfig,
             "retention": RetentionConfig}


def _check(source: str, dotted: str, key: Key, value: Any) -> Any:
    ok_type = isinstance(value, key.types) and not isinstance(value, bool)
    if not ok_type or not key.check(value):
        raise ConfigError(f"{source}: key '{dotted}' = {value!r}: expected {key.expected}")
    return value


def from_dict(data: dict[str, Any], *, source: str = "<config>", base_dir: str | None = None) -> Config:
    """Validate raw TOML data and build a :class:`Config`."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    tables: dict[str, Any] = {}
    for name, value in data.items():
        if name in _TABLES:
            field_name, parse = _TABLES[name]
            tables[field_name] = parse(source, value)
            continue
        if name in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: '{name}' must be a table ([{name}]), got {value!r}")
            sections[name] = {}
            for k, v in value.items():
                spec = SCHEMA[name].get(k)
                if spec is None:
                    raise ConfigError(f"{source}: unknown key '{name}.{k}' = {v!r} (known: "
                                      f"{', '.join(sorted(SCHEMA[name]))})")
                sections[name][k] = _check(source, f"{name}.{k}", spec, v)
            continue
        spec = SCHEMA[""].get(name)
        if spec is None:
            known = sorted(set(SCHEMA[""]) | set(_SECTIONS) | set(_TABLES))
            raise ConfigError(f"{source}: unknown key '{name}' = {value!r} (known: {', '.join(known)})")
        top[name] = _check(source, name, spec, value)
    if "handlers" in top:
        top["handlers"] = tuple(top["handlers"])
    built = {name: cls(**sections.get(name, {})) for name, cls in _SECTIONS.items()}
    cfg = Config(**top, **built, **tables)
    if cfg.worker.heartbeat_interval >= cfg.worker.lease_timeout:
        raise ConfigError(f"{source}: key 'worker.heartbeat_interval' = {cfg.worker.heartbeat_interval!r}: "
                          f"expected less than worker.lease_timeout ({cfg.worker.lease_timeout!r})")
    if base_dir is not None and cfg.database != ":memory:":
        cfg = cfg.replace(database=str(Path(base_dir, cfg.database).resolve()))
    return cfg


def _table(source: str, prefix: str, keys: dict[str, Key], value: Any, what: str) -> dict[str, Any]:
    """Check one table (``prefix`` names it in errors) against ``keys``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: '{prefix}' must be a table ({what}), got {value!r}")
    out = {}
    for k, v in value.items():
        spec = keys.get(k)
        if spec is None:
            raise ConfigError(f"{source}: unknown key '{prefix}.{k}' = {v!r} (known: {', '.join(sorted(keys))})")
        out[k] = _check(source, f"{prefix}.{k}", spec, v)
    return out


def _schedules(source: str, value: Any) -> tuple[ScheduleConfig, ...]:
    """``[[schedule]]`` entries: each checked, the required keys present, the names unique."""
    if not isinstance(value, list):
        raise ConfigError(f"{source}: 'schedule' must be an array of tables ([[schedule]]), got {value!r}")
    out: list[ScheduleConfig] = []
    for i, entry in enumerate(value):
        prefix = f"schedule[{i}]"
        checked = _table(source, prefix, SCHEDULE_KEYS, entry, "[[schedule]]")
        for k in _SCHEDULE_REQUIRED:
            if k not in checked:
                raise ConfigError(f"{source}: key '{prefix}.{k}' is missing: expected {SCHEDULE_KEYS[k].expected}")
        if any(s.name == checked["name"] for s in out):
            raise ConfigError(f"{source}: key '{prefix}.name' = {checked['name']!r}: "
                              f"expected a name no other [[schedule]] entry uses")
        out.append(ScheduleConfig(**checked))
    return tuple(out)


def _types(source: str, value: Any) -> dict[str, TypeConfig]:
    """``[types."<job type>"]`` tables."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: 'types' must be tables like [types.\"report:generate\"], got {value!r}")
    return {name: TypeConfig(**_table(source, f'types."{name}"', TYPE_KEYS, entry, f'[types."{name}"]'))
            for name, entry in value.items()}


# TOML name -> (Config field, parser) of the sections that hold several tables.
_TABLES: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "schedule": ("schedules", _schedules), "types": ("types", _types)}


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
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    cfg = from_dict(data, source=str(p), base_dir=str(p.resolve().parent))
    return cfg.replace(path=str(p.resolve()))


def resolve_path(cli_path: str | None) -> str:
    """Which config file to use: ``--config``, else ``$JOBQ_CONFIG``, else ``./jobq.toml``."""
    return cli_path or os.environ.get("JOBQ_CONFIG") or "jobq.toml"


def write_snapshot(cfg: Config, path: str) -> None:
    """Write the effective config atomically as JSON, for workers to read (``load_snapshot``).

    The supervisor hands workers this snapshot rather than the file an operator edits, so a
    worker never starts on, or reloads, a file the supervisor rejected.
    """
    import json
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"path": cfg.path, "config": cfg.to_dict()}, f)
    os.replace(tmp, path)


def load_snapshot(path: str) -> Config:
    import json
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read config snapshot: {exc}") from None
    return from_dict(data["config"], source=path).replace(path=data["path"])
