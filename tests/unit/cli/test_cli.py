"""The ops CLI, run as a user runs it: ``python -m supervisor COMMAND`` in a subprocess on a
temporary config, checking output and exit codes, with the supervisor down and up."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from shared.runtime.clock import SystemClock, parse_iso
from shared.model.exitcodes import ExitCode
from shared.runtime.processes import host_id
from shared.engines.sqlite.store import Finish, SqliteStore
from tests.proc import env, fresh_ctrl_c, job_row, wait_until, worker_rows, write_config

OWNER = "testhost:1111:1"


def jobq(
    cfg: Path | None,
    *args: str,
    stdin: str | None = None,
    before: bool = False,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``python -m supervisor ARGS --config CFG`` (``before``: --config first)."""
    conf = ["--config", str(cfg)] if cfg is not None else []
    argv = [*conf, *args] if before else [*args, *conf]
    e = env()
    e.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *argv],
        capture_output=True,
        text=True,
        input=stdin,
        env=e,
        timeout=60,
        cwd=str(cfg.parent) if cfg else None,
    )


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r.stdout


def as_json(r: subprocess.CompletedProcess):
    return json.loads(ok(r))


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path, handlers=["opsjobs"])


def store_of(cfg: Path) -> SqliteStore:
    return SqliteStore(str(cfg.parent / "q.db"))


def fail_job(cfg: Path, job_id: str, error: str = "boom", at: float | None = None) -> None:
    """Claim and fail ``job_id`` directly through the store, as a worker would (the other jobs
    claimed with it are given back, attempt and all)."""
    now = SystemClock().now()
    with store_of(cfg) as s:
        (job,) = [j for j in s.claim(OWNER, 1111, now, 1000) if j.id == job_id]
        assert s.finish(
            Finish("failed", job.id, job.attempts, error, 0.0, 3), OWNER, now if at is None else at
        )
        s.release_owner(OWNER, "test", now, max_attempts_for=lambda j: 3, count_attempt=False)


# -- supervisor down: enqueue -----------------------------------------------------------------------


def test_enqueue_prints_the_id_and_stores_the_options(cfg):
    job_id = ok(
        jobq(
            cfg,
            "enqueue",
            "ops:ok",
            '{"n": 1}',
            "--priority",
            "5",
            "--max-attempts",
            "2",
            "--delay",
            "1h30m",
        )
    ).strip()
    row = job_row(cfg, job_id)
    assert (row["type"], row["payload"], row["priority"], row["max_attempts"], row["status"]) == (
        "ops:ok",
        '{"n":1}',
        5,
        2,
        "pending",
    )
    assert parse_iso(row["run_at"]) - parse_iso(row["created_at"]) == pytest.approx(5400, abs=1)
    at = as_json(jobq(cfg, "enqueue", "ops:ok", "--run-at", "2030-01-02T03:04:05Z", "--json"))["id"]
    assert job_row(cfg, at)["run_at"] == "2030-01-02T03:04:05.000Z"
    first = ok(jobq(cfg, "enqueue", "ops:ok", "--key", "order-7")).strip()
    assert (
        ok(jobq(cfg, "enqueue", "ops:ok", '{"other": true}', "--key", "order-7")).strip() == first
    )
    scoped = jobq(
        cfg, "enqueue", "ops:ok", "--key", "order-7", "--unique", "pending", "--priority", "3"
    )
    assert ok(scoped).strip() == first  # still pending: the same job, its priority kept
    assert "DuplicateJobWarning" not in scoped.stderr and "priority=3" in scoped.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["ops:ok", "{not json"], "payload is not valid JSON"),
        (["ops:ok", "--run-at", "2030-01-02T03:04:05"], "no timezone"),
        (["ops:ok", "--max-attempts", "0"], "max_attempts must be an integer from 1"),
        (["ops:ok", "--key", "k", "--unique", "sometimes"], "unique= must be"),
        (["", "{}"], "job type must be a non-empty string"),
        ([], "give a job TYPE"),
    ],
)
def test_enqueue_refuses_bad_input_with_exit_2_and_writes_nothing(cfg, args, message):
    r = jobq(cfg, "enqueue", *args)
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert message in r.stderr
    with store_of(cfg) as s:
        assert s.counts() == {}


def test_enqueue_bad_delay_is_a_usage_error(cfg):
    r = jobq(cfg, "enqueue", "ops:ok", "--delay", "soon")
    assert r.returncode == ExitCode.USAGE and "'soon' is not a duration" in r.stderr


def test_enqueue_file_and_stdin_validate_everything_first(cfg, tmp_path):
    lines = [
        '{"type": "ops:ok", "payload": {"n": 1}}',
        "",
        '{"type": "ops:ok", "delay": "10m", "priority": 3}',
        '{"type": "ops:fail", "key": "k1", "max_attempts": 1}',
        '{"type": "ops:ok", "queue": "reports", "limit_key": "customer-7"}',
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    r = jobq(cfg, "enqueue", "--file", str(path))
    ids = ok(r).split()
    assert len(ids) == 4 and "enqueued 4 jobs" in r.stderr
    assert job_row(cfg, ids[1])["priority"] == 3
    assert (job_row(cfg, ids[3])["queue"], job_row(cfg, ids[3])["limit_key"]) == (
        "reports",
        "customer-7",
    )
    ids2 = as_json(jobq(cfg, "enqueue", "--file", "-", "--json", stdin=lines[0] + "\n" + lines[0]))[
        "ids"
    ]
    assert len(ids2) == 2

    bad = lines + ['{"type": "ops:ok", "priority": "high"}']
    path.write_text("\n".join(bad) + "\n")
    r = jobq(cfg, "enqueue", "--file", str(path))
    assert r.returncode == ExitCode.USAGE
    assert (
        "line 6: priority must be an integer, got 'high'" in r.stderr
        and "nothing was written" in r.stderr
    )
    path.write_text('{"type": "ops:ok"}\n{"tipe": "x"}\n')
    r = jobq(cfg, "enqueue", "--file", str(path))
    assert r.returncode == ExitCode.USAGE and "line 2" in r.stderr
    with store_of(cfg) as s:
        assert sum(s.counts().values()) == 6


# -- supervisor down: inspect ---------------------------------------------------------------------


def test_jobs_lists_filters_and_limits(cfg):
    a = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    b = ok(jobq(cfg, "enqueue", "ops:fail", "--priority", "7")).strip()
    c = ok(jobq(cfg, "enqueue", "ops:ok", "--priority", "1")).strip()
    fail_job(cfg, b, "Traceback (most recent call last):\n  File x\nRuntimeError: kaput")
    out = ok(jobq(cfg, "jobs"))
    assert out.splitlines()[0].split()[:3] == ["ID", "TYPE", "STATUS"]
    assert [ln.split()[0] for ln in out.splitlines()[1:]] == [c, b, a]  # newest first
    assert "RuntimeError: kaput" in out
    pending = as_json(jobq(cfg, "jobs", "--status", "pending", "--json"))
    assert [j["id"] for j in pending] == [c, a]  # claim order
    assert [j["id"] for j in as_json(jobq(cfg, "jobs", "--type", "ops:fail", "--json"))] == [b]
    assert len(as_json(jobq(cfg, "jobs", "--limit", "1", "--json"))) == 1
    assert ok(jobq(cfg, "jobs", "--status", "cancelled")).strip() == "no jobs"
    r = jobq(cfg, "jobs", "--status", "done")
    assert r.returncode == ExitCode.USAGE and "invalid choice" in r.stderr


def test_show_prints_payload_error_and_history_by_id_or_prefix(cfg):
    jid = ok(jobq(cfg, "enqueue", "ops:fail", '{"reportId": "r9"}')).strip()
    fail_job(cfg, jid, "Traceback (most recent call last):\n  File x\nPermanentError: nope")
    out = ok(jobq(cfg, "show", jid[:12]))
    assert f"id            {jid}" in out and '"reportId": "r9"' in out
    assert "Traceback (most recent call last):" in out and "PermanentError: nope" in out
    assert "attempts:" in out and " failed " in out
    data = as_json(jobq(cfg, "show", jid, "--json"))
    assert data["job"]["payload"] == {"reportId": "r9"} and data["job"]["status"] == "failed"
    assert [(h["attempt"], h["outcome"]) for h in data["attempts"]] == [(1, "failed")]
    r = jobq(cfg, "show", "ffffffffffff")
    assert r.returncode == ExitCode.NOT_FOUND and "no job has that id" in r.stderr


def test_jobs_and_show_give_the_configured_max_attempts_of_a_job_that_sets_none(tmp_path):
    """A completed job showed ``1/-``; it shows the max the config gives its type."""
    cfg = write_config(
        tmp_path,
        handlers=["opsjobs"],
        retry={"max_attempts": 5},
        types={"ops:fail": {"max_attempts": 7}},
    )
    done = ok(jobq(cfg, "enqueue", "ops:ok", "--priority", "1")).strip()
    typed = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    own = ok(jobq(cfg, "enqueue", "ops:fail", "--max-attempts", "2", "--priority", "-1")).strip()
    now = SystemClock().now()
    with store_of(cfg) as s:
        (job,) = s.claim(OWNER, 1111, now, 1)
        assert job.id == done and s.finish(
            Finish("completed", job.id, job.attempts, None), OWNER, now
        )
    attempts = {ln.split()[0]: ln.split()[3] for ln in ok(jobq(cfg, "jobs")).splitlines()[1:]}
    assert attempts == {done: "1/5", typed: "0/7", own: "0/2"}
    assert "max_attempts  5\n" in ok(jobq(cfg, "show", done))
    assert (
        as_json(jobq(cfg, "show", done, "--json"))["job"]["max_attempts"] is None
    )  # the stored value


# -- supervisor down: act on jobs -------------------------------------------------------------------


def test_retry_by_id_and_all_failed_of_a_type(cfg):
    jobs = {t: ok(jobq(cfg, "enqueue", t)).strip() for t in ("ops:ok", "ops:fail", "ops:flaky")}
    for jid in (jobs["ops:fail"], jobs["ops:flaky"]):
        fail_job(cfg, jid)
    r = jobq(cfg, "retry", jobs["ops:fail"], jobs["ops:ok"], "nope")
    assert r.returncode == ExitCode.NOT_FOUND
    assert f"retried {jobs['ops:fail']}" in r.stdout
    assert (
        f"job {jobs['ops:ok']}: is pending: retry applies to failed or cancelled jobs" in r.stdout
    )
    assert "job nope: no such job" in r.stdout
    row = job_row(cfg, jobs["ops:fail"])
    assert (row["status"], row["attempts"], row["completed_at"]) == ("pending", 0, None)
    assert (
        ok(jobq(cfg, "retry", "--failed", "--type", "ops:ok"))
        == "retried 0 failed jobs of type ops:ok\n"
    )
    assert as_json(jobq(cfg, "retry", "--failed", "--json")) == {"retried": 1}
    assert job_row(cfg, jobs["ops:flaky"])["status"] == "pending"
    assert jobq(cfg, "retry").returncode == ExitCode.USAGE


def test_cancel_pending_and_running_jobs_only(cfg):
    a = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    b = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    fail_job(cfg, a)
    r = jobq(cfg, "cancel", a, b)
    assert r.returncode == ExitCode.NOT_FOUND
    assert (
        f"cancelled {b}" in r.stdout
        and f"job {a}: is failed: cancel applies to pending and running jobs" in r.stdout
    )
    assert job_row(cfg, b)["status"] == "cancelled"
    r = jobq(cfg, "cancel", b, "--json")
    assert r.returncode == ExitCode.NOT_FOUND
    why = "is cancelled: cancel applies to pending and running jobs"
    assert json.loads(r.stdout) == {
        "cancelled": [],
        "requested": [],
        "finished_first": {},
        "skipped": {b: why},
    }


def test_cancel_pending_cancels_every_pending_job_of_a_type(cfg):
    a = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    b = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    assert (
        ok(jobq(cfg, "cancel", "--pending", "--type", "ops:ok"))
        == "cancelled 1 pending or waiting jobs of type ops:ok (and their waiting dependants)\n"
    )
    assert (job_row(cfg, a)["status"], job_row(cfg, b)["status"]) == ("cancelled", "pending")
    assert as_json(jobq(cfg, "cancel", "--pending", "--json")) == {"cancelled": 1}
    for wrong in (
        ["cancel"],
        ["cancel", a, "--pending"],
        ["cancel", a, "--type", "x"],
        ["cancel", "--pending", "--wait"],
        ["cancel", a, "--timeout", "1"],
    ):
        assert jobq(cfg, *wrong).returncode == ExitCode.USAGE, wrong


def test_retry_and_cancel_take_the_id_prefixes_show_takes(cfg):
    """One resolver for every command (and the dashboard's actions): a unique prefix
    works everywhere `show` takes it; an ambiguous one is refused saying how many match."""
    a = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    b = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    ok(jobq(cfg, "show", b[:12]))
    r = jobq(cfg, "cancel", b[:12])
    assert ok(r) == f"cancelled {b}\n"
    assert ok(jobq(cfg, "retry", b[:12])) == f"retried {b}\n"
    common = next(i for i in range(len(a)) if a[i] != b[i])
    assert common >= 4  # ids start with the time in ms: two made in a row share their first digits
    for cmd in ("show", "retry", "cancel"):
        r = jobq(cfg, cmd, a[:common])
        assert r.returncode == ExitCode.NOT_FOUND, (cmd, r.stderr)
        assert "2 jobs start with it: give more of the id" in r.stdout + r.stderr, (
            cmd,
            r.stdout,
            r.stderr,
        )
    assert job_row(cfg, a)["status"] == "pending" and job_row(cfg, b)["status"] == "pending"
    r = jobq(cfg, "cancel", "ffffffffffff", "--json")
    assert r.returncode == ExitCode.NOT_FOUND and json.loads(r.stdout)["skipped"] == {
        "ffffffffffff": "no such job"
    }


def test_purge_deletes_old_finished_jobs_and_their_history(cfg):
    old = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    new = ok(jobq(cfg, "enqueue", "ops:fail", "--priority", "-1")).strip()
    fail_job(cfg, old, at=time.time() - 8 * 86400)
    fail_job(cfg, new)
    assert ok(
        jobq(cfg, "purge", "--status", "failed", "--older-than", "7d", "--dry-run")
    ).startswith("would delete 1 failed jobs that finished before ")
    assert job_row(cfg, old) is not None
    data = as_json(jobq(cfg, "purge", "--status", "failed", "--older-than", "7d", "--json"))
    assert data["deleted"] == 1 and data["status"] == "failed"
    assert job_row(cfg, old) is None and job_row(cfg, new) is not None
    assert as_json(jobq(cfg, "show", new, "--json"))["attempts"]
    assert ok(jobq(cfg, "purge", "--older-than", "1d")).startswith("deleted 0 completed jobs")
    r = jobq(cfg, "purge", "--status", "pending", "--older-than", "1d")
    assert r.returncode == ExitCode.USAGE and "invalid choice" in r.stderr
    assert jobq(cfg, "purge").returncode == ExitCode.USAGE  # --older-than is required


def test_pause_and_resume_set_the_flag_without_a_supervisor(cfg):
    assert "claim nothing" in ok(jobq(cfg, "pause"))
    assert as_json(jobq(cfg, "status", "--json"))["paused"] is True
    assert "PAUSED" in ok(jobq(cfg, "status"))
    assert as_json(jobq(cfg, "resume", "--json")) == {"paused": False}
    assert as_json(jobq(cfg, "status", "--json"))["paused"] is False


@pytest.mark.parametrize("command", [["stop"], ["reload"], ["scale", "3"]])
def test_supervisor_commands_exit_9_when_none_runs(cfg, command):
    with store_of(cfg) as s:  # a stale row of a dead supervisor is not a running supervisor
        s.register_process(f"{host_id()}:999999:1", "supervisor", 999999, host_id(), time.time())
    r = jobq(cfg, *command)
    assert r.returncode == ExitCode.NOT_RUNNING
    assert "no supervisor is running on" in r.stderr and "jobq run --config" in r.stderr


def test_status_with_the_supervisor_down(cfg):
    ok(jobq(cfg, "enqueue", "ops:ok", "--delay", "1h"))
    ok(jobq(cfg, "enqueue", "ops:ok"))
    out = ok(jobq(cfg, "status"))
    assert "supervisor  not running" in out
    assert "ops:ok" in out and "PER MINUTE" in out and "WORKERS  none registered" in out
    snap = as_json(jobq(cfg, "status", "--json"))
    assert snap["jobs"]["pending"] == 2 and snap["jobs"]["scheduled"] == 1
    assert snap["by_type"]["ops:ok"]["pending"] == 2
    assert snap["oldest_due"]["type"] == "ops:ok" and snap["oldest_due"]["age_s"] >= 0
    assert len(snap["throughput"]["per_minute"]) == 5
    assert set(snap["latency"]["wait_s"]) == {"p50", "p90", "p99", "max"}
    assert snap["supervisors"] == [] and snap["workers"] == [] and snap["wal_bytes"] >= 0


def test_status_watch_refreshes_until_ctrl_c(cfg):
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "supervisor",
            "status",
            "--watch",
            "--json",
            "--interval",
            "0.1",
            "--config",
            str(cfg),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        text=True,
        preexec_fn=fresh_ctrl_c,
    )
    try:
        first = json.loads(p.stdout.readline())
        ok(jobq(cfg, "enqueue", "ops:ok"))
        wait_until(
            lambda: json.loads(p.stdout.readline())["jobs"]["pending"] == 1,
            what="a refreshed snapshot",
        )
        assert first["jobs"]["pending"] == 0
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0
    finally:
        p.kill()
        p.wait()


def test_top_without_a_terminal_says_what_to_use(cfg):
    r = jobq(cfg, "top")
    assert r.returncode == ExitCode.USAGE and "status --json" in r.stderr


# -- config ---------------------------------------------------------------------------------------


def test_config_init_show_and_refuse_to_overwrite(tmp_path):
    path = tmp_path / "fresh.toml"
    assert ok(jobq(path, "config", "init")).startswith(f"wrote {path}")
    assert (tmp_path / "fresh.toml").read_text().startswith("# jobq configuration")
    r = jobq(path, "config", "init")
    assert r.returncode == ExitCode.USAGE and "already exists" in r.stderr
    ok(jobq(path, "config", "init", "--force"))
    assert ok(jobq(path, "config", "show")) == path.read_text()
    eff = as_json(jobq(path, "config", "show", "--effective", "--json"))
    assert eff["config"]["supervisor"]["workers"] == 2 and eff["config"]["metrics_port"] == 0
    assert eff["config"]["database"] == str(tmp_path / "jobq.db")
    assert "[supervisor]" in ok(jobq(path, "config", "show", "--effective"))


def test_config_set_keeps_comments_validates_and_refuses(tmp_path):
    path = tmp_path / "jobq.toml"
    original = (
        '# my notes\ndatabase = "q.db"  # keep me\nhandlers = ["opsjobs"]\n\n'
        "[supervisor]\n# scale here\nworkers = 2  # two\n"
    )
    path.write_text(original)
    assert "supervisor.workers = 6" in ok(jobq(path, "config", "set", "supervisor.workers", "6"))
    assert path.read_text() == original.replace("workers = 2  # two", "workers = 6  # two")
    ok(jobq(path, "config", "set", "log_format", "json"))
    ok(jobq(path, "config", "set", "retry.backoff_max", "2.5"))
    text = path.read_text()
    assert 'handlers = ["opsjobs"]\nlog_format = "json"\n' in text
    assert (
        text.endswith("[retry]\nbackoff_max = 2.5\n")
        and "# my notes" in text
        and "# keep me" in text
    )
    for key, value, why in [
        ("supervisor.workers", "-1", "expected an integer >= 0"),
        ("log_format", "xml", "expected one of 'text', 'json'"),
        ("metrics_port", "70000", "expected an integer >= 0 and <= 65535"),
        ("supervisor.nope", "1", "unknown key 'supervisor.nope'"),
        ("worker.heartbeat_interval", "100", "less than worker.lease_timeout"),
    ]:
        before = path.read_bytes()
        r = jobq(path, "config", "set", key, value)
        assert r.returncode == ExitCode.CONFIG_INVALID, (key, r.stderr)
        assert why in r.stderr, r.stderr
        assert path.read_bytes() == before
    r = jobq(tmp_path / "missing.toml", "config", "set", "supervisor.workers", "3")
    assert r.returncode == ExitCode.CONFIG_INVALID and "config init" in r.stderr


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["no-bom", "bom"])
@pytest.mark.parametrize("eol", [b"\r\n", b"\n"], ids=["crlf", "lf"])
def test_config_set_keeps_the_files_line_ends_and_byte_order_mark(tmp_path, bom, eol):
    """A file saved by a Windows editor (CRLF line ends, perhaps a UTF-8 byte-order mark) is
    read by every command (check, show, set) and written back in its own form: a replaced,
    inserted or appended line ends as the others do; the mark stays."""
    path = tmp_path / "jobq.toml"
    lines = [
        b"# my notes",
        b'database = "q.db"',
        b'handlers = ["opsjobs"]',
        b"",
        b"[supervisor]",
        b"workers = 2  # two",
        b"",
    ]
    path.write_bytes(bom + eol.join(lines))
    ok(jobq(path, "config", "check"))
    assert "workers = 2" in ok(jobq(path, "config", "show"))
    shown = json.loads(ok(jobq(path, "--json", "config", "show")))
    assert shown["config"]["supervisor"]["workers"] == 2
    ok(jobq(path, "config", "set", "supervisor.workers", "6"))  # replaced
    ok(jobq(path, "config", "set", "log_format", "json"))  # inserted
    ok(jobq(path, "config", "set", "retry.backoff_max", "2.5"))  # a table appended
    want = [
        *lines[:3],
        b'log_format = "json"',
        *lines[3:5],
        b"workers = 6  # two",
        b"",
        b"[retry]",
        b"backoff_max = 2.5",
        b"",
    ]
    assert path.read_bytes() == bom + eol.join(want)
    ok(jobq(path, "config", "check"))


# -- errors, --config placement -------------------------------------------------------------------


def test_bad_config_and_unusable_database_exit_3_and_5(tmp_path):
    bad = write_config(tmp_path, handlers=["opsjobs"], metrics_port=99999)
    r = jobq(bad, "status")
    assert (
        r.returncode == ExitCode.CONFIG_INVALID
        and "metrics_port" in r.stderr
        and "99999" in r.stderr
    )
    gone = write_config(tmp_path, handlers=["opsjobs"], database="no/such/folder/q.db")
    r = jobq(gone, "jobs")
    assert r.returncode == ExitCode.DATABASE_UNAVAILABLE and "does not exist" in r.stderr
    r = jobq(tmp_path / "absent.toml", "jobs")
    assert r.returncode == ExitCode.CONFIG_INVALID and "not found" in r.stderr
    # a database that answers but refuses the statement is not said to be unavailable
    broken = write_config(tmp_path, handlers=["opsjobs"], database="broken.db")
    ok(jobq(broken, "jobs"))
    with sqlite3.connect(tmp_path / "broken.db") as c:
        c.execute("DROP TABLE jobs")
    r = jobq(broken, "jobs")
    assert r.returncode == ExitCode.DATABASE_UNAVAILABLE and "database error:" in r.stderr, r.stderr
    assert "no such table: jobs" in r.stderr and "unavailable" not in r.stderr


def test_help_lists_the_commands():
    out = ok(jobq(None, "--help"))
    for command in (
        "run",
        "enqueue",
        "status",
        "top",
        "jobs",
        "show",
        "retry",
        "cancel",
        "purge",
        "pause",
        "resume",
        "stop",
        "reload",
        "scale",
        "config",
    ):
        assert f"    {command} " in out, command
    said = " ".join(out.split())  # cancel covers running jobs too: they are asked to stop
    assert "running ones are asked to stop (--wait: until they end)" in said
    assert "cancel pending or waiting jobs" not in said


def test_config_and_json_work_before_or_after_the_command_and_from_the_environment(cfg):
    jid = ok(jobq(cfg, "enqueue", "ops:ok", before=True)).strip()
    assert as_json(jobq(cfg, "--json", "jobs", before=True))[0]["id"] == jid
    r = jobq(None, "jobs", "--json", extra_env={"JOBQ_CONFIG": str(cfg)})
    assert as_json(r)[0]["id"] == jid


# -- supervisor up --------------------------------------------------------------------------------


def test_ops_commands_against_a_running_supervisor(cfg, sup_factory, tmp_path):
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="2 workers")
    done = ok(jobq(cfg, "enqueue", "ops:ok", '{"n": 5}')).strip()
    flaky = ok(jobq(cfg, "enqueue", "ops:flaky", '{"ok_at": 2}')).strip()
    gate = tmp_path / "gate"
    held = ok(jobq(cfg, "enqueue", "ops:gate", json.dumps({"gate": str(gate)}))).strip()
    wait_until(lambda: job_row(cfg, flaky)["status"] == "completed", what="flaky job completed")
    wait_until(lambda: job_row(cfg, held)["status"] == "running", what="gate job running")

    snap = as_json(jobq(cfg, "status", "--json"))
    (live,) = [s for s in snap["supervisors"] if s["alive"]]
    assert live["pid"] == sup.pid
    assert len(snap["workers"]) == 2 and all(
        w["alive"] and w["rss_mb"] > 0 for w in snap["workers"]
    )
    # forked from the template: each worker shares most of its pages (USS well under RSS)
    assert all(0 < w["uss_mb"] < w["rss_mb"] and w["pss_mb"] > 0 for w in snap["workers"])
    busy = [w for w in snap["workers"] if w["jobs"]]
    assert [j["id"] for w in busy for j in w["jobs"]] == [held] and busy[0]["jobs"][0][
        "running_s"
    ] >= 0
    assert snap["jobs"]["completed"] == 2 and snap["jobs"]["running"] == 1
    assert snap["throughput"]["completed_per_min"] > 0 and snap["latency"]["attempts"] >= 3
    assert snap["latency"]["run_s"]["max"] is not None
    text = ok(jobq(cfg, "status"))
    assert f"running, pid {sup.pid}" in text and held in text
    assert psutil.Process(sup.pid).net_connections("inet") == []  # no metrics_port: no socket
    history = as_json(jobq(cfg, "show", flaky, "--json"))["attempts"]
    assert [(h["attempt"], h["outcome"]) for h in history] == [(1, "retry"), (2, "completed")]
    assert "RuntimeError: flaky: attempt 1 fails" in history[0]["error"]
    assert as_json(jobq(cfg, "show", done, "--json"))["job"]["result"] == {"n": 5}

    assert "scaling to 1 workers" in ok(jobq(cfg, "scale", "1"))
    gate.touch()
    wait_until(lambda: len(worker_rows(cfg)) == 1, what="scaled down to 1 worker")
    assert "reload" in ok(jobq(cfg, "reload"))
    wait_until(lambda: "config.reloaded" in sup.output(), what="config reloaded")
    assert as_json(jobq(cfg, "scale", "3", "--json"))["workers"] == 3
    wait_until(lambda: len(worker_rows(cfg)) == 3, what="scaled up to 3 workers")
    counters = wait_until(
        lambda: [
            s["counters"]
            for s in as_json(jobq(cfg, "status", "--json"))["supervisors"]
            if s["counters"].get("worker_starts") == 4
        ],
        what="counters published",
    )
    assert counters[0]["jobs_reaped"] == 0

    ok(jobq(cfg, "pause"))
    later = ok(jobq(cfg, "enqueue", "ops:ok")).strip()
    ok(jobq(cfg, "resume"))
    wait_until(lambda: job_row(cfg, later)["status"] == "completed", what="job after resume")
    assert ok(jobq(cfg, "stop")) == f"stopped supervisor pid {sup.pid}\n"
    assert sup.wait(10) == 0
    assert jobq(cfg, "stop").returncode == ExitCode.NOT_RUNNING


def test_json_logs_are_one_object_per_line_end_to_end(tmp_path, sup_factory):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # the metrics port is in use: logged, and the supervisor runs on without it
    cfg = write_config(
        tmp_path,
        handlers=["opsjobs"],
        log_format="json",
        log_level="debug",
        metrics_port=taken.getsockname()[1],
        supervisor={"workers": 1},
    )
    sup = sup_factory(cfg)
    ok(jobq(cfg, "enqueue", "ops:ok"))
    failed = ok(jobq(cfg, "enqueue", "ops:fail")).strip()
    wait_until(lambda: job_row(cfg, failed)["status"] == "failed", what="job failed")
    ok(jobq(cfg, "stop"))
    sup.wait(10)
    lines = [ln for ln in sup.output().splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert all(isinstance(r, dict) and {"ts", "level", "event"} <= set(r) for r in records)
    names = [r["event"] for r in records]
    for name in (
        "supervisor.started",
        "worker.spawned",
        "worker.started",
        "job.started",
        "job.completed",
        "job.failed",
        "supervisor.stopping",
        "worker.exited",
        "supervisor.stopped",
    ):
        assert name in names, name
    done = next(r for r in records if r["event"] == "job.completed")
    assert {"id", "type", "attempt", "duration", "slot", "pid"} <= set(done) and done[
        "type"
    ] == "ops:ok"
    fail = next(r for r in records if r["event"] == "job.failed")
    assert fail["id"] == failed and "ops:fail always fails" in fail["error"]
    unavailable = next(r for r in records if r["event"] == "metrics.unavailable")
    assert unavailable["port"] == taken.getsockname()[1] and unavailable["level"] == "error"
    taken.close()
