"""The commented default ``jobq.toml`` that ``jobq config init`` writes.

Generated from the config schema (``shared.config.SCHEMA``) and the defaults of ``Config``, so a
key added to the schema appears here with its default at once; :data:`DOCS` explains each key
(a key without an entry is described by what it accepts).
"""
from __future__ import annotations

import textwrap
from typing import Any

from shared.config import SCHEMA, Config

from .tomledit import toml_value

HEADER = """\
# jobq configuration (written by `jobq config init`). Every key is optional; the values below are
# the defaults. Times are in seconds. Edit this file while the supervisor runs: it reloads within
# a few seconds (or at once on SIGHUP, `jobq reload`) and applies the new settings to new claims.
# `jobq config set KEY VALUE` edits one key and keeps these comments.
"""

FOOTER = """
# Recurring jobs ([[schedule]]) and limits per job type ([types."<type>"]) are described in the
# jobq.toml that ships with jobq.
"""

DOCS: dict[str, str] = {
    "database": "SQLite database file, relative to this file's folder.",
    "handlers": 'Python modules whose @handler functions the workers run, e.g. ["myapp.jobs"].',
    "synchronous": '"normal": fast, survives process crashes, may lose the last commits on power loss. '
                   '"full": fsync on every commit, survives power loss.',
    "busy_timeout": "How long a connection waits for SQLite's write lock before retrying (seconds).",
    "max_payload_bytes": "Largest accepted payload, in bytes of JSON.",
    "max_result_bytes": "Largest result a handler may return, in bytes of JSON; a larger one fails its job.",
    "log_level": 'Log level: "debug", "info", "warning" or "error".',
    "log_format": 'Log format: "text", or "json" (one object per line).',
    "metrics_port": "Prometheus metrics, served by the supervisor at http://metrics_host:metrics_port/metrics "
                    "(0: off).",
    "metrics_host": '"127.0.0.1" answers this machine only; "0.0.0.0" answers on every interface.',
    "supervisor.workers": "Number of worker processes (jobq run --workers N overrides it).",
    "supervisor.shutdown_timeout": "On SIGTERM: how long running jobs may take to finish before their "
                                   "workers are killed.",
    "supervisor.kill_grace": "After SIGTERM to a timed-out worker: how long before SIGKILL.",
    "supervisor.maintenance_interval": "How often the supervisor checks leases, timeouts, the WAL and this file.",
    "supervisor.restart_backoff_max": "Cap of the per-slot restart back-off when a worker keeps crashing.",
    "supervisor.wal_checkpoint_mb": "Checkpoint (TRUNCATE) the WAL when it grows past this many MiB.",
    "supervisor.config_poll_interval": "How often to look for edits of this file (0 disables; SIGHUP still reloads).",
    "worker.poll_interval": "How long an idle worker sleeps between claims.",
    "worker.job_timeout": "Default hard timeout of a job (a handler's timeout= overrides it).",
    "worker.heartbeat_interval": "How often a worker refreshes the lease of its running job.",
    "worker.lease_timeout": "A running job whose lease is older than this is taken from its (hung) worker.",
    "worker.max_jobs": "Replace a worker after this many jobs (0: never).",
    "worker.max_memory_mb": "Replace a worker after a job leaves it above this resident memory, in MiB (0: never).",
    "worker.max_batch": "Most jobs one claim may take (1 turns batching off).",
    "worker.batch_wait": "Seconds the unstarted rest of a batch waits behind a running job before it is given back.",
    "retry.max_attempts": "Attempts before a job fails for good (a handler's max_attempts= overrides it).",
    "retry.backoff_base": "Back-off after attempt n: min(backoff_base * 2^n, backoff_max), minus up to 25% jitter.",
    "retry.backoff_max": "The longest back-off, in seconds.",
    "retention.completed_after": 'Delete completed (and cancelled) jobs older than this: "7d", "12h", ... or "never".',
    "retention.failed_after": 'Delete failed jobs older than this ("never": they are the dead-letter queue).',
}


def default_toml() -> str:
    """The text of a commented ``jobq.toml`` holding every key at its default."""
    data = Config().to_dict()
    out = [HEADER]
    for section, keys in SCHEMA.items():
        values = data if section == "" else data.get(section, {})
        out.append(f"\n[{section}]\n" if section else "\n")
        for key, spec in keys.items():
            dotted = f"{section}.{key}" if section else key
            doc = DOCS.get(dotted) or f"Expected: {spec.expected}."
            out += [f"# {ln}\n" for ln in textwrap.wrap(doc, 96)]
            out.append(f"{key} = {_value(values.get(key))}\n")
    out.append(FOOTER)
    return "".join(out)


def _value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return toml_value(value)
