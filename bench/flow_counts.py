"""What a workflow's job costs on SQLite, in counts the machine's load does not move:
``python -m bench.flow_counts [--batch B] [--jobs N]``.

Each shape of :func:`bench.features.shapes` (independent jobs, fan-in graphs, chains) is written
by ``enqueue_many`` on a fresh file, then claimed and completed in batches of ``B`` as a worker
does (claim B; complete them and claim B more in one transaction) in this one process. Per job:
the statements SQLite ran (the trace callback, which also reports each trigger program a
statement fires, under that statement's text) and its virtual machine instructions (a progress
handler called at every one), for the enqueue and for the claim + completion cycle, with the
cycle's instructions split by statement.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from dataclasses import replace
from typing import Any

from jobq import JobQueue
from shared.model.job import Finish
from shared.settings.config import from_dict

from .features import QUICK, shapes

OWNER = "bench:flow_counts:1"


class Counts:
    """Statements and VM instructions on one connection, by statement (its first 60 characters)."""

    def __init__(self, conn: Any) -> None:
        self.ops, self.statements = 0, 0
        self.by: collections.Counter = collections.Counter()
        self.current, self.mark = "", 0
        conn.set_trace_callback(self.trace)
        conn.set_progress_handler(self.step, 1)

    def step(self) -> int:
        self.ops += 1
        return 0

    def trace(self, sql: str) -> None:
        self.by[self.current] += self.ops - self.mark
        self.statements, self.mark, self.current = self.statements + 1, self.ops, sql[:60]

    def take(self) -> tuple[int, int, collections.Counter]:
        """The counts since the last take, and start again."""
        self.trace("")
        out = (self.statements - 1, self.ops, self.by)
        self.ops, self.statements, self.by, self.mark = 0, 0, collections.Counter(), 0
        return out


def measure(items: list[Any], batch: int) -> dict[str, Any]:
    """One shape on a fresh file: per job, statements and instructions of each phase."""
    with tempfile.TemporaryDirectory(prefix="jobq-flow-counts-") as folder:
        config = from_dict({"database": os.path.join(folder, "q.db")})
        with JobQueue(config=config) as q:
            store = q.store.current()
            counts = Counts(store.conn)
            q.enqueue_many(items)
            enqueued = counts.take()
            jobs, n = store.claim(OWNER, os.getpid(), time.time(), batch), 0
            while jobs:
                n += len(jobs)
                done = [Finish("completed", j.id, j.attempts, None) for j in jobs]
                _, jobs = store.finish_and_claim(done, OWNER, os.getpid(), time.time(), batch)
            cycle = counts.take()
    if n != len(items):
        raise RuntimeError(f"{n} of {len(items)} jobs claimed")
    return {
        "enqueue": {"statements": enqueued[0] / n, "instructions": enqueued[1] / n},
        "cycle": {"statements": cycle[0] / n, "instructions": cycle[1] / n},
        "cycle_by_statement": {k: round(v / n, 1) for k, v in cycle[2].most_common(6)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="jobs per claim (a worker's batch)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs of each shape")
    args = parser.parse_args()
    plan = shapes(replace(QUICK, graph_jobs=args.jobs))
    base = None
    for name, items in plan.items():
        r = measure(items, args.batch)
        total = r["enqueue"]["instructions"] + r["cycle"]["instructions"]
        base = base or total
        print(
            f"{name:12s} per job: enqueue {r['enqueue']['statements']:.2f} statements, "
            f"{r['enqueue']['instructions']:.0f} instructions; claim + complete "
            f"{r['cycle']['statements']:.2f} statements, {r['cycle']['instructions']:.0f} "
            f"instructions; independent / this: {base / total:.3f}"
        )
        for sql, ops in r["cycle_by_statement"].items():
            print(f"    {ops:8.1f}  {' '.join(sql.split())}")


if __name__ == "__main__":
    main()
