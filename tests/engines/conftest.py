"""Fixtures of the engine tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.engines import PostgresEngine


@pytest.fixture
def pg(tmp_path) -> Iterator[PostgresEngine]:
    """A PostgreSQL engine in a schema of its own, dropped afterwards (skips without a server,
    fails under JOBQ_REQUIRE_POSTGRES=1). A module may define its own ``pg`` (test_copy does)."""
    engine = PostgresEngine(tmp_path)
    yield engine
    engine.drop()
