"""The SQLite engine's side of ``jobq copy`` (the ``TransferStore`` part of
:mod:`shared.engines.contract`).

:class:`SqliteTransfer` is a mixin of :class:`SqliteStore` (the exports, plain reads paged by
id, are :mod:`shared.engines.sql.transfer`'s): an import is one ``BEGIN IMMEDIATE`` transaction per call (the caller sends a few hundred rows),
so a copy interrupted anywhere leaves whole chunks, and running it again skips them by id.
Inserted rows fire the count triggers like any insert; the attempt trigger fires on updates only,
so the history is copied as rows, for the jobs inserted in the same transaction, as are their
workflow edges (and the settling that follows: :meth:`ExportSql._import_flows`).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Mapping, Sequence

from shared.engines.contract import ATTEMPT_FIELDS, JOB_FIELDS, Imported
from ..sql.transfer import COLUMNS as _COLUMNS

# ON CONFLICT without a target: the id and the partial unique index on key both skip the row.
_INSERT = (
    f"INSERT INTO jobs ({_COLUMNS}) VALUES ({', '.join('?' * len(JOB_FIELDS))}) "
    "ON CONFLICT DO NOTHING"
)
_INSERT_ATTEMPT = (
    f"INSERT INTO job_attempts ({', '.join(ATTEMPT_FIELDS)}) "
    f"VALUES ({', '.join('?' * len(ATTEMPT_FIELDS))})"
)
_UNCHANGED = "id = ? AND status = ? AND attempts = ? AND updated_at = ? AND status <> 'running'"
_DELETE_UNCHANGED = f"DELETE FROM jobs WHERE {_UNCHANGED}"
# A parent moved away is not a cancelled one: unmarked first, its delete settles no child here.
_UNMARK_UNCHANGED = f"UPDATE jobs SET has_children = 0 WHERE {_UNCHANGED} AND has_children <> 0"
# A row SQLite refuses (a broken constraint, a number beyond 64 bits): named, not copied.
_REFUSED = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError, OverflowError)


class SqliteTransfer:
    """Import of whole job rows and the delete of copied ones (needs the store's ``_immediate``)."""

    def import_jobs(
        self,
        rows: Sequence[Mapping[str, Any]],
        attempts: Sequence[Mapping[str, Any]] = (),
        edges: Sequence[Mapping[str, Any]] = (),
    ) -> Imported:
        def tx(c: sqlite3.Connection) -> Imported:
            done = Imported()
            skipped = []
            for r in rows:
                try:
                    inserted = c.execute(_INSERT, [r[f] for f in JOB_FIELDS]).rowcount == 1
                except _REFUSED as exc:  # only this statement is undone; the rest goes on
                    done.rejected[r["id"]] = " ".join(str(exc).split())
                    continue
                if inserted:
                    done.inserted.append(r["id"])
                else:
                    skipped.append(r)
            done.edges = self._import_flows(c, done.inserted, edges)  # type: ignore[attr-defined]
            self._classify(c, skipped, done)  # type: ignore[attr-defined]
            new = set(done.inserted)
            c.executemany(
                _INSERT_ATTEMPT,
                [[a[f] for f in ATTEMPT_FIELDS] for a in attempts if a["job_id"] in new],
            )
            return done

        return self._immediate(tx)  # type: ignore[attr-defined]

    def delete_copied(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            gone = []
            for r in rows:
                key = (r["id"], r["status"], r["attempts"], r["updated_at"])
                c.execute(_UNMARK_UNCHANGED, key)
                if c.execute(_DELETE_UNCHANGED, key).rowcount == 1:
                    gone.append(r["id"])
            return gone

        return self._immediate(tx)  # type: ignore[attr-defined]
