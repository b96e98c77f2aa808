"""Fault and bad-input cases, each with its expected outcome.

Real supervisor and worker processes on each engine (a SQLite file under tmp_path, a schema of
the PostgreSQL test server); every wait is a poll on a condition with a timeout. Handlers that
misbehave live in tests/fixtures/faultjobs.py. The cases of a database file (unusable, full, its
WAL and write-lock discipline) are SQLite's: they take no database fixture, or say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from typing import Any

import psutil
import pytest

from shared import ops
from shared.ops import flows as ops_flows
from shared import JobQueue
from shared.runtime.clock import parse_iso
from shared.settings.config import load
from shared.model.exitcodes import ExitCode
from shared.engines.sqlite.store import NewJob, SqliteStore
from shared.model.errors import StoreUnavailable
from supervisor.children import restart_delay
from tests.engines import Database
from tests.proc import (
    log_events,
    Running,
    db,
    env,
    write_lock_free,
    events,
    job_row,
    pid_gone,
    wait_until,
    worker_rows,
    write_config,
)

pytestmark = (
    pytest.mark.engines
)  # the tests that use database (or sup_factory, shared_sup) run on each engine


# -- helpers --------------------------------------------------------------------------------------


def config(folder: Path, **sections) -> Path:
    """A test config with the fault handlers and JSON logs (parsed by the tests)."""
    sections.setdefault("handlers", ["faultjobs"])
    sections.setdefault("log_format", "json")
    return write_config(folder, **sections)


def enqueue(cfg: Path, jtype: str, payload: dict | None = None, **kw) -> str:
    with JobQueue(config=load(cfg)) as q:
        return q.enqueue(jtype, payload, **kw)


def terminal(cfg: Path, job_id: str) -> sqlite3.Row | None:
    row = job_row(cfg, job_id)
    return row if row["status"] in ("completed", "failed", "cancelled") else None


def starts(log: Path, job_id: str) -> list[dict]:
    return [e for e in events(log) if e["job"] == job_id and e["event"] == "start"]


def integrity(path: Path) -> str:
    with sqlite3.connect(str(path)) as c:
        return c.execute("PRAGMA integrity_check").fetchone()[0]


# -- misbehaving handlers, on one shared supervisor ---------------------------------------------------


@pytest.fixture(scope="module")
def shared_sup(tmp_path_factory, engine_name):
    """One supervisor with 2 workers for the handler cases that do not stop it, per engine. Each
    test only looks at its own job. max_memory_mb is far above a worker's size (~40 MiB) and far
    below what fault:leak keeps."""
    folder = tmp_path_factory.mktemp("shared")
    database = Database(engine_name)
    cfg = config(
        folder,
        **database.sections(),
        supervisor={"workers": 2, "kill_grace": 0.5, "restart_backoff_max": 0.5},
        worker={"max_memory_mb": 250},
    )
    sup = Running(cfg)
    try:
        wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="2 workers registered")
        yield cfg, sup, folder / "events.log"
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        sup.close()
        database.drop()


def test_handler_raises_is_retried_then_failed_with_its_traceback(shared_sup):
    cfg, sup, log = shared_sup
    jid = enqueue(cfg, "fault:raise", {"log": str(log)})  # max_attempts=2
    row = wait_until(lambda: terminal(cfg, jid), what="job terminal")
    assert row["status"] == "failed" and row["attempts"] == 2
    assert "Traceback" in row["error"] and "ValueError: bad input on attempt 2" in row["error"]
    assert [e["attempt"] for e in starts(log, jid)] == [1, 2]


@pytest.mark.parametrize("how", ["null-pointer", "signal"])
def test_segfault_in_handler_kills_only_the_worker_and_counts_attempts(shared_sup, how):
    cfg, sup, log = shared_sup
    jid = enqueue(cfg, "fault:segv", {"log": str(log), "how": how})  # max_attempts=2
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="job terminal")
    assert row["status"] == "failed" and row["attempts"] == 2
    assert "SIGSEGV" in row["error"]
    runs = starts(log, jid)
    assert [e["attempt"] for e in runs] == [1, 2]
    assert runs[0]["pid"] != runs[1]["pid"]  # each crash took its worker with it
    assert all(pid_gone(e["pid"]) for e in runs)
    assert not [e for e in events(log) if e["job"] == jid and e["event"] == "survived"]
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers replaced")


@pytest.mark.parametrize(
    "jtype, expect", [("fault:exit0", "exited with 0"), ("fault:sysexit", "called sys.exit(None)")]
)
def test_exiting_handler_is_a_failure_never_a_success(shared_sup, jtype, expect):
    cfg, sup, log = shared_sup
    jid = enqueue(cfg, jtype, {"log": str(log)})  # max_attempts=1
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="job terminal")
    assert row["status"] == "failed" and row["result"] is None and row["completed_at"] is not None
    assert expect in row["error"]
    assert len(starts(log, jid)) == 1


def test_blocking_handler_is_killed_at_its_timeout(shared_sup):
    cfg, sup, log = shared_sup
    jid = enqueue(cfg, "fault:block", {"log": str(log)})  # timeout=1, max_attempts=1
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="job terminal")
    assert row["status"] == "failed" and "timed out after 1 s" in row["error"]
    [run] = starts(log, jid)
    wait_until(lambda: pid_gone(run["pid"]), what="blocked worker killed")


def test_leaking_handler_gets_its_worker_recycled(shared_sup):
    cfg, sup, log = shared_sup
    jid = enqueue(cfg, "fault:leak", {"log": str(log), "mb": 400})
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="job terminal")
    assert row["status"] == "completed"  # the job itself is fine: its worker is replaced after it
    pid = json.loads(row["result"])["pid"]
    wait_until(lambda: pid_gone(pid), what="leaky worker exits")
    wait_until(
        lambda: [
            e
            for e in log_events(sup, "worker.exited")
            if e["pid"] == pid and "exited with 7 (recycled)" in e["how"]
        ],
        what="exit logged as recycled",
    )
    recycle = [e for e in log_events(sup, "worker.recycle") if e["pid"] == pid]
    assert recycle and recycle[0]["reason"] == "max_memory_mb" and recycle[0]["rss_mb"] > 250
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="worker replaced")


def test_payload_that_is_not_json_in_the_database_fails_at_once(shared_sup, engine_name):
    """(PostgreSQL keeps payloads as jsonb: the server refuses the damage, the job runs.)"""
    cfg, sup, log = shared_sup
    damage = "UPDATE jobs SET payload = '{\"log\": unquoted' WHERE id = ?"
    with JobQueue(config=load(cfg)) as q:
        q.pause()  # nothing is claimed before the row is damaged; resume() wakes the workers
        try:
            jid = q.enqueue("fault:ok", {"log": str(log)})
            with db(cfg) as c:  # damaged by hand (or by another program)
                if engine_name == "postgresql":
                    with pytest.raises(Exception, match="invalid input syntax for type json"):
                        c.execute(damage, (jid,))
                else:
                    c.execute(damage, (jid,))
        finally:
            q.resume()
    row = wait_until(lambda: terminal(cfg, jid), what="job terminal")
    if engine_name == "postgresql":
        assert row["status"] == "completed"
        return
    assert row["status"] == "failed" and row["attempts"] == 1  # no retries: it can never succeed
    assert "not valid JSON" in row["error"] and "fault:ok" in row["error"]
    assert starts(log, jid) == []


def test_unknown_job_type_fails_at_once_naming_the_known_types(shared_sup):
    cfg, sup, _ = shared_sup
    jid = enqueue(cfg, "no:such:type", {})
    row = wait_until(lambda: terminal(cfg, jid), what="job terminal")
    assert row["status"] == "failed" and row["attempts"] == 1
    assert "no:such:type" in row["error"] and "fault:ok" in row["error"]


def test_oversized_payload_is_refused_and_nothing_is_written(database, tmp_path):
    cfg = config(tmp_path, max_payload_bytes=1000)
    with JobQueue(config=load(cfg)) as q:
        with pytest.raises(
            ValueError, match=r"1002 bytes, above the limit of 1000 \(max_payload_bytes\)"
        ):
            q.enqueue("fault:ok", "x" * 1000)  # 1000 characters + 2 quotes of JSON
        with pytest.raises(ValueError, match="max_payload_bytes"):
            q.enqueue_many([("fault:ok", {}), ("fault:ok", "y" * 5000)])  # all or nothing
        assert q.counts() == {}
        assert q.get(q.enqueue("fault:ok", "x" * 998)).status == "pending"  # exactly at the limit


# -- shutdown of misbehaving jobs -----------------------------------------------------------------


def test_a_killed_workers_job_locked_at_its_death_is_released_later_with_the_kills_reason(
    tmp_path, sup_factory
):
    """The cause of a rare failure of test_blocking_handler_is_killed_at_its_timeout on
    PostgreSQL (the job released as "gone"): a dead worker's release skips a row another
    session holds at that moment (SKIP LOCKED; the dead worker's own session can still be ending
    its last statement), and on SQLite a release fails while another process holds the write
    lock past ``busy_timeout``. The job then stayed ``running`` until maintenance found its
    owner gone and released it as a stranger's. Now the supervisor remembers the dead worker:
    the job is released on a later round with the kill's reason and attempt accounting."""
    cfg = config(
        tmp_path, supervisor={"workers": 1, "kill_grace": 0.5}, sqlite={"busy_timeout": 0.05}
    )
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "fault:block", {"log": str(log)})  # timeout=1, max_attempts=1
    [run] = wait_until(lambda: starts(log, jid), timeout=30, what="job started")
    with db(cfg) as c:
        sqlite = isinstance(c, sqlite3.Connection)
        c.execute("BEGIN IMMEDIATE" if sqlite else "BEGIN")
        try:
            if not sqlite:
                c.execute("SELECT id FROM jobs WHERE id = ? FOR UPDATE", (jid,))
            [exited] = wait_until(
                lambda: [e for e in log_events(sup, "worker.exited") if e["pid"] == run["pid"]],
                timeout=30,
                what="the timed-out worker killed and reaped",
            )
            assert exited["jobs_requeued"] == 0  # the release could not take the job
            assert (
                c.execute("SELECT status FROM jobs WHERE id = ?", (jid,)).fetchone()[0] == "running"
            )
        finally:
            c.execute("ROLLBACK")
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="job terminal")
    # Killed at its timeout; or, on SQLite, fenced first: the write lock stops its heartbeat too,
    # and stalls the supervisor's own writes. Either way the dead worker's reason, not "gone".
    reason = {
        "timed out after 1 s",
        f"worker {run['pid']} exited with 11 (fenced) while running the job",
    }
    assert row["status"] == "failed" and row["error"] in reason, row["error"]
    # the supervisor logs the release after its commit: the line may come a moment after the row
    reaped = wait_until(
        lambda: [e["reason"] for e in log_events(sup, "job.reaped") if e["id"] == jid],
        timeout=10,
        what="the job.reaped line",
    )
    assert reaped == [row["error"]]


def test_grandchild_is_killed_with_its_worker_group_on_forced_shutdown(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1, "shutdown_timeout": 60})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "fault:grandchild", {"log": str(log)})
    run = wait_until(lambda: starts(log, jid), what="handler started its child")[0]
    worker, child = run["pid"], run["child"]
    assert psutil.Process(child).ppid() == worker and not pid_gone(child)
    sup.signal(signal.SIGTERM)
    wait_until(lambda: log_events(sup, "supervisor.stopping"), what="graceful stop begun")
    sup.signal(signal.SIGTERM)  # second signal: immediate, kills each worker's process group
    assert sup.wait(15) == 0
    wait_until(lambda: pid_gone(worker) and pid_gone(child), what="worker and grandchild gone")
    row = job_row(cfg, jid)
    assert row["status"] == "pending" and row["attempts"] == 0  # a shutdown gives the attempt back


def test_handler_ignoring_sigterm_is_killed_at_the_drain_timeout(tmp_path, sup_factory):
    cfg = config(tmp_path, supervisor={"workers": 1, "shutdown_timeout": 1.5})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "fault:ignore_term", {"log": str(log)})
    worker = wait_until(lambda: starts(log, jid), what="handler running")[0]["pid"]
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert pid_gone(worker)
    timeouts = log_events(sup, "worker.drain_timeout")
    assert [e["pid"] for e in timeouts] == [worker]
    exited = [e for e in log_events(sup, "worker.exited") if e["pid"] == worker]
    assert (
        exited
        and "killed by SIGKILL" in exited[0]["how"]
        and "shutdown_timeout passed" in exited[0]["how"]
    )
    row = job_row(cfg, jid)
    assert row["status"] == "pending" and row["attempts"] == 0  # re-queued, the attempt given back


def test_a_run_killed_at_shutdown_is_in_its_history_and_its_next_run_shows_no_stale_error(
    tmp_path, sup_factory
):
    """The run killed when shutdown_timeout passed is an ``interrupted`` attempt with that
    reason; run again by the next supervisor, the job shows no error while it runs."""
    cfg = config(tmp_path, supervisor={"workers": 1, "shutdown_timeout": 1.5})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    jid = enqueue(cfg, "fault:ignore_term", {"log": str(log)})
    wait_until(lambda: starts(log, jid), what="handler running")
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    with JobQueue(config=load(cfg)) as q:
        assert (q.get(jid).status, q.get(jid).error) == ("pending", "shutdown_timeout passed")
        history = ops.attempt_history(q.store, jid)
        assert [(h["attempt"], h["outcome"], h["error"]) for h in history] == [
            (1, "interrupted", "shutdown_timeout passed")
        ]
        sup_factory(cfg)
        wait_until(lambda: len(starts(log, jid)) == 2, what="the job running again")
        job = q.get(jid)
        assert (job.status, job.attempts, job.error) == ("running", 1, None)
        shown = subprocess.run(
            [sys.executable, "-m", "jobq", "--config", str(cfg), "show", jid],
            capture_output=True,
            text=True,
            env=env(),
            timeout=60,
        ).stdout
        assert "error:" not in shown
        assert "interrupted" in shown and "shutdown_timeout passed" in shown


# -- a worker that cannot boot ---------------------------------------------------------------------


@pytest.mark.engine_only(
    "sqlite",
    reason="the supervisor's back-off, no database in it; its gaps are "
    "read from log stamps, and on PostgreSQL 'worker.exited' is logged after the "
    "re-queue's round trip (~15 ms after the death the back-off counts from)",
)
def test_worker_crashing_at_boot_backs_off_with_a_cap_and_the_supervisor_idles(
    tmp_path, sup_factory
):
    cap = 0.5
    cfg = config(
        tmp_path,
        handlers=["bootcrash"],
        supervisor={"workers": 1, "restart_backoff_max": cap, "maintenance_interval": 0.5},
    )
    sup = sup_factory(cfg)
    # spawns 1..8: delays 0, 0.5 (the cap), 0.5 ... (restart_delay of 1, 2, 3, ... failures)
    spawned = wait_until(
        lambda: (s := log_events(sup, "worker.spawned")) and len(s) >= 8 and s,
        timeout=60,
        what="8 spawns",
    )
    cpu = psutil.Process(sup.pid).cpu_times()
    t0 = time.monotonic()
    exited = log_events(sup, "worker.exited")
    assert all("exited with 8 (worker_boot_failed)" in e["how"] for e in exited), exited
    assert "bootcrash: this module refuses to load in a worker" in sup.output()
    assert sup.proc.poll() is None  # the supervisor itself keeps running
    by_pid = {e["pid"]: e for e in exited}
    gaps = []
    for prev, nxt in zip(spawned, spawned[1:]):
        death = by_pid[prev["pid"]]
        # The death as logged comes after the replacement was asked for and the dead worker's
        # jobs re-queued (a write: milliseconds on a loaded machine), so the gap from it reads
        # short by that much; the gap from the previous spawn plus the worker's life (``lived``,
        # on the supervisor's monotonic clock) reads off by the two spawns' own logging delays
        # instead. A respawn sooner than its back-off is sooner by both.
        gap = max(
            _ts(nxt["ts"]) - _ts(death["ts"]), _ts(nxt["ts"]) - _ts(prev["ts"]) - death["lived"]
        )
        gaps.append((nxt["restarts"], gap))
        # never sooner than the back-off (log timestamps have millisecond resolution)
        assert gap >= restart_delay(nxt["restarts"], cap) - 0.002, (nxt, death, gap)
    restarts = [r for r, _ in gaps]
    assert restarts == list(range(1, 1 + len(gaps)))  # consecutive failures keep counting
    assert restart_delay(restarts[-1], cap) == cap  # ... and the delay is capped:
    assert all(
        gap < 4.0 for r, gap in gaps if r >= 5
    )  # uncapped: 4, 8, 16 s after 5, 6, 7 failures
    # idle while backing off: no busy loop (a spinning supervisor would use ~1 s of CPU per s)
    wait_until(lambda: time.monotonic() - t0 >= 3 * cap, what="an observation window")
    used = sum(psutil.Process(sup.pid).cpu_times()[:2]) - sum(cpu[:2])
    assert used < 0.5 * (time.monotonic() - t0), used
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def _ts(text: str) -> float:
    return parse_iso(text)


# -- a database that cannot be used ------------------------------------------------------------------


@contextmanager
def bind_mount_readonly(target: Path, source: Path | None = None):
    """Bind-mount ``source`` (default: ``target`` itself) read-only over ``target``."""
    src = str(source or target)
    try:
        subprocess.run(["mount", "--bind", src, str(target)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"needs root and mount(8) for a read-only bind mount: {exc}")
    try:
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True
        )
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


@contextmanager
def bind_mount(target: Path, source: Path):
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def run_supervisor(cfg: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "--config", str(cfg)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(cfg.parent),
    )


def make_database(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with JobQueue(str(path)) as q:
        q.enqueue("fault:ok", {})


def assert_clean_database_error(p: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 5 at once, one clear message naming the file, no worker ever started."""
    assert p.returncode == ExitCode.DATABASE_UNAVAILABLE, p.stderr
    failures = [line for line in p.stderr.splitlines() if "supervisor.boot_failed" in line]
    assert len(failures) == 1, p.stderr  # said once: no retry storm
    assert all(f in failures[0] for f in fragments), failures[0]
    assert "worker.spawned" not in p.stderr and "Traceback" not in p.stderr


def test_read_only_database_file_is_a_clear_startup_error(tmp_path):
    dbfile = tmp_path / "data" / "q.db"
    make_database(dbfile)
    cfg = config(tmp_path, database="data/q.db")
    with bind_mount_readonly(dbfile):  # root ignores chmod 0444; a read-only mount it cannot
        p = run_supervisor(cfg)
    assert_clean_database_error(p, str(dbfile), "readonly")


def test_read_only_database_folder_is_a_clear_startup_error(tmp_path):
    folder = tmp_path / "data"
    make_database(folder / "q.db")
    cfg = config(tmp_path, database="data/q.db")
    with bind_mount_readonly(folder):
        p = run_supervisor(cfg)
    # SQLite cannot create the -shm file: "unable to open database file (... no permission?)"
    assert_clean_database_error(
        p, str(folder / "q.db"), "unable to open database file", "permission"
    )


def test_unwritable_folder_of_a_writable_database_is_a_clear_startup_error(tmp_path):
    """The file is writable but its folder is not: SQLite cannot create the -wal and -shm files."""
    folder, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    make_database(elsewhere / "q.db")
    folder.mkdir()
    (folder / "q.db").touch()
    cfg = config(tmp_path, database="data/q.db")
    with bind_mount_readonly(folder), bind_mount(folder / "q.db", elsewhere / "q.db"):
        p = run_supervisor(cfg)
    assert_clean_database_error(
        p, str(folder / "q.db"), "unable to open database file", "permission"
    )


def test_missing_database_folder_is_a_clear_startup_error(tmp_path):
    cfg = config(tmp_path, database="no/such/folder/q.db")
    p = run_supervisor(cfg)
    assert_clean_database_error(p, str(tmp_path / "no/such/folder"), "does not exist")
    assert not (tmp_path / "no").exists()


def test_a_database_newer_than_this_jobq_is_a_clear_startup_error(tmp_path):
    """A schema from a later jobq: exit 5 at once with one line, never a traceback."""
    make_database(tmp_path / "q.db")
    with sqlite3.connect(str(tmp_path / "q.db")) as c:
        c.execute("PRAGMA user_version = 999")
    p = run_supervisor(config(tmp_path))
    assert_clean_database_error(p, "version 999 is newer than this jobq")


def test_file_that_is_not_a_database_is_a_clear_startup_error(tmp_path):
    (tmp_path / "q.db").write_bytes(b"this is a text file, not SQLite\n" * 200)
    cfg = config(tmp_path)
    p = run_supervisor(cfg)
    assert_clean_database_error(p, str(tmp_path / "q.db"), "not a database")
    assert (tmp_path / "q.db").read_bytes().startswith(b"this is a text file")  # left untouched


# -- a database failing while the supervisor boots ------------------------------------------------


@contextmanager
def failing_at_boot(database: Database, folder: Path, proxy: Any = None):
    """Make every try of a supervisor to reach the database fail, until the block ends: on
    PostgreSQL the server's port refuses connections (``proxy``, the supervisor's way to the
    server, cut: as during a failover; ending sessions as they show leaves gaps a boot can get
    through), on SQLite another program holds the write lock."""
    if database.name == "sqlite":
        locker = sqlite3.connect(str(folder / "q.db"), isolation_level=None, timeout=10)
        locker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        return
    proxy.cut("refuse")
    try:
        yield
    finally:
        proxy.heal()


def test_a_database_failing_while_the_supervisor_boots_is_waited_for_then_it_runs_jobs(
    tmp_path, database, sup_factory, request
):
    """A failure that may heal by waiting (PostgreSQL's server refusing connections during
    start-up, as in a failover during a deploy; SQLite's write lock held by another program) is
    logged and tried again with the loop's back-off, never the end of the supervisor; once the
    database is back it boots, starts its workers and runs the job, on its first attempt."""
    sections: dict = {"supervisor": {"workers": 1}, "worker": {"lease_timeout": 4}}
    proxy = None
    if database.name == "postgresql":
        from tests.engines import postgres_url
        from tests.twohost import Proxy, host_url

        proxy = Proxy("127.0.0.1", postgres_url())
        request.addfinalizer(proxy.close)
        sections["database"] = host_url(proxy)
    cfg = config(tmp_path, **sections)
    jid = enqueue(cfg, "fault:ok")
    with failing_at_boot(database, tmp_path, proxy):
        sup = sup_factory(cfg)
        try:
            wait_until(
                lambda: (
                    sup.proc.poll() is not None
                    or len(log_events(sup, "supervisor.database_unavailable")) >= 2
                ),
                timeout=60,
                what="two tries to reach the database failed",
            )
        except AssertionError:
            raise AssertionError(sup.output()[-6000:]) from None
        assert sup.proc.poll() is None, sup.output()
        assert not log_events(sup, "supervisor.boot_failed"), sup.output()
    row = wait_until(
        lambda: terminal(cfg, jid), timeout=60, what="the job run once the database is back"
    )
    assert row["status"] == "completed" and row["attempts"] == 1, dict(row)
    # (its workers may run the job before the boot's first recovery ends and it logs 'started')
    wait_until(lambda: log_events(sup, "supervisor.started"), timeout=30, what="supervisor.started")
    names = [e["event"] for e in log_events(sup)]
    assert names.index("supervisor.database_unavailable") < names.index("supervisor.started")
    # (a worker started while sessions were still being ended may fail its own boot: the
    # supervisor restarts it; only the supervisor's boot must never fail)
    assert sup.proc.poll() is None and not log_events(sup, "supervisor.boot_failed"), sup.output()
    unavailable = log_events(sup, "supervisor.database_unavailable")
    assert all(e["retry_in"] > 0 for e in unavailable), unavailable  # the loop's back-off


def test_a_stop_signal_ends_a_boot_waiting_for_the_database(tmp_path, database, sup_factory):
    """SIGTERM while the boot waits for the database: exit 0 at once, no worker started. On
    PostgreSQL the server is out of reach (a port where nothing listens refuses every try, which
    may heal), not ended session by session: ending sessions as they show leaves gaps a boot
    can get through."""
    sections: dict = {"worker": {"lease_timeout": 4}}
    if database.name == "postgresql":
        sections["database"] = f"postgresql://127.0.0.1:{_closed_port()}/test"
    cfg = config(tmp_path, **sections)
    unreachable = contextlib.nullcontext()
    if database.name == "sqlite":
        enqueue(cfg, "fault:ok")
        unreachable = failing_at_boot(database, tmp_path)
    with unreachable:
        sup = sup_factory(cfg)
        wait_until(
            lambda: (
                sup.proc.poll() is not None or log_events(sup, "supervisor.database_unavailable")
            ),
            timeout=60,
            what="a try to reach the database failed",
        )
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == ExitCode.OK, sup.output()
    assert "worker.spawned" not in sup.output() and "boot_failed" not in sup.output(), sup.output()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.engine_only("postgresql", reason="a server's refusals (SQLite's: the cases above)")
@pytest.mark.parametrize(
    "refusal, says",
    [
        ("role", "does not exist"),
        ("database", "does not exist"),
        ("schema", "is newer than"),
    ],
)
def test_a_refusal_no_wait_heals_ends_the_boot_at_once(tmp_path, database, refusal, says):
    """A role or database that does not exist, or a schema newer than this code: exit 5 at
    once, said once, no retry and no worker."""
    import psycopg
    from tests.engines import postgres_url

    url = postgres_url()
    if refusal == "role":
        url = url.replace("postgresql://", "postgresql://jobq_no_such_role@", 1)
    elif refusal == "database":
        url = url.replace("/test", "/jobq_no_such_database", 1)
    else:
        enqueue(config(tmp_path), "fault:ok")  # the schema made, then from a later jobq
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'UPDATE "{database.schema}".meta SET version = version + 1')
    p = run_supervisor(config(tmp_path, database=url))
    assert_clean_database_error(p, says)
    assert "database_unavailable" not in p.stderr, p.stderr


@pytest.mark.engine_only(
    "sqlite", reason="SQLite's write lock (PostgreSQL's upkeep lock_timeout: test_postgres)"
)
def test_a_held_write_lock_never_stalls_the_supervisors_loop_for_long(tmp_path, sup_factory):
    """SQLite: another program holds the write lock. The supervisor's store waits for it once,
    a quarter of the lease (here 1 s), never a worker's busy_timeout and its retries (5 s, 7
    times: over 35 s, the loop reaping nothing meanwhile): a worker killed while the lock is
    held is reaped and logged within seconds, its job re-queued once the lock is free."""
    cfg = config(tmp_path, supervisor={"workers": 2}, worker={"lease_timeout": 4})
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, timeout=30, what="workers up")
    jid = enqueue(cfg, "fault:block", {"log": str(log)})  # killed below, before its timeout (1 s)
    [run] = wait_until(lambda: starts(log, jid), timeout=30, what="job started")
    locker = sqlite3.connect(str(tmp_path / "q.db"), isolation_level=None, timeout=10)
    try:
        locker.execute("BEGIN IMMEDIATE")
        killed = time.monotonic()
        os.kill(run["pid"], signal.SIGKILL)
        wait_until(
            lambda: [e for e in log_events(sup, "worker.exited") if e["pid"] == run["pid"]],
            timeout=15,
            what="the killed worker reaped while the lock is held",
        )
        reaped_in = time.monotonic() - killed
        assert (
            locker.execute("SELECT status FROM jobs WHERE id = ?", (jid,)).fetchone()[0]
            == "running"
        )
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert log_events(
        sup, "worker.release_failed"
    )  # it gave up on the lock: a later round re-queued
    row = wait_until(
        lambda: terminal(cfg, jid), timeout=30, what="the job released (max_attempts=1)"
    )
    assert row["status"] == "failed" and "SIGKILL" in row["error"], row["error"]
    print(f"reaped {reaped_in:.2f} s after the kill, the write lock held")


@pytest.mark.engine_only("sqlite", reason="SQLite's write lock (PostgreSQL's: test_postgres)")
def test_a_claim_that_waited_for_the_write_lock_runs_its_job_on_the_first_attempt(
    tmp_path, sup_factory
):
    """Another program holds the write lock longer than the fence (3.2 s of a 4 s lease) while
    a worker's claim of a job that fell due waits for it: the claim goes through on release,
    the worker renews at once and runs the job on its first attempt, never fencing itself
    because its silence was counted from the claim's send."""
    cfg = config(tmp_path, supervisor={"workers": 1}, worker={"lease_timeout": 4})
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 1, timeout=30, what="worker up")
    jid = enqueue(cfg, "fault:ok", delay=1.0)
    due = time.monotonic() + 1.0
    locker = sqlite3.connect(str(tmp_path / "q.db"), isolation_level=None, timeout=10)
    try:
        locker.execute("BEGIN IMMEDIATE")
        threading.Event().wait(max(due + 4.0 - time.monotonic(), 0))  # the lock held past the fence
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    row = wait_until(lambda: terminal(cfg, jid), timeout=30, what="the job run")
    assert row["status"] == "completed" and row["attempts"] == 1, dict(row)
    assert not log_events(sup, "worker.fenced"), sup.output()


# -- config mistakes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sections, named",
    [
        ({"worker": {"pol_interval": 0.5}}, "unknown key 'worker.pol_interval'"),  # typo
        ({"databse": "q.db"}, "unknown key 'databse'"),  # typo, top level
        ({"supervisor": {"workers": "4"}}, "'supervisor.workers' = '4': expected an integer"),
        (
            {"sqlite": {"synchronous": "sometimes"}},
            "'sqlite.synchronous' = 'sometimes': expected one of",
        ),
        (
            {"supervisor": {"shutdown_timeout": -1}},
            "'supervisor.shutdown_timeout' = -1: expected a number >= 0",
        ),
        ({"worker": {"lease_timeout": -5}}, "'worker.lease_timeout' = -5"),
        (
            {"retention": {"completed_after": "-3d"}},
            "'retention.completed_after' = '-3d': expected a duration",
        ),
        ({"nosuchsection": {"x": 1}}, "unknown key 'nosuchsection'"),
    ],
)
def test_config_mistakes_stop_startup_with_the_key_named(tmp_path, sections, named):
    cfg = config(tmp_path, **sections)
    p = run_supervisor(cfg)
    assert p.returncode == ExitCode.CONFIG_INVALID
    assert str(cfg) in p.stderr and named in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "q.db").exists()  # nothing started


# -- disk full --------------------------------------------------------------------------------------


@contextmanager
def small_tmpfs(folder: Path, size: str):
    folder.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"needs root to mount a small tmpfs (the RLIMIT_FSIZE test still runs): {exc}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def fill_disk(folder: Path) -> Path:
    """Write a file until the filesystem is full (ENOSPC), in ever smaller pieces."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    f.write(b"z" * chunk)
            except OSError as exc:
                assert exc.errno == 28, exc  # ENOSPC
    assert os.statvfs(folder).f_bavail == 0
    return filler


@pytest.mark.engine_only("sqlite", reason="a full disk under SQLite's file")
def test_disk_full_is_a_clear_error_nothing_uncommitted_is_done_and_work_resumes(
    tmp_path, sup_factory
):
    with small_tmpfs(tmp_path / "disk", "4m") as disk:
        cfg = config(
            tmp_path,
            database="disk/q.db",
            log_level="debug",
            supervisor={"workers": 2},
            worker={"lease_timeout": 60},
        )
        dbfile, log, gate = disk / "q.db", tmp_path / "events.log", tmp_path / "gate"

        def put(jtype: str, payload: dict) -> str:
            with JobQueue(str(dbfile)) as q:
                return q.enqueue(jtype, payload)

        def row(job_id: str) -> sqlite3.Row:
            with sqlite3.connect(str(dbfile)) as c:
                c.row_factory = sqlite3.Row
                return c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()

        sup = sup_factory(cfg)
        warm = put("fault:blob", {"log": str(log), "kb": 20})
        wait_until(lambda: row(warm)["status"] == "completed", what="a job before the disk fills")
        held = [
            put("fault:blob", {"log": str(log), "gate": str(gate), "kb": 300}) for _ in range(2)
        ]
        wait_until(
            lambda: (
                all(row(j)["status"] == "running" for j in held)
                and any(starts(log, j) for j in held)
            ),
            what="held jobs claimed and started",
        )

        filler = fill_disk(disk)
        # a producer gets a clear error, and nothing is written
        with pytest.raises(StoreUnavailable, match="database or disk is full"):
            put("fault:ok", {"pad": "p" * 200_000})
        # the handlers finish, but their outcomes (300 KiB each) cannot be committed
        gate.touch()
        wait_until(
            lambda: all(
                [e for e in events(log) if e["job"] == j and e["event"] == "end"]
                for j in held
                if starts(log, j)
            ),
            what="handlers returned",
        )
        wait_until(
            lambda: log_events(sup, "worker.write_failed"), what="the failed commit is reported"
        )
        failed = log_events(sup, "worker.write_failed")
        assert "database or disk is full" in failed[0]["error"]
        with sqlite3.connect(str(dbfile)) as c:
            assert c.execute("SELECT count(*) FROM jobs").fetchone()[0] == 3
            assert [
                r[0] for r in c.execute("SELECT status FROM jobs WHERE id IN (?, ?)", held)
            ] == ["running"] * 2
        done = {e["id"] for e in log_events(sup, "job.completed")}
        assert done == {warm}, "nothing is reported done before it is committed"
        assert integrity(dbfile) == "ok"
        assert sup.proc.poll() is None  # the supervisor rides it out

        filler.unlink()  # space returns: the kept outcomes commit, new work flows
        wait_until(
            lambda: all(row(j)["status"] == "completed" for j in held),
            timeout=30,
            what="held jobs completed once space returned",
        )
        after = put("fault:blob", {"log": str(log), "kb": 20})
        wait_until(lambda: row(after)["status"] == "completed", what="new work after the disk full")
        for j in held:
            r = row(j)
            runs = starts(log, j)
            assert (
                r["attempts"] == 1
                and len(runs) == 1
                and json.loads(r["result"])["pid"] == runs[0]["pid"]
            )
        completed = [e["id"] for e in log_events(sup, "job.completed")]
        assert sorted(completed) == sorted([warm, after, *held])  # each outcome recorded once
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
        assert integrity(dbfile) == "ok"


def test_file_size_limit_is_a_clear_error_and_leaves_the_database_intact(tmp_path):
    """RLIMIT_FSIZE (no root needed): SQLite reports "disk I/O error"; what committed is there,
    what did not is not, and the file is sound."""
    path = tmp_path / "q.db"
    with JobQueue(str(path)) as q:
        before = q.enqueue_many([("fault:ok", {"n": i}) for i in range(10)])
        q.store.checkpoint()
    limit = path.stat().st_size + (256 << 10)
    script = textwrap.dedent(f"""
        import sys
        from shared import JobQueue
        done = []
        with JobQueue({str(path)!r}) as q:
            try:
                while True:
                    done.append(q.enqueue("fault:ok", {{"pad": "p" * 50000}}))
                    print("OK", done[-1], flush=True)
            except Exception as exc:
                print("ERROR", type(exc).__name__, exc, flush=True)
    """)

    def limit_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    p = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=limit_size,
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    lines = p.stdout.splitlines()
    # jobq's own error, naming the file and SQLite's cause
    assert (
        p.returncode == 0 and lines[-1] == f"ERROR StoreUnavailable database {path}: disk I/O error"
    ), (p.stdout, p.stderr)
    committed = [line.split()[1] for line in lines if line.startswith("OK")]
    assert committed  # some fitted before the limit
    assert integrity(path) == "ok"
    with JobQueue(str(path)) as q:  # no limit here: the queue works on
        ids = {r["id"] for r in q.store.conn.execute("SELECT id FROM jobs")}
        assert ids == set(before) | set(committed)  # exactly what was acknowledged
        q.enqueue("fault:ok", {"pad": "p" * 50000})
    assert integrity(path) == "ok"


# -- transaction discipline: regression tests -----------------------------------------------------

_WRITE = ("INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")


class StatementLog:
    """Every statement a connection runs (``set_trace_callback``), checked for the store's
    contract: a write is a single autocommit statement or inside ``BEGIN IMMEDIATE``; no
    deferred ``BEGIN`` or ``SAVEPOINT`` opens a transaction; every transaction ends."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.violations: list[str] = []
        self.in_tx = False

    def __call__(self, sql: str) -> None:
        self.statements.append(sql)
        words = sql.split(None, 2)
        head = words[0].upper() if words else ""
        if head == "BEGIN":
            mode = words[1].upper().rstrip(";") if len(words) > 1 else "DEFERRED"
            if mode not in ("IMMEDIATE", "EXCLUSIVE"):
                self.violations.append(f"deferred transaction: {sql!r}")
            self.in_tx = True
        elif head == "SAVEPOINT" and not self.in_tx:
            self.violations.append(f"SAVEPOINT opens a deferred transaction: {sql!r}")
        elif head in ("COMMIT", "END", "ROLLBACK") and not (
            head == "ROLLBACK" and "TO" in sql.upper()
        ):
            self.in_tx = False

    def writes(self) -> list[str]:
        return [s for s in self.statements if s.split(None, 1)[0].upper() in _WRITE]


def traced(store: SqliteStore) -> StatementLog:
    log = StatementLog()
    store.conn.set_trace_callback(log)
    return log


def no_snapshot_held(path: str) -> bool:
    """Is no reader pinning a snapshot (a half-read SELECT cursor would)? After a commit from
    another connection, a TRUNCATE checkpoint succeeds only if no reader is left on an older
    snapshot."""
    c = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        c.execute(
            "INSERT INTO control (name, value) VALUES ('probe', '1') "
            "ON CONFLICT (name) DO UPDATE SET value = value + 1"
        )
        return c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        c.close()


def store_cycle(store: SqliteStore):
    """Every public operation of the store, in a full enqueue/claim/run/record/release cycle.
    Yields (name, thunk); the names must cover every public method (checked by the test)."""
    from shared.runtime.clock import FakeClock
    from shared.model.limits import TypeLimit
    from shared.engines.sqlite.store import Finish

    clock = FakeClock()
    now = clock.now()
    jobs = [NewJob(f"{i:032x}", "t", "{}", 0, now, None, None) for i in range(1, 9)]
    keyed = NewJob("f" * 32, "t", "{}", 0, now, None, "key-1")
    owner, other = "host:1:1", "host:2:2"
    state: dict = {}

    def claim():
        state["claimed"] = store.claim(owner, 1, now, 2)
        assert len(state["claimed"]) == 2

    def finish_and_claim():
        a, b = state["claimed"]
        ok, got = store.finish_and_claim(
            [
                Finish("completed", a.id, a.attempts, None),
                Finish("retry", b.id, b.attempts, "e", now + 60, 3),
            ],
            owner,
            1,
            now,
            3,
        )
        assert ok == [True, True] and len(got) == 3
        state["claimed"] = got

    def finishes():
        a, b, c = state["claimed"]
        assert store.finish(Finish("completed", a.id, a.attempts, '{"r":1}'), owner, now)
        assert store.finish(Finish("failed", b.id, b.attempts, "boom", 0.0, 3), owner, now)
        assert store.finish(Finish("retry", c.id, c.attempts, "again", now, 3), owner, now)
        assert not store.finish(
            Finish("completed", a.id, a.attempts, None), other, now
        )  # a stale owner

    def release_unstarted():
        state["claimed"] = store.claim(owner, 1, now, 2)
        assert store.release_unstarted(owner, [state["claimed"][1].id], now) == 1

    def release_owner():
        store.claim(other, 2, now, 1)
        released = store.release_owner(other, "gone", now, max_attempts_for=lambda j: 3)
        released += store.release_owner(
            owner, "gone", now, max_attempts_for=lambda j: 3, count_attempt=False, unstarted=[]
        )
        assert len(released) == 2

    def run_schedule():
        assert store.run_schedule("s", "fp", now, lambda last: ([], None)) is None  # anchors
        store.run_schedule(
            "s",
            "fp",
            now + 60,
            lambda last: ([NewJob("e" * 32, "t", "{}", 0, now, None, "tick")], now + 60),
        )

    yield "enqueue", lambda: store.enqueue(jobs[:1], now)
    yield "enqueue (many)", lambda: store.enqueue(jobs[1:], now)
    yield (
        "enqueue (keyed, twice)",
        lambda: (store.enqueue([keyed], now), store.enqueue([keyed], now)),
    )
    yield "claim", claim
    yield "heartbeat", lambda: store.heartbeat(owner, now)
    yield (
        "check_in",
        lambda: (store.check_in(owner), store.check_in(owner, [(state["claimed"][0].id, 1, "{}")])),
    )
    yield "finish_and_claim", finish_and_claim
    yield "finish (completed, failed, retry)", finishes
    yield "release_unstarted", release_unstarted
    yield "release_owner", release_owner
    yield "try_claim", lambda: store.try_claim(owner, 1, now, 1)
    yield (
        "claim_limited",
        lambda: store.claim_limited(owner, 1, now, {"t": TypeLimit("t", 5, (10, 60.0))}, 2),
    )
    yield "set_paused", lambda: (store.set_paused(True), store.is_paused(), store.set_paused(False))
    yield (
        "lead_upkeep",
        lambda: (store.lead_upkeep(owner, now, 30.0), store.lead_upkeep(owner, now, 0.0)),
    )
    yield (
        "serve claim",
        lambda: (
            store.serve((("q", 2), ("default", 1))),
            store.claim(owner, 1, now, 1),
            store.try_claim(owner, 1, now, 1),
            store.serve(None),
        ),
    )
    yield (
        "set_queue_paused is_queue_paused paused_queues",
        lambda: (
            store.set_queue_paused("q", True),
            store.is_queue_paused("q"),
            store.paused_queues(),
            store.claim(owner, 1, now, 1),
            store.set_queue_paused("q", False),
        ),
    )
    yield (
        "claim_limited (per key, fair)",
        lambda: (
            store.enqueue(
                [
                    NewJob("f" * 31 + str(i), "k", "{}", 0, now, None, None, limit_key=f"k{i}")
                    for i in range(3)
                ],
                now,
            ),
            store.claim_limited(
                owner, 1, now, {"k": TypeLimit("k", None, None, 1, (5, 60.0), True)}, 2
            ),
        ),
    )
    yield (
        "register_process touch_process",
        lambda: (
            store.register_process(owner, "worker", 1, "host", now),
            store.touch_process(owner, now),
        ),
    )
    yield "remove_process", lambda: store.remove_process(owner)
    yield "run_schedule", run_schedule
    yield "purge_finished", lambda: store.purge_finished({"completed": now + 1, "failed": now + 1})
    yield (
        "reads",
        lambda: (
            store.get(jobs[0].id),
            store.counts(),
            store.running(),
            store.next_due(),
            store.has_due(now),
            store.idle_read(now),
            store.processes(),
            store.processes("worker"),
            store.schedule_marks(),
            store.stats(),
            store.lease_ages(now),
            store.running_groups(now),
            store.process_ages(now),
        ),
    )
    yield "checkpoint", store.checkpoint
    # the read layer's writes (shared.ops): the store's write, transaction, batches, wake_idle,
    # notify_controls (a running job's cancel, a scale request)
    yield (
        "write transaction batches wake_idle notify_controls",
        lambda: (
            ops.retry_jobs(store, [jobs[0].id], now),
            ops.cancel_jobs(store, [jobs[1].id], now),
            ops.retry_failed(store, now),
            ops.purge(store, "cancelled", now + 1),
            ops.purge_jobs(store, [jobs[1].id]),
            ops.request_scale(store, "sup", 3),
            ops.take_scale_request(store, "sup"),
            ops.save_counters(store, "sup", {"n": 1}),
        ),
    )
    yield (
        "read (the read layer)",
        lambda: (
            ops.counts_by_type(store),
            ops.scheduled_by_type(store, now),
            ops.oldest_due(store, now),
            ops.finished_per_minute(store, now - 60),
            ops.recent_failures(store),
            ops.list_jobs(store),
            ops.find_ids(store, "e"),
            ops.statuses(store, [jobs[0].id]),
            ops.attempt_history(store, jobs[0].id),
            ops.worker_rows(store),
            ops.running_without_worker(store),
            ops.last_attempt_seq(store),
            ops.recent_attempts(store, now - 60, 10),
            ops.attempt_aggregates(store, 0, 10, [1.0]),
            ops.pending_scale(store, "sup"),
            ops.supervisor_counters(store),
        ),
    )
    yield (
        "read (browse, activity)",
        lambda: (
            ops.browse.browse_jobs(store, None, None, None, None, 10, 100),
            ops.browse.find_jobs(store, "e"),
            ops.job_texts(store, jobs[0].id),
            ops.activity.attempts_per_minute(store, 0),
            ops.activity.attempt_seq_bounds(store),
            ops.activity.attempt_from(store, 1),
            ops.activity.rate_window_use(store, "t", now - 60),
        ),
    )

    def transfer():
        rows = store.export_jobs("", 100)
        store.export_attempts([r["id"] for r in rows])
        edges = store.export_edges([r["id"] for r in rows])
        assert (
            store.import_jobs(rows, (), edges).inserted == []
        )  # all there already: nothing written
        store.delete_copied([r for r in rows if r["status"] == "completed"][:1])

    yield "export_jobs export_attempts export_edges import_jobs delete_copied", transfer
    # workflows: a graph in one transaction, a child's parents read back, an operator's view of it
    root, flow = (
        NewJob("b" * 32, "t", "{}", 0, now, None, None),
        NewJob("c" * 32, "t", "{}", 0, now, None, None),
    )
    flow.after = (root.id,)
    yield (
        "enqueue_flow parents",
        lambda: (
            store.enqueue_flow([root, flow], now),
            store.parents(flow.id),
            ops_flows.relatives(store, flow.id),
        ),
    )


# Public methods that are not operations on the database (or that the cycle reaches through
# another name above: is_paused, touch_process and the reads).
_NOT_OPERATIONS = {
    "close",
    "closed",
    "conn",
    "from_config",
    "claim_limited_in",
    "wakeup",
    "aio",  # the async writer (None on SQLite: its async calls run the sync ones in a thread)
    "delete_finished_in",
    "pacer",
    "for_thread",
    "dialect",
    "channel",
    "schema",
    "qualifier",
    "named",  # the shared SQL's attributes
    "gauges",
    "serving",
    "claim_order",
    "serving_names",
    "serving_tag",
    "serving_slot",
}  # a worker's queues


def test_every_store_write_is_autocommit_or_begin_immediate_and_leaves_no_lock(tmp_path):
    path = str(tmp_path / "q.db")
    store = SqliteStore(path)
    log = traced(store)
    covered = set()
    for name, thunk in store_cycle(store):
        before = len(log.statements)
        thunk()
        covered.update(name.replace("(", " ").split())
        assert not store.conn.in_transaction, f"{name}: left a transaction open"
        assert not log.in_tx, f"{name}: BEGIN without COMMIT/ROLLBACK: {log.statements[before:]}"
        assert write_lock_free(path), (
            f"{name}: still holds the write lock (an unread RETURNING cursor?)"
        )
        assert no_snapshot_held(path), f"{name}: still pins a read snapshot (a half-read cursor?)"
    assert log.violations == []
    assert log.writes(), "the trace saw no writes: the checker is blind"
    public = {n for n in dir(SqliteStore) if not n.startswith("_")}
    missing = (
        public
        - covered
        - _NOT_OPERATIONS
        - {
            "is_paused",
            "touch_process",
            "get",
            "counts",
            "running",
            "next_due",
            "has_due",
            "idle_read",
            "processes",
            "schedule_marks",
            "wal_bytes",
            "stats",
            "lease_ages",
            "running_groups",
            "process_ages",
            "export_jobs",
            "export_attempts",
            "export_edges",
        }
    )
    assert not missing, (
        f"store methods not exercised by this regression test (add them to store_cycle): {missing}"
    )
    store.close()


def test_the_discipline_checks_catch_a_deferred_write_and_an_unread_returning_cursor(tmp_path):
    """The checks above can fail: a deferred read-then-write and a RETURNING cursor left unread
    are both caught."""
    path = str(tmp_path / "q.db")
    store = SqliteStore(path)
    log = traced(store)
    store.enqueue([NewJob(c * 32, "t", "{}", 0, 0.0, None, None) for c in "abc"], 0.0)
    store.conn.execute("BEGIN")  # the mistake: a deferred transaction
    store.conn.execute("SELECT count(*) FROM jobs").fetchall()
    store.conn.execute("UPDATE jobs SET priority = 1")
    store.conn.execute("COMMIT")
    assert log.violations and "deferred transaction" in log.violations[0]
    cur = store.conn.execute("UPDATE jobs SET priority = 2 RETURNING id")  # never fetched
    assert not store.conn.in_transaction  # what Python reports...
    assert not write_lock_free(path)  # ...and what is true: the lock is still held
    cur.fetchall()
    assert write_lock_free(path)
    half = store.conn.execute("SELECT id FROM jobs")
    half.fetchone()
    assert not no_snapshot_held(path)  # a half-read SELECT pins a snapshot
    half.close()
    assert no_snapshot_held(path)
    store.close()


def test_worker_and_supervisor_paths_follow_the_discipline(tmp_path, monkeypatch):
    """Every connection any store opens in this process (the state machine's producer,
    supervisor and workers) is traced while the stateful test's machine runs a few examples."""
    import tests.engines.test_store_stateful as stateful

    logs: list[StatementLog] = []
    real_open = SqliteStore._open

    def open_traced(self, migrate):
        real_open(self, migrate)
        logs.append(traced(self))

    monkeypatch.setattr(SqliteStore, "_open", open_traced)
    from tests.engines import SqliteEngine

    stateful.run_machine(SqliteEngine(tmp_path), max_examples=15, stateful_step_count=40)
    assert sum(len(lg.writes()) for lg in logs) > 100, "too few writes traced to mean anything"
    assert [v for lg in logs for v in lg.violations] == []


# -- load: producers, a long reader, the WAL ----------------------------------------------------------

PRODUCER = textwrap.dedent("""
    import sys
    from shared import JobQueue
    path, n, out, me = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    ids = []
    with JobQueue(path) as q:
        i = 0
        while i < n:
            if i % 200 < 100:                     # half one by one (one autocommit statement each)
                ids.append(q.enqueue("fault:ok", {"p": me, "i": i}))
                i += 1
            else:                                 # half in batches of 50 (one transaction each)
                k = min(50, n - i)
                ids += q.enqueue_many([("fault:ok", {"p": me, "i": i + j}) for j in range(k)])
                i += k
    with open(out, "w") as f:
        f.write("\\n".join(ids))
""")


def run_producers_under_load(tmp_path: Path, total: int, sup_factory) -> None:
    """``total`` jobs from 4 producer processes while 4 workers run them. 6,000 (the default
    suite) already take the WAL tens of times past its 1 MiB bound; 100,000 is the slow soak."""
    limit_mb = 1
    cfg = config(tmp_path, supervisor={"workers": 4}, sqlite={"wal_checkpoint_mb": limit_mb})
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 4, timeout=30, what="workers up")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                PRODUCER,
                str(tmp_path / "q.db"),
                str(total // 4),
                str(tmp_path / f"ids-{k}"),
                str(k),
            ],
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in range(4)
    ]
    wal_seen: list[int] = []  # the WAL's size while they write

    def produced() -> bool:
        wal_seen.append(os.path.getsize(tmp_path / "q.db-wal"))
        return all(p.poll() is not None for p in procs)

    wait_until(produced, timeout=600, interval=0.01, what="the producers done")
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
        assert "locked" not in out and "busy" not in out, out
    ids = [line for k in range(4) for line in (tmp_path / f"ids-{k}").read_text().split()]
    assert len(ids) == total and len(set(ids)) == total  # every acknowledged enqueue, exactly once
    assert (
        max(wal_seen) > limit_mb << 20
    )  # the load outgrew the bound, so the checkpoint below is tested

    def finished() -> bool:
        with db(cfg) as c:
            return (
                c.execute("SELECT count(*) FROM jobs WHERE status = 'completed'").fetchone()[0]
                == total
            )

    wait_until(finished, timeout=600, interval=0.05, what=f"{total} jobs completed")
    with db(cfg) as c:
        assert c.execute("SELECT count(*) FROM jobs").fetchone()[0] == total
        assert {r[0] for r in c.execute("SELECT id FROM jobs")} == set(ids)
        assert c.execute("SELECT max(attempts) FROM jobs").fetchone()[0] == 1  # nothing ran twice
    out = sup.output()
    assert "database is locked" not in out and "worker.write_failed" not in out
    # the WAL is bounded afterwards: the supervisor's checkpoint (over the limit, or when idle)
    wait_until(
        lambda: os.path.getsize(tmp_path / "q.db-wal") <= limit_mb << 20,
        timeout=60,
        what="WAL back under wal_checkpoint_mb",
    )
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert integrity(tmp_path / "q.db") == "ok"


@pytest.mark.engine_only("sqlite", reason="SQLite's one write lock and its WAL's bound")
def test_four_producers_while_workers_run_exact_counts_no_locked_errors(tmp_path, sup_factory):
    run_producers_under_load(tmp_path, 6_000, sup_factory)


@pytest.mark.slow
@pytest.mark.engine_only("sqlite", reason="SQLite's one write lock and its WAL's bound")
def test_four_producers_100k_jobs(tmp_path, sup_factory):
    run_producers_under_load(tmp_path, 100_000, sup_factory)


def test_checkpoint_never_waits_for_a_reader(tmp_path):
    """The supervisor's TRUNCATE checkpoint must not sit in the busy handler waiting for a long
    reader: while it waits, SQLite holds off every writer (workers, producers, heartbeats)."""
    path = str(tmp_path / "q.db")
    with JobQueue(path) as q:
        q.enqueue_many([("fault:ok", {"pad": "x" * 1000}) for _ in range(500)])
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM jobs").fetchone()  # holds its snapshot from now on
    with JobQueue(path) as q:
        q.enqueue_many([("fault:ok", {"pad": "x" * 1000}) for _ in range(500)])
    out: list = []

    def checkpoint() -> None:
        with SqliteStore(
            path, busy_timeout=120
        ) as store:  # a long busy timeout makes a wait obvious
            out.append(store.checkpoint())

    t = threading.Thread(target=checkpoint, daemon=True)
    t.start()
    t.join(30)
    try:
        assert not t.is_alive(), "checkpoint() is waiting for the reader (and blocking writers)"
        assert out[0][0] == 1  # busy: it could not finish, and said so
        assert write_lock_free(path)
    finally:
        reader.execute("COMMIT")
        reader.close()
        t.join(150)
    with SqliteStore(path) as store:
        assert store.checkpoint()[0] == 0 and store.wal_bytes() == 0  # reader gone: it truncates


@pytest.mark.engine_only("sqlite", reason="SQLite's WAL and its checkpoint")
def test_long_reader_grows_the_wal_and_the_supervisor_checkpoint_shrinks_it_after(
    tmp_path, sup_factory
):
    limit_mb = 1
    cfg = config(tmp_path, supervisor={"workers": 2}, sqlite={"wal_checkpoint_mb": limit_mb})
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 2, what="workers up")
    wal = tmp_path / "q.db-wal"
    reader = sqlite3.connect(str(tmp_path / "q.db"), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM jobs").fetchone()  # a report that never finishes
    try:
        with JobQueue(str(tmp_path / "q.db")) as q:
            for _ in range(6):
                q.enqueue_many([("fault:ok", {"pad": "x" * 2000}) for _ in range(500)])

            def done() -> bool:
                return q.counts().get("completed", 0) == 3000

            wait_until(
                done, timeout=120, interval=0.2, what="3000 jobs completed under the open reader"
            )
        # the checkpoints the supervisor tried could not reset the WAL past the reader's snapshot
        assert wal.stat().st_size > 4 * (limit_mb << 20)
        assert sup.proc.poll() is None
    finally:
        reader.execute("COMMIT")
        reader.close()
    wait_until(
        lambda: wal.stat().st_size <= limit_mb << 20,
        timeout=60,
        what="WAL checkpointed after release",
    )
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert integrity(tmp_path / "q.db") == "ok"


def test_a_claim_that_fails_on_a_working_database_is_logged_as_a_query_error(
    tmp_path, database, sup_factory
):
    """A statement the database refuses (here the schema changed under the worker by another
    program) is not an outage: the worker names it a failed query (not "database unavailable"),
    keeps going, and claims again once the schema is right."""
    cfg = config(tmp_path, supervisor={"workers": 1})
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 1, timeout=30, what="the worker registered")
    jid = enqueue(cfg, "fault:ok", delay=1.5)  # its claim comes after the damage
    with db(cfg) as c:
        c.execute("ALTER TABLE jobs RENAME COLUMN priority TO priority_gone")
    try:
        # (the SQLite worker claims with its outcomes' write: a failed one is a write_failed)
        failed = wait_until(
            lambda: [
                e
                for e in log_events(sup)
                if e["event"] in ("worker.query_failed", "worker.write_failed")
            ],
            timeout=30,
            what="a failed query logged",
        )
        assert "priority" in failed[0]["error"] and failed[0]["level"] == "error", failed
        assert not log_events(sup, "worker.database_unavailable"), sup.output()
    finally:
        with db(cfg) as c:
            c.execute("ALTER TABLE jobs RENAME COLUMN priority_gone TO priority")
    row = wait_until(lambda: terminal(cfg, jid), timeout=60, what="the job run once it is fixed")
    assert row["status"] == "completed", dict(row)
