"""`jobq status` shows the next run of each [[schedule]] entry, with the supervisor down."""

from __future__ import annotations

import json
import subprocess
import sys

import tomli_w

from tests.proc import env


def test_status_lists_each_schedule_with_its_next_run(tmp_path):
    cfg = tmp_path / "jobq.toml"
    cfg.write_text(
        tomli_w.dumps(
            {
                "database": "q.db",
                "handlers": [],
                "schedule": [
                    {
                        "name": "daily-revenue-report",
                        "type": "report:generate",
                        "cron": "0 8 * * *",
                        "timezone": "America/New_York",
                        "payload": {"format": "pdf"},
                    }
                ],
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", "--json", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (entry,) = json.loads(out.stdout)["schedules"]
    assert entry["name"] == "daily-revenue-report" and entry["type"] == "report:generate"
    # 08:00 in New York is 12:00 or 13:00 UTC, depending on daylight saving time
    assert entry["next_at"][11:] in ("12:00:00.000Z", "13:00:00.000Z")
    text = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert (
        text.returncode == 0
        and "daily-revenue-report" in text.stdout
        and "0 8 * * *" in text.stdout
    )


def test_jobq_schedules_lists_the_files_entries_and_the_tasks_own(tmp_path):
    (tmp_path / "nightly.py").write_text(
        "from jobq import task\n\n\n"
        '@task(name="reports.nightly", schedule="30 2 * * *", tz="Europe/Paris")\n'
        "def nightly() -> None:\n    pass\n\n\n"
        '@task(name="reports.hourly", schedule="0 * * * *")\n'
        "def hourly() -> None:\n    pass\n"
    )
    cfg = tmp_path / "jobq.toml"
    entry = {"name": "reports.hourly", "type": "reports.hourly", "cron": "15 * * * *"}
    cfg.write_text(
        tomli_w.dumps({"database": "q.db", "handlers": ["nightly"], "schedule": [entry]})
    )
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", "schedules", "--json", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["reports.hourly"]["cron"] == "15 * * * *"  # the file's entry wins
    assert rows["reports.hourly"]["source"] == "config"
    assert rows["reports.nightly"]["source"] == "code"
    assert rows["reports.nightly"]["timezone"] == "Europe/Paris"
    assert rows["reports.nightly"]["next_at"][14:] == "30:00.000Z"
    text = subprocess.run(
        [sys.executable, "-m", "supervisor", "schedules", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert "reports.nightly" in text.stdout and "code" in text.stdout and "FROM" in text.stdout
