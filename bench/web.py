"""The dashboard at scale: ``python -m bench.web build DB [--jobs N]`` writes a
database of N jobs (default 1,000,000) the way a busy day leaves one; ``python -m bench.web
measure DB`` serves it with ``jobq web`` and times every page and the live update over HTTP,
plus the snapshot ``status`` prints and one ``top`` refresh, in process.

Mix: 88% completed over the last 24 h (with their attempt rows, so the charts and percentiles have
a day of history), 5% pending and due, 3% scheduled for later, 2% failed, 2% cancelled, 8 types.
Rows go in with direct inserts in transactions of 50,000 (the schema's triggers keep the
counters, as they would for enqueues).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TYPES = [f"type{i}:work" for i in range(8)]
MIX = [
    ("completed", 0.88),
    ("pending", 0.05),
    ("scheduled", 0.03),
    ("failed", 0.02),
    ("cancelled", 0.02),
]
CHUNK = 50_000


def _iso(t: float) -> str:
    from shared.runtime.clock import iso

    return iso(t)


def build(path: str, n: int, seed: int = 7) -> None:
    """Write ``n`` jobs into a new database at ``path``."""
    from shared import SqliteStore

    if os.path.exists(path):
        raise SystemExit(f"bench.web build: {path} exists; remove it first")
    rnd = random.Random(seed)
    now = time.time()
    start = now - 86400.0
    store = SqliteStore(path)
    conn = store.conn
    conn.execute("PRAGMA synchronous = OFF")
    statuses = [s for s, w in MIX for _ in range(int(w * 100))]
    t0 = time.monotonic()
    for lo in range(0, n, CHUNK):
        jobs, attempts = [], []
        for i in range(lo, min(lo + CHUNK, n)):
            created = start + 86400.0 * i / n
            jid = "%012x" % int(created * 1000) + "%020x" % rnd.getrandbits(80)
            jobs.append(_row(rnd, jid, created, now, statuses[rnd.randrange(100)], attempts))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO jobs (id, type, status, payload, result, error, attempts, priority, run_at, "
            "started_at, completed_at, created_at, updated_at, key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)",
            jobs,
        )
        conn.executemany(
            "INSERT INTO job_attempts (job_id, type, attempt, outcome, due_at, started_at, ended_at, "
            "owner, error) VALUES (?, ?, 1, ?, ?, ?, ?, 'bench:1:1', ?)",
            attempts,
        )
        conn.execute("COMMIT")
    store.close()
    print(
        f"built {path}: {n} jobs in {time.monotonic() - t0:.1f} s, {os.path.getsize(path) / 2**20:.0f} MiB"
    )


def _row(
    rnd: random.Random, jid: str, created: float, now: float, status: str, attempts: list
) -> tuple:
    jtype = TYPES[rnd.randrange(len(TYPES))]
    payload = json.dumps({"reportId": f"r{rnd.randrange(10**6)}", "format": "pdf"})
    key = f"key-{jid[-12:]}" if rnd.random() < 0.1 else None
    if status in ("pending", "scheduled", "cancelled"):
        run_at = created if status != "scheduled" else now + rnd.uniform(60, 86400)
        fields = (
            "cancelled" if status == "cancelled" else "pending",
            None,
            None,
            0,
            _iso(run_at),
            None,
            _iso(created + 5) if status == "cancelled" else None,
        )
        return (
            jid,
            jtype,
            fields[0],
            payload,
            fields[1],
            fields[2],
            fields[3],
            fields[4],
            fields[5],
            fields[6],
            _iso(created),
            _iso(created),
            key,
        )
    begun = created + rnd.expovariate(5.0)
    ended = min(begun + rnd.expovariate(20.0), now - 1)
    error = (
        None
        if status == "completed"
        else "Traceback (most recent call last):\nValueError: bench failure"
    )
    attempts.append((jid, jtype, status, _iso(created), _iso(begun), _iso(ended), error))
    return (
        jid,
        jtype,
        status,
        payload,
        '{"ok": true}' if error is None else None,
        error,
        1,
        _iso(created),
        _iso(begun),
        _iso(ended),
        _iso(created),
        _iso(ended),
        key,
    )


# -- measure --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(client: Any, url: str, runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"bench.web: GET {url} answered {r.status_code}: {r.text[:300]}")
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(0.95 * (runs - 1))], 1),
        "max_ms": round(times[-1], 1),
    }


def measure(path: str, runs: int) -> dict[str, Any]:
    import httpx

    folder = Path(tempfile.mkdtemp(prefix="jobq-bench-web-"))
    cfg = folder / "jobq.toml"
    cfg.write_text(
        f'database = "{os.path.abspath(path)}"\nhandlers = []\n'
        '[types."type1:work"]\nconcurrency = 2\nrate = "100/min"\n'
        '[[schedule]]\nname = "nightly"\ntype = "type0:work"\ncron = "0 3 * * *"\n'
        'timezone = "Europe/Paris"\n'
    )
    port = _free_port()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "web", "--config", str(cfg), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            _wait_up(client, proc)
            some = client.get("/jobs?status=failed").text
            job_id = some.split('href="/jobs/')[1].split('"')[0]
            pages = {
                "overview": "/",
                "overview live update": "/live/overview",
                "jobs (all)": "/jobs",
                "jobs pending (claim order)": "/jobs?status=pending",
                "jobs failed": "/jobs?status=failed",
                "jobs completed, type filter": "/jobs?status=completed&type=type3:work",
                "jobs search text (one window)": "/jobs?q=r12345",
                "jobs search id prefix": f"/jobs?q={job_id[:10]}",
                "job detail": f"/jobs/{job_id}",
                "schedules": "/schedules",
                "types": "/types",
            }
            deep = client.get("/jobs?status=pending").text
            cursor = deep.split("after=")[1].split('"')[0].split("&")[0]
            pages["jobs pending, page 2 (keyset)"] = f"/jobs?status=pending&after={cursor}"
            for name, url in pages.items():
                out[name] = _timed(client, url, runs)
    finally:
        proc.terminate()
        proc.wait(10)
    out.update(_in_process(path, runs))
    return out


def _wait_up(client: Any, proc: subprocess.Popen) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench.web: jobq web exited: {proc.stdout.read().decode()}")
        try:
            client.get("/healthz")
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("bench.web: jobq web did not start in 30 s")


def _in_process(path: str, runs: int) -> dict[str, Any]:
    """``status`` snapshot and one ``top`` poll, timed without HTTP."""
    from shared.runtime.clock import SystemClock
    from shared import SqliteStore
    from supervisor.views.snapshot import collect
    from supervisor.cli.top import TopView

    out = {}
    with SqliteStore(path) as store:
        view = TopView(store, SystemClock(), 1.0)
        for name, fn in (
            ("status snapshot (collect)", lambda: collect(store, time.time())),
            ("top refresh (poll)", view.poll),
        ):
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            out[name] = {
                "median_ms": round(statistics.median(times), 1),
                "p95_ms": round(times[int(0.95 * (runs - 1))], 1),
                "max_ms": round(times[-1], 1),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("db")
    b.add_argument("--jobs", type=int, default=1_000_000)
    m = sub.add_parser("measure")
    m.add_argument("db")
    m.add_argument("--runs", type=int, default=20)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.cmd == "build":
        build(args.db, args.jobs)
        return 0
    res = measure(args.db, args.runs)
    print("| request | median ms | p95 ms | max ms |\n|---|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {r['median_ms']} | {r['p95_ms']} | {r['max_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
