"""The tables of ``jobq.toml``: one frozen dataclass per table (``[supervisor]``, ``[worker]``,
``[retry]``, ``[retention]``, each ``[[schedule]]`` entry, each ``[types."<job type>"]`` and each
``[queues."<name>"]``; the engines' ``[sqlite]`` and ``[postgres]`` are
:mod:`shared.settings.enginesections`), every key declared once as a field made by
:func:`shared.settings.schema.setting`: its type, default, range and description.

:class:`shared.settings.config.Config` gathers these tables (one :func:`section` field each, or a
collection of named entries) and validates a file against them; import them from there or here.
A new key of a table is a one-line change here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.settings import cron as cron_mod
from shared.settings import durations
from shared.settings.schema import (
    BOOLEAN,
    JOB_TYPE,
    NONEMPTY_STR,
    REQUIRED,
    Key,
    choice,
    number,
    setting,
)
from shared.model.queuenames import KEY_PATH, QUEUE_LIST, QUEUE_NAME


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


_DURATION = Key((str,), durations.DURATION_EXPECTED, durations.is_duration)


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
    control_poll_interval: float = setting(
        10.0,
        number(0.05, 3600),
        """PostgreSQL, while the supervisor
        listens for controls (a cancel of a running job, `jobq scale`): how often it and its busy
        workers read them anyway, should a notification be missed (seconds). Elsewhere they are
        read every round, as each busy worker's check-in.""",
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
        database changes (SQLite: inotify on the WAL file; PostgreSQL: a notification) or when a
        delayed job falls due; this is how often each polls where nothing wakes them (no
        inotify; PostgreSQL through a pooler without `postgres.listen`), in seconds. Otherwise
        they read as a backstop every 5 s, or this interval if longer (PostgreSQL: only each
        pool's idle lead, every 15 s while its supervisor listens).""",
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
        min(backoff_base * 2^n, backoff_max), minus up to `jitter` of it, at random (seconds).""",
    )
    backoff_max: float = setting(60.0, number(0, 7 * 86400), "The longest back-off (seconds).")
    jitter: float = setting(
        0.25, number(0, 1), "The fraction a back-off may be drawn down by, at random (0 to 1)."
    )


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
    `@handler(max_attempts=..., timeout=...)` overrides both, while a task's retry options in
    code (`backoff=`, `jitter=`, `max_delay=`) are its defaults, which these keys override."""

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
    jitter: float | None = setting(
        None, number(0, 1), "Fraction a retry back-off of the type may be drawn down by."
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
