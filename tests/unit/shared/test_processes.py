"""shared.runtime.processes: owner tokens (which survive pid reuse) and liveness, on real
processes of this host."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shared.runtime import processes as procs


@pytest.fixture
def exited():
    """A child's token taken while it ran, and the child exited but not reaped yet (a
    zombie); reaped after the test."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    token = procs.owner_token(child.pid)
    assert procs.token_alive(token)
    child.stdin.close()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    yield child, token
    child.wait()


@pytest.mark.parametrize(
    "token, parsed",
    [
        (
            "web-1/0123456789ab/4026531836:42:1700000000123",
            ("web-1/0123456789ab/4026531836", 42, 1700000000123),
        ),
        ("a:b:1:2", ("a:b", 1, 2)),  # the host is what is left of the last two fields
    ],
)
def test_parse_token(token, parsed):
    assert procs.parse_token(token) == parsed
    assert procs.token_host(token) == parsed[0]


@pytest.mark.parametrize("token", ["", "host:1", "host:x:1", "host:1:y", "nocolons"])
def test_not_a_token(token):
    assert procs.parse_token(token) is None and procs.token_host(token) is None
    assert procs.token_alive(token) is False


def test_own_token_is_alive_and_round_trips():
    here = procs.host_id()
    assert ":" not in here and here
    token = procs.owner_token(os.getpid(), here)
    assert procs.parse_token(token)[1] == os.getpid()
    assert procs.owner_token(os.getpid()) == token
    assert procs.token_alive(token, here)


def test_a_reused_pid_is_not_the_same_process():
    here = procs.host_id()
    host, pid, created = procs.parse_token(procs.owner_token(os.getpid(), here))
    assert not procs.token_alive(f"{host}:{pid}:{created - 1000}", here)


def test_another_hosts_token_counts_as_alive():
    assert procs.token_alive("elsewhere:1:1", "here")


def test_an_exited_process_is_dead_reaped_or_not(exited):
    child, token = exited
    assert not procs.token_alive(token)  # a zombie
    child.wait()
    assert not procs.token_alive(token)
    assert procs.create_time_ms(child.pid) is None
    assert procs.send_signal(child.pid, 0) is False
    assert procs.memory_mb(child.pid) is None and procs.rss_mb(child.pid) == 0.0


def test_signals_and_memory_of_a_live_process():
    assert procs.send_signal(None, 0) is False
    assert procs.send_signal(os.getpid(), 0) is True
    mem = procs.memory_mb(os.getpid())
    assert mem["rss_mb"] > 0 and procs.rss_mb(os.getpid()) > 0


def test_start_times_read_from_proc_are_psutils_to_the_millisecond(exited):
    """Tokens taken by /proc (shared.runtime.processes) and by psutil name a process alike:
    this process, its parent, a zombie child, and no process at all."""
    psutil = pytest.importorskip("psutil")
    child, _ = exited
    for pid in (os.getpid(), os.getppid(), child.pid):
        assert procs.create_time_ms(pid) == int(round(psutil.Process(pid).create_time() * 1000))
    assert procs._zombie(child.pid) and not procs._zombie(os.getpid())
    gone = max(psutil.pids()) + 10_000
    assert procs.create_time_ms(gone) is None and procs._zombie(gone)
