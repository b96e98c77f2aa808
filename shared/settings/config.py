"""The configuration: `jobq.toml`, read with tomllib and validated strictly.

Every key is declared once below, as a dataclass field made by :func:`setting`: its type, default,
range and description. Validation here, ``jobq config init``'s commented file, the shipped
``jobq.toml`` and ``docs/configuration.md`` (``python -m supervisor.gendocs``) all come from those
fields, so a new key is a one-line change (a new table: a dataclass and one :func:`section` field
of :class:`Config`).

An unknown key, a wrong type or an out-of-range value raises :class:`ConfigError` naming the file,
the dotted key, the value and what was expected, so start-up stops with a message instead of
running on a typo.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shared.settings import cron as cron_mod
from shared.engines import location as database_mod
from shared.settings import durations
from shared.runtime import fencing

# ConfigError is defined with the checks (configschema) and imported by the rest of jobq from here.
from shared.settings.schema import (
    BOOLEAN,
    JOB_TYPE,
    NONEMPTY_STR,
    REQUIRED,
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
from shared.runtime.files import write_atomic
from shared.model.queuenames import KEY_PATH, QUEUE_LIST, QUEUE_NAME, queue_name_error


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


_DURATION = Key((str,), durations.DURATION_EXPECTED, durations.is_duration)
_SECONDS = "(seconds)"


@dataclass(frozen=True)
class SupervisorConfig:
    """`[supervisor]`: the process that forks, watches and replaces the workers."""

    workers: int = setting(
        2,
        number(0, 256, integer=True),
        "Number of worker processes (`python -m supervisor --workers N` overrides it).",
    )
    shutdown_timeout: float = setting(
        30.0,
        number(0, 86400),
        """On SIGTERM: how long running jobs
        may take to finish before their workers are killed (seconds).""",
    )
    kill_grace: float = setting(
        5.0,
        number(0, 3600),
        """After a job's timeout raised JobTimeout in its
        handler (or after SIGTERM to a stopping worker): how long before SIGKILL (seconds).""",
    )
    maintenance_interval: float = setting(
        1.0,
        number(0.01, 60),
        """How often the supervisor checks
        leases, timeouts, the WAL and this file (seconds).""",
    )
    restart_backoff_max: float = setting(
        30.0,
        number(0, 3600),
        """Cap of the per-slot restart
        back-off when a worker keeps crashing (seconds).""",
    )
    config_poll_interval: float = setting(
        2.0,
        number(0, 3600),
        """How often to look for edits of
        this file (seconds; 0 disables, SIGHUP still reloads).""",
    )
    queues: tuple[str, ...] = setting(
        (),
        QUEUE_LIST,
        """Serve only these named queues (`python -m
        supervisor --queues a,b` overrides it); empty: every queue.""",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "queues", tuple(self.queues))  # TOML and JSON give lists


@dataclass(frozen=True)
class WorkerConfig:
    """`[worker]`: how each worker process claims, runs and reports jobs."""

    poll_interval: float = setting(
        1.0,
        number(0.001, 3600),
        """Idle workers wake at once when the
        database changes (inotify on the WAL file) or when a delayed job falls due; this is how
        often they poll where inotify is unavailable (with it: every 5 s), in seconds.""",
    )
    job_timeout: float = setting(
        300.0,
        number(0, 7 * 86400, open_lo=True),
        """Default timeout of a
        job in seconds (a handler's `timeout=` overrides it): JobTimeout is raised in the handler.""",
    )
    cancel_grace: float = setting(
        10.0,
        number(0, 86400),
        """After `jobq cancel` of a running job: how
        long its handler may take to stop before its worker is killed (seconds).""",
    )
    heartbeat_interval: float = setting(
        2.0,
        number(0.05, 3600),
        """How often a worker refreshes the
        lease of its running job (seconds; at most a quarter of `lease_timeout`: a worker that
        cannot renew its lease stops itself before it expires, see docs/scaling-out.md).""",
    )
    lease_timeout: float = setting(
        30.0,
        number(0.1, 86400),
        """A running job whose lease is older
        than this is taken from its (hung) worker (seconds, on the database's clock). A worker that has
        not renewed it for `lease_timeout` minus a margin (the larger of 2 x `heartbeat_interval`
        and 20%, at most half) exits (FENCED).""",
    )
    max_jobs: int = setting(
        0, number(0, None, integer=True), "Replace a worker after this many jobs (0: never)."
    )
    max_memory_mb: int = setting(
        0,
        number(0, None, integer=True),
        """Replace a worker after a job
        leaves it above this resident memory, in MiB (0: never).""",
    )
    max_batch: int = setting(
        512,
        number(1, 1000, integer=True),
        """Most jobs one claim may take.
        Batches grow only while claims come back full of jobs that take under 5 ms each and a
        batch would still run within about 25 ms of its own time (time its worker spent waiting
        for a CPU on a busy machine not counted; at most about 100 ms of wall time), and drop
        back to 1 after a slower job; 1 turns batching off.""",
    )
    batch_wait: float = setting(
        0.5,
        number(0.05, 86400),
        """Jobs of a batch that have not started
        are given back to the queue (without losing an attempt) once the job ahead of them has run
        this many seconds, so no batch waits long behind a slow job.""",
    )


@dataclass(frozen=True)
class RetryConfig:
    """`[retry]`: what happens after a handler raises."""

    max_attempts: int = setting(
        3,
        number(1, 1000, integer=True),
        """Attempts before a job fails for
        good (a handler's `max_attempts=` overrides it).""",
    )
    backoff_base: float = setting(
        1.0,
        number(0, 86400),
        """Back-off after attempt n:
        min(backoff_base * 2^n, backoff_max), minus up to 25% jitter (seconds).""",
    )
    backoff_max: float = setting(60.0, number(0, 7 * 86400), "The longest back-off (seconds).")


@dataclass(frozen=True)
class RetentionConfig:
    """`[retention]`: how long finished jobs are kept before the built-in job
    `cleanup:old-data` deletes them."""

    completed_after: str = setting(
        "7d",
        _DURATION,
        """Delete completed (and cancelled) jobs older
        than this: a duration like "7d", "12h", "1h30m", or "never". A cleanup:old-data job's
        payload {"retentionDays": N} overrides it.""",
    )
    failed_after: str = setting(
        "never",
        _DURATION,
        """Delete failed jobs older than this. Failed
        jobs are the dead-letter queue: by default ("never") they are kept until someone acts.""",
    )


@dataclass(frozen=True)
class SqliteConfig:
    """`[sqlite]`: the SQLite engine's settings (used when `database` is a SQLite file)."""

    synchronous: str = setting(
        "normal",
        choice("normal", "full"),
        """"normal": fast, survives
        process crashes, may lose the last commits on power loss. "full": fsync on every commit,
        survives power loss.""",
    )
    busy_timeout: float = setting(
        5.0,
        number(0, 600),
        """How long a connection waits for SQLite's
        write lock before retrying (seconds). The supervisor's own connection waits at most a
        quarter of the lease (0.5 to 5 s), once: its loop never waits long on another program's lock.""",
    )
    wal_checkpoint_mb: float = setting(
        64.0, number(1, 1 << 20), "Checkpoint (TRUNCATE) the WAL when it grows past this many MiB."
    )


_IDENTIFIER = Key(
    (str,),
    "a PostgreSQL identifier: letters, digits and _ (not first), at most 63",
    lambda v: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", v) is not None,
)


_LISTEN_URL = Key(
    (str,),
    "empty, or a postgresql:// URL to the server itself, without a password",
    lambda v: v == "" or (v.startswith(("postgresql://", "postgres://")) and not _has_password(v)),
)


def _has_password(url: str) -> bool:
    """Does ``url`` hold a password (``user:secret@`` or ``password=``)?"""
    head = url.split("://", 1)[1].split("/", 1)[0]
    return (":" in head.split("@")[0] if "@" in head else False) or "password=" in url.lower()


@dataclass(frozen=True)
class PostgresConfig:
    """`[postgres]`: the PostgreSQL engine's settings (used when `database` is a postgresql:// URL)."""

    schema: str = setting(
        "jobq",
        _IDENTIFIER,
        """The schema that holds jobq's tables (created and
        migrated on first use; several queues can share one database in schemas of their own).""",
    )
    connect_timeout: float = setting(
        5.0,
        number(0.1, 600),
        """How long to wait for a connection to
        the server before giving up, and the longest back-off between reconnection attempts (seconds).""",
    )
    mode: str = setting(
        "auto",
        choice("auto", "direct", "pooled"),
        """How jobq uses its
        connections: "direct" (to the server: the schema and the session's limits are set
        once per connection), "pooled" (through a transaction-pooling PgBouncer: nothing kept
        in a session, every statement names its schema, nothing prepared, limits set per
        transaction, idle workers poll), or "auto": direct, or pooled when the server refuses
        startup options as PgBouncer does. `jobq config check` says which one a URL gets.""",
    )
    listen: str = setting(
        "",
        _LISTEN_URL,
        """In pooled mode, a URL that reaches the
        server directly (not through the pooler), on which each host's supervisor holds one
        connection that hears new jobs and wakes its idle workers; without it idle workers
        poll every `worker.poll_interval`. No password here: libpq reads it from PGPASSWORD or
        ~/.pgpass.""",
    )


@dataclass(frozen=True)
class ScheduleConfig:
    """`[[schedule]]`: each entry enqueues `type` with `payload` at each tick of `cron` in
    `timezone`, exactly once even with several supervisors on the database."""

    name: str = setting(REQUIRED, NONEMPTY_STR, "Unique name of the entry (required).")
    type: str = setting(REQUIRED, JOB_TYPE, "Job type to enqueue (required).")
    cron: str = setting(
        REQUIRED,
        Key((str,), cron_mod.CRON_EXPECTED, lambda v: cron_mod.cron_error(v) is None),
        """Five cron fields: minute hour day-of-month month day-of-week (required).
                        Daylight-saving changes work as in cron: a local time that is skipped runs
                        right after the jump, one in the repeated hour runs once.""",
    )
    timezone: str = setting(
        "UTC",
        Key((str,), cron_mod.ZONE_EXPECTED, cron_mod.is_zone),
        "IANA time zone the cron fields are read in.",
    )
    payload: dict = setting(
        {},
        Key((dict,), "a table of JSON values (no TOML dates or times)", _json_ok),
        "Payload of each enqueued job.",
    )
    catch_up: str = setting(
        "latest",
        choice("latest", "none", "all"),
        """Ticks missed while no
        supervisor ran: "latest" runs the most recent one once, "none" skips them, "all" runs
        each (up to 1000).""",
    )


@dataclass(frozen=True)
class TypeConfig:
    """`[types."<job type>"]`: limits and defaults of one job type, across every worker and
    supervisor on the database. A job held back by a limit stays pending and does not hold up
    other types. Unset keys fall back to the global settings; a handler's
    `@handler(max_attempts=..., timeout=...)` overrides both."""

    concurrency: int | None = setting(
        None, number(1, 100_000, integer=True), "At most this many jobs of the type run at once."
    )
    rate: str | None = setting(
        None,
        Key((str,), durations.RATE_EXPECTED, durations.is_rate),
        """At most this many start in any period ("5/s", "3/10s").""",
    )
    max_attempts: int | None = setting(
        None, number(1, 1000, integer=True), "Attempts before a job of the type fails for good."
    )
    timeout: float | None = setting(
        None, number(0, 7 * 86400, open_lo=True), "Hard timeout of a job of the type (seconds)."
    )
    priority: int | None = setting(
        None,
        number(None, None, integer=True),
        "Priority of jobs of the type enqueued without one (higher runs first).",
    )
    backoff_base: float | None = setting(
        None, number(0, 86400), "Retry back-off base of the type (seconds)."
    )
    backoff_max: float | None = setting(
        None, number(0, 7 * 86400), "Longest retry back-off of the type (seconds)."
    )
    async_concurrency: int | None = setting(
        None,
        number(1, 10_000, integer=True),
        """Jobs of the type
        (an `async def` handler) one worker runs at once on its event loop (see Async jobs).""",
    )
    queue: str | None = setting(
        None, QUEUE_NAME, 'Queue of jobs of the type enqueued without one ("default").'
    )
    key: str | None = setting(
        None,
        KEY_PATH,
        """Where a job's limit key comes from when enqueued
        without `limit_key=`: a dotted path into its payload, "payload.customer_id".""",
    )
    concurrency_per_key: int | None = setting(
        None, number(1, 100_000, integer=True), "At most this many jobs of one key run at once."
    )
    rate_per_key: str | None = setting(
        None,
        Key((str,), durations.RATE_EXPECTED, durations.is_rate),
        'At most this many jobs of one key start in any period ("10/min").',
    )
    fair: bool | None = setting(
        None, BOOLEAN, "Hand due jobs round-robin across keys, not in claim order."
    )


@dataclass(frozen=True)
class QueueConfig:
    """`[queues."<name>"]`: a named queue (docs/queues.md). With `workers` it has a pool of its
    own; without, it shares the pool of `[supervisor] workers` minus the own pools, by `weight`."""

    workers: int | None = setting(
        None, number(0, 256, integer=True), "Worker processes of its own pool."
    )
    weight: int | None = setting(
        None,
        number(1, 1000, integer=True),
        """Its share of the shared
        pool's claims (default 1), when it has no pool of its own.""",
    )
    paused: bool = setting(False, BOOLEAN, "Claim nothing of it (as `jobq pause --queue NAME`).")


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
    if "handlers" in top:
        top["handlers"] = tuple(top["handlers"])
    built = {name: cls(**sections.get(name, {})) for name, cls in _SECTIONS.items()}
    cfg = Config(**top, **built, **tables)
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
    try:
        return cfg.replace(database=database_mod.resolve(cfg.database, base_dir))
    except ValueError as exc:
        raise ConfigError(
            f"{source}: key 'database' = {database_mod.redacted(cfg.database)!r}: {exc}"
        ) from None


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
