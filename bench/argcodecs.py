"""``python -m bench.argcodecs [--base PATH] [--rounds 5] [-n 20000] [--smoke]``: what carrying
a task's arguments and result by their annotations costs.

- **three plain arguments** (``int``, ``str``, ``float``): per call, the enqueue side (binding and
  encoding: ``task.binder.payload``), the worker side (the task's handler: decoding, the call,
  the result) and both together, and a whole job (``task.enqueue`` into a SQLite file and
  ``drain()`` running it), in microseconds. With ``--base PATH`` (a checkout of the tree before
  annotations counted, such as ``git worktree add /tmp/base <commit>``) the same measures run
  on both trees in alternating rounds, each in a process of its own, and the extra cost in %
  is printed. Target: at most 10% on the enqueue and worker sides together.
- **per rich argument**: a task with the same three plain arguments and one more of each kind
  (UUID, aware datetime, date, Decimal, Enum, a dataclass of three fields, a pydantic model of
  three fields when pydantic is installed, ``list[UUID]`` of 10), against the plain task: the
  extra microseconds of the enqueue and worker sides together (the best of ``--rounds``, at
  least 3).

The last line printed is the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

# Measured in a process of its own, on this tree or the base's (``PYTHONPATH``): only what
# both trees have (``jobq.task``, ``JobQueue``, the handler attribute).
PLAIN = r"""
import json, os, sys, tempfile, time
from jobq import JobQueue, task

@task(name="bench.plain3")
def plain3(a: int, b: str, c: float) -> int:
    return a

def per_call(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6

class Ctx:
    id, attempt, parent_results = "j", 1, {}

n = int(sys.argv[1])
args = (7, "invoice", 2.5)
payload = plain3.binder.payload(args, {})
run = getattr(plain3, "__jobq_handler__").fn
ctx = Ctx()
best = {}
for _ in range(3):
    enc = per_call(lambda: plain3.binder.payload(args, {}), n)
    dec = per_call(lambda: run(payload, ctx), n)
    best["enqueue_side"] = min(best.get("enqueue_side", 1e9), enc)
    best["worker_side"] = min(best.get("worker_side", 1e9), dec)
with tempfile.TemporaryDirectory() as tmp:
    with JobQueue(os.path.join(tmp, "q.db"), handlers=[sys.modules[__name__]]) as q:
        bound = plain3.using(queue=q)
        jobs = max(200, n // 20)
        t0 = time.perf_counter()
        for _ in range(jobs):
            bound.enqueue(*args)
        q.drain()
        best["whole_job"] = (time.perf_counter() - t0) / jobs * 1e6
print(json.dumps(best))
"""


def plain_round(pythonpath: str, n: int) -> dict[str, float]:
    """One round of the plain measures in a process on the tree at ``pythonpath``."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    out = subprocess.run(
        [sys.executable, "-c", PLAIN, str(n)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
        timeout=600,
    )
    got: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    got["both_sides"] = got["enqueue_side"] + got["worker_side"]
    return got


def plain_figures(head: str, base: str | None, rounds: int, n: int) -> dict[str, Any]:
    """The best of ``rounds`` alternating rounds on each tree, and the extra cost in %."""
    trees = {"head": head, **({"base": base} if base else {})}
    best: dict[str, dict[str, float]] = {k: {} for k in trees}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            for k, v in plain_round(trees[name], n).items():
                best[name][k] = round(min(best[name].get(k, 1e9), v), 2)
    out: dict[str, Any] = {"us": best}
    if base:
        out["extra_percent"] = {
            k: round(100.0 * (best["head"][k] / best["base"][k] - 1), 1) for k in best["head"]
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.argcodecs")
    parser.add_argument("--base", help="a checkout of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", type=int, default=20000, help="calls per measure")
    parser.add_argument("--smoke", action="store_true", help="tiny run: it works, no figures")
    opts = parser.parse_args(argv)
    n, rounds = (300, 1) if opts.smoke else (opts.n, opts.rounds)
    head = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    figures = plain_figures(head, opts.base, rounds, n)
    from bench.argcodecs_rich import rich_figures  # this tree's codecs: in this process

    figures["rich_extra_us"] = rich_figures(n, 1 if opts.smoke else max(3, rounds))
    print(report(figures))
    print(json.dumps(figures))
    return 0


def report(figures: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    lines = ["| three plain arguments (us) | " + " | ".join(figures["us"]) + " | extra % |"]
    lines.append("|---" * (len(figures["us"]) + 2) + "|")
    extra = figures.get("extra_percent", {})
    for k in figures["us"]["head"]:
        cells = [str(figures["us"][t][k]) for t in figures["us"]]
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {extra.get(k, '')} |")
    lines += ["", "| one more rich argument | extra us per call (both sides) |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in figures["rich_extra_us"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
