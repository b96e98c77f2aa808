"""A password in the database URL never reaches a log line, a page, an error text, ``ps`` or a
metric: one function renders a database location for people
(:func:`shared.engines.location.redacted`), :func:`shared.engines.location.scrub` hides the secrets
of a URL in any other text, and the end-to-end test greps every output of real processes for a
planted password."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from shared.settings.config import load
from shared.engines.location import redacted, scrub
from tests.proc import Running, env, wait_until, write_config

PLANTED = "PLANTED-s3cret-9f2"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://root:s3cret@db:5432/jobq", "postgresql://root:***@db:5432/jobq"),
        (
            "postgres://root:s3cret@db/jobq?sslmode=require",
            "postgres://root:***@db/jobq?sslmode=require",
        ),
        (
            "postgresql://root:p%40ss%2Fw0rd@db/jobq",
            "postgresql://root:***@db/jobq",
        ),  # percent-encoded
        ("postgresql://root:p@ss@db/jobq", "postgresql://root:***@db/jobq"),  # a raw @
        ("postgresql://root:pa/ss@db/jobq", "postgresql://root:***@db/jobq"),  # a raw /
        (
            "postgresql://root@db/jobq?password=s3cret&sslmode=require",
            "postgresql://root@db/jobq?password=***&sslmode=require",
        ),
        (
            "postgresql:///jobq?host=/run/postgresql&PASSWORD=s3cret",
            "postgresql:///jobq?host=/run/postgresql&PASSWORD=***",
        ),
        ("postgresql://db/jobq?sslpassword=s3cret", "postgresql://db/jobq?sslpassword=***"),
        (
            "postgresql://root:s3cret@db/jobq?options=-c%20lock_timeout%3D50",
            "postgresql://root:***@db/jobq?options=-c%20lock_timeout%3D50",
        ),  # options kept
        (
            "postgresql://root@db/jobq?application_name=me@host",
            "postgresql://root@db/jobq?application_name=me@host",
        ),
        ("postgresql://root@db/jobq", "postgresql://root@db/jobq"),
        ("/var/lib/jobq/jobq.db", "/var/lib/jobq/jobq.db"),
        ("sqlite:///var/lib/jobq/jobq.db", "sqlite:///var/lib/jobq/jobq.db"),
    ],
)
def test_a_database_location_is_shown_without_its_password(url, shown):
    assert redacted(url) == shown
    assert redacted(shown) == shown  # rendering twice changes nothing


@pytest.mark.parametrize(
    "url, text",
    [
        (
            "postgresql://root:p%40ssw0rd@db/jobq",
            'bad password "p@ssw0rd" in postgresql://root:p%40ssw0rd@db/jobq',
        ),
        ("postgresql://root:p%40ssw0rd@db/jobq", "it said p%40ssw0rd"),
        ("postgresql://root@db/jobq?password=hunter22", "password=hunter22 is wrong"),
        (
            "postgresql://root:hunter22/xyz@db/jobq",
            'invalid integer value "hunter22" for connection option "port"',
        ),
    ],
)
def test_scrub_hides_every_form_of_the_password_in_a_text(url, text):
    out = scrub(text, url)
    assert "ssw0rd" not in out and "hunter22" not in out and "***" in out


def test_an_unknown_engine_is_refused_without_showing_the_password(tmp_path):
    from shared.settings.config import ConfigError

    config = write_config(tmp_path, database=f"mysql://root:{PLANTED}@db/jobq")
    with pytest.raises(ConfigError) as err:
        load(config)
    assert PLANTED not in str(err.value) and "mysql://root:***@db/jobq" in str(err.value)


# -- end to end: real processes on PostgreSQL ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jobq(config: Path, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
        cwd=str(config.parent),
    )
    return f"$ jobq {' '.join(args)} (exit {r.returncode})\n{r.stdout}{r.stderr}"


def _get(url: str) -> str:
    """Status, headers and body of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return f"{r.status}\n{r.headers}\n{r.read().decode()}"
    except urllib.error.HTTPError as e:
        return f"{e.code}\n{e.headers}\n{e.read().decode()}"


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def _ps() -> str:
    """Every process's command line (``ps -eo args``): a password there is anyone's to read."""
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout


def _web(config: Path, outputs: dict[str, str], label: str, *args: str) -> None:
    """Start ``jobq web`` on ``config``, fetch every kind of page, keep what it printed, stop it."""
    from tests.unit.web.test_web import Web

    web = Web(config, *args)
    try:
        web.wait_up()
        paths = [
            "/",
            "/live/overview",
            "/jobs",
            "/jobs?status=failed",
            "/jobs?q=nothing-like-it",
            "/schedules",
            "/types",
            "/jobs/0123456789abcdef0123",
            "/nowhere",
            "/jobs?status=finished",
            "/jobs?q=%00",
            "/static/app.css",
        ]
        for path in paths:
            outputs[f"{label} GET {path}"] = _get(web.url + path)
    finally:
        web.close()
    outputs[f"{label} output"] = web.log_path.read_text()


def test_a_planted_password_appears_in_no_output(tmp_path):
    """Supervisor and workers running and failing a job, the CLI, the dashboard (every page,
    the error pages, ``--read-only``), the metrics and ``ps``: the password is in none of them."""
    from shared.producer.api import JobQueue
    from tests.engines import PostgresEngine

    db = PostgresEngine(tmp_path)  # a schema of its own; trust auth accepts any password
    url = f"postgresql://root:{PLANTED}@127.0.0.1:5432/test"
    metrics = _free_port()
    config = write_config(
        tmp_path,
        database=url,
        postgres={"schema": db.schema},
        metrics_port=metrics,
        schedule=[{"name": "hourly", "type": "test:noop", "cron": "0 * * * *", "payload": {}}],
    )
    outputs: dict[str, str] = {}
    sup = Running(config)
    try:
        with JobQueue(config=load(config)) as q:
            job = q.enqueue("test:fail", {"x": 1})
            wait_until(lambda: q.get(job).status == "failed", 60, "the job to fail")
            wait_until(lambda: len(sup.workers()) == 2, 30, "both workers")
        outputs["ps -eo args"] = _ps()
        for p in [psutil.Process(sup.pid), *psutil.Process(sup.pid).children(recursive=True)]:
            outputs[f"cmdline of {p.pid}"] = " ".join(p.cmdline())
        # the endpoint is bound on the supervisor's first wait, which may come after a job
        # already failed on workers that start quickly: wait for it to answer
        wait_until(lambda: _answers(metrics), 30, "the metrics endpoint")
        outputs["metrics"] = _get(f"http://127.0.0.1:{metrics}/metrics")
        for args in (
            ("status",),
            ("status", "--json"),
            ("jobs",),
            ("jobs", "--status", "failed"),
            ("show", job),
            ("show", "ffffffffffff"),
            ("no-such-command",),
            ("cancel", "nope"),
            ("config", "show"),
            ("config", "show", "--effective"),
            ("config", "show", "--json"),
        ):
            outputs[" ".join(args)] = _jobq(config, *args)
        _web(config, outputs, "web")
        _web(config, outputs, "web --read-only", "--read-only")
    finally:
        sup.signal(15)
        try:
            sup.wait(30)
        finally:
            sup.close()
            db.drop()
    outputs["supervisor and worker log"] = sup.output()
    # a server that does not answer: the error texts name it (without the password) too. Nothing
    # listens on the port, so each try is refused at once; a short connect_timeout ends the
    # retries sooner (each of the 13 requests below waits it out: at 2 s the test took twice as
    # long)
    (tmp_path / "down").mkdir()
    down = write_config(
        tmp_path / "down",
        database=f"postgresql://root:{PLANTED}@127.0.0.1:{_free_port()}/test",
        postgres={"schema": db.schema, "connect_timeout": 0.3},
    )
    outputs["status, server down"] = _jobq(down, "status")
    _web(down, outputs, "web, server down")
    leaks = [where for where, text in outputs.items() if PLANTED in text]
    assert not leaks, f"the planted password appears in: {leaks}\n" + "\n".join(
        f"--- {w}\n{outputs[w][:3000]}" for w in leaks
    )
    # and the outputs are the real ones: the job failed, the location is shown (as user:***@)
    assert "nope" in outputs["supervisor and worker log"] and "jobq_jobs" in outputs["metrics"]
    assert "127.0.0.1:5432/test" in outputs["status"] and "root:***@" in outputs["status"]
    assert "root:***@" in outputs["web output"] and outputs["web, server down GET /"].startswith(
        "503"
    )
