"""Where a jobq under test keeps its jobs, and a small engine-neutral reader of them.

A :class:`Db` is either a SQLite file (``Db.sqlite(folder, sync)``) or a schema on a PostgreSQL
server (``Db.postgres(folder, url, schema)``). It gives what the config file needs
(:meth:`Db.toml`), a :class:`shared.settings.config.Config` for a producer's ``JobQueue``, and
:meth:`Db.query`: one read in SQL both engines accept (the tables and columns are the same on
both, times as ISO text), on a short autocommit connection that never holds a snapshot open.
The bench reads through here, not through an engine's module.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Iterator

from shared.settings.config import Config, PostgresConfig, SqliteConfig


@dataclass
class Db:
    folder: str  # where the config file and logs go
    database: str  # the ``database`` value: a file path or a postgresql:// URL
    sync: str = "normal"  # SQLite's ``synchronous``
    schema: str | None = None  # PostgreSQL: jobq's schema
    _pg: Any = field(default=None, repr=False)

    @classmethod
    def sqlite(cls, folder: str, sync: str = "normal", name: str = "jobq.db") -> "Db":
        return cls(folder, os.path.join(folder, name), sync)

    @classmethod
    def postgres(cls, folder: str, url: str, schema: str) -> "Db":
        return cls(folder, url, schema=schema)

    @property
    def engine(self) -> str:
        return "postgresql" if self.schema is not None else "sqlite"

    def toml(self) -> dict[str, Any]:
        """The keys of jobq.toml that say where the database is."""
        if self.engine == "postgresql":
            return {"database": self.database, "postgres": {"schema": self.schema}}
        return {
            "database": os.path.basename(self.database)
            if os.path.dirname(self.database) == self.folder
            else self.database,
            "sqlite": {"synchronous": self.sync},
        }

    def config(self) -> Config:
        if self.engine == "postgresql":
            return Config(database=self.database, postgres=PostgresConfig(schema=self.schema))
        return Config(database=self.database, sqlite=SqliteConfig(synchronous=self.sync))

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows of one read (``?`` placeholders on both engines). Raises :class:`Missing` when
        jobq has not created its tables yet."""
        if self.engine == "postgresql":
            return self._pg_query(sql.replace("?", "%s"), params)
        c = sqlite3.connect(self.database, timeout=5.0)
        try:
            return c.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise Missing(str(exc)) from exc
            raise
        finally:
            c.close()

    def _pg_query(self, sql: str, params: tuple) -> list[tuple]:
        import psycopg
        from psycopg import errors

        if self._pg is None or self._pg.closed or self._pg.broken:
            # one autocommit connection, kept: a fresh one per poll would cost more than the read
            self._pg = psycopg.connect(
                self.database, autocommit=True, options=f"-c search_path={self.schema}"
            )
            # times and JSON read as jobq's own connections read them (text), as on SQLite
            from shared.engines.postgres.loaders import register_native

            register_native(self._pg.adapters)
        try:
            return self._pg.execute(sql, params).fetchall()
        except (errors.UndefinedTable, errors.InvalidSchemaName) as exc:
            raise Missing(str(exc)) from exc

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
            self._pg = None


class Missing(Exception):
    """jobq's tables do not exist (yet)."""


@contextlib.contextmanager
def place(folder: str, url: str | None, prefix: str = "run") -> Iterator[Db]:
    """Where one run keeps its jobs: a SQLite file in ``folder``, or a fresh schema on the
    server at ``url`` (jobq creates its tables; the schema is dropped after)."""
    if url is None:
        yield Db.sqlite(folder)
        return
    from .pg import fresh_schema

    with fresh_schema(url, prefix, create=False) as schema:
        db = Db.postgres(folder, url, schema)
        try:
            yield db
        finally:
            db.close()
