"""The PostgreSQL engine's side of ``jobq copy`` (the ``TransferStore`` part of
:mod:`shared.engines.contract`).

:class:`PgTransfer` is a mixin of :class:`PgStore` (it needs :class:`PgConnection`'s ``conn``,
``_write`` and ``_tx``). A chunk of rows travels as one ``jsonb`` parameter expanded by
``jsonb_populate_recordset`` against the table's own row type, so an import is a handful of
round trips whatever its size: insert the jobs, their workflow edges (and settle across the
copy: :meth:`ExportSql._import_flows`), sort out the ones skipped, insert the history of the new
ones, all in one transaction. Inserts fire the row triggers (count deltas) like any enqueue
of a flow; the attempt history is copied as rows (its trigger fires on updates only).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import psycopg
from psycopg.types.json import Jsonb

from shared.engines.contract import ATTEMPT_FIELDS, JOB_FIELDS, Imported
from ..sql.transfer import ATTEMPT_COLUMNS as _ATTEMPT_COLUMNS, COLUMNS as _COLUMNS
from .dialect import DIALECT, pg_json
from .native import NATIVE_COLUMNS

# The JSON columns travel as JSON strings (their text, as every engine exports it): each string's
# text read as jsonb (``#>> '{}'``: a JSON null stays NULL). Times are ISO strings, which
# populate reads as the timestamptz they are.
_JSON = {c.column for c in NATIVE_COLUMNS if c.table == "jobs" and c.type == "jsonb"}
_VALUES = ", ".join(f"(r.{f} #>> '{{}}')::jsonb" if f in _JSON else f"r.{f}" for f in JOB_FIELDS)
# ON CONFLICT without a target: a taken id and a taken key (the partial unique index) both skip.
_INSERT = (
    f"INSERT INTO jobs ({_COLUMNS}) SELECT {_VALUES} "
    "FROM jsonb_populate_recordset(NULL::jobs, %s) AS r "
    "ON CONFLICT DO NOTHING RETURNING id"
)
# seq is left to its sequence; ordinality keeps the exported order (oldest first per job).
_INSERT_ATTEMPTS = (
    f"INSERT INTO job_attempts ({_ATTEMPT_COLUMNS}) SELECT {_ATTEMPT_COLUMNS} "
    "FROM jsonb_populate_recordset(NULL::job_attempts, %s) WITH ORDINALITY AS a "
    "ORDER BY a.ordinality"
)
# Texts that may hold a NUL, written so that PostgreSQL can: an error as the engine writes one
# (dialect.pg_text: the NUL visible as the four characters \x00); a payload, result or progress,
# JSON, with a raw NUL escaped the JSON way (\u0000), then as the engine stores JSON
# (dialect.pg_json: a NUL that jsonb cannot hold kept visible as the escape's text). Attempts:
# every text as an error.
_FREE_TEXT = {"payload": "\\u0000", "result": "\\u0000", "progress": "\\u0000", "error": "\\x00"}
_REFUSED = (psycopg.DataError, psycopg.IntegrityError)  # the server refuses a row's values
_UNCHANGED = (
    "jsonb_populate_recordset(NULL::jobs, %s) AS r WHERE j.id = r.id AND j.status = r.status "
    "AND j.attempts = r.attempts AND j.updated_at = r.updated_at AND j.status <> 'running'"
)
_DELETE_UNCHANGED = f"DELETE FROM jobs j USING {_UNCHANGED} RETURNING j.id"
# A parent moved away is not a cancelled one: unmarked first (its row locked until the delete),
# its delete settles no child here.
_UNMARK_UNCHANGED = f"UPDATE jobs j SET has_children = 0 FROM {_UNCHANGED} AND j.has_children <> 0"


class PgTransfer:
    """Import of whole job rows and the delete of copied ones (the exports are
    :mod:`shared.engines.sql.transfer`'s)."""

    def import_jobs(
        self,
        rows: Sequence[Mapping[str, Any]],
        attempts: Sequence[Mapping[str, Any]] = (),
        edges: Sequence[Mapping[str, Any]] = (),
    ) -> Imported:
        if not rows:
            return Imported()
        done = Imported()
        jobs = [job for job in (_storable(r, done.rejected) for r in rows) if job is not None]
        history = _storable_history(attempts, {j["id"] for j in jobs})
        return self._tx(  # type: ignore[attr-defined]
            lambda c: self._import_rows(c, jobs, history, edges, done.rejected)
        )

    def _import_rows(
        self,
        c: psycopg.Connection,
        jobs: list[dict[str, Any]],
        history: list[dict[str, Any]],
        edges: Sequence[Mapping[str, Any]],
        rejected: dict[str, str],
    ) -> Imported:
        """The import's transaction: the storable ``jobs`` (``rejected``: those that are not),
        their workflow ``edges``, the ones skipped sorted out, the ``history`` of the new ones,
        and idle workers woken if one is pending."""
        out = Imported(rejected=dict(rejected))
        new = _insert_jobs(c, jobs, out.rejected)
        out.inserted = [j["id"] for j in jobs if j["id"] in new]
        out.edges = self._import_flows(c, out.inserted, edges)  # type: ignore[attr-defined]
        self._classify(
            c,
            [j for j in jobs if j["id"] not in new and j["id"] not in out.rejected],  # type: ignore[attr-defined]
            out,
        )
        mine = [a for a in history if a["job_id"] in new]
        if mine:
            c.execute(_INSERT_ATTEMPTS, (Jsonb(mine),))
        if any(j["status"] == "pending" for j in jobs if j["id"] in new):
            c.execute("SELECT pg_notify(%s, '')", (self.channel,))  # type: ignore[attr-defined]
        return out

    def delete_copied(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        if not rows:
            return []
        keys = Jsonb(
            [
                {
                    "id": r["id"],
                    "status": r["status"],
                    "attempts": r["attempts"],
                    "updated_at": r["updated_at"],
                }
                for r in rows
            ]
        )

        def tx(c: Any) -> set[str]:  # psycopg.Connection, its rows dicts (the store's row factory)
            c.execute(_UNMARK_UNCHANGED, (keys,))
            return {h["id"] for h in c.execute(_DELETE_UNCHANGED, (keys,)).fetchall()}

        gone = self._tx(tx)  # type: ignore[attr-defined]
        return [r["id"] for r in rows if r["id"] in gone]


def _storable(row: Mapping[str, Any], rejected: dict[str, str]) -> dict[str, Any] | None:
    """``row`` as PostgreSQL stores it: a NUL in a free text (payload, result, error) escaped,
    see ``_FREE_TEXT``. None, with the reason in ``rejected``, when a NUL is in a column that
    names things (id, type, key, owner...), which text here cannot hold, or when the id is not
    32 hex digits (ids here are uuids)."""
    if not DIALECT.is_id(row["id"]):
        rejected[row["id"]] = "its id is not 32 hex digits, which a job id here (a uuid) must be"
        return None
    out = {}
    for f in JOB_FIELDS:
        value = row[f]
        if isinstance(value, str) and "\x00" in value:
            if f not in _FREE_TEXT:
                rejected[row["id"]] = (
                    f"its {f} {value!r} contains NUL, which PostgreSQL text cannot hold"
                )
                return None
            value = value.replace("\x00", _FREE_TEXT[f])
        out[f] = pg_json(value) if f in _JSON else value
    return out


def _storable_history(
    attempts: Sequence[Mapping[str, Any]], wanted: set[str]
) -> list[dict[str, Any]]:
    """The attempts of the jobs ``wanted``, every text as an error (a NUL as ``\\x00``)."""
    return [
        {
            f: a[f].replace("\x00", "\\x00") if isinstance(a[f], str) else a[f]
            for f in ATTEMPT_FIELDS
        }
        for a in attempts
        if a["job_id"] in wanted
    ]


def _insert_jobs(
    c: psycopg.Connection, jobs: Sequence[Mapping[str, Any]], rejected: dict[str, str]
) -> set[str]:
    """Insert ``jobs`` in one statement, in a savepoint: a row the server refuses spoils only
    that, and the chunk goes again a row at a time (:func:`_insert_one_by_one`). The ids
    inserted."""
    try:
        with c.transaction():  # a savepoint: a row the server refuses spoils only this
            return (
                {h["id"] for h in c.execute(_INSERT, (Jsonb(jobs),)).fetchall()} if jobs else set()
            )
    except _REFUSED:
        return _insert_one_by_one(c, jobs, rejected)


def _insert_one_by_one(
    c: psycopg.Connection, jobs: Sequence[Mapping[str, Any]], rejected: dict[str, str]
) -> set[str]:
    """The chunk again, a row at a time, each in a savepoint: the ids inserted; the rows the
    server refuses (a number out of range, a broken constraint) go to ``rejected`` with why."""
    new: set[str] = set()
    for job in jobs:
        try:
            with c.transaction():
                new.update(h["id"] for h in c.execute(_INSERT, (Jsonb([job]),)).fetchall())
        except _REFUSED as exc:
            rejected[job["id"]] = " ".join(str(exc).split())
    return new
