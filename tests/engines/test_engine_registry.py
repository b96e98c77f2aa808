"""Engines by registry, ``database`` resolved once, handler modules next to the config.

The registry (``shared.engines``) maps a URL scheme to an engine package exporting one
``ENGINE``; ``shared.engines.location.target`` is the one reading of a ``database`` value; the
module functions others call are thin calls of the target's engine, on both engines. A config's
handler modules are imported from its folder too, by the supervisor, its template and exec'd
workers, from whatever directory jobq was started.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared import engines
from shared.settings.config import Config, load
from shared.engines.location import target
from shared.engines.engine import Engine, Target
from shared.model.errors import StoreUnavailable
from shared.execution.handlers import load_registry
from tests.proc import env, wait_until, write_config


@pytest.mark.parametrize(
    "value, expected",
    [
        ("q.db", Target("sqlite", "q.db", file="q.db")),
        ("sqlite:///srv/q.db", Target("sqlite", "/srv/q.db", file="/srv/q.db")),
        (":memory:", Target("sqlite", ":memory:")),
        (
            "postgresql://u:pw@db/jobq",
            Target("postgresql", "postgresql://u:pw@db/jobq", server=True),
        ),
        (
            "POSTGRES+psycopg://db/jobq",
            Target("postgresql", "POSTGRES+psycopg://db/jobq", server=True),
        ),
    ],
)
def test_a_database_value_resolves_into_its_engines_target(value, expected):
    assert target(value) == expected
    assert engines.target(value) == expected and engines.target(expected) is expected


def test_a_relative_file_resolves_against_the_config_folder_only_when_given(tmp_path):
    assert target("sub/q.db", str(tmp_path)).file == str(tmp_path.resolve() / "sub" / "q.db")
    assert target("sqlite:sub/q.db").location == "sub/q.db"


def test_an_unknown_scheme_is_refused_by_the_registry_naming_the_value_not_its_password():
    with pytest.raises(
        StoreUnavailable, match=r"mysql://u:\*\*\*@db.*unknown engine 'mysql'"
    ) as info:
        engines.open_store(Config(database="mysql://u:hunter2@db/x"))
    assert "hunter2" not in str(info.value)
    with pytest.raises(StoreUnavailable, match="unknown"):
        engines.store_class("mysql")


def test_each_scheme_names_a_package_whose_engine_takes_its_values():
    for scheme in engines.ENGINES:
        engine = engines.engine_for(scheme)
        assert isinstance(engine, Engine)
        assert target(f"{scheme}:///srv/q.db").engine == engine.name
    assert engines.engine_for(None) is engines.engine_for(engines.DEFAULT)
    assert engines.by_name("postgresql") is engines.engine_for("postgres")


def test_the_registrys_functions_open_the_targets_engine(engine):
    cfg = engine.config()
    where = target(cfg.database)
    assert engines.engine_name(cfg.database) == engine.name == where.engine
    assert engines.database_file(cfg) == where.file and (where.file is None) == where.server
    with engines.open_store(cfg) as store:
        assert type(store) is engines.store_class(engine.name)
    assert all(t.name for t in engines.upkeep_tasks(cfg))
    assert set(engines.by_name(engine.name).driver_errors()) <= set(engines.driver_errors())


def test_handler_modules_are_imported_from_the_config_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "nextto_jobs.py").write_text(
        "from worker import handler\n\n@handler('nextto:ping')\n"
        "def ping(payload, job):\n    return 'pong'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.delitem(sys.modules, "nextto_jobs", raising=False)
    assert load_registry(["nextto_jobs"], str(folder / "jobq.toml")).get("nextto:ping") is not None
    assert str(folder) in sys.path and "" in sys.path  # the config's folder, and the current one


@pytest.mark.parametrize("fork_server", ["1", "0"])
def test_a_supervisor_started_elsewhere_runs_the_handlers_next_to_its_config(
    tmp_path, engine, fork_server
):
    """The template (forked before the supervisor imports a handler) and exec'd workers too."""
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "nextto_jobs.py").write_text(
        "from worker import handler\n\n@handler('nextto:ping')\n"
        "def ping(payload, job):\n    return payload + 1\n"
    )
    cfg = write_config(
        folder,
        handlers=["nextto_jobs"],
        database=engine.database,
        postgres={"schema": getattr(engine, "schema", "jobq")},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = open(tmp_path / "supervisor.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "run", "--config", str(cfg)],
        cwd=str(elsewhere),
        env={**env(), "JOBQ_FORK_SERVER": fork_server},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        from shared import JobQueue

        with JobQueue(config=load(cfg)) as q:  # no type check: it would import the module here
            job = q.enqueue("nextto:ping", 41)
            assert q.wait_many([job], timeout=60) == [42], (tmp_path / "supervisor.log").read_text()
    finally:
        proc.terminate()
        wait_until(lambda: proc.poll() is not None, 30, "the supervisor to stop")
        log.close()
    assert "boot_failed" not in (tmp_path / "supervisor.log").read_text()
