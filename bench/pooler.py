"""jobq on PostgreSQL direct and through PgBouncer in transaction pooling, in the same run:
``python -m bench.pooler [--hosts 20 --workers 2 --jobs 5000 --trickle 200]``.

Each host is a supervisor of its own (its own config, and its own TMPDIR: its own idle lead and
relay files, as on machines of their own; ``--shared-tmp`` makes them share one, as the workers
of one host would). Per mode (``direct``; ``pooled+listen``:
through a PgBouncer of the bench's own with ``[postgres] listen`` at the server; ``pooled-poll``:
no ``listen``, idle workers poll every ``poll_interval``):

- ``burst``: jobs/s of a burn-down of ``--jobs`` no-op jobs enqueued before the hosts start,
  on ``--hosts`` x ``--workers``, and on 1 host x ``--one`` workers;
- ``server_connections``: the most the server held for the run (direct: ``pg_stat_activity``
  rows of the schema's sessions; pooled: PgBouncer's pool plus the direct listeners);
- ``trickle``: enqueue-to-completion of ``--trickle`` jobs enqueued one at a time, each after
  the last completed (p50 / p99, ms, as the bench's polling sees it), their enqueue-to-start
  (``started_at - created_at``, p50 / p99, ms), and the server transactions per job
  (``pg_stat_database.xact_commit`` over the trickle, less the bench's own reads), on the hosts
  x workers;
- ``idle``: server transactions per second (``pg_stat_database.xact_commit``) while every host is
  idle, over ``--idle`` seconds (the whole server's: run it on a quiet machine).

Needs the local PostgreSQL and ``pgbouncer`` (``apt-get install -y pgbouncer``); uses
``tests/pgbouncer.py`` to run the bouncer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import tomli_w

from shared import JobQueue
from shared.runtime.clock import parse_iso
from shared.engines.postgres.turns import JOINED
from shared.settings.config import load
from tests.pgbouncer import PgBouncer

SOCKET = "postgresql:///{db}?host=/var/run/postgresql"
TCP = "postgresql://root@127.0.0.1:5432/{db}"
DB = {"name": "jobq_bench_pooler"}  # --database: one of its own keeps others' commits out


def server() -> str:
    return SOCKET.format(db=DB["name"])


def server_tcp() -> str:
    return TCP.format(db=DB["name"])


def _config(folder: Path, url: str, schema: str, workers: int, listen: str) -> Path:
    path = folder / "jobq.toml"
    data: dict[str, Any] = {
        "database": url,
        "handlers": ["bench.handlers"],
        "log_level": "warning",
        "supervisor": {"workers": workers},
        "postgres": {"schema": schema, **({"listen": listen} if listen else {})},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


class Fleet:
    """``hosts`` supervisors of ``workers`` each on ``url`` (schema ``schema``)."""

    def __init__(
        self, root: Path, url: str, schema: str, hosts: int, workers: int, listen: str, shared: bool
    ):
        self.procs = []
        self.shared = shared
        self.configs = [_config(root / f"h{i}", url, schema, workers, listen) for i in range(hosts)]
        self.workers = hosts * workers

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        for c in self.configs:
            log = open(c.parent / "log", "wb")
            if not self.shared:
                (c.parent / "tmp").mkdir(exist_ok=True)
                env = {**env, "TMPDIR": str(c.parent / "tmp")}
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "supervisor", "run", "--config", str(c)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def _server(sql: str, *args: Any) -> Any:
    with psycopg.connect(server(), autocommit=True) as c:
        return c.execute(sql, args).fetchone()[0]


def _exists(schema: str) -> bool:
    return _server("SELECT to_regclass(%s) IS NOT NULL", f'"{schema}".processes')


def _count(schema: str, status: str) -> int:
    return _server(f'SELECT count(*) FROM "{schema}".jobs WHERE status = %s', status)


def _connections(bouncer: PgBouncer | None) -> int:
    """Server sessions of jobq now: direct, every one; pooled, the bouncer's pool and the
    sessions that reach the server directly (the relays' LISTEN)."""
    sessions = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'jobq'"
        " AND client_addr IS NOT NULL"  # the bench's hosts use TCP; the suite, the socket
    )
    if bouncer is None:
        return _server(sessions)
    return _server(sessions + " AND query LIKE 'LISTEN%%'") + bouncer.server_connections()


def _wait(pred, timeout: float, every: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def run_mode(mode: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    bouncer = PgBouncer(pool_size=args.pool) if mode != "direct" else None
    url = bouncer.url(DB["name"]) if bouncer else server_tcp()
    listen = server_tcp() if mode == "pooled+listen" else ""
    out: dict[str, Any] = {}
    try:
        for label, hosts, workers in (
            (f"{args.hosts}x{args.workers}", args.hosts, args.workers),
            (f"1x{args.one}", 1, args.one),
        ):
            schema = f"jobq_bench_{uuid.uuid4().hex[:8]}"
            out[label] = _one_fleet(
                root / mode / label,
                url,
                schema,
                hosts,
                workers,
                listen,
                bouncer,
                args,
                trickle=(hosts == args.hosts),
            )
    finally:
        if bouncer:
            bouncer.close()
    return out


def _one_fleet(folder, url, schema, hosts, workers, listen, bouncer, args, trickle):
    fleet = Fleet(folder, url, schema, hosts, workers, listen, args.shared_tmp)
    q = JobQueue(config=load(str(fleet.configs[0])))
    result: dict[str, Any] = {}
    try:
        fleet.start()
        workers = f"SELECT count(*) FROM \"{schema}\".processes WHERE kind = 'worker'"
        _wait(lambda: _exists(schema) and _server(workers) >= fleet.workers, 300, every=0.2)
        peak = 0
        t0 = time.monotonic()
        q.enqueue_many([("bench:noop", {})] * args.jobs)  # the burst, once every worker is up

        def drained() -> bool:
            nonlocal peak
            peak = max(peak, _connections(bouncer))
            return _count(schema, "completed") >= args.jobs

        _wait(drained, 600, every=0.1)
        result["burst_jobs_per_s"] = round(args.jobs / (time.monotonic() - t0), 1)
        result["server_connections_peak"] = peak
        if trickle:
            time.sleep(args.settle)
            flush_relays(server(), schema)  # what the burst's relays hold back, reported now
            before = _xacts()
            time.sleep(args.idle)  # idle: nothing to do but the hosts' upkeep and polls
            result["idle_server_xact_per_s"] = round((_xacts() - before) / args.idle, 1)
            got = _trickle(q, args.trickle, lambda: flush_relays(server(), schema))
            before = _xacts()
            time.sleep(args.idle)  # idle again: the hosts' own commits, read on both sides
            idle = (result["idle_server_xact_per_s"] + (_xacts() - before) / args.idle) / 2
            xacts, took = got.pop("xacts"), got.pop("seconds")
            got["trickle_server_xact_per_job"] = round((xacts - idle * took) / args.trickle, 1)
            result.update(got)
    finally:
        fleet.stop()
        q.close()
        with psycopg.connect(server(), autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return result


def flush_relays(url: str, schema: str) -> None:
    """Make every listening session report the commits it holds back, and wait until it did.

    A listening backend runs a transaction of its own for every notification sent in its
    database (whatever the channel: PostgreSQL 15 signals every listener, which reads the
    queue), but counts them in ``pg_stat_database`` only when it next ends a statement of its
    client's: a relay that runs none for a while holds back what it read meanwhile, and reports
    it into a later count. A relay's notification of a change in the turns (``+``) has every
    relay read the list again (a statement); it reports within 10 s after it (PostgreSQL 15's
    PGSTAT_IDLE_INTERVAL). Costs, itself, about two transactions per relay."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pg_notify(%s, %s)", (f"jobq_{schema}", JOINED))
    time.sleep(11.0)


def _xacts() -> int:
    """Transactions committed in the bench's database so far (``pg_stat_database``; read
    through a connection of its own, which commits one more)."""
    return _server("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")


def _trickle(q: JobQueue, n: int, flush: Any) -> dict[str, float]:
    """``n`` jobs one at a time (see the module). The server counts a busy session's commits
    when it goes idle, at most once a second, and at the latest 10 s later (PostgreSQL 15's
    PGSTAT_IDLE_INTERVAL), and a listening session's reads of notifications only after its
    next statement: the count (``xacts``, less the bench's own) is read after ``flush``
    (:func:`flush_relays`, whose own cost, about two per relay, it includes), ``seconds``
    after the first (the caller takes off what the idle hosts commit anyway in that time)."""
    lat, start, reads = [], [], 0
    t0, before = time.monotonic(), _xacts()
    for _ in range(n):
        t = time.monotonic()
        jid = q.enqueue("bench:noop", {})

        def done() -> bool:
            nonlocal reads
            reads += 1
            return q.get(jid).status == "completed"

        _wait(done, 30, every=0.0005)
        lat.append((time.monotonic() - t) * 1000)
        job = q.get(jid)
        reads += 1
        start.append((parse_iso(job.started_at) - parse_iso(job.created_at)) * 1000)
    flush()
    xacts = _xacts() - before - 2 - reads  # (less our reads, the flush's and the count's own)
    lat.sort()
    start.sort()
    return {
        "trickle_ms_p50": round(statistics.median(lat), 1),
        "trickle_ms_p99": round(lat[int(len(lat) * 0.99) - 1], 1),
        "trickle_start_ms_p50": round(statistics.median(start), 1),
        "trickle_start_ms_p99": round(start[int(len(start) * 0.99) - 1], 1),
        "xacts": xacts,
        "seconds": time.monotonic() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--one", type=int, default=8, help="workers of the single-host run")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--trickle", type=int, default=200)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--pool", type=int, default=10)
    ap.add_argument("--modes", default="direct,pooled+listen,pooled-poll")
    ap.add_argument(
        "--database",
        default="jobq_bench_pooler",
        help="the server's database (made if need be; one of its own keeps others' commits out)",
    )
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after the burst")
    ap.add_argument("--shared-tmp", action="store_true", help="every host shares one TMPDIR")
    args = ap.parse_args()
    DB["name"] = args.database
    if args.database != "test":
        with psycopg.connect(SOCKET.format(db="test"), autocommit=True) as c:
            if not c.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (args.database,)
            ).fetchone():
                c.execute(f'CREATE DATABASE "{args.database}"')
    root = Path(tempfile.mkdtemp(prefix="jobq-bench-pooler-"))
    results = {m: run_mode(m, args, root) for m in args.modes.split(",")}
    print(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
