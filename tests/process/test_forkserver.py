"""The template process (fork server), the restart back-off rule, handler reloads
and the state folders supervisors leave behind. Real supervisors, real kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from shared import JobQueue
from shared.runtime.processes import create_time_ms
from supervisor import statedir
from tests.proc import log_events, Running, env, job_row, wait_until, worker_rows, write_config


def config(folder: Path, **sections) -> Path:
    sections.setdefault("log_format", "json")
    return write_config(folder, **sections)


def enqueue(cfg: Path, jtype: str, payload: dict | None = None, **kw) -> str:
    with JobQueue(str(cfg.parent / "q.db")) as q:
        return q.enqueue(jtype, payload, **kw)


def completed(cfg: Path, log: Path) -> int:
    """Jobs whose handler recorded its end in ``log``."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if '"end"' in line)


# -- the back-off rule --------------------------------------------------------------------------


def test_worker_that_ran_jobs_is_replaced_at_once_however_often_it_is_killed(tmp_path, sup_factory):
    """Four SIGKILLs in a row, each after the worker completed jobs: each replacement is started
    with no back-off (its slot's failure count stays 1, restart_delay 0). The old rule counted a
    worker that lived under 10 s as a crash loop: 0.5, 1, 2 s ... between replacements."""
    cfg = config(tmp_path, supervisor={"workers": 1, "restart_backoff_max": 30})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    for round_ in range(4):
        worker = wait_until(lambda: sup.workers(), what="a worker")[0]
        before = completed(cfg, log)
        for _ in range(3):
            enqueue(cfg, "test:noop", {"log": str(log)})
        wait_until(lambda: completed(cfg, log) >= before + 3, what=f"jobs done (round {round_})")
        os.kill(worker, signal.SIGKILL)
        wait_until(
            lambda: any(e["pid"] == worker for e in log_events(sup, "worker.exited")),
            what="the death reaped",
        )
    spawned = wait_until(
        lambda: (s := log_events(sup, "worker.spawned")) and len(s) >= 5 and s,
        what="4 replacements",
    )
    assert [e["restarts"] for e in spawned[1:5]] == [1, 1, 1, 1]
    exited = log_events(sup, "worker.exited")
    assert len(exited) == 4 and all("killed by SIGKILL" in e["how"] for e in exited)  # still logged
    wait_until(lambda: _counter(cfg, "worker_crashes") == 4, what="deaths counted")


def test_ready_worker_sigkilled_before_any_job_is_replaced_at_once(tmp_path, sup_factory):
    """SIGKILL (the OOM killer, an operator) of a worker that booted, before it ran a job: not a
    crash loop either; three in a row, no back-off."""
    cfg = config(tmp_path, supervisor={"workers": 1, "restart_backoff_max": 30})
    sup = sup_factory(cfg)
    for n in range(3):
        row = wait_until(lambda: (r := worker_rows(cfg)) and r[0], what=f"worker {n} registered")
        wait_until(lambda: os.path.exists(_progress_file(sup)), what="worker ready (progress file)")
        os.kill(row["pid"], signal.SIGKILL)
        wait_until(
            lambda: any(e["pid"] == row["pid"] for e in log_events(sup, "worker.exited")),
            what="death reaped",
        )
        wait_until(
            lambda: not worker_rows(cfg) or worker_rows(cfg)[0]["pid"] != row["pid"],
            what="row gone",
        )
    spawned = wait_until(
        lambda: (s := log_events(sup, "worker.spawned")) and len(s) >= 4 and s,
        what="3 replacements",
    )
    assert [e["restarts"] for e in spawned[1:4]] == [1, 1, 1]


def _progress_file(sup: Running) -> str:
    """Slot 0's progress file, in the supervisor's folder in the temporary directory."""
    root = tempfile.gettempdir()
    (folder,) = [d for d in os.listdir(root) if d.startswith(f"jobq-supervisor-{sup.pid}-")]
    return os.path.join(root, folder, "slot-0.progress")


def _counter(cfg: Path, name: str) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", "--json", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(cfg.parent),
    )
    if out.returncode != 0:
        return -1
    snap = json.loads(out.stdout)
    live = [s for s in snap["supervisors"] if s["alive"]]
    return live[0]["counters"].get(name, 0) if live else -1


def test_worker_dying_before_it_completes_a_job_still_backs_off(tmp_path, sup_factory):
    """The boot-crash side of the rule, with template-forked workers (bootcrash kills each one
    at fork): consecutive failures count up and the delay grows to the cap."""
    cfg = config(
        tmp_path,
        handlers=["bootcrash"],
        supervisor={"workers": 1, "restart_backoff_max": 0.5, "maintenance_interval": 0.5},
    )
    sup = sup_factory(cfg)
    spawned = wait_until(
        lambda: (s := log_events(sup, "worker.spawned")) and len(s) >= 4 and s,
        timeout=30,
        what="4 spawns",
    )
    assert all(e["forked"] for e in spawned)
    assert [e["restarts"] for e in spawned[:4]] == [0, 1, 2, 3]
    assert all("exited with 8" in e["how"] for e in log_events(sup, "worker.exited"))


# -- the template's failure modes ---------------------------------------------------------------


def test_template_import_failure_halts_startup_with_exit_4_and_its_traceback(tmp_path):
    cfg = config(tmp_path, handlers=["templatecrash"], supervisor={"workers": 2})
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", "run", "--config", str(cfg)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(tmp_path),
        timeout=60,
    )
    assert out.returncode == 4, out.stderr
    assert "templatecrash: this module refuses to load in the template" in out.stderr
    assert "Traceback" in out.stderr and "boot_failed" in out.stderr
    assert '"worker.spawned"' not in out.stderr  # halted: no worker, no crash loop


def test_template_death_restarts_it_then_falls_back_to_exec(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    wait_until(lambda: sup.workers() and sup.template(), what="worker and template")
    for n in range(1, 4):
        template = sup.template()
        os.kill(template, signal.SIGKILL)
        died = wait_until(
            lambda: [e for e in log_events(sup, "template.died") if e["pid"] == template],
            what=f"template death {n} noticed",
        )
        assert died[0]["action"] == ("restart" if n < 3 else "fallback")
        if n < 3:  # a new template (exec'd) forks the next worker
            wait_until(
                lambda: len(log_events(sup, "template.ready")) == n + 1, what="new template ready"
            )
            assert log_events(sup, "template.ready")[-1]["how"] == "exec"
            worker = sup.workers()[0]
            os.kill(worker, signal.SIGKILL)
            spawned = wait_until(
                lambda: [e for e in log_events(sup, "worker.spawned")][n:], what="respawn"
            )
            assert spawned[0]["forked"] is True
    wait_until(lambda: sup.template() is None, what="no template after the fallback")
    worker = wait_until(lambda: sup.workers(), what="a worker")[0]
    os.kill(worker, signal.SIGKILL)
    wait_until(
        lambda: (
            log_events(sup, "worker.spawned")[-1]["forked"] is False
            and len(log_events(sup, "worker.spawned")) == 4
        ),
        what="an exec'd replacement",
    )
    jid = enqueue(cfg, "test:noop", {"log": str(log)})
    wait_until(lambda: job_row(cfg, jid)["status"] == "completed", what="jobs still run")


def test_template_that_cannot_fork_safely_says_why_and_workers_are_execd(tmp_path, sup_factory):
    """A handler module that starts a thread at import: the template refuses to fork (a thread's
    locks would cross), the supervisor says so and starts its workers by exec."""
    (tmp_path / "threadjobs.py").write_text(
        "import threading\nfrom worker import handler\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "@handler('thr:noop')\ndef noop(payload, job):\n    return 1\n"
    )
    cfg = config(tmp_path, handlers=["testjobs", "threadjobs"], supervisor={"workers": 1})
    sup = sup_factory(cfg)
    died = wait_until(lambda: log_events(sup, "template.died"), what="template refusal logged")
    assert "threads running" in died[0]["error"] and died[0]["action"] == "fallback"
    spawned = wait_until(lambda: log_events(sup, "worker.spawned"), what="a worker")
    assert spawned[0]["forked"] is False
    jid = enqueue(cfg, "thr:noop")
    wait_until(lambda: job_row(cfg, jid)["status"] == "completed", what="job completed")


# -- reloads that change the handler modules ------------------------------------------------------

NEW_MODULE = (
    "from worker import handler\n"
    "@handler('new:job')\n"
    "def new_job(payload, job):\n    return {'ran': 'new'}\n"
)


def test_reload_adding_a_handler_module_runs_jobs_of_the_new_type(tmp_path, sup_factory):
    """Add a module to `handlers`, SIGHUP, enqueue the new type: completed (it
    used to fail for good with "no handler for job type"). A new template is started and the
    running workers are rolled onto it."""
    cfg = config(tmp_path, supervisor={"workers": 2})
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers up")
    old_workers, old_template = set(sup.workers()), sup.template()
    (tmp_path / "newjobs.py").write_text(NEW_MODULE)
    config(tmp_path, supervisor={"workers": 2}, handlers=["testjobs", "newjobs"])
    sup.signal(signal.SIGHUP)
    jid = enqueue(cfg, "new:job")
    row = wait_until(
        lambda: (r := job_row(cfg, jid))["status"] in ("completed", "failed") and r,
        what="new-type job finished",
    )
    assert row["status"] == "completed", row["error"]
    assert json.loads(row["result"]) == {"ran": "new"}
    wait_until(lambda: sup.template() not in (None, old_template), what="a new template")
    wait_until(
        lambda: len(sup.workers()) == 2 and not (set(sup.workers()) & old_workers),
        what="workers rolled onto the new template",
    )
    rolled = log_events(sup, "worker.exited")
    assert all("exited with 0" in e["how"] or "exited with 7" in e["how"] for e in rolled)


def test_worker_with_old_handlers_gives_back_a_job_of_a_served_type(tmp_path):
    """A worker (here `python -m worker` on its own) whose config now names a module it did not
    import claims a job of that module's type: the job goes back, its attempt not charged, and
    the worker exits RECYCLED (7) to be replaced; it is never failed for want of a handler."""
    cfg = config(tmp_path, handlers=["testjobs"])
    out_path = tmp_path / "worker.log"
    with open(out_path, "wb") as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "--config", str(cfg)],
            env=env(),
            cwd=str(tmp_path),
            stdout=out_file,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 1, what="worker up")
        config(tmp_path, handlers=["testjobs", "newjobs"])  # newjobs need not even exist
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "config.reloaded" in out_path.read_text(), what="worker reloaded")
        jid = enqueue(cfg, "new:job")
        assert proc.wait(30) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = out_path.read_text()
    row = job_row(cfg, jid)
    assert row["status"] == "pending" and row["attempts"] == 0, (dict(row), out)
    assert "worker.handlers_changed" in out


# -- nothing left behind --------------------------------------------------------------------------


def _dead_pid() -> tuple[int, int]:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    created = create_time_ms(p.pid)
    p.wait()
    return p.pid, created or 1


def test_start_removes_the_folders_of_gone_supervisors_only(tmp_path, monkeypatch, sup_factory):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    dead_pid, dead_ms = _dead_pid()
    dead = tmp / f"jobq-supervisor-{dead_pid}-{dead_ms}-abcd"
    me = tmp / f"jobq-supervisor-{os.getpid()}-{create_time_ms(os.getpid())}-efgh"  # alive
    reused = tmp / f"jobq-supervisor-{os.getpid()}-{dead_ms}-ijkl"  # a live pid, another start time
    old = tmp / "jobq-supervisor-mnop"  # old format: no owner named
    other = tmp / "unrelated"
    for d in (dead, me, reused, old, other):
        d.mkdir()
        (d / "config.json").write_text("{}")
    cfg = config(tmp_path, supervisor={"workers": 1})
    sup = sup_factory(cfg)
    wait_until(lambda: log_events(sup, "supervisor.started"), what="started")
    assert not dead.exists() and not reused.exists()
    assert me.exists() and old.exists() and other.exists()
    removed = {e["path"] for e in log_events(sup, "supervisor.leftover_removed")}
    assert removed == {str(dead), str(reused)}
    # a SIGKILLed supervisor's folder is removed by the next start
    mine = [p for p in tmp.iterdir() if p.name.startswith(f"jobq-supervisor-{sup.pid}-")]
    assert len(mine) == 1
    sup.proc.kill()
    sup.proc.wait(10)
    assert mine[0].exists()
    sup2 = sup_factory(cfg)
    wait_until(lambda: log_events(sup2, "supervisor.started"), what="second start")
    assert not mine[0].exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith(f"jobq-supervisor-{sup2.pid}-")]


def test_statedir_names_its_owner(tmp_path):
    path = statedir.create(str(tmp_path))
    name = os.path.basename(path)
    assert name.startswith(f"jobq-supervisor-{os.getpid()}-{create_time_ms(os.getpid())}-")
    assert statedir.remove_leftovers(str(tmp_path)) == []  # we are alive
    assert os.path.isdir(path)
