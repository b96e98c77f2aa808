"""The idle lead (shared.engines.idlelead.py): one idle worker at a time waits for commits; hand-overs and a
dead lead wake the followers; a burst still reaches every idle worker."""

from __future__ import annotations

import ast
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
from shared.engines.idlelead import IdleLead

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


# The lock is per process (a POSIX record lock): each lead under test lives in its own process,
# driven over a pipe.
DRIVER = """
import ast, select, sys
from shared.engines.idlelead import IdleLead
lead = IdleLead(sys.argv[1])
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "take":
        out = lead.take()
    elif cmd == "resign":
        out = lead.resign()
    elif cmd == "readable":
        out = bool(select.select([lead.fileno()], [], [], float(arg[0]))[0])
    elif cmd == "state":
        out = lead.state
    elif cmd == "available":
        out = lead.available
    elif cmd == "close":
        out = lead.close()
    elif cmd == "joined":
        lead.thread.join(float(arg[0]))
        out = not lead.thread.is_alive()
    print(repr(out), flush=True)
"""


class LeadProc:
    """An IdleLead in a child process: ``lead("take")`` runs ``take()`` there and returns its value."""

    def __init__(self, db: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, db],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env(),
            cwd=str(REPO),
        )

    def __call__(self, cmd: str):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return ast.literal_eval(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc.stdout.close()


def test_one_lead_at_a_time_and_a_resignation_wakes_one_follower(tmp_path):
    db = str(tmp_path / "q.db")
    a, b, c = LeadProc(db), LeadProc(db), LeadProc(db)
    try:
        assert a("available") and b("available") and c("available")
        assert a("take") and a("take")  # taking twice keeps it
        assert not b("take") and not c("take")  # both queue
        assert not b("readable 0") and not c("readable 0")
        a("resign")
        wait_until(lambda: b("readable 0") or c("readable 0"), what="a follower woken")
        first, other = (b, c) if b("readable 0") else (c, b)
        assert first("take") and not a("take")  # a queues behind
        assert not other("readable 0.2")  # the kernel handed the lock to one follower
        first("resign")
        first("resign")  # not held: changes nothing
    finally:
        for lead in (a, b, c):
            lead.close()


def test_a_queued_follower_that_resigns_or_closes_gives_the_lock_back(tmp_path):
    db = str(tmp_path / "q.db")
    a, b = LeadProc(db), LeadProc(db)
    try:
        assert a("take") and not b("take")
        b("resign")  # busy now: cancel the queued request
        a("resign")
        wait_until(lambda: b("state") == "free", what="b's helper to give the lock back")
        assert a("take")
        assert not b("take")  # queued again
        b("close")
        a("resign")
        assert b("joined 10")
        wait_until(lambda: a("take"), what="the lock free again after b closed")
    finally:
        a.close()
        b.close()


def test_a_dead_leads_forked_children_do_not_keep_the_lead(tmp_path):
    """Forked children, the class: children forked without exec by the lead's process, before and
    after it took the lead, still live when it dies; the lead is free at once all the same."""
    db = str(tmp_path / "q.db")
    code = (
        "import os, sys, time\n"
        "from shared.engines.idlelead import IdleLead\n"
        "def fork():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        time.sleep(120); os._exit(0)\n"
        "    return pid\n"
        "l = IdleLead(sys.argv[1]); before = fork(); assert l.take(); after = fork()\n"
        "print(before, after, flush=True); time.sleep(120)\n"
    )
    lead = subprocess.Popen(
        [sys.executable, "-c", code, db],
        stdout=subprocess.PIPE,
        env=env(),
        cwd=str(REPO),
        text=True,
    )
    follower = LeadProc(db)
    children: list[int] = []
    try:
        children = [int(p) for p in lead.stdout.readline().split()]
        assert len(children) == 2
        assert not follower("take")
        os.kill(lead.pid, signal.SIGKILL)
        lead.wait(10)
        assert all(os.path.exists(f"/proc/{p}") for p in children)  # the children live on
        assert follower("readable 10")
        assert follower("take")
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if lead.poll() is None:
            lead.kill()
            lead.wait(10)
        lead.stdout.close()
        follower.close()


def test_a_dead_lead_wakes_the_followers(tmp_path):
    db = str(tmp_path / "q.db")
    code = (
        "import sys, time; from shared.engines.idlelead import IdleLead; "
        "l = IdleLead(sys.argv[1]); assert l.take(); print('lead', flush=True); time.sleep(120)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, db], stdout=subprocess.PIPE, env=env(), cwd=str(REPO)
    )
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
            wait_until(
                lambda: job_row(cfg, jid)["status"] == "completed", what=f"single job {i} done"
            )
        ids = q.enqueue_many([("test:gate", {"gate": str(gate), "log": str(log)})] * 4)
    pids = {p["pid"] for p in worker_rows(cfg)}
    wait_until(
        lambda: (
            {e["pid"] for e in events(log) if e["job"] in ids and e["event"] == "start"} == pids
        ),
        what="each of the 4 workers running one job of the burst",
    )
    gate.touch()
    wait_until(
        lambda: all(job_row(cfg, j)["status"] == "completed" for j in ids), what="burst done"
    )
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


def test_a_lead_worker_killed_while_its_handlers_forked_child_lives_is_replaced_as_lead(
    tmp_path, sup_factory
):
    """Forked children through the real supervisor: the only worker runs a handler that forks a
    sleeping child, leads while idle, and is SIGKILLed (its child lives on). Its replacement must
    lead at once: each job then completes well within the 5 s a follower sleeps (a behaviour
    bound, not a speed target)."""
    cfg = write_config(
        tmp_path, handlers=["procjobs"], log_format="json", supervisor={"workers": 1}
    )
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    child = None
    with JobQueue(str(tmp_path / "q.db")) as q:
        try:
            jid = q.enqueue("proc:fork_sleeper", {"log": str(log), "seconds": 120})
            wait_until(
                lambda: job_row(cfg, jid)["status"] == "completed", what="the forking job done"
            )
            start = next(e for e in events(log) if e["job"] == jid)
            worker, child = start["pid"], start["child"]
            wait_until(
                lambda: os.path.exists(str(tmp_path / "q.db-lead")), what="the lead's lock file"
            )
            lock_file = str(tmp_path / "q.db-lead")
            wait_until(
                lambda: str(worker) in _lock_holders(lock_file),
                what="the worker leading while idle",
            )
            os.kill(worker, signal.SIGKILL)
            wait_until(
                lambda: [r["pid"] for r in worker_rows(cfg)] not in ([], [worker]),
                what="the replacement worker registered",
            )
            probe = q.enqueue("proc:ok", {})
            wait_until(
                lambda: job_row(cfg, probe)["status"] == "completed", what="the probe job done"
            )
            for i in range(3):
                jid = q.enqueue("proc:ok", {})
                wait_until(
                    lambda: job_row(cfg, jid)["status"] == "completed",
                    timeout=1.5,
                    what=f"job {i} done within 1.5 s of its enqueue",
                )
        finally:
            if child is not None:
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    sup.signal(signal.SIGTERM)
    assert sup.wait(20) == 0


def _lock_holders(path: str) -> list[str]:
    """Pids holding a lock on ``path`` (not waiting for one), as /proc/locks lists them."""
    ino = os.stat(path).st_ino
    with open("/proc/locks") as f:
        rows = [line.split() for line in f]
    return [r[4] for r in rows if len(r) > 5 and r[1] != "->" and r[5].endswith(f":{ino}")]
