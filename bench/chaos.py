"""Chaos soak: many short jobs while workers and the supervisor are SIGKILLed at random.

    python -m bench.chaos                      # 10,000 jobs, 8 workers, a kill every ~100 ms,
                                               # the supervisor SIGKILLed (and restarted) twice
    python -m bench.chaos --jobs 500 --json out.json
    python -m bench.chaos --database postgresql:///test   # the same on PostgreSQL, in a fresh
                                                          # schema dropped at the end
    python -m bench.chaos --async-concurrency 50   # async jobs (chaos:async), 50 at once per worker

Prints one line and exits 0 if nothing was lost and no two runs of a job overlapped:

    chaos: jobs=10000 completed=10000 failed=0 lost=0 overlapping=0 max_runs=3 kills=240 ...

Every job runs ``chaos:work`` (tests/fixtures/chaosjobs.py): it logs its start and end to an
O_APPEND file and holds a per-job ``flock`` while it runs, so a second run of a job whose first
run's process still exists is caught in the act. :func:`analyse` is the oracle, also used by
tests/proofs/test_chaos_property.py:

- lost: a job that is not terminal at the end, is missing, or is ``completed`` without a run
  that ended well with the attempt and pid its result names;
- overlapping: runs of one job whose intervals intersect, or that found its lock taken;
- unexplained: a job started more often than 1 + the runs that failed by plan + the runs a fault
  hit (a run is hit if its process was SIGKILLed or SIGSTOPped after it started, was orphaned by
  a supervisor kill, crashed by plan later in the same process (a batch's uncommitted outcomes
  die with it), or fenced itself: a worker that could not renew its lease in time, as when its
  database call waits behind a run queue of 15 on 2 cores that the kills' respawns make on a
  slow machine, logs ``worker.fenced`` and exits, and its job runs again; the report's line
  counts the fences, so that a soak that fences often shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import psutil

from bench.db import Db
from bench.procs import wait_for

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Fault:
    """Something done to a process: 'kill' (SIGKILL), 'stop' (SIGSTOP), 'orphan' (its
    supervisor was SIGKILLed), or that it did to itself: 'fence' (``worker.fenced``), at
    wall-clock time ``t``."""

    pid: int
    t: float
    kind: str


@dataclass
class Report:
    jobs: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    overlapping: int = 0
    max_runs: int = 0
    kills: int = 0
    worker_kills: int = 0
    supervisor_kills: int = 0
    stops: int = 0
    fences: int = 0
    runs: int = 0
    unexplained: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"chaos: jobs={self.jobs} completed={self.completed} failed={self.failed} lost={self.lost} "
            f"overlapping={self.overlapping} max_runs={self.max_runs} kills={self.kills} "
            f"(workers={self.worker_kills} supervisor={self.supervisor_kills} stops={self.stops}) fences={self.fences} "
            f"runs={self.runs} unexplained={self.unexplained} seconds={self.seconds:.1f}"
        )


# -- the oracle ---------------------------------------------------------------------------------------


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def reader(db: "Path | Db") -> Db:
    """The engine-neutral reader of a run's jobs: a SQLite file's path, or a :class:`Db`."""
    if isinstance(db, Db):
        return db
    return Db.sqlite(str(Path(db).parent), name=Path(db).name)


def analyse(
    db_path: "Path | Db",
    log_path: Path,
    job_ids: Iterable[str],
    faults: Iterable[Fault],
    plans: dict[str, dict[str, str]] | None = None,
) -> Report:
    """Check the end state of a chaos run (see the module docstring); ``plans``: per job, the
    attempts planned to fail ("raise", "exit", "kill"). ``db_path``: the SQLite file, or a
    :class:`bench.db.Db` (either engine)."""
    plans = plans or {}
    job_ids = list(job_ids)
    faults = list(faults)
    rep = Report(jobs=len(job_ids))
    cols = ("id", "status", "attempts", "result", "error")
    rows = {
        r[0]: dict(zip(cols, r))
        for r in reader(db_path).query(f"SELECT {', '.join(cols)} FROM jobs")
    }
    events = read_log(log_path)
    starts: dict[str, list[dict]] = defaultdict(list)
    ends: dict[tuple, dict] = {}
    for e in events:
        if e["ev"] == "start":
            starts[e["job"]].append(e)
        elif e["ev"] == "end":
            ends[(e["job"], e["pid"], e["attempt"], e["start"])] = e
    # when each process was hit: driver faults, and planned crashes (exit/kill) inside it
    hit_at: dict[int, float] = {}
    for f in faults:
        t = float("inf") if f.kind == "orphan" else f.t
        hit_at[f.pid] = max(hit_at.get(f.pid, -1.0), t)
    for job, runs in starts.items():
        for r in runs:
            if (plans.get(job) or {}).get(str(r["attempt"])) in ("exit", "kill"):
                hit_at[r["pid"]] = max(hit_at.get(r["pid"], -1.0), r["t"])
    rep.worker_kills = sum(1 for f in faults if f.kind == "kill")
    rep.stops = sum(1 for f in faults if f.kind == "stop")
    rep.fences = sum(1 for f in faults if f.kind == "fence")
    for job in job_ids:
        row = rows.get(job)
        runs = sorted(starts.get(job, []), key=lambda e: e["t"])
        rep.runs += len(runs)
        rep.max_runs = max(rep.max_runs, len(runs))
        if row is None or row["status"] not in TERMINAL:
            rep.lost += 1
            rep.problems.append(
                f"job {job}: {'missing' if row is None else row['status']} at the end"
            )
            continue
        if row["status"] == "completed":
            rep.completed += 1
            res = json.loads(row["result"]) if row["result"] else {}
            good = [ends.get((job, res.get("pid"), res.get("attempt"), res.get("start")))]
            if not good[0] or good[0]["outcome"] != "ok" or res.get("attempt") != row["attempts"]:
                rep.lost += 1
                rep.problems.append(
                    f"job {job}: completed, but no run ended well as attempt "
                    f"{row['attempts']} (result {row['result']!r})"
                )
        elif row["status"] == "failed":
            rep.failed += 1
        # overlap: the lock said so, or two finished runs' intervals intersect
        for r in runs:
            if r.get("overlap"):
                rep.overlapping += 1
                rep.problems.append(
                    f"job {job}: run of pid {r['pid']} attempt {r['attempt']} found the "
                    f"job's lock taken (another run's process still existed)"
                )
        finished = sorted(
            (
                ends[(job, r["pid"], r["attempt"], r["t"])]
                for r in runs
                if (job, r["pid"], r["attempt"], r["t"]) in ends
            ),
            key=lambda e: e["start"],
        )
        for a, b in zip(finished, finished[1:]):
            if b["start"] < a["end"]:
                rep.overlapping += 1
                rep.problems.append(f"job {job}: runs {a} and {b} overlap")
        # starts bounded by 1 + explained runs
        plan = plans.get(job) or {}
        explained = 0
        for r in runs:
            if plan.get(str(r["attempt"])) in ("raise", "exit", "kill"):
                explained += 1
            elif hit_at.get(r["pid"], -1.0) >= r["t"]:
                explained += 1
        if len(runs) > 1 + explained:
            rep.unexplained += 1
            rep.problems.append(
                f"job {job}: started {len(runs)} times, only {explained} runs failed by "
                f"plan or were hit by a fault: {runs}"
            )
    return rep


# -- running it -------------------------------------------------------------------------------------------

ASYNC_TYPE = "chaos:async"  # tests/fixtures/chaosjobs.py's async handler


def write_config(
    folder: Path,
    workers: int,
    *,
    lease: float = 2.0,
    log_level: str = "warning",
    max_attempts: int = 100,
    shutdown_timeout: float = 2.0,
    db: Db | None = None,
    async_concurrency: int = 0,
) -> Path:
    """The chaos supervisor's config; ``db``: where the jobs are (default: ``q.db`` in ``folder``);
    ``async_concurrency``: so many ``chaos:async`` jobs at once per worker (0: none)."""
    import tomli_w

    data = {
        **(db.toml() if db is not None else {"database": "q.db"}),
        "handlers": ["chaosjobs"],
        "log_level": log_level,
        "log_format": "json",
        "supervisor": {
            "workers": workers,
            "shutdown_timeout": shutdown_timeout,
            "kill_grace": 0.3,
            "maintenance_interval": 0.1,
            "config_poll_interval": 0,
        },  # shipped restart back-off
        "worker": {
            "poll_interval": 0.05,
            "heartbeat_interval": min(0.2, lease / 5),
            "lease_timeout": lease,
        },
        "retry": {"max_attempts": max_attempts, "backoff_base": 0, "backoff_max": 0},
    }
    if async_concurrency:
        data["types"] = {ASYNC_TYPE: {"async_concurrency": async_concurrency}}
    path = folder / "jobq.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(FIXTURES), env.get("PYTHONPATH", "")) if p
    )
    return env


class Cluster:
    """A supervisor process (restartable after a SIGKILL) and the record of every pid seen."""

    def __init__(self, cfg: Path, log: Path) -> None:
        self.cfg = cfg
        self.log_path = log
        self.log = open(log, "ab")
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()
        self.stopped: set[int] = set()

    def start(self, timeout: float = 60) -> None:
        """Start a supervisor; return once it has booted (signal handlers installed) and spawned
        its workers: it writes "ready" to the ``--ready-fd`` pipe then."""
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "supervisor",
                    "run",
                    "--config",
                    str(self.cfg),
                    "--ready-fd",
                    str(w),
                ],
                pass_fds=(w,),
                stdout=self.log,
                stderr=subprocess.STDOUT,
                env=child_env(),
                cwd=str(self.cfg.parent),
            )
            self.seen.add(self.proc.pid)
            os.close(w)
            w = -1
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready or b"ready" not in os.read(r, 64):
                raise TimeoutError(
                    f"the supervisor was not ready within {timeout:g} s (exit code "
                    f"{self.proc.poll()})"
                )
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    def workers(self) -> list[int]:
        try:
            kids = psutil.Process(self.proc.pid).children()
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            try:
                if (
                    k.status() != psutil.STATUS_ZOMBIE and k.name() != "jobq-template"
                ):  # workers only
                    out.append(k.pid)
            except psutil.NoSuchProcess:
                pass
        self.seen.update(out)
        return out

    def fences(self) -> list[Fault]:
        """The workers that fenced themselves (``worker.fenced`` in the supervisors' JSON log;
        a line that is not JSON, such as a crash's traceback, is not one)."""
        from shared.runtime.clock import parse_iso

        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"worker.fenced"' in line:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                out.append(Fault(int(e["pid"]), parse_iso(e["ts"]), "fence"))
        return out

    def kill_supervisor(self) -> list[int]:
        """SIGKILL the supervisor; returns its workers (now orphans)."""
        orphans = self.workers()
        self.proc.kill()
        self.proc.wait(30)
        return orphans

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(30)

    def alive(self) -> list[int]:
        """Processes seen during the run that still exist (zombies do not count)."""
        out = []
        for pid in sorted(self.seen):
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.NoSuchProcess:
                pass
        return out

    def close(self) -> None:
        """Leave nothing behind, whatever happened."""
        for pid in self.stopped:
            _signal(pid, signal.SIGCONT)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        for pid in self.alive():
            _signal(pid, signal.SIGKILL)
        self.log.close()


def _signal(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False if it is already gone (exited and reaped). A victim picked
    from a snapshot may exit before it is signalled (a handler's planned exit, the supervisor's
    kill past the lease, an orphan leaving): no error, and no fault to record."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def count_terminal(db_path: "Path | Db") -> int:
    return reader(db_path).query(
        "SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed', 'cancelled')"
    )[0][0]


def booted(db: "Path | Db", pids: list[int]) -> list[int]:
    """Those of ``pids`` that are workers which have booted: opened the database and registered."""
    rows = reader(db).query("SELECT pid FROM processes WHERE kind = 'worker'")
    known = {r[0] for r in rows}
    return [p for p in pids if p in known]


def inflict(
    cluster: "Cluster",
    db: "Path | Db",
    faults: list[Fault],
    rng: random.Random,
    jobs: int,
    kill_every: float,
    supervisor_kills: int,
    timeout: float,
    grace: float = 60.0,
) -> int:
    """Kill a random booted worker every ~``kill_every`` s, and the supervisor (restarted at once)
    at even fractions of the jobs ended, until every job has ended (or ``timeout``; then wait up
    to ``grace`` s more for the jobs to end); the supervisor kills left.

    Two rules keep the kills from starving the run they test on a slow machine (seen under load:
    153 kills, 61 runs, no job ended for 150 s, so the supervisor kills, due at a third of the
    jobs ended, never came):

    - the worker kills stay at most one per worker ahead of the jobs ended: the run makes
      progress whatever a kill costs (a respawn, a re-run), and a fast run is not held back;
    - only a worker that has booted (written its process row) is a victim: killing boots again
      and again is a crash loop, which the supervisor rightly answers with its restart back-off
      (up to 30 s a slot; tests/unit/supervisor/test_arbiter_parts.py covers it), and the soak
      would only wait on it."""
    thresholds = [jobs * (k + 1) / (supervisor_kills + 1) for k in range(supervisor_kills)]
    deadline = time.monotonic() + timeout
    done = kills = 0
    while done < jobs and time.monotonic() < deadline:
        time.sleep(kill_every * rng.uniform(0.5, 1.5))
        done = count_terminal(db)
        if thresholds and done >= thresholds[0]:
            thresholds.pop(0)
            now = time.time()
            faults += [Fault(pid, now, "orphan") for pid in cluster.kill_supervisor()]
            cluster.start()
            continue
        live = booted(db, cluster.workers())
        if live and kills < done + len(live):
            victim = rng.choice(live)
            if _signal(victim, signal.SIGKILL):
                faults.append(Fault(victim, time.time(), "kill"))
                kills += 1
    wait_for(
        lambda: count_terminal(db) == jobs,
        max(deadline - time.monotonic(), 0) + grace,
        "every job terminal",
    )
    return len(thresholds)


def soak(
    folder: Path,
    jobs: int,
    workers: int,
    kill_every: float,
    supervisor_kills: int,
    job_ms: float,
    timeout: float,
    seed: int | None,
    url: str | None = None,
    async_concurrency: int = 0,
) -> Report:
    """The soak on ``q.db`` in ``folder``, or (``url``) in a fresh schema on that PostgreSQL
    server, dropped at the end; ``async_concurrency``: async jobs (``chaos:async``), so many at
    once per worker."""
    if url is None:
        return _soak(
            folder,
            Db.sqlite(str(folder), name="q.db"),
            jobs,
            workers,
            kill_every,
            supervisor_kills,
            job_ms,
            timeout,
            seed,
            async_concurrency,
        )
    from bench import pg

    with pg.fresh_schema(url, "chaos", create=False) as schema:
        db = Db.postgres(str(folder), url, schema)
        try:
            return _soak(
                folder,
                db,
                jobs,
                workers,
                kill_every,
                supervisor_kills,
                job_ms,
                timeout,
                seed,
                async_concurrency,
            )
        finally:
            db.close()


def _soak(
    folder: Path,
    db: Db,
    jobs: int,
    workers: int,
    kill_every: float,
    supervisor_kills: int,
    job_ms: float,
    timeout: float,
    seed: int | None,
    async_concurrency: int = 0,
) -> Report:
    from shared import JobQueue

    rng = random.Random(seed)
    cfg = write_config(
        folder,
        workers,
        db=db if db.engine != "sqlite" else None,
        async_concurrency=async_concurrency,
    )
    job_type = ASYNC_TYPE if async_concurrency else "chaos:work"
    db_path, log_path, locks = db, folder / "runs.log", folder / "locks"
    locks.mkdir(exist_ok=True)
    cluster = Cluster(cfg, folder / "supervisor.log")
    faults: list[Fault] = []
    t0 = time.monotonic()
    try:
        cluster.start()
        payload = {"log": str(log_path), "locks": str(locks), "sleep": job_ms / 1000}
        ids: list[str] = []
        with JobQueue(config=db.config()) as q:
            for i in range(0, jobs, 1000):
                ids += q.enqueue_many([(job_type, payload)] * min(1000, jobs - i))
        spared = inflict(cluster, db_path, faults, rng, jobs, kill_every, supervisor_kills, timeout)
        code = cluster.stop()
        if code != 0:
            raise RuntimeError(f"the supervisor exited with {code} on SIGTERM")
        wait_for(lambda: not cluster.alive(), 30, "every process gone")
        rep = analyse(db_path, log_path, ids, faults + cluster.fences())
    except TimeoutError as exc:
        rep = analyse(
            db_path, log_path, ids if "ids" in locals() else [], faults + cluster.fences()
        )
        rep.problems.insert(0, str(exc))
    finally:
        left = cluster.alive()
        cluster.close()
    rep.supervisor_kills = supervisor_kills - spared if "spared" in locals() else 0
    rep.kills = rep.worker_kills + rep.supervisor_kills
    rep.seconds = time.monotonic() - t0
    if left:
        rep.problems.append(f"processes left running: {left}")
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument(
        "--kill-every",
        type=float,
        default=0.1,
        help="seconds between worker kills (jittered ±50%%)",
    )
    p.add_argument("--supervisor-kills", type=int, default=2)
    p.add_argument("--job-ms", type=float, default=2.0, help="how long each job sleeps")
    p.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--dir", default=None, help="work folder (default: a temporary one, removed after)"
    )
    p.add_argument("--json", default=None, help="also write the full report (with problems) here")
    p.add_argument(
        "--database",
        default=None,
        help="postgresql://... : run on this server, in a fresh schema "
        "(default: a SQLite file in the work folder)",
    )
    p.add_argument(
        "--async-concurrency",
        type=int,
        default=0,
        help="async jobs (chaos:async), this many "
        "at once per worker (default 0: chaos:work, one at a time)",
    )
    args = p.parse_args(argv)
    if args.dir:
        folder = Path(args.dir)
        folder.mkdir(parents=True, exist_ok=True)
        rep = soak(
            folder,
            args.jobs,
            args.workers,
            args.kill_every,
            args.supervisor_kills,
            args.job_ms,
            args.timeout,
            args.seed,
            args.database,
            args.async_concurrency,
        )
    else:
        with tempfile.TemporaryDirectory(prefix="jobq-chaos-") as tmp:
            rep = soak(
                Path(tmp),
                args.jobs,
                args.workers,
                args.kill_every,
                args.supervisor_kills,
                args.job_ms,
                args.timeout,
                args.seed,
                args.database,
                args.async_concurrency,
            )
    print(rep.line(), flush=True)
    for problem in rep.problems[:20]:
        print("  " + problem[:500], file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(rep), indent=1))
    ok = rep.lost == 0 and rep.overlapping == 0 and rep.unexplained == 0 and not rep.problems
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
