"""``supervisor.maintenance._kill_and_wait`` runs on the supervisor's loop, which must never block
for long: a silent owner on this host whose parent does not reap it (the parent is stopped)
stays a zombie after SIGKILL, and the kill must come back at once, counting the zombie as gone
(it can run no more code), instead of waiting seconds for the pid to vanish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from shared.runtime.processes import owner_token, token_alive
from supervisor import maintenance
from tests.proc import wait_until

# The parent forks a child that sleeps, prints the child's pid, then stops itself (SIGSTOP): a
# stopped parent reaps nothing, so the killed child stays a zombie.
PARENT = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(600)
    os._exit(0)
print(pid, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
time.sleep(600)
"""


def test_a_killed_owner_left_a_zombie_by_a_stopped_parent_does_not_block_the_loop():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        wait_until(lambda: psutil.Process(parent.pid).status() == psutil.STATUS_STOPPED, timeout=10)
        token = owner_token(child)
        assert token_alive(token)
        t0 = time.monotonic()
        gone = maintenance._kill_and_wait(token)
        took = time.monotonic() - t0
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE  # not reaped: parent stopped
        assert gone and not token_alive(token)
        assert took < 1.0, f"the supervisor's loop waited {took:.2f} s for a zombie"
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()


def test_an_owner_that_cannot_be_found_is_gone_and_a_bad_token_is_not_acted_on():
    assert maintenance._kill_and_wait("not a token") is False
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    token = owner_token(p.pid)
    p.wait()
    assert maintenance._kill_and_wait(token) is True
