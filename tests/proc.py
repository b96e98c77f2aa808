"""Helpers for tests that run real supervisor and worker processes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Callable

import psutil
import tomli_w

from shared.settings.config import Config
from shared.engines.location import resolve
from tests.engines import merge, missing_table, raw, under_test

REPO = Path(__file__).resolve().parents[1]  # the checkout
FIXTURES = str(Path(__file__).parent / "fixtures")


def fresh_ctrl_c() -> None:
    """In a child about to exec a command a test will Ctrl-C: SIGINT as a user's shell leaves
    it (default disposition, not blocked), whatever the test process inherited or changed.
    (Seen in full-suite runs only: both Ctrl-C tests hung, their child never saw SIGINT, after
    something earlier in the same pytest process left SIGINT ignored or blocked; not found yet.)"""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    what: str = "condition",
    interval: float = 0.02,
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def write_config(folder: Path, **sections: Any) -> Path:
    """A jobq.toml in ``folder`` for tests: fast polling, the fixture handlers, small leases."""
    data: dict[str, Any] = {
        "database": "q.db",
        "handlers": ["testjobs"],
        "log_level": "info",
        "supervisor": {
            "workers": 2,
            "shutdown_timeout": 10,
            "kill_grace": 1,
            "maintenance_interval": 0.1,
            "config_poll_interval": 0.2,
        },
        "worker": {"poll_interval": 0.05, "heartbeat_interval": 0.2, "lease_timeout": 5},
        "retry": {"backoff_base": 0, "backoff_max": 0},
    }
    merge(data, under_test())  # the engine under test (the database fixture), on PostgreSQL
    merge(data, sections)
    path = folder / "jobq.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([FIXTURES, e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


class Running:
    """A ``python -m supervisor`` process started for a test; ``close()`` leaves nothing behind."""

    def __init__(self, config: Path, *args: str) -> None:
        self.config = config
        self.log_path = config.parent / f"supervisor-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "run", "--config", str(config), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env(),
            cwd=str(config.parent),
        )
        self.pid = self.proc.pid

    def output(self) -> str:
        return self.log_path.read_text()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)

    def workers(self) -> list[int]:
        """The supervisor's live worker processes: forked by its template (jobq-worker) or
        started as ``python -m worker`` (not the template, nor a child not yet either)."""
        return [c.pid for c in live_children(self.pid) if is_worker(c)]

    def template(self) -> int | None:
        """The pid of the supervisor's template process (None if it has none)."""
        return next((c.pid for c in live_children(self.pid) if is_template(c)), None)

    def close(self) -> None:
        kill_tree(self.proc)
        self.log.close()


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a process a test started and every process under it (a supervisor's workers)."""
    descendants = []
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    for p in descendants:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=5)


TEMPLATE_NAME = (
    "jobq-template"  # worker.forkserver.NAME (not imported: tests see processes from outside)
)
WORKER_NAME = "jobq-worker"  # worker.forkserver.WORKER_NAME


def is_template(p: psutil.Process) -> bool:
    """Is ``p`` a supervisor's template process (or one of its go-betweens)?"""
    try:
        return p.name() == TEMPLATE_NAME
    except psutil.Error:
        return False


def is_worker(p: psutil.Process) -> bool:
    try:
        return p.name() == WORKER_NAME or (
            p.name() != TEMPLATE_NAME and "worker" in p.cmdline()[1:3]
        )
    except psutil.Error:
        return False


def live_children(pid: int, recursive: bool = False) -> list[psutil.Process]:
    out = []
    try:
        kids = psutil.Process(pid).children(recursive=recursive)
    except psutil.NoSuchProcess:
        return []
    for c in kids:
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


def db(config: Path) -> Any:
    """A plain connection to the database of the config file ``config`` (whichever engine:
    :func:`tests.engines.raw`), rows by column name. Only ``database`` and ``postgres.schema``
    are read: the rest of the file may be invalid (a test's rejected edit)."""
    data = tomllib.loads(config.read_text())
    section = data.get("postgres", {})
    cfg = Config(database=resolve(data.get("database", "jobq.db"), str(config.parent)))
    if "schema" in section:
        cfg = cfg.replace(postgres=dataclasses.replace(cfg.postgres, schema=section["schema"]))
    return raw(cfg)


def job_row(config: Path, job_id: str) -> sqlite3.Row:
    with db(config) as c:
        return c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def worker_rows(config: Path) -> list[sqlite3.Row]:
    """Registered worker processes ([] before the supervisor has created the schema)."""
    with db(config) as c:
        try:
            return c.execute(
                "SELECT * FROM processes WHERE kind = 'worker' ORDER BY slot"
            ).fetchall()
        except Exception as exc:
            if missing_table(exc):
                return []
            raise


def pid_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop_signal_names() -> tuple[int, ...]:
    return (signal.SIGTERM, signal.SIGINT)


def write_lock_free(path: str) -> bool:
    """Can another connection take the write lock at once (busy timeout 0)?"""
    c = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        c.execute("BEGIN IMMEDIATE")
        c.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        c.close()


def log_events(sup: "Running", name: str | None = None) -> list[dict[str, Any]]:
    """The supervisor's (and its workers') JSON log lines, optionally only event ``name``."""
    out = []
    for line in sup.output().splitlines():
        if line.startswith("{"):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if name is None or e.get("event") == name:
                out.append(e)
    return out
