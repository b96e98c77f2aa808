"""Idle hosts' cost on a PostgreSQL server, and a cancel's latency:
``python -m bench.idle_hosts [--hosts 20] [--workers 2] [--seconds 30] [--before TREE]``.

On a database of its own (``jobq_bench_idle``, made and dropped here) it starts ``--hosts``
supervisors of ``--workers`` workers each, default intervals, nothing to do, and counts over
``--seconds``: the statements the server ran for them (``log_statement = all`` on that database
only, read back from the server's log, ``--log``, when this user can read it), by statement, in
all and per host; and ``pg_stat_database.xact_commit`` (each autocommit statement is one, but
autovacuum's visits to the new database count too: at these rates, noise of several a second).
Each host is a supervisor of its own on one machine, so their idle workers share one idle lead
per pool, as one host's would: the idle leads' reads are counted once, not per host. Then
``--cancels`` times, a job that loops until it sees a cancel request runs on one of them and is
cancelled from another session: the time from the cancel's return to the handler's seeing it
(p50, max; ms). With ``--before`` (a checkout of jobq to compare with, e.g. made with ``git
archive``) the same is measured with that tree's code in the same run. Prints JSON.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from .pg import SERVER, admin, commits

NAME = "jobq_bench_idle"
HERE = str(Path(__file__).resolve().parents[1])


def statements(log: str, start: int, seconds: float, hosts: int) -> dict:
    """The statements of the bench's database logged since ``start`` (the log's size then)."""
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    pattern = re.compile(r"@" + NAME + r" LOG:  (?:statement|execute [^:]*): (.*)")
    counted = collections.Counter(m.group(1)[:90] for m in pattern.finditer(text))
    total = sum(counted.values())
    return {
        "per_s": round(total / seconds, 2),
        "per_s_per_host": round(total / seconds / hosts, 3),
        "top": {k: round(n / seconds, 3) for k, n in counted.most_common(12)},
    }


def server_log(given: str) -> str | None:
    """The server's log file to read statements from, if readable."""
    found = [given] if given else sorted(glob.glob("/var/log/postgresql/postgresql-*.log"))
    return next((p for p in found if os.access(p, os.R_OK)), None)


def workers_up(n: int) -> bool:
    try:
        with psycopg.connect(SERVER + NAME, autocommit=True) as c:
            q = "SELECT count(*) FROM jobq.processes WHERE kind = 'worker'"
            return int(c.execute(q).fetchone()[0]) >= n
    except psycopg.Error:
        return False


def wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the hosts did not start in time")
        time.sleep(0.2)


def start(tree: str, config: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "supervisor", "run", "--config", str(config)]
    return subprocess.Popen(cmd, env=env, cwd=tree, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def cancel_latency(tree: str, config: Path, n: int) -> list[float]:
    """Milliseconds from each cancel's return to its handler's seeing it (one host's clock)."""
    code = (
        "import json, sys, time\n"
        "from shared import JobQueue\n"
        "from shared.settings.config import load\n"
        "out = []\n"
        "with JobQueue(config=load(sys.argv[1])) as q:\n"
        "    for _ in range(int(sys.argv[2])):\n"
        "        jid = q.enqueue('bench:until_cancelled', {'s': 60})\n"
        "        while q.get(jid).status != 'running': time.sleep(0.01)\n"
        "        time.sleep(1.0)  # its worker has checked in since it started\n"
        "        q.cancel(jid); t = time.time()\n"
        "        r = q.handle(jid).wait(timeout=90)\n"
        "        out.append((r['seen'] - t) * 1000 if r['seen'] else None)\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
    got = subprocess.run(
        [sys.executable, "-c", code, str(config), str(n)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120 * n,
    )
    if got.returncode:
        raise RuntimeError(got.stderr[-2000:])
    return json.loads(got.stdout)


def measure(tree: str, args: argparse.Namespace, folder: Path) -> dict:
    admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    admin(f"CREATE DATABASE {NAME}")
    log = server_log(args.log)
    if log:
        admin(f"ALTER DATABASE {NAME} SET log_statement = 'all'")  # (this database only)
    config = folder / "jobq.toml"
    config.write_text(
        f'database = "{SERVER}{NAME}"\nhandlers = ["bench.handlers"]\n'
        f'[postgres]\nschema = "jobq"\n[supervisor]\nworkers = {args.workers}\n'
    )
    procs = []
    try:
        for i in range(args.hosts):
            procs.append(start(tree, config, folder / f"host{i}.log"))
        wait(lambda: workers_up(args.hosts * args.workers), 60 + 10 * args.hosts)
        time.sleep(10)  # the boots' first rounds, the lead taken
        first, at = commits(NAME), os.path.getsize(log) if log else 0
        time.sleep(args.seconds)
        rate = (commits(NAME) - first) / args.seconds
        counted = statements(log, at, args.seconds, args.hosts) if log else None
        cancels = cancel_latency(tree, config, args.cancels) if args.cancels else []
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
        admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    seen = [c for c in cancels if c is not None]
    return {
        "idle_statements": counted,
        "idle_xact_per_s": round(rate, 2),
        "idle_xact_per_s_per_host": round(rate / args.hosts, 3),
        "cancel_ms": {
            "p50": round(statistics.median(seen), 1) if seen else None,
            "max": round(max(seen), 1) if seen else None,
            "missed": len(cancels) - len(seen),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--cancels", type=int, default=5)
    parser.add_argument("--before", default="", help="a jobq checkout to compare with")
    parser.add_argument("--log", default="", help="the server's log file (default: Debian's)")
    args = parser.parse_args()
    out = {"hosts": args.hosts, "workers": args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        for label, tree in (("before", args.before), ("after", HERE)):
            if tree:
                folder = Path(tmp) / label
                folder.mkdir()
                out[label] = measure(tree, args, folder)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
