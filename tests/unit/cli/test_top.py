"""``jobq top`` in a pseudo-terminal: it draws, refreshes, and quits cleanly on q and on Ctrl-C,
leaving the terminal's normal screen restored."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios

import pytest

from tests.proc import env, fresh_ctrl_c, wait_until, write_config
from tests.unit.cli.test_cli import jobq, ok

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


class PtyTop:
    """``python -m supervisor top`` on the slave side of a pty (40 x 140), output drained from
    the master side into :attr:`raw`."""

    def __init__(self, cfg) -> None:
        self.raw = b""
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal, then become the command
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
                fresh_ctrl_c()
                e = env()
                e["TERM"] = "xterm-256color"
                e.pop("LINES", None)
                e.pop("COLUMNS", None)
                os.execve(
                    sys.executable,
                    [
                        sys.executable,
                        "-m",
                        "supervisor",
                        "top",
                        "--interval",
                        "0.2",
                        "--config",
                        str(cfg),
                    ],
                    e,
                )
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.code: int | None = None

    def pump(self, timeout: float = 0.05) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                self.raw += os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                pass

    def screen_text(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def wait_for(self, text: str, what: str) -> None:
        wait_until(lambda: (self.pump(), text in self.screen_text())[1], timeout=20, what=what)

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def exited(self) -> int | None:
        self.pump(0.01)
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self.code = os.waitstatus_to_exitcode(status)
            self.drain()
        return self.code

    def drain(self) -> None:
        """Read what the exited child left in the terminal: its last writes (the screen restore)
        can land between a pump and the wait that reaps it."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: everything read, the terminal closed
                return
            if not chunk:
                return
            self.raw += chunk

    def close(self) -> None:
        if self.code is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path, handlers=["opsjobs"])


@pytest.mark.parametrize("quit_key", [b"q", b"\x03"], ids=["q", "ctrl-c"])
def test_top_draws_refreshes_and_quits(cfg, quit_key):
    ok(jobq(cfg, "status"))  # create the database
    top = PtyTop(cfg)
    try:
        top.wait_for("jobq top", "the first frame")
        for heading in (
            "jobs/s",
            "QUEUE BY TYPE",
            "WORKERS  none registered",
            "RECENT FAILURES  none",
            "supervisor NOT RUNNING",
        ):  # a frame can arrive in several reads
            top.wait_for(heading, f"{heading!r} on the first frame")
        ok(jobq(cfg, "enqueue", "kq7:visible"))  # new data shows up without a key press
        top.wait_for("kq7:visible", "a refreshed frame with the new job type")
        ok(
            jobq(cfg, "enqueue", "kq7:visible", "--queue", "kq7-reports")
        )  # named queues get their table
        top.wait_for("kq7-reports", "a refreshed frame with the named queue")
        drawn = len(top.raw)
        top.send(quit_key)
        wait_until(lambda: top.exited() is not None, timeout=10, what="top to exit")
        assert top.code == 0
        assert b"\x1b[?1049l" in top.raw[drawn:]  # left the alternate screen: terminal restored
    finally:
        top.close()


def test_top_names_a_queue_no_worker_serves(tmp_path):
    cfg = write_config(
        tmp_path,
        handlers=["opsjobs"],
        supervisor={"workers": 2},
        queues={"reports": {"workers": 1}},
    )
    ok(jobq(cfg, "enqueue", "kq7:visible", "--queue", "newsletters"))
    top = PtyTop(cfg)
    try:
        top.wait_for(
            "no worker serves queue newsletters: 1 pending", "the unserved queue on the screen"
        )
        assert "serves queue reports" not in top.screen_text()
        top.send(b"q")
        wait_until(lambda: top.exited() is not None, timeout=10, what="top to exit")
    finally:
        top.close()
