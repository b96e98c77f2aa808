"""The command line of named queues and per-key limits: enqueue --queue, pause and
resume --queue, status per queue and status --types."""

from __future__ import annotations

from shared.model.exitcodes import ExitCode
from tests.proc import write_config
from tests.unit.cli.test_cli import as_json, jobq, ok


def test_enqueue_pause_and_status_per_queue(tmp_path):
    cfg = write_config(tmp_path, handlers=["opsjobs"], queues={"emails": {"workers": 1}})
    job = as_json(jobq(cfg, "enqueue", "ops:ok", "{}", "--queue", "reports", "--json"))["id"]
    assert as_json(jobq(cfg, "show", job, "--json"))["job"]["queue"] == "reports"
    assert "queue 'reports' paused" in ok(jobq(cfg, "pause", "--queue", "reports"))
    snap = as_json(jobq(cfg, "status", "--json"))
    queues = {q["queue"]: q for q in snap["queues"]}
    assert queues["reports"]["paused"] and queues["reports"]["pending"] == 1 and not snap["paused"]
    assert not queues["emails"]["paused"]
    text = ok(jobq(cfg, "status"))
    assert "QUEUE" in text and "reports" in text and "PAUSED" in text
    assert as_json(jobq(cfg, "resume", "--queue", "reports", "--json")) == {
        "paused": False,
        "queue": "reports",
    }
    bad = jobq(cfg, "pause", "--queue", "a,b")
    assert bad.returncode == ExitCode.USAGE and "queue name" in bad.stderr
    bad = jobq(cfg, "enqueue", "ops:ok", "{}", "--queue", "")
    assert bad.returncode == ExitCode.USAGE and "queue name" in bad.stderr


def test_status_types_shows_the_busiest_keys_and_jobs_waiting_on_a_limit(tmp_path):
    cfg = write_config(
        tmp_path,
        handlers=["opsjobs"],
        types={"ops:ok": {"key": "payload.c", "concurrency_per_key": 1}},
    )
    for c in "AAB":
        ok(jobq(cfg, "enqueue", "ops:ok", f'{{"c": "{c}"}}'))
    rows = as_json(jobq(cfg, "status", "--types", "--json"))["types"]
    assert rows == [
        {
            "type": "ops:ok",
            "running": 0,
            "due": 3,
            "waiting": 0,
            "busiest": [{"key": "A", "running": 0, "due": 2}, {"key": "B", "running": 0, "due": 1}],
        }
    ]
    assert "BUSIEST KEYS" in ok(jobq(cfg, "status", "--types"))
    bad = jobq(cfg, "enqueue", "ops:ok", "{}")
    assert bad.returncode == ExitCode.USAGE and "payload.c" in bad.stderr
