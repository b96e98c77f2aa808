"""Named queues under a backlog: ``python -m bench.queues [--database postgresql:///test]``.

A real supervisor with 8 workers: queue ``emails`` has a pool of 2, ``reports`` one of 6. With
``--backlog`` (10,000) slow ``reports`` jobs due (each sleeps ``--report-ms``), ``--emails`` jobs
are enqueued one at a time, 20-100 ms apart, and their enqueue-to-start (the job's
``started_at - created_at``, one host's clock) is summarised. The same run is then repeated
with no report backlog on a fresh database, so the two figures come from one sitting; the
ratio is what to read (the target: p99 under 50 ms with the backlog).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from typing import Any

import tomli_w

from shared.producer.api import JobQueue
from shared.runtime.clock import parse_iso

from .db import Db, Missing
from .procs import Tree, python, wait_for
from .stats import latency_ms


def write_config(db: Db) -> str:
    path = os.path.join(db.folder, "jobq.toml")
    data = {
        **db.toml(),
        "handlers": ["bench.handlers"],
        "log_level": "warning",
        "supervisor": {"workers": 8},
        "queues": {"emails": {"workers": 2}, "reports": {"workers": 6}},
    }
    with open(path, "wb") as f:
        tomli_w.dump(data, f)
    return path


def running(db: Db, queue: str) -> int:
    try:
        return db.query(
            "SELECT count(*) FROM jobs WHERE queue = ? AND status = 'running'", (queue,)
        )[0][0]
    except Missing:
        return 0


def workers_up(db: Db, tree: Tree) -> int:
    if not tree.alive():
        raise RuntimeError(f"supervisor exited with {tree.proc.returncode}: {tree.output()}")
    try:
        return db.query("SELECT count(*) FROM processes WHERE kind = 'worker'")[0][0]
    except Missing:
        return 0


def one_run(
    db: Db, backlog: int, emails: int, report_ms: int, rng: random.Random
) -> dict[str, Any]:
    """Emails' enqueue-to-start behind ``backlog`` report jobs (see the module doc)."""
    cfg = write_config(db)
    with JobQueue(config=db.config()) as q:
        for i in range(0, backlog, 1000):
            q.enqueue_many(
                [
                    ("bench:sleep", {"ms": report_ms}, {"queue": "reports"})
                    for _ in range(min(1000, backlog - i))
                ]
            )
        with Tree(
            [python(), "-m", "supervisor", "run", "--config", cfg],
            os.path.join(db.folder, "supervisor.log"),
            stop_timeout=30,
        ) as tree:
            wait_for(lambda: workers_up(db, tree) >= 8, 60, "8 workers")
            if backlog:
                wait_for(lambda: running(db, "reports") >= 6, 30, "six report workers busy")
            ids = []
            for _ in range(emails):
                time.sleep(rng.uniform(0.02, 0.1))
                ids.append(q.enqueue("bench:stamp", {}, queue="emails"))
            wait_for(
                lambda: all(q.get(i).status == "completed" for i in ids), 30, "every email done"
            )
            lags = []
            for i in ids:
                j = q.get(i)
                lags.append(parse_iso(j.started_at) - parse_iso(j.created_at))
            reports_running = running(db, "reports")
    out = latency_ms(lags, expected=emails)
    out["reports_running_at_end"] = reports_running
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.queues", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--database",
        default=None,
        help="postgresql://... (default: a SQLite file in a temp folder)",
    )
    p.add_argument("--backlog", type=int, default=10_000)
    p.add_argument("--emails", type=int, default=200)
    p.add_argument("--report-ms", type=int, default=500)
    a = p.parse_args(argv)
    rng = random.Random(26)
    results = {}
    for label, backlog in (("behind the backlog", a.backlog), ("no backlog", 0)):
        with tempfile.TemporaryDirectory(prefix="jobq-queues-") as tmp:
            if a.database is None:
                results[label] = one_run(Db.sqlite(tmp), backlog, a.emails, a.report_ms, rng)
                continue
            from bench import pg

            with pg.fresh_schema(a.database, "queues", create=False) as schema:
                db = Db.postgres(tmp, a.database, schema)
                try:
                    results[label] = one_run(db, backlog, a.emails, a.report_ms, rng)
                finally:
                    db.close()
    engine = "postgresql" if a.database else "sqlite"
    for label, r in results.items():
        print(
            f"[{engine}] emails enqueue-to-start, {label}: p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, "
            f"max {r['max']:.1f} ms (n={r['n']}, missing {r['missing']}; reports running at the end: "
            f"{r['reports_running_at_end']})"
        )
    base, loaded = results["no backlog"], results["behind the backlog"]
    print(
        f"[{engine}] ratio behind/no backlog: p50 {loaded['p50'] / base['p50']:.2f}x, "
        f"p99 {loaded['p99'] / base['p99']:.2f}x; load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
