"""Generic fixtures for the core tests: a database path in tmp_path, a FakeClock, a config file
writer and a JobQueue on that database, and the engine a test runs on.

A module marked ``pytestmark = pytest.mark.engines`` (the behaviour suites) runs each test that
asks for ``database`` (or for ``make_config``, ``config_path``, ``queue``, ``sup_factory``, which ask
for it) on SQLite and on PostgreSQL; ``@pytest.mark.engine_only("sqlite", reason=...)`` keeps a
test to one engine and says why. Elsewhere ``database`` is SQLite: a file under tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from shared.producer.api import JobQueue
from shared.runtime.clock import FakeClock
from shared.settings.config import load
from tests.engines import Database, merge, under_test

ENGINE_NAMES = ("sqlite", "postgresql")  # the database fixture's engines (tests.engines.Database)


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "engines: run each test that uses the database fixture on every engine"
    )
    config.addinivalue_line(
        "markers",
        "engine_only(name, reason): in an engines module, this test runs "
        "on that engine only, for the reason given",
    )


def pytest_generate_tests(metafunc) -> None:
    """Parametrise ``engine_name`` by engine in the modules (or classes, tests) marked ``engines``."""
    if "engine_name" not in metafunc.fixturenames or not metafunc.definition.get_closest_marker(
        "engines"
    ):
        return
    only = metafunc.definition.get_closest_marker("engine_only")
    if only is not None and not only.kwargs.get("reason"):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: engine_only needs reason=...")
    names = [only.args[0]] if only is not None else list(ENGINE_NAMES)
    metafunc.parametrize("engine_name", names, indirect=True, scope="module")


@pytest.fixture(scope="module")
def engine_name(request) -> str:
    """The engine of the test: each of :data:`ENGINE_NAMES` in an ``engines`` module, else SQLite."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def database(engine_name: str, monkeypatch) -> Database:
    """The engine this test runs on (:class:`tests.engines.Database`). On PostgreSQL the
    config helpers name the test server and a fresh schema, dropped after the test."""
    made = Database(engine_name)
    for name, value in made.env.items():
        monkeypatch.setenv(name, value)
    yield made
    made.drop()


def make_config(tmp_path: Path, **overrides: Any) -> Path:
    """Write ``tmp_path/jobq.toml`` and return its path.

    Top-level keys are given as keywords (``max_payload_bytes=100``); a section as a dict
    (``worker={"poll_interval": 0.05}``). ``database`` defaults to ``jobq.db`` next to the file.
    """
    data: dict[str, Any] = {"database": "jobq.db", "handlers": []}
    merge(data, under_test())  # the engine under test (the database fixture), on PostgreSQL
    merge(data, overrides)
    path = Path(tmp_path) / "jobq.toml"
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.fixture(name="make_config")
def _make_config_fixture(database):
    """The :func:`make_config` helper, as a fixture (no import of conftest needed)."""
    return make_config


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jobq.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def config_path(tmp_path: Path, database: Database) -> Path:
    return make_config(tmp_path)


@pytest.fixture
def queue(config_path: Path, clock: FakeClock):
    q = JobQueue(config=load(config_path), clock=clock)
    yield q
    q.close()


@pytest.fixture
def sup_factory(database):
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
