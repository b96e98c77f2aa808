"""The engines' tables of ``jobq.toml``: ``[sqlite]`` and ``[postgres]``, as frozen dataclasses
whose fields are the keys (:func:`shared.settings.schema.setting`), like the other tables of
:mod:`shared.settings.sections`. An engine reads its own table (``Engine.section``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.settings.schema import Key, choice, number, setting


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
    shown=lambda v: _hidden(v) if isinstance(v, str) else v,
)


def _hidden(url: str) -> str:
    """``url`` with its password replaced by ``***`` (an error may show the value)."""
    url = re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)
    return re.sub(r"(?i)(password=)[^&#]*", r"\1***", url)


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
