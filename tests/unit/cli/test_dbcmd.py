"""``jobq db upgrade``'s own handling, on SQLite (no online upgrade there): a bad ``--batch`` is
a usage error, and an engine without such changes says there is nothing to do. The upgrade
itself, on PostgreSQL, is tests/engines/test_online_upgrade.py's."""

from __future__ import annotations

import json

from shared.model.exitcodes import ExitCode
from supervisor.cli.main import main


def config(tmp_path) -> str:
    path = tmp_path / "jobq.toml"
    path.write_text(f'database = "{tmp_path / "q.db"}"\n', encoding="utf-8")
    return str(path)


def test_a_batch_below_one_is_a_usage_error(tmp_path, capsys):
    assert main(["db", "upgrade", "--batch", "0", "--config", config(tmp_path)]) == ExitCode.USAGE
    assert "--batch must be >= 1" in capsys.readouterr().err


def test_an_engine_without_online_changes_has_nothing_to_upgrade(tmp_path, capsys):
    assert main(["db", "upgrade", "--config", config(tmp_path)]) == ExitCode.OK
    assert "sqlite database: nothing to upgrade online" in capsys.readouterr().out
    assert main(["db", "upgrade", "--finish", "--json", "--config", config(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["finish"] is True
