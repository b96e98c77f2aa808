"""The idle lead (worker/lead.py): one idle worker at a time waits for commits; hand-overs and a
dead lead wake the followers; a burst still reaches every idle worker."""
from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from shared import JobQueue
from shared.engines.sqlite.store import SqliteStore
from tests.proc import env, events, job_row, wait_until, worker_rows, write_config
from shared.engines.sqlite.lead import IdleLead

REPO = Path(__file__).resolve().parent.parent


def readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_one_lead_at_a_time_and_a_resignation_wakes_one_follower(tmp_path):
    db = str(tmp_path / "q.db")
    a, b, c = IdleLead(db), IdleLead(db), IdleLead(db)
    try:
        assert a.available and b.available and c.available
        assert a.take() and a.take()             # taking twice keeps it
        assert not b.take() and not c.take()     # both queue
        assert not readable(b.fileno(), 0) and not readable(c.fileno(), 0)
        a.resign()
        ready = select.select([b.fileno(), c.fileno()], [], [], 10)[0]
        assert len(ready) == 1
        first = b if ready == [b.fileno()] else c
        other = c if first is b else b
        assert first.take() and not a.take()     # a queues behind
        assert not readable(other.fileno(), 0.2) # the kernel handed the lock to one follower
        first.resign()
        first.resign()                           # not held: changes nothing
    finally:
        for lead in (a, b, c):
            lead.close()


def test_a_queued_follower_that_resigns_or_closes_gives_the_lock_back(tmp_path):
    db = str(tmp_path / "q.db")
    a, b = IdleLead(db), IdleLead(db)
    try:
        assert a.take() and not b.take()
        b.resign()                               # busy now: cancel the queued request
        a.resign()
        wait_until(lambda: b.state == "free", what="b's helper to give the lock back")
        assert a.take()
        assert not b.take()                      # queued again
        b.close()
        a.resign()
        b.thread.join(10)
        assert not b.thread.is_alive()
        wait_until(a.take, what="the lock free again after b closed")
    finally:
        a.close()
        b.close()


def test_a_dead_lead_wakes_the_followers(tmp_path):
    db = str(tmp_path / "q.db")
    code = ("import sys, time; from shared.engines.sqlite.lead import IdleLead; "
            "l = IdleLead(sys.argv[1]); assert l.take(); print('lead', flush=True); time.sleep(120)")
    child = subprocess.Popen([sys.executable, "-c", code, db], stdout=subprocess.PIPE, env=env(),
                             cwd=str(REPO))
    follower = IdleLead(db)
    try:
        assert child.stdout.readline().strip() == b"lead"
        assert not follower.take()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert readable(follower.fileno(), 10)
        assert follower.take()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        child.stdout.close()
        follower.close()


def test_without_a_lock_file_every_idle_worker_leads(tmp_path):
    for db in (str(tmp_path / "missing-folder" / "q.db"), ":memory:"):
        lead = IdleLead(db)
        assert not lead.available
        assert lead.take() and lead.take()
        lead.resign()
        lead.close()
    assert not (Path.cwd() / ":memory:-lead").exists()


def test_jobs_enqueued_one_by_one_and_in_a_burst_reach_idle_workers(tmp_path, sup_factory):
    """Single jobs into idle workers all run (no lost wake-up across hand-overs), and a burst
    spreads over every idle worker: the lead hands on after each claim."""
    cfg = write_config(tmp_path, supervisor={"workers": 4})
    log, gate = tmp_path / "events.log", tmp_path / "gate"
    sup = sup_factory(cfg)
    wait_until(lambda: len(worker_rows(cfg)) == 4, what="4 workers registered")
    with JobQueue(str(tmp_path / "q.db")) as q:
        for i in range(20):
            jid = q.enqueue("test:noop", {"log": str(log)})
            wait_until(lambda: job_row(cfg, jid)["status"] == "completed", what=f"single job {i} done")
        ids = q.enqueue_many([("test:gate", {"gate": str(gate), "log": str(log)})] * 4)
    pids = {p["pid"] for p in worker_rows(cfg)}
    wait_until(lambda: {e["pid"] for e in events(log) if e["job"] in ids and e["event"] == "start"} == pids,
               what="each of the 4 workers running one job of the burst")
    gate.touch()
    wait_until(lambda: all(job_row(cfg, j)["status"] == "completed" for j in ids), what="burst done")
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def test_try_claim_answers_at_once_while_another_connection_writes(tmp_path):
    """The lead's claim: None at once on a held write lock (no busy-handler sleep), the job
    once the lock is free, and the connection's busy timeout restored either way."""
    db = str(tmp_path / "q.db")
    with JobQueue(db) as q:
        jid = q.enqueue("t", {})
    store = SqliteStore(db, busy_timeout=30)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        assert store.try_claim("w:1", 1, 0.0) is None
        assert list(store.conn.execute("PRAGMA busy_timeout").fetchone().values())[0] == 30000
        holder.execute("COMMIT")
        assert [j.id for j in store.try_claim("w:1", 1, 1e10)] == [jid]
        assert store.try_claim("w:1", 1, 1e10) == []
        assert list(store.conn.execute("PRAGMA busy_timeout").fetchone().values())[0] == 30000
    finally:
        holder.close()
        store.close()
