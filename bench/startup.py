"""``python -m bench.startup``: the start-up measurements, taken from outside
the way a user sees them (process launch, the jobs' own timestamps, the kernel's process table),
on SQLite and (``--database postgresql://...``, a fresh schema dropped after) PostgreSQL.

- cold:    launch of ``python -m supervisor --workers 8`` with N no-op jobs waiting: to the first
           job's start, to all 8 workers running their first job, to the last completion (end
           to end jobs/s), and the workers' memory (RSS, USS, PSS) once idle. ``--rounds`` runs
           of each checkout, alternating (``--base DIR``: another checkout, e.g. ``main``'s, in
           the same sitting), medians reported.
- cpu:     CPU seconds of the supervisor, the template and the workers from launch until each
           worker runs a job (of 3 s), steadier than wall times on a loaded machine; and the
           wall times to the first and to the last of those jobs' starts (8 busy with no race
           of no-op batches for the write lock).
- exec:    the same as cold with ``JOBQ_FORK_SERVER=0`` (every worker a fresh ``python -m worker``).
- huey:    Huey's consumer end to end (``-q`` and its defaults; SQLite only).
- respawn: SIGKILL a busy worker: from the kill (and from its death being logged) to its
           replacement's first job start.
- faults:  2,000 jobs of 5-20 ms on 8 workers at the shipped defaults, fault-free and with a
           random worker SIGKILLed every 100 ms: jobs/s, nothing lost.

Children write their bytecode to a cache of the run's own (``PYTHONPYCACHEPREFIX``), warmed by
one untimed launch, even where ``PYTHONDONTWRITEBYTECODE`` is set: an installed jobq has its
``.pyc`` files, and compiling every module at each launch would be measured instead of jobq.
``--no-pycache`` keeps the environment as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import psutil
import tomli_w

from shared.runtime.clock import parse_iso

from . import huey_runs
from .db import Db, place
from .huey_app import make_huey, read_records
from .procs import REPO, Tree, child_env, python, wait_for

TEMPLATE = "jobq-template"
# The start-up targets of docs/performance.md.
TARGETS = {"first_job_s": 0.2, "all_workers_first_job_s": 0.3, "respawn_after_kill_ms": 50.0}


@dataclass
class Side:
    """One checkout under test, and the environment its processes get."""

    name: str
    tree: str
    pycache: str | None

    def env(self, **extra: str) -> dict[str, str]:
        env = child_env(**extra)
        env["PYTHONPATH"] = os.pathsep.join(
            [self.tree, *env["PYTHONPATH"].split(os.pathsep)[1:]]
        ).rstrip(os.pathsep)
        if self.pycache:
            env["PYTHONDONTWRITEBYTECODE"] = (
                ""  # empty: unset (Tree adds this environment to os.environ)
            )
            env["PYTHONPYCACHEPREFIX"] = self.pycache
        return env


def _config(db: Db, workers: int, log_level: str) -> str:
    """Shipped defaults, except the bench handlers and JSON logs (read back by respawn)."""
    path = os.path.join(db.folder, "jobq.toml")
    where = db.toml() if db.engine == "postgresql" else {"database": db.database}
    with open(path, "wb") as f:
        tomli_w.dump(
            {
                **where,
                "handlers": ["bench.handlers"],
                "log_level": log_level,
                "log_format": "json",
                "supervisor": {"workers": workers},
            },
            f,
        )
    return path


_FILL = """import json, sys
from shared.producer.api import JobQueue
from shared.settings.config import Config, PostgresConfig, SqliteConfig
database, schema, items = json.load(sys.stdin)
cfg = (Config(database=database, sqlite=SqliteConfig(synchronous="off")) if schema is None
       else Config(database=database, postgres=PostgresConfig(schema=schema)))
with JobQueue(database, config=cfg) as q:
    for k in range(0, len(items), 1000):
        q.enqueue_many([tuple(i) for i in items[k:k + 1000]])
"""


def _fill(db: Db, side: Side, items: list[tuple[str, Any]]) -> None:
    """Enqueue ``items`` with ``side``'s own code, in a process of its own: the schema (created
    by the first jobq to open it) is then the version that side runs (an older checkout refuses
    a newer schema)."""
    schema = db.schema if db.engine == "postgresql" else None
    subprocess.run(
        [python(), "-c", _FILL],
        input=json.dumps([db.database, schema, items]),
        text=True,
        check=True,
        cwd=side.tree,
        env={**os.environ, **side.env()},
        timeout=600,
    )


def _launch(
    db: Db, side: Side, workers: int, fork_server: bool, log_level: str = "warning"
) -> Tree:
    cfg = _config(db, workers, log_level)
    return Tree(
        [python(), "-m", "supervisor", "run", "--config", cfg, "--workers", str(workers)],
        os.path.join(db.folder, "supervisor.log"),
        stop_timeout=30,
        cwd=side.tree,
        env=side.env(JOBQ_FORK_SERVER="1" if fork_server else "0"),
    )


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
    """The workers' total RSS, USS and PSS in MiB."""
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


LEFT = (
    "SELECT (SELECT count(*) FROM jobs WHERE status = 'pending') "
    "+ (SELECT count(*) FROM jobs WHERE status = 'running')"
)
# SQLite: is any job left? On the claim's and the running jobs' partial indexes, named: with
# the statistics jobq's upkeep gathers, the planner counted the pending jobs (and looked for
# one) by a scan of the whole table, ~4 ms of CPU per poll at 20,000 jobs, every 10 ms, on
# the cores the run is measured on.
ANY_LEFT_SQLITE = (
    "SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_claim WHERE status = 'pending') "
    "OR EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_running WHERE status = 'running')"
)


@contextlib.contextmanager
def drained(db: Db) -> Iterator[Callable[[], bool]]:
    """A poll of "no job is left", as cheap as the engine allows: on SQLite one read of a
    partial index each (:data:`ANY_LEFT_SQLITE`) on one connection kept for the polls (not a
    connection per poll); on PostgreSQL :data:`LEFT` through ``db.query`` (its connection is
    kept). The poll runs beside the processes measured, on the same cores."""
    if db.engine != "sqlite":
        yield lambda: db.query(LEFT)[0][0] == 0
        return
    conn, query = None, ANY_LEFT_SQLITE

    def poll() -> bool:
        nonlocal conn, query
        try:
            conn = conn or sqlite3.connect(db.database, timeout=5.0, isolation_level=None)
            return conn.execute(query).fetchone()[0] == 0
        except sqlite3.OperationalError as exc:
            if "no such index" in str(exc):  # a checkout whose schema names them otherwise
                query = LEFT
            elif "no such table" not in str(exc):  # (not there yet: not drained)
                raise
            return False

    try:
        yield poll
    finally:
        if conn is not None:
            conn.close()


def cold(db: Db, side: Side, workers: int, n: int, fork_server: bool) -> dict[str, Any]:
    _fill(db, side, [("bench:noop", None)] * n)
    t0 = time.time()
    tree = _launch(db, side, workers, fork_server)
    try:
        # Polled as Huey's side is: whether any job is left, on the partial indexes (a count or a
        # scan of every row took ~24% of a core from the run measured).
        with drained(db) as done:
            wait_for(done, 120 + n / 500, "the burn-down", interval=0.01)
        firsts = sorted(
            parse_iso(t)
            for (t,) in db.query("SELECT min(started_at) FROM job_attempts GROUP BY owner")
        )
        last = parse_iso(db.query("SELECT max(completed_at) FROM jobs")[0][0])
        wait_for(lambda: len(_workers(tree)) >= workers, 30, "workers")
        mem = memory(tree)
    finally:
        tree.close()
    return {
        "fork_server": fork_server,
        "jobs": n,
        "workers": workers,
        "first_job_s": round(firsts[0] - t0, 3),
        "all_workers_first_job_s": round(firsts[workers - 1] - t0, 3)
        if len(firsts) >= workers
        else None,
        "workers_that_ran": len(firsts),
        "end_to_end_s": round(last - t0, 3),
        "end_to_end_jobs_s": round(n / (last - t0)),
        "memory_idle": mem,
    }


def cpu(db: Db, side: Side, workers: int) -> dict[str, Any]:
    """CPU seconds the supervisor, the template and the workers spent from launch until each
    worker runs a job (of 3 s): the start-up's cost, which a busy machine's load stretches in
    wall time but hardly changes."""
    _fill(db, side, [("bench:sleep", {"ms": 3000})] * workers)
    t0 = time.time()
    tree = _launch(db, side, workers, True)
    try:
        wait_for(
            lambda: db.query("SELECT count(*) FROM jobs WHERE status = 'running'")[0][0] >= workers,
            60,
            f"{workers} jobs running",
            interval=0.005,
        )
        spent = tree.cpu_seconds()
        template = [p.pid for p in tree.members() if _name(p) == TEMPLATE]
        starts = sorted(parse_iso(t) for (t,) in db.query("SELECT started_at FROM jobs"))
    finally:
        tree.close()
    sup = spent.pop(tree.proc.pid, 0.0)
    tpl = sum(spent.pop(pid, 0.0) for pid in template)
    return {
        "total_s": round(sup + tpl + sum(spent.values()), 3),
        "supervisor_s": round(sup, 3),
        "template_s": round(tpl, 3),
        "workers_s": round(sum(spent.values()), 3),
        "first_job_s": round(starts[0] - t0, 3),
        "all_running_s": round(starts[-1] - t0, 3),
    }


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


def huey_cold(folder: str, fsync: str, workers: int, n: int, quiet: bool) -> dict[str, Any]:
    db, out = huey_runs.paths(folder)
    filler, task = make_huey(db, "off")
    for k in range(n):
        task(k)
    filler.storage.close()
    huey, _ = make_huey(db, fsync)
    t0 = time.time()
    argv = [
        python(),
        "-m",
        "bench.huey_consumer",
        "--db",
        db,
        "--fsync",
        fsync,
        "--out",
        out,
        "-w",
        str(workers),
        *(["-q"] if quiet else []),
    ]
    with Tree(
        argv, os.path.join(folder, "consumer.log"), stop_signal=signal.SIGINT, stop_timeout=30
    ) as tree:
        with huey_left(db) as left:  # (as jobq's side: whether any task is left, one read)
            wait_for(lambda: not left(), 120 + n / 100, "the Huey burn-down", interval=0.01)
        time.sleep(0.2)  # the last tasks finish after they leave the queue
        tree.close()
    huey.storage.close()
    records = read_records(out)
    first = min(a for a, _ in records.values())
    last = max(b for _, b in records.values())
    return {
        "fsync": fsync,
        "quiet": quiet,
        "jobs": len(records),
        "first_job_s": round(first - t0, 3),
        "end_to_end_s": round(last - t0, 3),
        "end_to_end_jobs_s": round(len(records) / (last - t0)),
    }


@contextlib.contextmanager
def huey_left(path: str) -> Iterator[Callable[[], bool]]:
    """Is any task left in Huey's SQLite queue ``path``? One read of its first row (Huey's own
    ``pending_count()`` counts them all), on one connection kept for the polls."""
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    try:
        yield lambda: conn.execute("SELECT EXISTS (SELECT 1 FROM task)").fetchone()[0] == 1
    finally:
        conn.close()


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


def respawn(db: Db, side: Side, kills: int, jobs: int) -> dict[str, Any]:
    """One worker on a deep queue of 2 ms jobs; SIGKILL it ``kills`` times."""
    _fill(db, side, [("bench:sleep", {"ms": 2})] * jobs)
    tree = _launch(db, side, 1, True, log_level="info")
    after_log, after_kill = [], []
    try:
        for _ in range(kills):
            victim = wait_for(lambda: _workers(tree), 30, "a worker")[0].pid
            wait_for(lambda: _first_start(db, victim), 30, "its first job")
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            new = wait_for(
                lambda: [p.pid for p in _workers(tree) if p.pid != victim], 30, "a replacement"
            )[0]
            started = wait_for(lambda: _first_start(db, new), 30, "the replacement's first job")
            logged = wait_for(
                lambda: [e for e in _log_events(db.folder, "worker.exited") if e["pid"] == victim],
                30,
                "worker.exited",
            )
            after_log.append(started - parse_iso(logged[0]["ts"]))
            after_kill.append(started - t_kill)
    except TimeoutError as exc:
        raise TimeoutError(
            f"{side.name}: {exc}; workers {[p.pid for p in _workers(tree)]}; the supervisor's "
            f"log ends:\n{tree.output()[-3000:]}"
        ) from None
    finally:
        tree.close()
    return {
        "kills": kills,
        "after_exit_logged_ms": _summary(after_log),
        "after_kill_ms": _summary(after_kill),
    }


def _first_start(db: Db, pid: int) -> float | None:
    like = f"%:{int(pid)}:%"
    for table in ("job_attempts", "jobs"):
        rows = db.query(f"SELECT min(started_at) FROM {table} WHERE owner LIKE ?", (like,))
        if rows and rows[0][0]:
            return parse_iso(rows[0][0])
    return None


def _summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(x * 1000 for x in xs)
    return {"median": round(xs[len(xs) // 2], 1), "max": round(xs[-1], 1), "min": round(xs[0], 1)}


def faults(
    db: Db, side: Side, workers: int, n: int, kill_every: float | None, seed: int = 16
) -> dict[str, Any]:
    rng = random.Random(seed)
    _fill(db, side, [("bench:sleep", {"ms": rng.uniform(5, 20)}) for _ in range(n)])
    t0 = time.time()
    tree = _launch(db, side, workers, True)
    kills = 0
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = db.query("SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed')")[0][
                0
            ]
            if done >= n:
                break
            time.sleep(0.05 if kill_every is None else kill_every)
            live = _workers(tree) if kill_every is not None else []
            if live:
                try:
                    os.kill(rng.choice(live).pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
        last = parse_iso(db.query("SELECT max(completed_at) FROM jobs")[0][0])
        states = dict(db.query("SELECT status, count(*) FROM jobs GROUP BY status"))
    finally:
        tree.close()
    return {
        "kill_every_s": kill_every,
        "kills": kills,
        "jobs": n,
        "states": states,
        "elapsed_s": round(last - t0, 2),
        "jobs_s": round(states.get("completed", 0) / (last - t0), 1),
    }


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    xs = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(xs), 3) if xs else None


def engine_runs(
    args: argparse.Namespace, url: str | None, sides: list[Side], sub: Any
) -> dict[str, Any]:
    """Every measurement asked for on one engine, each side's cold runs alternating."""
    only = set(args.only.split(","))
    out: dict[str, Any] = {s.name: {} for s in sides}

    def run(fn: Any, side: Side, *a: Any) -> Any:
        with place(sub(fn.__name__), url, "startup") as db:
            return fn(db, side, *a)

    for side in sides:  # untimed: fills the bytecode cache
        run(cold, side, args.workers, 200, True)
    if "cold" in only:
        for k in range(args.rounds):
            for side in sides if k % 2 == 0 else sides[::-1]:
                out[side.name].setdefault("cold_runs", []).append(
                    run(cold, side, args.workers, args.jobs, True)
                )
        for side in sides:
            runs = out[side.name]["cold_runs"]
            out[side.name]["cold"] = {
                key: _median(runs, key)
                for key in (
                    "first_job_s",
                    "all_workers_first_job_s",
                    "end_to_end_s",
                    "end_to_end_jobs_s",
                )
            }
    if "cpu" in only:
        for k in range(args.rounds):
            for side in sides if k % 2 == 0 else sides[::-1]:
                out[side.name].setdefault("cpu_runs", []).append(run(cpu, side, args.workers))
        for side in sides:
            out[side.name]["cpu"] = {
                key: _median(out[side.name]["cpu_runs"], key)
                for key in (
                    "total_s",
                    "supervisor_s",
                    "template_s",
                    "workers_s",
                    "first_job_s",
                    "all_running_s",
                )
            }
    for side in sides:
        if "exec" in only:
            out[side.name]["cold_exec"] = run(cold, side, args.workers, args.jobs, False)
        if "respawn" in only:
            out[side.name]["respawn"] = run(respawn, side, args.kills, args.respawn_jobs)
        if "faults" in only:
            out[side.name]["faults_none"] = run(faults, side, args.workers, args.fault_jobs, None)
            out[side.name]["faults_kill"] = run(faults, side, args.workers, args.fault_jobs, 0.1)
    if "huey" in only and url is None and huey_runs.available():
        out["huey_quiet"] = huey_cold(sub("huey"), "off", args.workers, args.jobs, True)
        out["huey_default"] = huey_cold(sub("huey"), "default", args.workers, args.jobs, False)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.startup", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="cold runs of each checkout (alternating)")
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--respawn-jobs", type=int, default=100_000)
    p.add_argument("--fault-jobs", type=int, default=2000)
    p.add_argument("--only", default="cold,cpu,exec,huey,respawn,faults")
    p.add_argument(
        "--database", default=None, help="postgresql://... : measure PostgreSQL too (fresh schemas)"
    )
    p.add_argument(
        "--engines",
        default=None,
        help="sqlite,postgresql (default: sqlite, and postgresql if --database is given)",
    )
    p.add_argument("--base", default=None, help="another checkout measured in the same sitting")
    p.add_argument(
        "--no-pycache", action="store_true", help="children keep PYTHONDONTWRITEBYTECODE"
    )
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    engines = (args.engines or ("sqlite,postgresql" if args.database else "sqlite")).split(",")
    if "postgresql" in engines and not args.database:
        p.error("--engines postgresql needs --database postgresql://...")
    root = tempfile.mkdtemp(prefix="jobq-bench-startup-")
    cache = None if args.no_pycache else os.path.join(root, "pycache")
    sides = [Side("this", REPO, cache and cache + "-this")]
    if args.base:
        sides.append(Side("base", os.path.abspath(args.base), cache and cache + "-base"))
    out: dict[str, Any] = {
        "loadavg_start": os.getloadavg(),
        "trees": {s.name: s.tree for s in sides},
        "bytecode_cache": cache is not None,
    }

    def sub(name: str) -> str:
        return tempfile.mkdtemp(prefix=name + "-", dir=root)

    try:
        for engine in engines:
            out[engine] = engine_runs(
                args, args.database if engine == "postgresql" else None, sides, sub
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["loadavg_end"] = os.getloadavg()
    out["verdicts"] = {e: verdicts(out[e], [s.name for s in sides]) for e in engines}
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


def verdicts(r: dict[str, Any], sides: list[str]) -> dict[str, Any]:
    """The start-up targets per checkout (first job <= 0.2 s, 8 busy <= 0.3 s, respawn <= 50 ms
    after the kill), and the template's ratios, each with the figure it was judged on; with a base
    checkout, this one's figures over the base's."""
    v: dict[str, Any] = {}
    for name in sides:
        mine = r.get(name, {})
        c, e, resp = mine.get("cold"), mine.get("cold_exec"), mine.get("respawn")
        figures = {
            **(c or {}),
            **({"respawn_after_kill_ms": resp["after_kill_ms"]["median"]} if resp else {}),
        }
        for key, limit in TARGETS.items():
            if figures.get(key) is not None:
                v[f"{name}.{key}_le_{limit:g}"] = (figures[key], figures[key] <= limit)
        if c and e:
            ratio = 1 - mine["cold_runs"][-1]["memory_idle"]["uss_mb"] / e["memory_idle"]["rss_mb"]
            v[f"{name}.uss_third_below_old_rss"] = (round(ratio, 3), ratio >= 1 / 3)
        for key, need in (("huey_quiet", 2.0), ("huey_default", 8.0)):
            if c and r.get(key):
                ratio = c["end_to_end_jobs_s"] / r[key]["end_to_end_jobs_s"]
                v[f"{name}.end_to_end_vs_{key}_ge_{need:g}x"] = (round(ratio, 2), ratio >= need)
        if mine.get("faults_none") and mine.get("faults_kill"):
            ratio = mine["faults_kill"]["jobs_s"] / mine["faults_none"]["jobs_s"]
            lost = mine["faults_kill"]["states"].get("completed", 0) != mine["faults_kill"]["jobs"]
            v[f"{name}.faults_ge_50pct"] = (round(ratio, 3), ratio >= 0.5 and not lost)
    if "base" in sides:
        for key in (
            "first_job_s",
            "all_workers_first_job_s",
            "respawn_after_kill_ms",
            "cpu_total_s",
        ):
            a, b = _figure(r, "this", key), _figure(r, "base", key)
            if a is not None and b:
                v[f"this_over_base.{key}"] = round(a / b, 3)
    return v


def _figure(r: dict[str, Any], side: str, key: str) -> float | None:
    mine = r.get(side, {})
    if key == "respawn_after_kill_ms":
        return mine["respawn"]["after_kill_ms"]["median"] if mine.get("respawn") else None
    if key == "cpu_total_s":
        return (mine.get("cpu") or {}).get("total_s")
    return (mine.get("cold") or {}).get(key)


if __name__ == "__main__":
    sys.exit(main())
