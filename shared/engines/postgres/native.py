"""The PostgreSQL engine's native column types: which of jobq's text columns become the server's
own types (times ``timestamptz``, JSON ``jsonb``), and how a value of the old text form converts
(each a ``USING`` expression over the column, ``{c}``); then, in a step of their own
(:data:`ID_COLUMNS`), the job ids as ``uuid`` (jobq's ids are 128 bits written as 32 hex
digits: 16 bytes a key instead of 33, a narrower primary key and index entries). jobq's code
still sees ids as 32-hex text: its connections read a ``uuid`` back so (:mod:`.loaders`) and
the server reads 32 hex digits as a ``uuid`` where the context says so.

Each list serves both ways of getting there: the migration step that converts in place (a new or
small schema, one transaction) and the batched upgrade an operator runs on a live queue.
"""

from __future__ import annotations

from typing import NamedTuple


class NativeColumn(NamedTuple):
    """One column to convert: ``table.column`` to ``type``, each old value by ``using``."""

    table: str
    column: str
    type: str
    using: str


_TIME = ("timestamptz", "{c}::timestamptz")
_JSON = ("jsonb", "{c}::jsonb")

_COLUMNS = {
    "jobs": {
        "payload": _JSON,
        "result": _JSON,
        "progress": _JSON,
        "run_at": _TIME,
        "started_at": _TIME,
        "completed_at": _TIME,
        "created_at": _TIME,
        "updated_at": _TIME,
        "heartbeat_at": _TIME,
        "ended_at": _TIME,
        "cancel_requested_at": _TIME,
    },
    "job_attempts": {"due_at": _TIME, "started_at": _TIME, "ended_at": _TIME},
    "processes": {"started_at": _TIME, "heartbeat_at": _TIME},
    "schedule_marks": {"last_tick": _TIME, "updated_at": _TIME},
    "type_starts": {"started_at": _TIME},
    "key_starts": {"started_at": _TIME},
}

NATIVE_COLUMNS: tuple[NativeColumn, ...] = tuple(
    NativeColumn(table, column, kind, using)
    for table, columns in _COLUMNS.items()
    for column, (kind, using) in columns.items()
)

_ID = ("uuid", "{c}::uuid")

# Every column that holds a job's id (the workflow edges' both ends, the attempt history's job).
ID_COLUMNS: tuple[NativeColumn, ...] = tuple(
    NativeColumn(table, column, *_ID)
    for table, column in (
        ("jobs", "id"),
        ("job_attempts", "job_id"),
        ("job_deps", "child"),
        ("job_deps", "parent"),
    )
)
