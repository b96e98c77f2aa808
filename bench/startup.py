"""``python -m bench.startup``: issue 16's measurements, taken from outside the way a user sees
them (process launch, the jobs' own timestamps, the kernel's process table), with both systems
in the same run so that ratios hold on a noisy machine.

- cold:    launch of ``python -m supervisor --workers 8`` with N no-op jobs waiting: to the first
           job's start, to all 8 workers running their first job, to the last completion (end
           to end jobs/s), and the workers' memory (RSS, USS, PSS) once idle. With the template
           (default) and with ``JOBQ_FORK_SERVER=0`` (every worker a fresh ``python -m worker``:
           the old way) side by side; Huey's consumer end to end (``-q`` and its defaults).
- respawn: SIGKILL a busy worker: from its death being reaped (the supervisor's log) and from
           the kill to its replacement's first job start.
- faults:  2,000 jobs of 5-20 ms on 8 workers at the shipped defaults, fault-free and with a
           random worker SIGKILLed every 100 ms: jobs/s, nothing lost.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from typing import Any

import psutil
import tomli_w

from shared.api import JobQueue
from shared.clock import parse_iso
from shared.config import Config, SqliteConfig

from . import huey_runs
from .huey_app import make_huey, read_records
from .procs import Tree, python, wait_for

TEMPLATE = "jobq-template"


def _config(folder: str, workers: int, log_level: str = "warning") -> str:
    """Shipped defaults, except the bench handlers and JSON logs (read back by respawn)."""
    path = os.path.join(folder, "jobq.toml")
    with open(path, "wb") as f:
        tomli_w.dump({"database": "jobq.db", "handlers": ["bench.handlers"], "log_level": log_level,
                      "log_format": "json", "supervisor": {"workers": workers}}, f)
    return path


def _fill(folder: str, items: list[tuple[str, Any]]) -> None:
    with JobQueue(os.path.join(folder, "jobq.db"), config=Config(sqlite=SqliteConfig(synchronous="off"))) as q:
        for k in range(0, len(items), 1000):
            q.enqueue_many(items[k:k + 1000])


def _query(folder: str, sql: str) -> list[tuple]:
    c = sqlite3.connect(os.path.join(folder, "jobq.db"), timeout=5.0)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def _launch(folder: str, workers: int, fork_server: bool, log_level: str = "warning") -> Tree:
    cfg = _config(folder, workers, log_level)
    old = os.environ.get("JOBQ_FORK_SERVER")
    os.environ["JOBQ_FORK_SERVER"] = "1" if fork_server else "0"
    try:
        return Tree([python(), "-m", "supervisor", "run", "--config", cfg, "--workers", str(workers)],
                    os.path.join(folder, "supervisor.log"), stop_timeout=30)
    finally:
        if old is None:
            os.environ.pop("JOBQ_FORK_SERVER", None)
        else:
            os.environ["JOBQ_FORK_SERVER"] = old


def _workers(tree: Tree) -> list[psutil.Process]:
    out = []
    try:
        kids = psutil.Process(tree.proc.pid).children()
    except psutil.NoSuchProcess:
        return []
    for k in kids:
        try:
            if k.status() != psutil.STATUS_ZOMBIE and k.name() != TEMPLATE:
                out.append(k)
        except psutil.Error:
            pass
    return out


def memory(tree: Tree) -> dict[str, float]:
    """The workers' total RSS, USS and PSS in MiB (and the template's RSS)."""
    tot = {"rss_mb": 0.0, "uss_mb": 0.0, "pss_mb": 0.0, "workers": 0}
    for p in _workers(tree):
        try:
            m = p.memory_full_info()
        except psutil.Error:
            continue
        tot["rss_mb"] += m.rss / 2**20
        tot["uss_mb"] += m.uss / 2**20
        tot["pss_mb"] += m.pss / 2**20
        tot["workers"] += 1
    return {k: round(v, 1) for k, v in tot.items()}


def cold(folder: str, workers: int, n: int, fork_server: bool) -> dict[str, Any]:
    _fill(folder, [("bench:noop", None)] * n)
    t0 = time.time()
    tree = _launch(folder, workers, fork_server)
    try:
        wait_for(lambda: _query(folder, "SELECT count(*) FROM jobs WHERE status = 'completed'")[0][0] >= n,
                 120 + n / 500, "the burn-down", interval=0.01)
        firsts = sorted(parse_iso(t) for (t,) in _query(
            folder, "SELECT min(started_at) FROM job_attempts GROUP BY owner"))
        last = parse_iso(_query(folder, "SELECT max(completed_at) FROM jobs")[0][0])
        wait_for(lambda: len(_workers(tree)) >= workers, 30, "workers")
        mem = memory(tree)
    finally:
        tree.close()
    return {"fork_server": fork_server, "jobs": n, "workers": workers,
            "first_job_s": round(firsts[0] - t0, 3),
            "all_workers_first_job_s": round(firsts[workers - 1] - t0, 3) if len(firsts) >= workers else None,
            "workers_that_ran": len(firsts), "end_to_end_s": round(last - t0, 3),
            "end_to_end_jobs_s": round(n / (last - t0)), "memory_idle": mem}


def huey_cold(folder: str, fsync: str, workers: int, n: int, quiet: bool) -> dict[str, Any]:
    db, out = huey_runs.paths(folder)
    filler, task = make_huey(db, "off")
    for k in range(n):
        task(k)
    filler.storage.close()
    huey, _ = make_huey(db, fsync)
    t0 = time.time()
    argv = [python(), "-m", "bench.huey_consumer", "--db", db, "--fsync", fsync, "--out", out,
            "-w", str(workers), *(["-q"] if quiet else [])]
    with Tree(argv, os.path.join(folder, "consumer.log"), stop_signal=signal.SIGINT, stop_timeout=30) as tree:
        wait_for(lambda: huey.pending_count() == 0, 120 + n / 100, "the Huey burn-down", interval=0.01)
        time.sleep(0.2)  # the last tasks finish after they leave the queue
        tree.close()
    huey.storage.close()
    records = read_records(out)
    first = min(a for a, _ in records.values())
    last = max(b for _, b in records.values())
    return {"fsync": fsync, "quiet": quiet, "jobs": len(records), "first_job_s": round(first - t0, 3),
            "end_to_end_s": round(last - t0, 3), "end_to_end_jobs_s": round(len(records) / (last - t0))}


def _log_events(folder: str, name: str) -> list[dict]:
    out = []
    with open(os.path.join(folder, "supervisor.log"), errors="replace") as f:
        for line in f:
            if line.startswith("{") and f'"{name}"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def respawn(folder: str, kills: int) -> dict[str, Any]:
    """One worker on a deep queue of 2 ms jobs; SIGKILL it ``kills`` times."""
    _fill(folder, [("bench:sleep", {"ms": 2})] * 100_000)
    tree = _launch(folder, 1, True, log_level="info")
    after_reap, after_kill = [], []
    try:
        for _ in range(kills):
            victim = wait_for(lambda: _workers(tree), 30, "a worker")[0].pid
            wait_for(lambda: _first_start(folder, victim), 30, "its first job")
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            new = wait_for(lambda: [p.pid for p in _workers(tree) if p.pid != victim], 30, "a replacement")[0]
            started = wait_for(lambda: _first_start(folder, new), 30, "the replacement's first job")
            reaped = [e for e in _log_events(folder, "worker.exited") if e["pid"] == victim]
            after_reap.append(started - parse_iso(reaped[0]["ts"]))
            after_kill.append(started - t_kill)
    finally:
        tree.close()
    return {"kills": kills, "after_reap_ms": _summary(after_reap), "after_kill_ms": _summary(after_kill)}


def _first_start(folder: str, pid: int) -> float | None:
    rows = _query(folder, f"SELECT min(started_at) FROM job_attempts WHERE owner LIKE '%:{int(pid)}:%'")
    if rows and rows[0][0]:
        return parse_iso(rows[0][0])
    rows = _query(folder, f"SELECT min(started_at) FROM jobs WHERE owner LIKE '%:{int(pid)}:%'")
    return parse_iso(rows[0][0]) if rows and rows[0][0] else None


def _summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(x * 1000 for x in xs)
    return {"median": round(xs[len(xs) // 2], 1), "max": round(xs[-1], 1), "min": round(xs[0], 1)}


def faults(folder: str, workers: int, n: int, kill_every: float | None, seed: int = 16) -> dict[str, Any]:
    rng = random.Random(seed)
    _fill(folder, [("bench:sleep", {"ms": rng.uniform(5, 20)}) for _ in range(n)])
    t0 = time.time()
    tree = _launch(folder, workers, True)
    kills = 0
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = _query(folder, "SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed')")[0][0]
            if done >= n:
                break
            if kill_every is None:
                time.sleep(0.05)
                continue
            time.sleep(kill_every)
            live = _workers(tree)
            if live:
                try:
                    os.kill(rng.choice(live).pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
        last = parse_iso(_query(folder, "SELECT max(completed_at) FROM jobs")[0][0])
        states = dict(_query(folder, "SELECT status, count(*) FROM jobs GROUP BY status"))
    finally:
        tree.close()
    return {"kill_every_s": kill_every, "kills": kills, "jobs": n, "states": states,
            "elapsed_s": round(last - t0, 2), "jobs_s": round(states.get("completed", 0) / (last - t0), 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--fault-jobs", type=int, default=2000)
    p.add_argument("--only", default="cold,huey,respawn,faults")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    only = set(args.only.split(","))
    root = tempfile.mkdtemp(prefix="jobq-bench-startup-")
    out: dict[str, Any] = {"loadavg_start": os.getloadavg()}

    def sub(name: str) -> str:
        return tempfile.mkdtemp(prefix=name + "-", dir=root)
    try:
        if "cold" in only:
            out["cold_template"] = cold(sub("cold"), args.workers, args.jobs, True)
            out["cold_exec"] = cold(sub("cold"), args.workers, args.jobs, False)
        if "huey" in only and huey_runs.available():
            out["huey_quiet"] = huey_cold(sub("huey"), "off", args.workers, args.jobs, True)
            out["huey_default"] = huey_cold(sub("huey"), "default", args.workers, args.jobs, False)
        if "respawn" in only:
            out["respawn"] = respawn(sub("respawn"), args.kills)
        if "faults" in only:
            out["faults_none"] = faults(sub("faults"), args.workers, args.fault_jobs, None)
            out["faults_kill"] = faults(sub("faults"), args.workers, args.fault_jobs, 0.1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["loadavg_end"] = os.getloadavg()
    out["verdicts"] = verdicts(out)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


def verdicts(r: dict[str, Any]) -> dict[str, Any]:
    """Issue 16's targets, each with the figure it was judged on."""
    v: dict[str, Any] = {}
    c, e = r.get("cold_template"), r.get("cold_exec")
    if c:
        v["first_job_le_0.2s"] = (c["first_job_s"], c["first_job_s"] <= 0.2)
        v["all_8_running_le_0.3s"] = (c["all_workers_first_job_s"], (c["all_workers_first_job_s"] or 99) <= 0.3)
    if c and e:
        ratio = 1 - c["memory_idle"]["uss_mb"] / e["memory_idle"]["rss_mb"]
        v["uss_third_below_old_rss"] = (round(ratio, 3), ratio >= 1 / 3)
    for key, need in (("huey_quiet", 2.0), ("huey_default", 8.0)):
        if c and r.get(key):
            ratio = c["end_to_end_jobs_s"] / r[key]["end_to_end_jobs_s"]
            v[f"end_to_end_vs_{key}_ge_{need:g}x"] = (round(ratio, 2), ratio >= need)
    if r.get("respawn"):
        med = r["respawn"]["after_reap_ms"]["median"]
        v["respawn_after_reap_le_50ms"] = (med, med <= 50)
    if r.get("faults_none") and r.get("faults_kill"):
        ratio = r["faults_kill"]["jobs_s"] / r["faults_none"]["jobs_s"]
        lost = r["faults_kill"]["states"].get("completed", 0) != r["faults_kill"]["jobs"]
        v["faults_ge_50pct"] = (round(ratio, 3), ratio >= 0.5 and not lost)
    return v


if __name__ == "__main__":
    sys.exit(main())
