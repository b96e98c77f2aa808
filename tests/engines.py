"""The engines the contract tests run on: one fixture class per engine (issue 13).

``tests/test_store_contract.py`` and ``tests/test_store_stateful.py`` take the ``engine``
fixture and reach the store only through :mod:`shared.contract`'s protocols (opened with the
factory, ``shared.engines.open_store``). A second engine gets the whole suite by adding its class
to ``ENGINES``: how to name a fresh database, and how to empty it between examples (the one
thing the protocols do not offer).
"""
from __future__ import annotations

import dataclasses
import os
import sqlite3
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from shared.config import Config
from shared.contract import Store
from shared.engines import open_store


class SqliteEngine:
    name = "sqlite"
    server_clock = False  # lease times come from the callers' (injectable) clock

    def __init__(self, folder: Path) -> None:
        self.database = f"sqlite://{Path(folder).resolve() / 'contract.db'}"  # the URL form

    def config(self, base: Config | None = None) -> Config:
        from shared.database import resolve
        return (base or Config()).replace(database=resolve(self.database, None))

    def open(self, base: Config | None = None, *, impatient: bool = False, **kw: Any) -> Store:
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
            for table in ("jobs", "control", "processes", "schedule_marks", "type_starts", "job_attempts"):
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
    server_clock = True  # leases are written and aged on the server's clock (a FakeClock cannot move it)
    TABLES = ("jobs", "control", "processes", "schedule_marks", "type_starts", "job_attempts",
              "job_counts", "job_count_deltas")

    def __init__(self, folder: Path) -> None:
        require_postgres()
        self.database = postgres_url()
        self.schema = f"jobq_t{uuid.uuid4().hex[:12]}"

    def config(self, base: Config | None = None) -> Config:
        cfg = (base or Config()).replace(database=self.database)
        return cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=self.schema))

    def open(self, base: Config | None = None, *, impatient: bool = False, **kw: Any) -> Store:
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
