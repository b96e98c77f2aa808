"""Pooled mode: jobq's sessions through a pooler that hands a server connection to a client for
one transaction at a time (PgBouncer's ``pool_mode = transaction``).

Such a pooler shares each server session between many clients, so a client may keep nothing in
its session. In pooled mode a :class:`~.connection.PgConnection`:

- sends nothing in the startup packet (PgBouncer refuses ``options``): no ``search_path``, no
  session limits. Every statement names jobq's tables and functions with their schema instead
  (:class:`Qualifier`, applied to each statement by :class:`PooledConnection`'s cursors);
- prepares no named statement and lets the driver prepare none (``prepare_threshold=None``):
  a statement prepared on one server session is unknown on, or means another statement on,
  the next one. Each statement is parsed where it runs (unnamed, one round trip);
- sets the server limits of a session (:func:`local_limits`: ``idle_in_transaction_session_timeout``,
  and for the supervisor's session ``lock_timeout`` and ``statement_timeout``) with
  ``SET LOCAL`` at the start of each of its transactions, where they hold and end with it. A
  lone statement outside a transaction runs under the pooler's own limits (PgBouncer's
  ``query_timeout``, ``idle_transaction_timeout``: the manual's set-up gives them);
- keeps no session setting of a worker's (the planner settings of ``WORKER_SESSION``): the
  claim is planned on each run, as the planner sees the table;
- takes only transaction-scoped advisory locks (jobq takes no other kind);
- does not ``LISTEN`` (a notification goes to whichever client the server session serves
  next): idle workers poll, or the supervisor relays notifications it receives on one direct
  connection (``[postgres] listen``).

The mode is ``[postgres] mode``: ``direct``, ``pooled``, or ``auto`` (the default): direct,
unless the server refuses the startup options as a pooler does (:func:`refuses_options`), when
the connection is made again in pooled mode.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

MODES = ("auto", "direct", "pooled")

# jobq's tables and functions (shared.engines.postgres.schema): what pooled mode's statements
# name with their schema. An index or trigger name is never written in a statement at run time.
TABLES = (
    "meta",
    "jobs",
    "control",
    "processes",
    "schedule_marks",
    "type_starts",
    "job_attempts",
    "job_counts",
    "job_count_deltas",
    "key_starts",
    "key_turns",
    "job_deps",
    "db_now",
)
# A name of TABLES where a statement names a relation (after FROM, JOIN, UPDATE, INTO, TABLE,
# USING, ANALYZE, or as a row type after ::) or calls the function, unless already qualified. A
# keyword decides, not the name alone: ``count(*) AS jobs`` names an output column.
_NAMES = "|".join(TABLES)
_RELATION = re.compile(
    r"\b(FROM|JOIN|UPDATE|INTO|TABLE|USING|ANALYZE|TRUNCATE)(\s+)(" + _NAMES + r")(?![\w.\"])"
    r"|(::)()(" + _NAMES + r")(?![\w.\"])|()()\b(db_now)(?=\()",
    re.IGNORECASE,
)

# The limits a transaction may set for itself (shared.engines.postgres.connection's
# session_limits also gives TCP settings, which belong to the client's connection: the
# pooler's own tcp_keepalive and tcp_user_timeout stand in for them).
LOCAL_LIMITS = ("idle_in_transaction_session_timeout", "lock_timeout", "statement_timeout")


def refuses_options(exc: BaseException) -> bool:
    """Did a connection fail because the server (a pooler) refuses startup options?"""
    return "unsupported startup parameter" in str(exc)


def local_limits(limits: dict[str, str]) -> str | None:
    """One statement that sets ``limits`` for the current transaction (``set_config(..., true)``,
    as ``SET LOCAL``; one statement, so that it can go in a pipeline), or None when none of
    them can be set per transaction."""
    sets = [f"set_config('{k}', '{int(v)}', true)" for k, v in limits.items() if k in LOCAL_LIMITS]
    return f"SELECT {', '.join(sets)}" if sets else None


class Qualifier:
    """Statements with jobq's tables and functions named by schema, each rewritten once and
    kept (the store runs a few dozen distinct statements, thousands of times)."""

    def __init__(self, schema: str) -> None:
        self.prefix = f'"{schema}".'
        self._done: dict[str, str] = {}

    def __call__(self, sql: str) -> str:
        done = self._done.get(sql)
        if done is None:
            done = self._done[sql] = _RELATION.sub(self._qualified, sql)
        return done

    def _qualified(self, m: re.Match[str]) -> str:
        keyword, space, name = (g for g in m.groups() if g is not None)
        return f"{keyword}{space}{self.prefix}{name}"

    def query(self, query: Any) -> Any:
        """``query`` as a cursor takes it: text (or bytes) qualified, anything else as given."""
        if isinstance(query, str):
            return self(query)
        if isinstance(query, bytes):
            return self(query.decode()).encode()
        return query


class PooledCursor(psycopg.Cursor):
    """A cursor whose statements name jobq's tables by schema (its connection's ``qualify``)."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        return super().execute(self._conn.qualify.query(query), params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        return super().executemany(self._conn.qualify.query(query), params_seq, **kwargs)

    def stream(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        return super().stream(self._conn.qualify.query(query), params, **kwargs)

    def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        return super().copy(self._conn.qualify.query(statement), params, **kwargs)


class PooledConnection(psycopg.Connection):
    """A psycopg connection for pooled mode: its cursors qualify statements (``qualify``, set by
    :func:`connect_pooled`) and it prepares nothing."""

    qualify: Qualifier


def connect_pooled(url: str, schema: str, **kwargs: Any) -> PooledConnection:
    """Connect in pooled mode: no startup options, no prepared statements."""
    conn = PooledConnection.connect(
        url, cursor_factory=PooledCursor, prepare_threshold=None, **kwargs
    )
    conn.qualify = Qualifier(schema)
    return conn
