"""Where a trickled job's server transactions go:
``python -m bench.trickle_profile [--hosts 20 --workers 2 --trickle 300 --idle 10]``.

On a database of its own (``jobq_bench_trickle``, made and dropped here, ``log_statement =
all`` on it only) it starts ``--hosts`` supervisors of ``--workers`` workers (direct mode, as
``bench.pooler``'s hosts), lets them settle, then counts from the server's log, per trickled job
(``--trickle`` jobs enqueued one at a time, each after the last completed) less what the same
sessions run in an idle window of ``--idle`` seconds before it: the statements and the
transactions (an autocommit statement, or a ``BEGIN`` .. ``COMMIT``) by source (the process
whose connection ran them: the bench, a supervisor's relay connection, a supervisor's own, a
worker's) and by statement. Beside it, ``pg_stat_database.xact_commit`` over the same trickle
(read after the 11 s a busy session may take to report its commits), its rollbacks, and the
autovacuum and autoanalyze runs on the schema's tables in that time (the relays made to report what they
hold back first and last, :func:`flush_relays`). Prints JSON.

Each backend is told apart by its client's TCP port (``pg_stat_activity.client_port``, then the
local process holding that port); the server's log must be readable (Debian's, or ``--log``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

from shared import JobQueue
from shared.settings.config import load

from .idle_hosts import server_log
from .pg import SERVER, admin, commits
from .pooler import Fleet, flush_relays

NAME = "jobq_bench_trickle"
LINE = re.compile(
    r"^\S+ \S+ \S+ \[(\d+)\] \S*@"
    + NAME
    + r" LOG:  (?:statement|execute ([^:]*)): (.*(?:\n\t.*)*)$",  # (and its further lines)
    re.M,
)


def _shape(text: str) -> str:
    """A statement's text without its literals (so one kind counts as one)."""
    text = " ".join(text.split())
    text = re.sub(r"'[^']*'", "'?'", text)
    text = re.sub(r'"jobq_l\d+_[0-9a-f]+"', '"lane"', text)
    text = re.sub(r"\b\d+\b", "N", text)
    claim = "c AS ( UPDATE jobs SET status = '?', attempts" in text  # (completions, a claim)
    return ("[and claim] " if claim else "") + text[:100]


def _read_log(log: str, start: int, end: int) -> list[tuple[int, str]]:
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read(end - start).decode(errors="replace")
    return [(int(m.group(1)), _shape(m.group(3))) for m in LINE.finditer(text)]


def _count(lines: list[tuple[int, str]], role: dict[int, str]) -> dict[str, collections.Counter]:
    """Statements and transactions by (source, statement): a transaction is counted on its
    COMMIT (or on an autocommit statement outside BEGIN .. COMMIT)."""
    stmts: collections.Counter = collections.Counter()
    xacts: collections.Counter = collections.Counter()
    open_tx: dict[int, str] = {}
    for pid, text in lines:
        who = role.get(pid, "other")
        head = text.split(None, 1)[0].upper() if text else ""
        stmts[who, text] += 1
        if head in ("BEGIN", "START"):
            open_tx[pid] = text
        elif head in ("COMMIT", "END", "ROLLBACK"):
            first = open_tx.pop(pid, "?")
            if head != "ROLLBACK":
                xacts[who, "tx: " + first] += 1
        elif pid not in open_tx:
            xacts[who, text] += 1
    return {"statements": stmts, "transactions": xacts}


def _roles(supervisors: set[int], bench: int) -> dict[int, str]:
    """Backend pid -> the source of its statements (see the module)."""
    ports = {}
    for c in psutil.net_connections("tcp"):
        if c.laddr and c.raddr and c.raddr.port == 5432 and c.pid:
            ports[c.laddr.port] = c.pid
    with psycopg.connect(SERVER + NAME, autocommit=True) as c:
        rows = c.execute(
            "SELECT pid, client_port, backend_type FROM pg_stat_activity WHERE datname = %s",
            (NAME,),
        ).fetchall()
        listening = {  # (the relays hold their slots' advisory locks: .turns)
            r[0]
            for r in c.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
            ).fetchall()
        }
    role = {}
    for pid, port, kind in rows:
        local = ports.get(port)
        if kind != "client backend":
            role[pid] = kind
        elif local == bench:
            role[pid] = "bench"
        elif local in supervisors:
            role[pid] = "relay" if pid in listening else "supervisor"
        elif local is not None and _parent(local) in supervisors:
            role[pid] = "worker"
        else:
            role[pid] = "other"
    return role


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _vacuums(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        return int(
            c.execute(
                "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) "
                "FROM pg_stat_user_tables WHERE schemaname = 'jobq'"
            ).fetchone()[0]
        )


def _rollbacks() -> int:
    with psycopg.connect(SERVER + "postgres", autocommit=True) as c:
        return int(
            c.execute(
                "SELECT xact_rollback FROM pg_stat_database WHERE datname = %s", (NAME,)
            ).fetchone()[0]
        )


def _trickle(q: JobQueue, n: int) -> float:
    """``n`` jobs one at a time, each after the last completed; the seconds it took."""
    t0 = time.monotonic()
    for _ in range(n):
        jid = q.enqueue("bench:noop", {})
        deadline = time.monotonic() + 30
        while getattr(q.get(jid), "status", None) != "completed":
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {jid} did not complete")
            time.sleep(0.0005)
    return time.monotonic() - t0


def _table(
    busy: dict[str, collections.Counter],
    idle: dict[str, collections.Counter],
    scale: float,
    jobs: int,
) -> dict[str, Any]:
    """Per trickled job: busy counts less the idle window's (scaled to the trickle's length)."""
    out: dict[str, Any] = {}
    for what in ("statements", "transactions"):
        net = {k: (busy[what][k] - idle[what][k] * scale) / jobs for k in busy[what] | idle[what]}
        by_source: collections.Counter = collections.Counter()
        for (who, _), v in net.items():
            by_source[who] += v
        top = sorted(net.items(), key=lambda kv: -abs(kv[1]))[:25]
        out[what] = {
            "total": round(sum(net.values()), 2),
            "by_source": {k: round(v, 2) for k, v in by_source.most_common()},
            "top": [[who, round(v, 2), text] for (who, text), v in top if abs(v) >= 0.05],
        }
    return out


def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    log = server_log(args.log)
    if log is None:
        raise SystemExit("the server's log is not readable (--log)")
    admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    admin(f"CREATE DATABASE {NAME}")
    admin(f"ALTER DATABASE {NAME} SET log_statement = 'all'")
    url = f"postgresql://root@127.0.0.1:5432/{NAME}"
    fleet = Fleet(folder, url, "jobq", args.hosts, args.workers, "", False)
    fleet.start()
    q = JobQueue(config=load(str(fleet.configs[0])))
    try:
        _wait_workers(url, fleet.workers)
        q.enqueue_many([("bench:noop", {})] * args.burst)
        while getattr(q.get(q.enqueue("bench:noop", {})), "status", None) != "completed":
            time.sleep(0.05)
        time.sleep(args.settle)
        at = os.path.getsize(log)
        time.sleep(args.idle)
        mid = os.path.getsize(log)
        flush_relays(url, "jobq")
        c0, r0, v0 = commits(NAME), _rollbacks(), _vacuums(url)
        t0 = time.monotonic()
        took = _trickle(q, args.trickle)
        time.sleep(0.5)  # the fallbacks after the last job (50 ms) and their claims
        end = os.path.getsize(log)
        took += 0.5
        flush_relays(url, "jobq")
        c1, r1, v1 = commits(NAME), _rollbacks(), _vacuums(url)
        window = time.monotonic() - t0
        idle_lines, busy_lines = _read_log(log, at, mid), _read_log(log, mid, end)
        role = _roles({p.pid for p in fleet.procs}, os.getpid())
        idle, busy = _count(idle_lines, role), _count(busy_lines, role)
        table = _table(busy, idle, took / args.idle, args.trickle)
        idle_xacts = sum(idle["transactions"].values()) / args.idle
        table["xact_commit"] = {
            "per_job_raw": round((c1 - c0) / args.trickle, 2),
            "per_job_less_idle_log_rate": round((c1 - c0 - idle_xacts * window) / args.trickle, 2),
            "rollbacks": r1 - r0,
            "autovacuum_or_analyze_runs": v1 - v0,
        }
        table["trickle_seconds"] = round(took, 2)
        table["idle_transactions_per_s"] = round(idle_xacts, 2)
        table["roles"] = dict(collections.Counter(role.values()))
        if args.burst_profile:
            table["burst"] = burst_profile(q, url, log, args.burst_profile, role)
        return table
    finally:
        q.close()
        fleet.stop()
        admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")


def burst_profile(q: JobQueue, url: str, log: str, n: int, role: dict[int, str]) -> dict:
    """``n`` jobs enqueued at once (one statement, as the pooler's burst) and run: jobs/s, the
    statements per job by source and kind, the claims (and jobs per claim), and what the
    hosts' backends waited on (``pg_stat_activity`` sampled every 5 ms: the share of samples
    of active backends per wait event)."""
    at = os.path.getsize(log)
    waits: collections.Counter = collections.Counter()
    sample = (
        "SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu') FROM pg_stat_activity "
        "WHERE datname = %s AND state = 'active' AND application_name = 'jobq'"
    )
    done = "SELECT count(*) FROM jobq.jobs WHERE status = 'completed'"
    with (
        psycopg.connect(SERVER + "postgres", autocommit=True) as look,
        psycopg.connect(url, autocommit=True) as c,
    ):
        base = int(c.execute(done).fetchone()[0])  # type: ignore[index]
        t0 = time.monotonic()
        q.enqueue_many([("bench:noop", {})] * n)
        while int(c.execute(done).fetchone()[0]) - base < n:  # type: ignore[index]
            if time.monotonic() - t0 > 600:
                raise TimeoutError("the burst did not drain")
            waits.update(r[0] for r in look.execute(sample, (NAME,)).fetchall())
            look.execute("SELECT pg_stat_clear_snapshot()")
            time.sleep(0.005)
        took = time.monotonic() - t0
    time.sleep(0.5)
    lines = _read_log(log, at, os.path.getsize(log))
    counted = _count(lines, role)["statements"]
    claims = sum(
        v
        for (_, text), v in counted.items()
        if text.startswith(("[and claim]", "UPDATE jobs SET status = '?', attempts"))
    )
    top = counted.most_common(12)
    total = sum(waits.values()) or 1
    return {
        "jobs_per_s": round(n / took, 1),
        "statements_per_job": round(sum(counted.values()) / n, 2),
        "claims": claims,
        "jobs_per_claim": round(n / claims, 2) if claims else None,
        "top": [[who, round(v / n, 3), text] for (who, text), v in top],
        "waits": {k: round(v / total, 3) for k, v in waits.most_common(10)},
    }


def _wait_workers(url: str, n: int) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(url, autocommit=True) as c:
                q = "SELECT count(*) FROM jobq.processes WHERE kind = 'worker'"
                if int(c.execute(q).fetchone()[0]) >= n:
                    return
        except psycopg.Error:
            pass
        time.sleep(0.2)
    raise TimeoutError("the hosts did not start in time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--trickle", type=int, default=300)
    ap.add_argument("--burst", type=int, default=200, help="jobs run first (warms the hosts)")
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--log", default="", help="the server's log file (default: Debian's)")
    ap.add_argument("--burst-profile", type=int, default=0, help="then a burst of this many")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = measure(args, Path(tmp))
    print(json.dumps({"args": vars(args), **out}, indent=2))


if __name__ == "__main__":
    main()
