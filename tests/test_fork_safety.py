"""Nothing crosses fork(): the supervisor holds no SQLite file open when it forks a worker."""
from __future__ import annotations

import os
import threading

from shared import config as config_mod
from shared.engines.sqlite.store import SqliteStore
from supervisor import children
from supervisor.arbiter import Arbiter
from tests.proc import wait_until, write_config


def open_database_fds(db_path: str) -> list[str]:
    """Paths of this process's open file descriptors that belong to the database."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(db_path):
            out.append(target)
    return out


def test_checker_sees_an_open_connection(tmp_path):
    path = str(tmp_path / "q.db")
    with SqliteStore(path):
        assert open_database_fds(path)
    assert not open_database_fds(path)


def test_no_database_fd_or_thread_at_fork(tmp_path, monkeypatch):
    cfg = config_mod.load(write_config(tmp_path, supervisor={"workers": 3}, handlers=[]))
    violations: list[str] = []
    forks = []
    real_fork = os.fork

    def checked_fork() -> int:
        fds = open_database_fds(cfg.database)
        if fds:
            violations.append(f"open at fork: {fds}")
        if threading.active_count() > 1:
            violations.append(f"threads at fork: {threading.enumerate()}")
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(children.os, "fork", checked_fork)
    arb = Arbiter(cfg)
    assert arb.boot() == 0
    try:
        arb.maintain()          # opens the database (recovery, WAL upkeep)
        arb.respawn()           # must close it before each fork
        assert len(forks) == 3
        # a crash and a respawn go through the same path
        os.kill(forks[0], 9)
        wait_until(lambda: (arb.reap_children(), arb.maintain(), arb.respawn(), len(forks) == 4)[-1],
                   what="respawn after crash")
    finally:
        arb.begin_halt("test")
        arb.reap_blocking()
        arb.shutdown()
    assert violations == []
