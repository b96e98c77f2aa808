"""Idle supervisors' server transactions per second, with and without the upkeep lead:
``python -m bench.upkeep_lead [--seconds 20] [--before /work/main]``.

On a database of its own (``jobq_bench_lead``, made and dropped here, so that
``pg_stat_database.xact_commit`` counts nobody else's transactions) it starts one idle
supervisor (no workers, default intervals: it takes the upkeep lead), counts the commits over
``--seconds``, then starts a second (a follower) and counts again: the follower's share is the
difference. With ``--before`` (a checkout of jobq without the lead) the same is measured with
that tree's code in the same run, for comparison. Prints JSON: transactions/s per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from .pg import SERVER, admin, commits

NAME = "jobq_bench_lead"
HERE = str(Path(__file__).resolve().parents[1])


def start(tree: str, config: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, "-m", "supervisor", "run", "--config", str(config)]
    return subprocess.Popen(cmd, env=env, cwd=tree, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def rate(seconds: float) -> float:
    """Commits per second in the database over ``seconds`` (the stats are flushed about every
    half second: long windows make that noise small)."""
    first = commits(NAME)
    time.sleep(seconds)
    return (commits(NAME) - first) / seconds


def measure(tree: str, seconds: float, folder: Path) -> dict[str, float]:
    admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    admin(f"CREATE DATABASE {NAME}")
    config = folder / "jobq.toml"
    config.write_text(f'database = "{SERVER}{NAME}"\nhandlers = []\n[supervisor]\nworkers = 0\n')
    procs = []
    try:
        procs.append(start(tree, config, folder / "a.log"))
        time.sleep(5)  # boot, schema, the first rounds
        one = rate(seconds)
        procs.append(start(tree, config, folder / "b.log"))
        time.sleep(5)
        two = rate(seconds)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)
        admin(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    return {"first_alone": round(one, 2), "second": round(two - one, 2), "both": round(two, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--before", default="", help="a jobq checkout without the upkeep lead")
    args = parser.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, tree in (("before", args.before), ("after", HERE)):
            if tree:
                folder = Path(tmp) / label
                folder.mkdir()
                out[label] = measure(tree, args.seconds, folder)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
