"""Start-up: the supervisor reaches its first claim without importing what the claim
does not need, and its forked workers import nothing of jobq after the fork."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.producer.api import JobQueue
from shared.settings.config import load
from tests.proc import REPO, env, log_events, wait_until, write_config

pytestmark = pytest.mark.engines

# A real `python -m supervisor run`, except that it writes the names of its modules at exit.
RUN = """
import atexit, json, runpy, sys
out, sys.argv = sys.argv[1], ["supervisor", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
runpy.run_module("supervisor", run_name="__main__", alter_sys=True)
"""


def run_until(module: str, owner: str, method: str) -> str:
    """The same as RUN, but it writes the names of its modules when ``module.owner.method`` is
    first called (instead of at exit)."""
    return f"""
import json, os, runpy, sys
out, sys.argv = sys.argv[1], ["supervisor", *sys.argv[2:]]
from {module.rpartition(".")[0]} import {module.rpartition(".")[2]} as target
real = target.{owner}.{method}
def recorded(*args, **kwargs):
    if not os.path.exists(out):
        open(out, "w").write(json.dumps(sorted(sys.modules)))
    return real(*args, **kwargs)
target.{owner}.{method} = recorded
runpy.run_module("supervisor", run_name="__main__", alter_sys=True)
"""


RUN_TO_FORK = run_until(
    "supervisor.forkserver", "ForkServer", "fork"
)  # it forks the worker template
RUN_TO_SPAWN = run_until("supervisor.spawner", "Spawner", "start")  # it asks for its first workers

# The same as RUN, but the first forked worker to claim writes the modules it imported since
# it was forked (everything it had then came from the template) instead.
RUN_TO_FIRST_CLAIM = """
import json, os, runpy, sys
out, sys.argv = sys.argv[1], ["supervisor", *sys.argv[2:]]
import worker.forked as forked
real = forked.become_worker
def become(*args, **kwargs):
    at_fork = set(sys.modules)
    from worker.loop import Worker
    claim = Worker.claim
    def first_claim(self, *a, **k):
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            os.write(fd, json.dumps(sorted(set(sys.modules) - at_fork)).encode())
            os.close(fd)
        return claim(self, *a, **k)
    Worker.claim = first_claim
    return real(*args, **kwargs)
forked.become_worker = become
runpy.run_module("supervisor", run_name="__main__", alter_sys=True)
"""

# Not needed for a claim: the ops CLI and its config reference, the dashboard, tracing, the
# producer API; on SQLite asyncio too (only async handlers use it; psycopg imports it itself).
NEVER = (
    "supervisor.cli",
    "supervisor.web",
    "supervisor.gendocs",
    "opentelemetry",
    "shared.producer.api",
)
NEVER_ON_SQLITE = ("asyncio", "psycopg", "psycopg_pool")


def supervisor_modules(tmp_path: Path, config: Path, script: str = RUN) -> list[str]:
    """Run a supervisor until it has run a job, stop it, and return its ``sys.modules`` (at exit,
    or as ``script`` records them)."""
    with JobQueue(config=load(str(config))) as q:
        job = q.enqueue("test:noop", {})
        out = tmp_path / "modules.json"
        log = open(tmp_path / "supervisor.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(out), "run", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env(),
            cwd=str(REPO),
        )
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


def test_the_template_is_forked_before_the_supervisors_own_modules_are_imported(
    tmp_path, database, engine_name
):
    """The template imports the worker loop while the supervisor imports its arbiter, upkeep,
    ops layer and metrics server: neither waits for the other's imports. What both
    need, the config and the engine with its driver, comes before the fork, once."""
    config = write_config(tmp_path, handlers=["testjobs"])
    at_fork = supervisor_modules(tmp_path, config, RUN_TO_FORK)
    assert "shared.settings.config" in at_fork and "shared.engines" in at_fork
    assert ("psycopg" in at_fork) is (engine_name != "sqlite")
    own = (
        "supervisor.arbiter",
        "supervisor.metrics",
        "supervisor.duties",
        "supervisor.maintenance",
        "shared.ops",
        "worker",
        "testjobs",
    )
    assert [m for m in at_fork if any(m == n or m.startswith(n + ".") for n in own)] == []


# Needed by no start without schedules, on either engine: cron's libraries (imported by the
# config's checks only for a [[schedule]]), psutil (owner tokens read /proc); on SQLite time
# zones, importlib.metadata and the import system's resource readers too (shared's finder of
# old module paths needs none; psycopg imports them itself, to read its own version).
NOT_BEFORE_THE_FORK = ("cronsim", "psutil")


def test_what_no_start_needs_is_not_imported_before_the_template_is_forked(
    tmp_path, database, engine_name
):
    config = write_config(tmp_path, handlers=["testjobs"])
    at_fork = supervisor_modules(tmp_path, config, RUN_TO_FORK)
    assert "shared.settings.config" in at_fork  # it was recorded at the fork
    lazy = NOT_BEFORE_THE_FORK + (
        ("zoneinfo", "importlib.metadata", "importlib.resources") if engine_name == "sqlite" else ()
    )
    assert [m for m in at_fork if any(m == n or m.startswith(n + ".") for n in lazy)] == []


def test_the_ops_layer_waits_until_the_first_workers_are_asked_for(tmp_path, database):
    """What a scrape or a `jobq scale` request reads (the ops layer) is imported after the
    supervisor has asked for its first workers, not on the way to them: the template is ready
    before the supervisor is, so its imports delay the first job."""
    config = write_config(tmp_path, handlers=["testjobs"])
    at_spawn = supervisor_modules(tmp_path, config, RUN_TO_SPAWN)
    assert "supervisor.arbiter" in at_spawn and "supervisor.metrics" in at_spawn
    assert [m for m in at_spawn if m == "shared.ops" or m.startswith("shared.ops.")] == []


def test_a_forked_worker_imports_nothing_of_jobq_on_its_way_to_its_first_claim(tmp_path, database):
    """The template imports what a worker's start uses (the engine's modules, its idle wait's
    too): eight workers importing a module each after the fork take turns on the cores."""
    config = write_config(tmp_path, handlers=["testjobs"])
    imported = supervisor_modules(tmp_path, config, RUN_TO_FIRST_CLAIM)
    assert [m for m in imported if m.split(".")[0] in ("shared", "worker", "supervisor")] == []


def test_a_dead_workers_replacement_forks_before_its_job_is_requeued_and_nothing_runs_twice(
    tmp_path, database, sup_factory
):
    """SIGKILL of a worker in the middle of a job: its replacement is asked for before the job
    is re-queued (``worker.spawned`` before ``worker.exited``); the job runs again once, in the
    replacement, after the first run's process is dead."""
    cfg = write_config(tmp_path, log_format="json", supervisor={"workers": 1})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    with JobQueue(config=load(str(cfg))) as q:
        job = q.enqueue("test:gate", {"log": str(log), "gate": str(gate)})
        sup = sup_factory(cfg)
        first = wait_until(lambda: _runs(log), 30, "the first run")[0]
        killed_at = time.time()
        os.kill(first["pid"], signal.SIGKILL)
        exited = wait_until(
            lambda: [e for e in log_events(sup, "worker.exited") if e["pid"] == first["pid"]],
            30,
            "the death reaped",
        )[0]
        assert exited["jobs_requeued"] == 1
        second = wait_until(lambda: _runs(log)[1:], 30, "the second run")[0]
        gate.touch()
        wait_until(lambda: q.get(job).status == "completed", 30, "the job to complete")
    order = [
        (e["event"], e["pid"])
        for e in log_events(sup)
        if e.get("event") in ("worker.spawned", "worker.exited")
    ]
    assert order[:3] == [
        ("worker.spawned", first["pid"]),
        ("worker.spawned", second["pid"]),
        ("worker.exited", first["pid"]),
    ]
    assert [r["attempt"] for r in _runs(log)] == [1, 2] and second["pid"] != first["pid"]
    assert second["t"] > killed_at  # never two runs at once


def _runs(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "start"]


def test_the_worker_loop_imports_no_async_runner_until_a_type_is_async():
    """The template imports the worker loop before the first job: the async runner and asyncio
    (half of those imports) wait until some handler is async."""
    code = (
        "import sys, worker.__main__; "
        "print(sorted(m for m in sys.modules if m == 'asyncio' or m == 'worker.aio'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
