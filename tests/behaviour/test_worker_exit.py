"""A worker that is done must end: a handler that leaks a non-daemon thread
must not keep a recycled, retired or stopping worker alive, and a worker that said it stopped
but lingers is killed by its supervisor after ``kill_grace``. Real supervisor and workers."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from shared import JobQueue
from shared.settings.config import load
from tests.proc import events, job_row, pid_gone, wait_until, worker_rows, write_config

pytestmark = pytest.mark.engines  # the tests that use database (or sup_factory) run on each engine


def config(folder: Path, **sections) -> Path:
    sections.setdefault("handlers", ["procjobs"])
    sections.setdefault("log_format", "json")
    return write_config(folder, **sections)


def run(cfg: Path, jtype: str, log: Path, timeout: float = 15.0) -> str:
    """Enqueue one job and wait for it to complete; returns its id."""
    with JobQueue(config=load(cfg)) as q:
        jid = q.enqueue(jtype, {"log": str(log)})
    wait_until(
        lambda: job_row(cfg, jid)["status"] == "completed",
        timeout=timeout,
        what=f"{jtype} {jid} completed",
    )
    return jid


def worker_pid(log: Path, jid: str) -> int:
    return next(e["pid"] for e in events(log) if e["job"] == jid)


def test_a_recycled_worker_with_a_leaked_thread_is_replaced(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1}, worker={"max_jobs": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    first = worker_pid(log, run(cfg, "proc:thread_leak", log))
    wait_until(lambda: pid_gone(first), timeout=10, what="the recycled worker to exit")
    second = worker_pid(log, run(cfg, "proc:ok", log))
    assert second != first
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_a_retired_worker_with_a_leaked_thread_exits_on_scale_down(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    first = worker_pid(log, run(cfg, "proc:thread_leak", log))
    sup.signal(signal.SIGTTOU)  # 1 -> 0 workers
    wait_until(lambda: pid_gone(first), timeout=10, what="the retired worker to exit")
    sup.signal(signal.SIGTTIN)  # 0 -> 1
    assert worker_pid(log, run(cfg, "proc:ok", log)) != first
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_shutdown_with_a_leaked_thread_ends_with_exit_code_0_well_before_shutdown_timeout(
    tmp_path, sup_factory
):
    cfg = config(tmp_path, supervisor={"workers": 1, "shutdown_timeout": 120})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    run(cfg, "proc:thread_leak", log)
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0  # before the fix: only the 120 s shutdown_timeout ended it


def test_a_worker_that_said_it_stopped_but_lingers_is_killed_after_kill_grace(
    tmp_path, sup_factory
):
    """The supervisor's half: the handler makes the worker's own exit block (os._exit replaced),
    so the worker writes its last outcome, says it stopped, and stays. The supervisor SIGKILLs
    it after kill_grace, without counting it as a crash, and the next job runs."""
    cfg = config(tmp_path, supervisor={"workers": 1, "kill_grace": 0.5}, worker={"max_jobs": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    first = worker_pid(log, run(cfg, "proc:wedge_exit", log))
    second = worker_pid(log, run(cfg, "proc:ok", log))
    assert second != first and pid_gone(first)
    lines = [e for e in (_json(x) for x in sup.output().splitlines()) if e]
    assert any(e.get("event") == "worker.exit_timeout" and e.get("pid") == first for e in lines)
    wait_until(lambda: len(worker_rows(cfg)) == 1, what="the replacement registered")
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def _json(line: str) -> dict | None:
    import json

    try:
        return json.loads(line)
    except ValueError:
        return None
