"""Integration tests: the real supervisor, real worker processes, real signals.

Every wait is a poll on a condition with a timeout; no sleep stands in for synchronisation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from shared import JobQueue
from tests.proc import env, events, job_row, pid_gone, wait_until, worker_rows, write_config


def enqueue(config: Path, jtype: str, payload: dict, **kw) -> str:
    with JobQueue(str(config.parent / "q.db")) as q:
        return q.enqueue(jtype, payload, **kw)


def status(config: Path, job_id: str) -> str:
    return job_row(config, job_id)["status"]


def running_pid(config: Path, job_id: str) -> int | None:
    row = job_row(config, job_id)
    return row["owner_pid"] if row["status"] == "running" else None


def test_sigkill_worker_mid_job_reruns_it_once_and_replaces_worker(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 2})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="2 workers registered")
    jid = enqueue(cfg, "test:gate", {"gate": str(gate), "log": str(log)})
    victim = wait_until(lambda: running_pid(cfg, jid), what="job running")
    wait_until(lambda: any(e["pid"] == victim for e in events(log)), what="handler started")
    os.kill(victim, signal.SIGKILL)
    # re-queued with the attempt counted, then claimed again by a live worker
    wait_until(
        lambda: job_row(cfg, jid)["attempts"] == 2 and status(cfg, jid) == "running",
        what="job claimed again",
    )
    second = running_pid(cfg, jid)
    assert second != victim
    gate.touch()
    wait_until(lambda: status(cfg, jid) == "completed", what="job completed")
    ev = events(log)
    assert [e["event"] for e in ev].count("end") == 1
    assert [e["pid"] for e in ev if e["event"] == "start"] == [victim, second]
    wait_until(
        lambda: len(worker_rows(cfg)) == 2 and victim not in [r["pid"] for r in worker_rows(cfg)],
        what="worker replaced",
    )
    assert "killed by SIGKILL: perhaps out of memory" in sup.output()
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_graceful_sigterm_finishes_job_and_claims_nothing_after(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 1})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "test:gate", {"gate": str(gate), "log": str(log)})
    wait_until(lambda: running_pid(cfg, jid), what="job running")
    later = enqueue(cfg, "test:noop", {"log": str(log)}, priority=-1)
    sup.signal(signal.SIGTERM)
    # logged after SIGTERM was sent to the worker
    wait_until(lambda: "supervisor.stopping" in sup.output(), what="worker told to stop")
    gate.touch()
    assert sup.wait(20) == 0
    assert status(cfg, jid) == "completed"
    assert status(cfg, later) == "pending"
    assert [e["job"] for e in events(log) if e["event"] == "start"] == [jid]
    assert worker_rows(cfg) == []


def test_second_signal_exits_promptly_and_job_recovers_on_next_start(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 1, "shutdown_timeout": 60})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "test:gate", {"gate": str(gate), "log": str(log)})
    worker = wait_until(lambda: running_pid(cfg, jid), what="job running")
    sup.signal(signal.SIGTERM)
    wait_until(lambda: "supervisor.stopping" in sup.output(), what="graceful stop begun")
    t0 = time.monotonic()
    sup.signal(signal.SIGINT)
    assert sup.wait(10) == 0
    assert time.monotonic() - t0 < 10
    assert pid_gone(worker)
    row = job_row(cfg, jid)
    assert (
        row["status"] == "pending" and row["attempts"] == 0
    )  # shutdown kill gives the attempt back
    gate.touch()
    sup2 = sup_factory(cfg)
    wait_until(lambda: status(cfg, jid) == "completed", what="job recovered and completed")
    sup2.signal(signal.SIGTERM)
    assert sup2.wait(20) == 0


def test_pause_and_resume_with_signals(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 2})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers up")
    sup.signal(signal.SIGUSR1)
    with JobQueue(str(tmp_path / "q.db")) as q:
        wait_until(q.is_paused, what="pause flag set")
        jid = q.enqueue("test:noop", {"log": str(log)})
        # an observation window (not synchronisation): 20 poll intervals with nothing claimed
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert q.get(jid).status == "pending"
            time.sleep(0.05)
        sup.signal(signal.SIGUSR2)
        wait_until(lambda: q.get(jid).status == "completed", what="job runs after resume")
        assert not q.is_paused()
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def _edit_workers(cfg: Path, n: int) -> None:
    text = cfg.read_text()
    import re

    new = re.sub(r"(?m)^workers = \d+", f"workers = {n}", text)
    assert new != text or f"workers = {n}" in text
    tmp = cfg.with_suffix(".tmp")
    tmp.write_text(new)
    os.replace(tmp, cfg)


def test_sighup_and_file_edit_scale_workers(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 1, "config_poll_interval": 0.2})
    sup = sup_factory(cfg)
    wait_until(lambda: len(sup.workers()) == 1, what="1 worker")
    _edit_workers(cfg, 3)
    sup.signal(signal.SIGHUP)
    wait_until(lambda: len(worker_rows(cfg)) == 3, what="scaled up to 3 by SIGHUP")
    _edit_workers(cfg, 1)  # no signal: the file watch picks it up
    wait_until(
        lambda: len(sup.workers()) == 1 and len(worker_rows(cfg)) == 1, what="scaled down to 1"
    )
    # an invalid edit is rejected and the running config kept
    cfg.write_text(cfg.read_text().replace("workers = 1", "workers = -4"))
    sup.signal(signal.SIGHUP)
    wait_until(lambda: "config.rejected" in sup.output(), what="invalid config rejected")
    assert "supervisor.workers" in sup.output()
    assert len(sup.workers()) == 1
    sup.signal(signal.SIGTTIN)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="SIGTTIN adds a worker")
    sup.signal(signal.SIGTTOU)
    wait_until(lambda: len(sup.workers()) == 1, what="SIGTTOU removes one")
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_broken_handler_module_halts_startup(tmp_path):
    (tmp_path / "brokenjobs.py").write_text("import os\nraise RuntimeError('boom at import')\n")
    cfg = write_config(tmp_path, handlers=["brokenjobs"])
    e = env()
    e["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{e['PYTHONPATH']}"
    p = subprocess.run(
        [sys.executable, "-m", "supervisor", "--config", str(cfg)],
        env=e,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(tmp_path),
    )
    assert p.returncode == 4  # ExitCode.BOOT_FAILED
    assert "brokenjobs" in p.stderr and "boom at import" in p.stderr and "Traceback" in p.stderr
    assert "worker.spawned" not in p.stderr


def test_invalid_config_stops_startup_with_message(tmp_path):
    cfg = write_config(tmp_path, worker={"poll_interval": -1})
    p = subprocess.run(
        [sys.executable, "-m", "supervisor", "--config", str(cfg)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 3
    assert str(cfg) in p.stderr and "worker.poll_interval" in p.stderr and "-1" in p.stderr


def test_a_job_that_ignores_its_timeout_is_killed_kill_grace_after_it(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 1, "kill_grace": 0.5})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "test:hang", {"log": str(log)})  # handler: timeout=1, max_attempts=1
    worker = wait_until(lambda: running_pid(cfg, jid), what="job running")
    wait_until(lambda: status(cfg, jid) == "failed", timeout=20, what="job failed by timeout")
    assert "timed out after 1 s" in job_row(cfg, jid)["error"]
    assert pid_gone(worker)
    wait_until(lambda: len(worker_rows(cfg)) == 1, what="worker replaced")
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_sigstopped_worker_past_its_lease_is_killed_and_job_rerun_once(tmp_path, sup_factory):
    cfg = write_config(
        tmp_path,
        supervisor={"workers": 2},
        worker={"heartbeat_interval": 0.1, "lease_timeout": 1.0},
    )
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers up")
    jid = enqueue(cfg, "test:gate", {"gate": str(gate), "log": str(log)})
    stopped = wait_until(lambda: running_pid(cfg, jid), what="job running")
    wait_until(lambda: any(e["pid"] == stopped for e in events(log)), what="handler started")
    os.kill(stopped, signal.SIGSTOP)
    try:
        wait_until(lambda: pid_gone(stopped), timeout=20, what="stopped worker killed")
        wait_until(
            lambda: job_row(cfg, jid)["attempts"] == 2 and status(cfg, jid) == "running",
            what="job claimed again",
        )
        gate.touch()
        wait_until(lambda: status(cfg, jid) == "completed", what="job completed")
    finally:
        try:
            os.kill(stopped, signal.SIGCONT)
        except ProcessLookupError:
            pass
    ev = events(log)
    starts = [e for e in ev if e["event"] == "start"]
    ends = [e for e in ev if e["event"] == "end"]
    assert len(starts) == 2 and len(ends) == 1 and ends[0]["pid"] != stopped
    assert "lease expired" in sup.output()
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_sigkill_of_supervisor_leaves_no_process_behind(tmp_path, sup_factory):
    cfg = write_config(tmp_path, supervisor={"workers": 3, "shutdown_timeout": 1})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 3, what="workers up")
    jid = enqueue(cfg, "test:gate", {"gate": str(gate), "log": str(log), "max_wait": 120})
    wait_until(lambda: running_pid(cfg, jid), what="job running")
    workers = sup.workers()
    assert len(workers) == 3
    template = sup.template()
    assert template is not None
    sup.proc.kill()
    sup.proc.wait(10)
    # idle workers notice within a second; the busy one abandons its job after shutdown_timeout;
    # the template goes at once (its parent-death signal, and EOF on its pipe)
    wait_until(
        lambda: all(pid_gone(p) for p in [*workers, template]), timeout=10, what="all workers gone"
    )
    assert status(cfg, jid) == "running"  # abandoned: the next start recovers it
    gate.touch()
    sup2 = sup_factory(cfg)
    wait_until(lambda: status(cfg, jid) == "completed", what="job recovered by the next supervisor")
    sup2.signal(signal.SIGTERM)
    assert sup2.wait(20) == 0
