"""Start-up (issue 30): the supervisor reaches its first claim without importing what the claim
does not need, and its forked workers import nothing of jobq after the fork."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from shared.api import JobQueue
from shared.config import load
from tests.proc import REPO, env, wait_until, write_config

pytestmark = pytest.mark.engines

# A real `python -m supervisor run`, except that it writes the names of its modules at exit.
RUN = """
import atexit, json, runpy, sys
out, sys.argv = sys.argv[1], ["supervisor", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
runpy.run_module("supervisor", run_name="__main__", alter_sys=True)
"""

# Not needed for a claim: the ops CLI and its config reference, the dashboard, tracing, the
# producer API; on SQLite asyncio too (only async handlers use it; psycopg imports it itself).
NEVER = ("supervisor.cli", "supervisor.web", "supervisor.gendocs", "opentelemetry", "shared.api")
NEVER_ON_SQLITE = ("asyncio", "psycopg", "psycopg_pool")


def supervisor_modules(tmp_path: Path, config: Path) -> list[str]:
    """Run a supervisor until it has run a job, stop it, and return its ``sys.modules``."""
    with JobQueue(config=load(str(config))) as q:
        job = q.enqueue("test:noop", {})
        out = tmp_path / "modules.json"
        log = open(tmp_path / "supervisor.log", "wb")
        proc = subprocess.Popen([sys.executable, "-c", RUN, str(out), "run", "--config", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, env=env(), cwd=str(REPO))
        try:
            wait_until(lambda: q.get(job).status == "completed", 30, "the job to complete")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, (tmp_path / "supervisor.log").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    return json.loads(out.read_text())


def test_the_supervisor_imports_only_what_its_claims_need(tmp_path, database, engine_name):
    config = write_config(tmp_path, handlers=["testjobs"])
    modules = supervisor_modules(tmp_path, config)
    assert "supervisor.arbiter" in modules and "shared.engines" in modules  # it did run
    never = NEVER + (NEVER_ON_SQLITE if engine_name == "sqlite" else ())
    assert [m for m in modules if any(m == n or m.startswith(n + ".") for n in never)] == []
    if engine_name != "sqlite":
        assert "psycopg" in modules
