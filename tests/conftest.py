"""Generic fixtures for the core tests: a database path in tmp_path, a FakeClock, a config file
writer and a JobQueue on that database. Everything runs on real SQLite files under tmp_path."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from shared.api import JobQueue
from shared.clock import FakeClock
from shared.config import load


def make_config(tmp_path: Path, **overrides: Any) -> Path:
    """Write ``tmp_path/jobq.toml`` and return its path.

    Top-level keys are given as keywords (``max_payload_bytes=100``); a section as a dict
    (``worker={"poll_interval": 0.05}``). ``database`` defaults to ``jobq.db`` next to the file.
    """
    data: dict[str, Any] = {"database": "jobq.db", "handlers": []}
    data.update(overrides)
    path = Path(tmp_path) / "jobq.toml"
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.fixture(name="make_config")
def _make_config_fixture():
    """The :func:`make_config` helper, as a fixture (no import of conftest needed)."""
    return make_config


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jobq.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return make_config(tmp_path)


@pytest.fixture
def queue(config_path: Path, clock: FakeClock):
    q = JobQueue(config=load(config_path), clock=clock)
    yield q
    q.close()


@pytest.fixture
def sup_factory():
    """Start real supervisors (``tests.proc.Running``) for a test; all are stopped, with every
    process they started, when it ends."""
    from tests.proc import Running
    started: list = []

    def start(config: Path, *args: str):
        r = Running(config, *args)
        started.append(r)
        return r
    yield start
    for r in started:
        r.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path):
    """One engine of ``tests.engines.ENGINES`` (the contract suite runs on each; PostgreSQL
    skips without a server unless JOBQ_REQUIRE_POSTGRES=1). Its database is dropped after."""
    from tests.engines import ENGINES
    made = next(e for e in ENGINES if e.name == request.param)(tmp_path)
    yield made
    if hasattr(made, "drop"):
        made.drop()
