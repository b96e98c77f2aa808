"""Child process trees for the benchmark: started in their own session, measured with psutil,
and always cleaned up (graceful signal, then SIGKILL of every process ever seen in the tree)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil

REPO = str(Path(__file__).resolve().parent.parent)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for children: this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def wait_for(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> object:
    """Poll ``predicate`` until truthy; raise TimeoutError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class Tree:
    """A process (``argv``) and its descendants. ``close()`` leaves none of them running."""

    def __init__(
        self,
        argv: list[str],
        log_path: str,
        *,
        stop_signal: int = signal.SIGTERM,
        stop_timeout: float = 30.0,
        env: dict[str, str] | None = None,
        cwd: str = REPO,
    ) -> None:
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self.log = open(log_path, "wb")
        self.log_path = log_path
        self.proc = subprocess.Popen(
            argv,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=child_env(**(env or {})),
            start_new_session=True,
        )
        self.seen: dict[int, psutil.Process] = {}

    def members(self) -> list[psutil.Process]:
        """The root and its live descendants (remembered, so orphans can still be killed)."""
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self.seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass
        return [p for p in self.seen.values() if _alive(p)]

    def cpu_seconds(self) -> dict[int, float]:
        """CPU seconds of each live member, by pid: the scheduler's nanosecond count of time on
        a CPU, summed over the process's threads, where Linux gives it (/proc/PID/task/*/schedstat);
        otherwise user + system time, which comes in 10 ms ticks (too coarse for a 1% budget)."""
        out = {}
        for p in self.members():
            exact = _schedstat_seconds(p.pid)
            if exact is not None:
                out[p.pid] = exact
                continue
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> int | None:
        """Stop gracefully (``stop_signal``), then SIGKILL whatever of the tree is left."""
        self.members()
        if self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in self.seen.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in self.seen.values():
            _kill(p)
        self.log.close()
        return self.proc.returncode

    def __enter__(self) -> "Tree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill(p: psutil.Process) -> None:
    try:
        if p.is_running():
            p.kill()
    except psutil.NoSuchProcess:
        pass


def _schedstat_seconds(pid: int) -> float | None:
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def cpu_percent_of_core(tree: Tree, seconds: float) -> float:
    """CPU the whole tree uses over a quiet window of ``seconds``, as % of one core."""
    before = tree.cpu_seconds()
    t0 = time.monotonic()
    time.sleep(seconds)
    after = tree.cpu_seconds()
    wall = time.monotonic() - t0
    used = sum(after[pid] - before.get(pid, 0.0) for pid in after)
    return round(100.0 * used / wall, 3)


def python() -> str:
    return sys.executable
