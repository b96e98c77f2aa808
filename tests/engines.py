"""The engines the contract tests run on: one fixture class per engine (issue 13).

``tests/test_store_contract.py`` and ``tests/test_store_stateful.py`` take the ``engine``
fixture and reach the store only through :mod:`shared.contract`'s protocols (opened with the
factory, ``shared.engines.open_store``). A second engine gets the whole suite by adding its class
to ``ENGINES``: how to name a fresh database, and how to empty it between examples (the one
thing the protocols do not offer).
"""
from __future__ import annotations

import dataclasses
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from shared.config import Config
from shared.contract import Store
from shared.engines import open_store


class SqliteEngine:
    name = "sqlite"

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


ENGINES = [SqliteEngine]
