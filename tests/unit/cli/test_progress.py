"""The progress line of the long commands (``purge``, ``retry --failed``, ``cancel`` of many
jobs or ``--pending``, ``copy``): drawn on a terminal (a real pty here), rows done, rate and
time left, erased at the end; nothing extra when piped or with ``--json``."""

from __future__ import annotations

import io
import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from supervisor.cli.progress import Progress
from tests.proc import env, write_config
from tests.unit.cli.test_cli import jobq, ok

N = 2500  # jobs: several chunks of every bulk write


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Ctx:
    def __init__(self, err: io.StringIO, json: bool = False) -> None:
        self.err, self.json = err, json


def in_pty(cfg: Path, *args: str) -> tuple[int, str]:
    """Run ``python -m supervisor ARGS --config CFG`` with a pty as its terminal; its exit code
    and everything it wrote there."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cfg.parent)
            argv = [sys.executable, "-m", "supervisor", *args, "--config", str(cfg)]
            os.execve(sys.executable, argv, env())
        finally:
            os._exit(127)
    raw, deadline = b"", time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            raw += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), raw.decode("utf-8", "replace")


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path, handlers=["opsjobs"])


def _jobs(cfg: Path, status: str) -> list[str]:
    with JobQueue(config=load(cfg)) as q:
        ids = q.enqueue_many([("ops:ok", {"n": i}) for i in range(N)])
        if status != "pending":
            q.store.write(
                "UPDATE jobs SET status = :s, completed_at = '2020-01-01T00:00:00.000Z'",
                {"s": status},
            )
    return ids


def test_the_line_gives_rows_rate_and_time_left_and_is_shown_only_on_a_terminal():
    now = [100.0]
    err = Tty()
    p = Progress(Ctx(err), "jobq purge", "jobs deleted", 1000, clock=lambda: now[0])
    now[0] = 102.0
    p.update(200)
    assert err.getvalue() == "\rjobq purge: 200 of 1000 jobs deleted (20%), 100/s, 8 s left\x1b[K"
    now[0] = 102.1
    p.update(300)  # within EVERY of the last: not redrawn
    assert err.getvalue().count("\r") == 1
    p.close()
    assert err.getvalue().endswith("\r\x1b[K")
    assert (
        Progress(Ctx(err), "jobq copy", "jobs read").line(9000, 3.0, "last id x")
        == "jobq copy: 9000 jobs read, 3000/s, last id x"
    )
    assert p.line(0, 200.0).endswith("0/s") and "left" not in p.line(0, 200.0)
    assert Progress(Ctx(err), "x", "y", 10).line(5, 1.0, "") == "x: 5 of 10 y (50%), 5/s, 1 s left"
    for quiet in (Ctx(io.StringIO()), Ctx(Tty(), json=True)):
        q = Progress(quiet, "jobq purge", "jobs deleted", 10)
        q.update(5)
        q.close()
        assert quiet.err.getvalue() == ""


def test_purge_shows_its_progress_on_a_terminal_and_nothing_when_piped(cfg):
    _jobs(cfg, "completed")
    code, out = in_pty(cfg, "purge", "--older-than", "1d")
    assert code == 0, out
    assert "\rjobq purge: " in out and f"of {N} jobs deleted (" in out
    assert "/s, " in out and " left" in out
    assert f"\r\x1b[Kdeleted {N} completed jobs" in out  # the line erased before the result
    _jobs(cfg, "completed")
    r = jobq(cfg, "purge", "--older-than", "1d")
    assert ok(r).startswith(f"deleted {N} completed jobs") and r.stderr == ""


def test_retry_failed_and_cancel_of_many_show_their_progress(cfg):
    _jobs(cfg, "failed")
    code, out = in_pty(cfg, "retry", "--failed")
    assert code == 0, out
    assert "\rjobq retry: " in out and f"of {N} jobs retried (" in out
    assert f"retried {N} failed jobs" in out
    with JobQueue(config=load(cfg)) as q:
        ids = [r["id"] for r in q.store.read("SELECT id FROM jobs")]
    code, out = in_pty(cfg, "cancel", *ids)
    assert code == 0, out
    assert "\rjobq cancel: " in out and f"of {N} jobs (" in out
    assert out.count("\ncancelled ") == N - 1
    r = jobq(cfg, "retry", "--failed", "--json")
    assert ok(r) and r.stderr == ""
    _jobs(cfg, "pending")
    code, out = in_pty(cfg, "cancel", "--pending")
    assert code == 0, out
    assert f"of {N} jobs cancelled (" in out
    assert f"\r\x1b[Kcancelled {N} pending or waiting jobs" in out


def test_copy_shows_its_progress_on_a_terminal_and_nothing_when_piped(cfg, tmp_path):
    _jobs(cfg, "pending")
    code, out = in_pty(cfg, "copy", "--from", "q.db", "--to", "copy.db")
    assert code == 0, out
    assert "\rjobq copy: " in out and f"of {N} jobs read (" in out and "copied, last id " in out
    assert f"\r\x1b[Kcopied {N} jobs" in out
    r = jobq(cfg, "copy", "--from", "q.db", "--to", "copy2.db")
    assert ok(r).startswith(f"copied {N} jobs") and r.stderr == ""
