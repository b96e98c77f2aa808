"""Workflows under chaos: ``extract -> N x transform -> load`` graphs while workers
and the supervisor are SIGKILLed at random.

    python -m bench.flowchaos                              # 20 graphs of 1 + 100 + 1 jobs, 8 workers,
                                                           # a kill every ~100 ms, 2 supervisor kills
    python -m bench.flowchaos --graphs 3 --width 18 --database postgresql:///test

Every job runs ``chaos:work`` (tests/fixtures/chaosjobs.py), so :func:`bench.chaos.analyse` is
the oracle of every run (nothing lost, no overlap, no start unexplained by a fault), and on top
of it, per graph: the load completed once, every one of its runs started after every transform
had ended well (the run its result names), and its result holds all N transforms' results; in a
graph whose first transform fails for good (``--failing``), the load ends cancelled, naming it.
Prints one line and exits 0 when all of that holds:

    flowchaos: graphs=20 width=100 jobs=2040 lost=0 overlapping=0 unexplained=0 bad_loads=0 ...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.chaos import Cluster, Report, analyse, inflict, read_log, wait_for
from bench.chaos import write_config
from bench.db import Db


def enqueue_graphs(
    db: Db, graphs: int, width: int, payload: dict[str, Any], failing: int = 0
) -> list[list[str]]:
    """``graphs`` graphs, each one ``enqueue_many`` (one transaction): the extract, ``width``
    transforms after it, the load after them all; their ids, graph by graph. In the first
    ``failing`` graphs the first transform fails for good (one attempt, which raises)."""
    from shared import JobQueue

    child = dict(payload, parents=True)
    doomed = dict(child, plan={"1": "raise"})
    out = []
    with JobQueue(config=db.config()) as q:
        for g in range(graphs):
            items: list[Any] = [("chaos:work", payload)]
            items += [
                ("chaos:work", doomed, {"after": [0], "max_attempts": 1})
                if g < failing and i == 0
                else ("chaos:work", child, {"after": [0]})
                for i in range(width)
            ]
            items.append(("chaos:work", child, {"after": list(range(1, width + 1))}))
            out.append(q.enqueue_many(items))
    return out


def check_loads(
    db: Db, log: list[dict[str, Any]], graphs: list[list[str]], failing: int = 0
) -> list[str]:
    """What is wrong with each graph's load (see the module docstring); in the first ``failing``
    graphs, the load must end cancelled naming the transform that failed."""
    rows = {
        r[0]: (r[1], json.loads(r[2]) if r[2] else None)
        for r in db.query("SELECT id, status, result FROM jobs")
    }
    ends = {
        (e["job"], e["pid"], e["attempt"], e["start"]): e["end"] for e in log if e["ev"] == "end"
    }
    starts: dict[str, list[float]] = defaultdict(list)
    for e in log:
        if e["ev"] == "start":
            starts[e["job"]].append(e["t"])
    problems = []
    errors = (
        dict(db.query("SELECT id, error FROM jobs WHERE status = 'cancelled'")) if failing else {}
    )
    for g, ids in enumerate(graphs):
        transforms, load = ids[1:-1], ids[-1]
        status, result = rows.get(load, (None, None))
        if g < failing:
            if status != "cancelled" or f"parent job {transforms[0]} " not in (
                errors.get(load) or ""
            ):
                problems.append(
                    f"load {load}: {status} ({errors.get(load)!r}), not cancelled naming {transforms[0]}"
                )
            continue
        if status != "completed":
            problems.append(f"load {load}: {status}")
            continue
        done_at = []
        for t in transforms:
            r = rows[t][1] or {}
            done_at.append(
                ends.get((t, r.get("pid"), r.get("attempt"), r.get("start")), float("inf"))
            )
        if min(starts[load], default=0.0) < max(done_at):
            problems.append(f"load {load}: a run started before its last transform ended")
        parents = result.get("parents") or {}
        order = result.get("order", list(parents))
        if order != transforms or any(parents.get(t) != rows[t][1] for t in transforms):
            problems.append(
                f"load {load}: saw {sum(v is not None for v in parents.values())} of "
                f"{len(transforms)} results, or not theirs, or out of order"
            )
    return problems


def soak(
    folder: Path,
    db: Db,
    graphs: int,
    width: int,
    workers: int,
    kill_every: float,
    supervisor_kills: int,
    job_ms: float,
    timeout: float,
    seed: int | None,
    failing: int = 0,
) -> tuple[Report, list[str]]:
    rng = random.Random(seed)
    cfg = write_config(folder, workers, db=db if db.engine != "sqlite" else None)
    log_path, locks = folder / "runs.log", folder / "locks"
    locks.mkdir(exist_ok=True)
    cluster, faults, t0 = Cluster(cfg, folder / "supervisor.log"), [], time.monotonic()
    ids: list[list[str]] = []
    try:
        cluster.start()
        ids = enqueue_graphs(
            db,
            graphs,
            width,
            {"log": str(log_path), "locks": str(locks), "sleep": job_ms / 1000},
            failing,
        )
        jobs = sum(len(g) for g in ids)
        left = inflict(cluster, db, faults, rng, jobs, kill_every, supervisor_kills, timeout)
        code = cluster.stop()
        if code != 0:
            raise RuntimeError(f"the supervisor exited with {code} on SIGTERM")
        wait_for(lambda: not cluster.alive(), 30, "every process gone")
        rep = analyse(
            db,
            log_path,
            [i for g in ids for i in g],
            faults + cluster.fences(),
            _plans(ids, failing),
        )
    except TimeoutError as exc:
        rep = analyse(db, log_path, [i for g in ids for i in g], faults + cluster.fences())
        rep.problems.insert(0, str(exc))
        left = supervisor_kills
    finally:
        alive = cluster.alive()
        cluster.close()
    rep.supervisor_kills = supervisor_kills - left
    rep.kills = rep.worker_kills + rep.supervisor_kills
    rep.seconds = time.monotonic() - t0
    if alive:
        rep.problems.append(f"processes left running: {alive}")
    return rep, check_loads(db, read_log(log_path), ids, failing)


def _plans(graphs: list[list[str]], failing: int) -> dict[str, dict[str, str]]:
    """The planned failures, for the oracle: the first transform of each failing graph."""
    return {ids[1]: {"1": "raise"} for ids in graphs[:failing]}


def run(folder: Path, args: argparse.Namespace) -> tuple[Report, list[str]]:
    params = (
        args.graphs,
        args.width,
        args.workers,
        args.kill_every,
        args.supervisor_kills,
        args.job_ms,
        args.timeout,
        args.seed,
        args.failing,
    )
    if args.database is None:
        return soak(folder, Db.sqlite(str(folder), name="q.db"), *params)
    from bench import pg

    with pg.fresh_schema(args.database, "flowchaos", create=False) as schema:
        db = Db.postgres(str(folder), args.database, schema)
        try:
            return soak(folder, db, *params)
        finally:
            db.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.flowchaos", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--graphs", type=int, default=20)
    p.add_argument("--width", type=int, default=100, help="transforms per graph")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument(
        "--kill-every",
        type=float,
        default=0.1,
        help="seconds between worker kills (jittered ±50%%)",
    )
    p.add_argument("--supervisor-kills", type=int, default=2)
    p.add_argument("--job-ms", type=float, default=2.0, help="how long each job sleeps")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--failing",
        type=int,
        default=0,
        help="graphs whose first transform fails for good "
        "(their load must end cancelled, naming it)",
    )
    p.add_argument(
        "--database", default=None, help="postgresql://... : a fresh schema on this server"
    )
    p.add_argument("--json", default=None, help="also write the full report here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jobq-flowchaos-") as tmp:
        rep, bad = run(Path(tmp), args)
    jobs = args.graphs * (args.width + 2)
    print(
        f"flow{rep.line()[:6]} graphs={args.graphs} width={args.width} {rep.line()[7:]} bad_loads={len(bad)}",
        flush=True,
    )
    for problem in (rep.problems + bad)[:20]:
        print("  " + problem[:500], file=sys.stderr)
    if args.json:
        Path(args.json).write_text(
            json.dumps({**rep.__dict__, "bad_loads": bad, "expected_jobs": jobs}, indent=1)
        )
    ok = (
        rep.lost == 0
        and rep.overlapping == 0
        and rep.unexplained == 0
        and not rep.problems
        and not bad
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
