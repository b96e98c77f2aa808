"""The engines the tests run on (and, as a package, the engine tests: ``tests/engines/test_*.py``).

The contract suites: one fixture class per engine.

``tests/engines/test_store_contract.py`` and ``tests/engines/test_store_stateful.py`` take the ``engine``
fixture and reach the store only through :mod:`shared.engines.contract`'s protocols (opened with the
factory, ``shared.engines.open_store``). A second engine gets the whole suite by adding its class
to ``ENGINES``: how to name a fresh database, and how to empty it between examples (the one
thing the protocols do not offer).
"""

from __future__ import annotations

import dataclasses
import decimal
import os
import re
import sqlite3
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from shared.settings.config import Config
from shared.engines.contract import EngineStore
from shared.engines import open_store


class SqliteEngine:
    name = "sqlite"
    server_clock = False  # lease times come from the callers' (injectable) clock

    def __init__(self, folder: Path) -> None:
        self.database = f"sqlite://{Path(folder).resolve() / 'contract.db'}"  # the URL form

    def config(self, base: Config | None = None) -> Config:
        from shared.engines.location import resolve

        return (base or Config()).replace(database=resolve(self.database, None))

    def open(
        self, base: Config | None = None, *, impatient: bool = False, **kw: Any
    ) -> EngineStore:
        """A store through the factory; ``impatient``: one that gives up on a lock at once."""
        cfg = self.config(base)
        if impatient:
            cfg = cfg.replace(sqlite=dataclasses.replace(cfg.sqlite, busy_timeout=0.0))
        return open_store(cfg, **kw)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Another connection holds the write lock meanwhile."""
        c = sqlite3.connect(self.config().database, isolation_level=None)
        try:
            c.execute("BEGIN IMMEDIATE")
            yield
            c.execute("ROLLBACK")
        finally:
            c.close()

    def reset(self) -> None:
        """Empty every table (a new example on the same file)."""
        with sqlite3.connect(self.config().database, isolation_level=None) as c:
            c.execute("BEGIN IMMEDIATE")
            for table in (
                "jobs",
                "control",
                "processes",
                "schedule_marks",
                "type_starts",
                "job_attempts",
            ):
                c.execute(f"DELETE FROM {table}")
            c.execute("COMMIT")
        c.close()


POSTGRES_DEFAULT = "postgresql:///test?host=/var/run/postgresql"


def postgres_url() -> str:
    """The server the PostgreSQL tests use: ``JOBQ_TEST_POSTGRES``, or the local socket's
    database ``test``."""
    return os.environ.get("JOBQ_TEST_POSTGRES") or POSTGRES_DEFAULT


def postgres_problem() -> str | None:
    """Why the PostgreSQL tests cannot run here (None: they can)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        psycopg.connect(postgres_url(), connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {postgres_url()}: {' '.join(str(exc).split())}"
    return None


def require_postgres() -> None:
    """Skip the calling test without a server, or fail under ``JOBQ_REQUIRE_POSTGRES=1``."""
    import pytest

    problem = postgres_problem()
    if problem is None:
        return
    if os.environ.get("JOBQ_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"JOBQ_REQUIRE_POSTGRES=1 but {problem}")
    pytest.skip(problem)


class PostgresEngine:
    """A schema of its own on the test server (dropped by :meth:`drop`)."""

    name = "postgresql"
    server_clock = (
        True  # leases are written and aged on the server's clock (a FakeClock cannot move it)
    )
    TABLES = (
        "jobs",
        "control",
        "processes",
        "schedule_marks",
        "type_starts",
        "job_attempts",
        "job_counts",
        "job_count_deltas",
    )

    def __init__(self, folder: Path) -> None:
        require_postgres()
        self.database = postgres_url()
        self.schema = f"jobq_t{uuid.uuid4().hex[:12]}"

    def config(self, base: Config | None = None) -> Config:
        cfg = (base or Config()).replace(database=self.database)
        return cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=self.schema))

    def open(
        self, base: Config | None = None, *, impatient: bool = False, **kw: Any
    ) -> EngineStore:
        cfg = self.config(base)
        if impatient:
            sep = "&" if "?" in self.database else "?"
            cfg = cfg.replace(database=f"{self.database}{sep}options=-c%20lock_timeout%3D50")
        return open_store(cfg, **kw)

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.database, autocommit=True)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Another connection holds a lock on the jobs table that every write waits for."""
        with self._admin() as c:
            c.execute("BEGIN")
            c.execute(f'LOCK TABLE "{self.schema}".jobs IN ACCESS EXCLUSIVE MODE')
            yield
            c.execute("ROLLBACK")

    def reset(self) -> None:
        with self._admin() as c:
            c.execute("TRUNCATE " + ", ".join(f'"{self.schema}".{t}' for t in self.TABLES))

    def drop(self) -> None:
        with self._admin() as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


ENGINES = [SqliteEngine, PostgresEngine]


# -- the engine a behaviour test runs on (the ``database`` fixture) -----------------------------------------
#
# A behaviour suite (``pytestmark = pytest.mark.engines``) runs each test that asks for ``database``
# (directly, or through ``make_config``/``queue``/``sup_factory``) once per engine. The config
# files the helpers write (``conftest.make_config``, ``tests.proc.write_config``) name the engine
# under test: SQLite keeps the file next to the config, as always; PostgreSQL gets the test
# server and a fresh schema. Processes started by the test read the same file, so they follow.

DATABASE_VAR = "JOBQ_TEST_DATABASE"  # set while a test runs on PostgreSQL: the server's URL
SCHEMA_VAR = "JOBQ_TEST_SCHEMA"  # ... and the schema of its own, dropped after it


def under_test() -> dict[str, Any]:
    """The config keys that point a test config at the engine under test: ``{}`` on SQLite (the
    helper's own file name stays), ``database`` and ``postgres.schema`` on PostgreSQL."""
    url, schema = os.environ.get(DATABASE_VAR), os.environ.get(SCHEMA_VAR)
    if not url:
        return {}
    return {"database": url, "postgres": {"schema": schema}}


def merge(data: dict[str, Any], sections: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``sections`` laid over it, a table's keys one by one."""
    for name, value in sections.items():
        if isinstance(value, dict):
            data[name] = {**data.get(name, {}), **value}
        else:
            data[name] = value
    return data


def _as_jsonb(value: Any) -> Any:
    """See :meth:`Database.kept`."""
    if isinstance(value, str):
        return re.sub("[\x00\ud800-\udfff]", lambda m: "\\u%04x" % ord(m.group()), value)
    if isinstance(value, list):
        return [_as_jsonb(v) for v in value]
    if isinstance(value, dict):
        return {_as_jsonb(k): _as_jsonb(v) for k, v in value.items()}
    if isinstance(value, float) and "e" in repr(value) and value == int(value):
        return int(decimal.Decimal(repr(value)))
    return value


class Database:
    """The engine a behaviour test runs on. ``name`` is 'sqlite' or 'postgresql'; on
    PostgreSQL, ``schema`` is the test's own (created by jobq on first use, dropped by
    :meth:`drop`), and :attr:`env` the variables that make the config helpers name it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.schema: str | None = None
        self.env: dict[str, str] = {}
        self.schemas: list[str] = []  # all this test's schemas (another() adds to them)
        if name == "postgresql":
            require_postgres()
            self.schema = f"jobq_b{uuid.uuid4().hex[:12]}"
            self.env = {DATABASE_VAR: postgres_url(), SCHEMA_VAR: self.schema}
            self.schemas = [self.schema]

    def kept(self, value: Any) -> Any:
        """``value`` (decoded JSON) as this engine gives it back. PostgreSQL's jsonb holds
        neither a NUL nor a lone surrogate in a string: each comes back as the text of its JSON
        escape (``\\u0000``); a float written with an exponent comes back as the number it
        spells (``1e308``: the integer 10**308)."""
        return _as_jsonb(value) if self.name == "postgresql" else value

    def sections(self) -> dict[str, Any]:
        """The config keys that name this engine in a test config (``{}`` on SQLite: the
        helper's own file name stays)."""
        return merge(
            {},
            self.env and {"database": self.env[DATABASE_VAR], "postgres": {"schema": self.schema}},
        )

    def config(self, folder: Path, base: Config | None = None, file: str = "q.db") -> Config:
        """``base`` (default: the defaults) on this engine: the SQLite file ``folder/file``, or
        the test server and this test's schema."""
        base = base or Config()
        if self.schema is None:
            return base.replace(database=str(Path(folder) / file))
        return base.replace(
            database=postgres_url(), postgres=dataclasses.replace(base.postgres, schema=self.schema)
        )

    def another(self) -> dict[str, Any]:
        """Config keys for one more fresh database of this engine (a set-up tried again): ``{}``
        on SQLite (the caller's new folder makes a new file), a new schema on PostgreSQL,
        dropped with this one."""
        if self.schema is None:
            return {}
        self.schemas.append(f"{self.schema}_{len(self.schemas)}")
        return {"postgres": {"schema": self.schemas[-1]}}

    def drop(self) -> None:
        """Drop the schemas (PostgreSQL), waiting a little for the test's last connections."""
        if not self.schemas:
            return
        import psycopg

        with psycopg.connect(postgres_url(), autocommit=True) as c:
            c.execute("SET lock_timeout = '20s'")
            for schema in self.schemas:
                c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class _Row(dict):
    """A PostgreSQL row read like ``sqlite3.Row``: by column name or by position."""

    def __init__(self, names: list[str], values: Any) -> None:
        super().__init__(zip(names, values))
        self._values = tuple(values)

    def __getitem__(self, key: Any) -> Any:
        return self._values[key] if isinstance(key, int) else super().__getitem__(key)

    def keys(self) -> Any:
        return list(super().keys())


def _row_factory(cursor: Any) -> Any:
    names = [c.name for c in cursor.description or ()]
    return lambda values: _Row(names, values)


class RawPostgres:
    """A connection to a config's schema, used like the tests' ``sqlite3`` connections
    (``?`` placeholders, rows by name or position, autocommit, ``with`` closes it)."""

    def __init__(self, config: Config) -> None:
        import psycopg

        from shared.engines.postgres.loaders import register_native

        self.conn = psycopg.connect(config.database, autocommit=True, row_factory=_row_factory)
        self.conn.execute(f'SET search_path TO "{config.postgres.schema}"')
        register_native(self.conn.adapters)  # times and JSON read as jobq's text, as on SQLite

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql.replace("%", "%%").replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Any) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(sql.replace("%", "%%").replace("?", "%s"), rows)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RawPostgres":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def raw(config: Config) -> Any:
    """A plain connection to ``config``'s database for a test that reads or writes around
    jobq: ``sqlite3`` (autocommit, ``sqlite3.Row``) or :class:`RawPostgres`."""
    if config.database.startswith(("postgresql:", "postgres:")):
        return RawPostgres(config)
    conn = sqlite3.connect(config.database, isolation_level=None, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def missing_table(exc: BaseException) -> bool:
    """Is ``exc`` a driver's "no such table" (the schema is not made yet)?"""
    return "no such table" in str(exc) or type(exc).__name__ == "UndefinedTable"
