"""``database`` as a path or a URL, ``$JOBQ_DATABASE``, and the ``[sqlite]`` table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from shared.settings.config import ConfigError, load
from shared.engines.location import parse, redacted
from tests.proc import env, write_config


@pytest.mark.parametrize(
    "value, engine, location",
    [
        ("jobq.db", "sqlite", "jobq.db"),
        ("/var/lib/jobq/q.db", "sqlite", "/var/lib/jobq/q.db"),
        ("sqlite:///var/lib/jobq/q.db", "sqlite", "/var/lib/jobq/q.db"),
        ("sqlite:data/q.db", "sqlite", "data/q.db"),
        ("./odd:name.db", "sqlite", "./odd:name.db"),
        ("postgresql://jobq@db/jobq", "postgresql", "postgresql://jobq@db/jobq"),
        ("postgres://db/jobq", "postgresql", "postgres://db/jobq"),
    ],
)
def test_database_values_name_an_engine_and_a_location(value, engine, location):
    assert (parse(value).engine, parse(value).location) == (engine, location)


@pytest.mark.parametrize(
    "value, named",
    [
        ("mysql://db/jobq", "unknown engine 'mysql'"),
        ("sqlite://relative.db", "needs an absolute path"),
        ("sqlite:", "no file path"),
    ],
)
def test_bad_database_values_are_refused_naming_them(tmp_path, make_config, value, named):
    with pytest.raises(ConfigError, match=f"key 'database' = '{value}'.*{named}"):
        load(make_config(tmp_path, database=value))


def test_sqlite_urls_and_paths_resolve_like_paths(tmp_path, make_config):
    base = tmp_path.resolve()
    assert load(make_config(tmp_path, database=f"sqlite://{base}/a.db")).database == str(
        base / "a.db"
    )
    assert load(make_config(tmp_path, database="sqlite:sub/b.db")).database == str(
        base / "sub" / "b.db"
    )
    assert load(make_config(tmp_path, database="c.db")).database == str(base / "c.db")
    pg = "postgresql://jobq:secret@db.example/jobq"
    assert (
        load(make_config(tmp_path, database=pg)).database == pg
    )  # opened (and refused) by the factory
    assert redacted(pg) == "postgresql://jobq:***@db.example/jobq"


def test_jobq_database_overrides_the_files_database(tmp_path, make_config, monkeypatch):
    path = make_config(tmp_path, database="file.db")
    monkeypatch.setenv("JOBQ_DATABASE", "sqlite:from-env.db")
    assert load(path).database == str(tmp_path.resolve() / "from-env.db")
    monkeypatch.setenv("JOBQ_DATABASE", "")
    assert load(path).database == str(tmp_path.resolve() / "file.db")
    monkeypatch.setenv("JOBQ_DATABASE", "mysql://x")
    with pytest.raises(ConfigError, match=r"JOBQ_DATABASE.*unknown engine"):
        load(path)


@pytest.mark.parametrize(
    "old, value, new",
    [
        ({"synchronous": "full"}, "'full'", "[sqlite] table (sqlite.synchronous)"),
        ({"busy_timeout": 2}, "2", "[sqlite] table (sqlite.busy_timeout)"),
        (
            {"supervisor": {"wal_checkpoint_mb": 8}},
            "8",
            "[sqlite] table (sqlite.wal_checkpoint_mb)",
        ),
    ],
)
def test_an_old_engine_key_names_its_new_place(tmp_path, make_config, old, value, new):
    key = (
        next(iter(old))
        if not isinstance(next(iter(old.values())), dict)
        else "supervisor.wal_checkpoint_mb"
    )
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"key '{key}' = {value} has moved: write it as '{new.split('.')[1][:-1]}' in the {new}"
        ),
    ):
        load(make_config(tmp_path, **old))


def test_sqlite_settings_are_read_from_their_table(tmp_path, make_config):
    cfg = load(
        make_config(
            tmp_path, sqlite={"synchronous": "full", "busy_timeout": 1.5, "wal_checkpoint_mb": 8}
        )
    )
    assert (cfg.sqlite.synchronous, cfg.sqlite.busy_timeout, cfg.sqlite.wal_checkpoint_mb) == (
        "full",
        1.5,
        8,
    )


def _jobq(cfg, *args, extra=None):
    e = env()
    e.pop("JOBQ_DATABASE", None)
    e.update(extra or {})
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=e,
        timeout=60,
        cwd=str(cfg.parent),
    )


def test_the_cli_follows_urls_and_the_environment(tmp_path):
    cfg = write_config(tmp_path, database=f"sqlite://{tmp_path.resolve()}/url.db")
    r = _jobq(cfg, "enqueue", "test:fast", "{}")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "url.db").exists()
    r = _jobq(cfg, "enqueue", "test:fast", "{}", extra={"JOBQ_DATABASE": str(tmp_path / "env.db")})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "env.db").exists()
    r = _jobq(
        cfg, "status", "--json", extra={"JOBQ_DATABASE": "postgresql://jobq:secret@nowhere/jobq"}
    )
    assert r.returncode == 5  # DATABASE_UNAVAILABLE
    assert "postgresql://jobq:***@nowhere/jobq" in r.stderr and "secret" not in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
