"""The configuration (shared.settings.config): strict validation with messages that name the file,
the dotted key and the value; the shipped jobq.toml."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tomli_w

from shared.settings.config import (
    SCHEMA,
    Config,
    ConfigError,
    SqliteConfig,
    from_dict,
    load,
    resolve_path,
)

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def test_defaults_when_file_is_almost_empty(tmp_path, make_config):
    cfg = load(make_config(tmp_path))
    assert cfg.database == str((tmp_path / "jobq.db").resolve())
    assert cfg.path == str((tmp_path / "jobq.toml").resolve())
    assert cfg.replace(database="jobq.db", path=None) == Config()


def test_values_are_read(tmp_path, make_config):
    cfg = load(
        make_config(
            tmp_path,
            handlers=["a.b", "c"],
            sqlite={"synchronous": "full", "busy_timeout": 0.5},
            supervisor={"workers": 4},
            worker={"poll_interval": 0.05, "max_jobs": 10},
            retry={"max_attempts": 5, "backoff_base": 0.5, "backoff_max": 8},
        )
    )
    assert cfg.handlers == ("a.b", "c")
    assert cfg.sqlite.synchronous == "full" and cfg.sqlite.busy_timeout == 0.5
    assert cfg.supervisor.workers == 4
    assert cfg.worker.poll_interval == 0.05 and cfg.worker.max_jobs == 10
    assert cfg.retry == type(cfg.retry)(5, 0.5, 8)


def test_database_resolves_against_the_files_folder(tmp_path, make_config, monkeypatch):
    sub = tmp_path.resolve() / "etc"
    sub.mkdir()
    monkeypatch.chdir(tmp_path)
    assert load(make_config(sub, database="data/q.db")).database == str(sub / "data" / "q.db")
    absolute = str(tmp_path / "elsewhere.db")
    assert load(make_config(sub, database=absolute)).database == absolute


def test_relative_config_path_resolves_database_next_to_file(tmp_path, make_config, monkeypatch):
    sub = tmp_path.resolve() / "etc"
    sub.mkdir()
    make_config(sub, database="q.db")
    monkeypatch.chdir(tmp_path)
    cfg = load("etc/jobq.toml")
    assert cfg.database == str(sub / "q.db")
    assert cfg.path == str(sub / "jobq.toml")


def test_shipped_config_loads(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the database resolves against the file, not the cwd
    shipped = REPO / "jobq.toml"
    cfg = load(shipped)
    assert cfg.database == str(REPO / "jobq.db")
    assert cfg.handlers == ("examples.handlers", "examples.tasks")
    # "the values below are the defaults unless noted": only database, handlers and the daily
    # cleanup schedule differ.
    assert [s.type for s in cfg.schedules] == ["cleanup:old-data"]
    assert cfg.replace(database="jobq.db", handlers=(), schedules=(), path=None) == Config()


def test_shipped_config_mentions_every_key():
    text = (REPO / "jobq.toml").read_text()
    for section, keys in SCHEMA.items():
        if section:
            assert f"[{section}]" in text
        for key in keys:
            assert f"\n{key} = " in text, f"{section}.{key} missing from the shipped jobq.toml"


def test_to_dict_round_trips(tmp_path):
    cfg = Config(handlers=("x",), sqlite=SqliteConfig(busy_timeout=2.5)).with_workers(7)
    path = tmp_path / "jobq.toml"
    path.write_text(tomli_w.dumps(cfg.to_dict()))
    again = load(path)
    assert again.supervisor.workers == 7
    assert again.replace(database="jobq.db", path=None) == cfg


# -- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, key, value",
    [
        # unknown keys
        ({"databse": "x.db"}, "databse", "'x.db'"),
        ({"worker": {"poll_intervall": 2}}, "worker.poll_intervall", "2"),
        ({"retry": {"max_attempt": 4}}, "retry.max_attempt", "4"),
        # wrong types
        ({"sqlite": {"busy_timeout": "5"}}, "sqlite.busy_timeout", "'5'"),
        ({"handlers": "examples.handlers"}, "handlers", "'examples.handlers'"),
        ({"handlers": ["ok", 3]}, "handlers", "['ok', 3]"),
        ({"max_payload_bytes": 1.5}, "max_payload_bytes", "1.5"),
        ({"supervisor": {"workers": True}}, "supervisor.workers", "True"),
        ({"supervisor": {"workers": "2"}}, "supervisor.workers", "'2'"),
        ({"worker": {"max_jobs": 2.0}}, "worker.max_jobs", "2.0"),
        ({"sqlite": {"synchronous": 1}}, "sqlite.synchronous", "1"),
        ({"worker": 5}, "worker", "5"),
        # out of range / not a choice
        ({"sqlite": {"busy_timeout": -1}}, "sqlite.busy_timeout", "-1"),
        ({"sqlite": {"busy_timeout": 601}}, "sqlite.busy_timeout", "601"),
        ({"sqlite": {"synchronous": "off"}}, "sqlite.synchronous", "'off'"),
        ({"log_level": "verbose"}, "log_level", "'verbose'"),
        ({"database": ""}, "database", "''"),
        ({"max_payload_bytes": 0}, "max_payload_bytes", "0"),
        ({"supervisor": {"workers": 257}}, "supervisor.workers", "257"),
        ({"worker": {"job_timeout": 0}}, "worker.job_timeout", "0"),
        ({"worker": {"poll_interval": 0}}, "worker.poll_interval", "0"),
        ({"worker": {"max_jobs": -1}}, "worker.max_jobs", "-1"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts", "0"),
        ({"retry": {"backoff_max": -0.5}}, "retry.backoff_max", "-0.5"),
        ({"retry": {"backoff_base": float("nan")}}, "retry.backoff_base", "nan"),
        (
            {"worker": {"heartbeat_interval": 30, "lease_timeout": 10}},
            "worker.heartbeat_interval",
            "30",
        ),
    ],
)
def test_config_error_names_file_key_and_value(tmp_path, make_config, overrides, key, value):
    path = make_config(tmp_path, **overrides)
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg
    assert f"'{key}'" in msg
    assert value in msg


def test_wrong_value_message_says_what_was_expected(tmp_path, make_config):
    with pytest.raises(ConfigError, match=r"expected an integer >= 0 and <= 256"):
        load(make_config(tmp_path, supervisor={"workers": -2}))
    with pytest.raises(ConfigError, match=r"known: .*poll_interval"):
        load(make_config(tmp_path, worker={"pollinterval": 1}))


def test_invalid_toml(tmp_path):
    path = tmp_path / "jobq.toml"
    path.write_text('database = "x.db"\n[worker\npoll_interval = 1\n')
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load(path)
    assert str(path) in str(info.value)


def test_invalid_utf8(tmp_path):
    path = tmp_path / "jobq.toml"
    path.write_bytes(b'database = "\xff\xfe.db"\n')
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="not found") as info:
        load(path)
    assert str(path) in str(info.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_from_dict_without_file():
    cfg = from_dict({"worker": {"poll_interval": 0.5}})
    assert cfg.worker.poll_interval == 0.5
    assert cfg.database == "jobq.db"
    with pytest.raises(ConfigError, match="<config>"):
        from_dict({"nope": 1})


def test_resolve_path(monkeypatch):
    monkeypatch.delenv("JOBQ_CONFIG", raising=False)
    assert resolve_path(None) == "jobq.toml"
    monkeypatch.setenv("JOBQ_CONFIG", "/etc/jobq.toml")
    assert resolve_path(None) == "/etc/jobq.toml"
    assert resolve_path("mine.toml") == "mine.toml"


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().database = "x"  # type: ignore[misc]


# -- one source: the key table generates jobq.toml, the init template and docs/configuration.md ---


def test_every_key_is_described_once_where_it_is_declared():
    from shared.settings.config import SCHEDULE_KEYS, TYPE_KEYS

    tables = {
        **{f"[{s}]" if s else "top": keys for s, keys in SCHEMA.items()},
        "[[schedule]]": SCHEDULE_KEYS,
        "[types]": TYPE_KEYS,
    }
    for table, keys in tables.items():
        for key, spec in keys.items():
            assert spec.doc and spec.expected, (
                f"{table} {key}: give it a description in shared/settings/config.py"
            )


def test_shipped_jobq_toml_and_configuration_reference_are_generated_and_fresh():
    """Fails when shared/settings/config.py changed but `python -m supervisor.gendocs` was not
    run."""
    from supervisor.cli.gendocs import stale

    assert stale() == [], "stale generated files: run  python -m supervisor.gendocs"


def test_a_stale_generated_file_is_detected(tmp_path):
    from supervisor.cli.gendocs import GENERATED, stale

    for rel, make in GENERATED.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(make())
    assert stale(tmp_path) == []
    doc = tmp_path / "docs/configuration.md"
    doc.write_text(
        doc.read_text().replace("| `workers` | integer | `2` |", "| `workers` | integer | `3` |")
    )
    (tmp_path / "jobq.toml").unlink()
    assert stale(tmp_path) == ["jobq.toml", "docs/configuration.md"]


def test_reference_lists_every_key_with_its_default_and_range():
    from supervisor.cli.configdoc import reference_markdown

    text = reference_markdown()
    for section, keys in SCHEMA.items():
        if section:
            assert f"## `[{section}]`" in text
        for key, spec in keys.items():
            assert f"| `{key}` | {spec.type_name} |" in text and spec.expected in text
    assert "| `max_batch` | integer | `512` | an integer >= 1 and <= 1000 |" in text
    assert (
        "| `cron` | string | required |" in text and "| `concurrency` | integer | unset |" in text
    )


def test_a_new_key_is_a_one_place_change():
    """A key declared on a dataclass is validated, templated and documented with no other edit."""
    from dataclasses import dataclass

    from shared.settings.schema import keys_of, number, setting
    from supervisor.cli.template import _table, config_toml

    @dataclass(frozen=True)
    class Extra:
        knob: int = setting(7, number(1, 9, integer=True), "A knob for the test.")

    assert keys_of(Extra)["knob"].doc == "A knob for the test."
    assert keys_of(Extra)["knob"].expected == "an integer >= 1 and <= 9"
    assert (
        "".join(_table("extra", Extra, {"knob": 7}, set())) == "# A knob for the test.\nknob = 7\n"
    )
    assert config_toml(Config(), "h")  # the real tables still render


@pytest.mark.parametrize("jtype", ["nightly\x07", "a\nb", " ", "x" * 201])
def test_a_schedule_type_follows_the_rule_enqueue_applies(jtype):
    """A [[schedule]] type enqueue would refuse is refused when the file is read,
    naming the file, the entry and the key (it used to fail at every tick instead)."""
    entry = {"name": "nightly-report", "type": jtype, "cron": "0 3 * * *"}
    with pytest.raises(
        ConfigError,
        match=r"^jobq\.toml: key 'schedule\[1\]\.type' = .*expected a job type name, as "
        r"enqueue takes it.* \(in the \[\[schedule\]\] named 'nightly-report'\)$",
    ):
        from_dict(
            {"schedule": [dict(entry, name="ok", type="report:generate"), entry]},
            source="jobq.toml",
        )


def test_strict_types_is_a_boolean_and_off_by_default():
    assert Config().strict_types is False and from_dict({"strict_types": True}).strict_types is True
    for value in (1, "true"):
        with pytest.raises(
            ConfigError, match=f"key 'strict_types' = {value!r}: expected true or false"
        ):
            from_dict({"strict_types": value}, source="jobq.toml")
    with pytest.raises(ConfigError, match="key 'supervisor.workers' = True: expected an integer"):
        from_dict({"supervisor": {"workers": True}}, source="jobq.toml")


@pytest.mark.parametrize(
    "url",
    ["postgresql://jobq:pl4nted-s3cret@db/jobq", "postgresql:///jobq?password=pl4nted-s3cret"],
)
def test_a_listen_url_with_a_password_is_refused_without_showing_it(url):
    """``[postgres] listen`` takes no password (libpq reads PGPASSWORD or ~/.pgpass): the error
    names the key and hides the secret."""
    with pytest.raises(ConfigError, match=r"postgres\.listen.*without a password") as got:
        from_dict({"database": "postgresql://jobq@db/jobq", "postgres": {"listen": url}})
    assert "pl4nted-s3cret" not in str(got.value) and "***" in str(got.value)
    ok = from_dict({"postgres": {"listen": "postgresql://jobq@db:5432/jobq", "mode": "pooled"}})
    assert (ok.postgres.listen, ok.postgres.mode) == ("postgresql://jobq@db:5432/jobq", "pooled")
