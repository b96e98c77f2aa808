"""The embedding API: run or steer a supervisor from Python.

    sup = Supervisor("jobq.toml", workers=4)
    sup.start()                 # a supervisor process runs; returns once its workers run
    sup.pause(); sup.resume()
    sup.wait_for_active(30)     # until no job is running
    sup.stop(30)

``start()`` launches ``python -m supervisor run`` as a separate process rather than forking the
caller: the caller's threads and database connections must never cross a fork. ``run()`` runs
the supervisor in the calling process and blocks (it is what ``python -m supervisor`` calls).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import tomli_w

from shared.settings import config as config_mod
from shared.settings.config import Config
from shared.engines.contract import EngineStore
from shared.engines import open_store

from .arbiter import Arbiter


class Supervisor:
    def __init__(
        self, config: Config | str | os.PathLike[str] | None = None, *, workers: int | None = None
    ) -> None:
        if config is None or isinstance(config, (str, os.PathLike)):
            config = config_mod.load(
                config_mod.resolve_path(None if config is None else str(config))
            )
        self.config = config
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None
        self._tmp: str | None = None

    def run(self) -> int:
        """Run in this process until stopped; returns the exit code."""
        return Arbiter(self._with_path(), workers=self.workers).run()

    def start(self, timeout: float = 30.0) -> None:
        """Start the supervisor process; return once all its workers are running."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("supervisor already started")
        cfg = self._with_path()
        r, w = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "supervisor",
            "run",
            "--config",
            cfg.path,
            "--ready-fd",
            str(w),
        ]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        self.process = subprocess.Popen(argv, pass_fds=(w,), start_new_session=True)
        os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], timeout)
            data = os.read(r, 64) if ready else b""
        finally:
            os.close(r)
        if b"ready" not in data:
            code = self.process.poll()
            if code is None:
                self.stop(5)
                raise TimeoutError(f"supervisor did not start its workers within {timeout:g} s")
            raise RuntimeError(f"supervisor exited with code {code} during start-up")

    def _store(self) -> EngineStore:
        return open_store(self.config)

    def pause(self) -> None:
        """Workers finish the job in hand and claim nothing until ``resume()``."""
        with self._store() as s:
            s.set_paused(True)

    def resume(self) -> None:
        with self._store() as s:
            s.set_paused(False)

    def wait_for_active(self, timeout: float) -> None:
        """Return once no job is running; raise TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._store() as s:
            while s.counts().get("running", 0):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"jobs still running after {timeout:g} s")
                time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful stop (SIGTERM); after ``timeout`` an immediate one; returns the exit code."""
        p = self.process
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)  # the second signal: immediate
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self._tmp:
            os.unlink(self._tmp)
            self._tmp = None
        return p.returncode

    def _with_path(self) -> Config:
        """Workers read the config file, so an in-memory Config is written to a temp file."""
        if self.config.path:
            return self.config
        fd, path = tempfile.mkstemp(prefix="jobq-", suffix=".toml")
        with os.fdopen(fd, "wb") as f:
            tomli_w.dump(self.config.to_dict(), f)
        self._tmp = path
        self.config = self.config.replace(path=path)
        return self.config

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
