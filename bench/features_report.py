"""The features workload's table (:mod:`bench.features`) and its command line,
``python -m bench.features [--smoke | --quick] [--database postgresql://...] [--json PATH]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def _get(node: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(k)
    return node


def _n(v: Any, digits: int = 2) -> str:
    if isinstance(v, int) or (isinstance(v, float) and abs(v) >= 1000):
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return "—"


def _x(v: Any) -> str:
    return f"{v:.2f}×" if isinstance(v, (int, float)) else "—"


def rows(out: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(measure, feature's figure, plain baseline's figure, ratio) per row."""
    e, w, d, f, a = (out.get(k) or {} for k in ("enqueue", "wait", "deps", "fair", "async"))
    us = e.get("us_per_call") or {}
    q_us, t_us = us.get("q.enqueue"), us.get("task.enqueue")
    table = [
        (
            "typed task `.enqueue()` vs `q.enqueue()` (µs per call; ratio of rates)",
            _n(t_us),
            _n(q_us),
            _x(q_us / t_us if q_us and t_us else None),
        )
    ]
    for q in ("p50", "p99"):
        table.append(
            (
                f"enqueue to result in hand via `wait()` vs enqueue to finish ({q}, ms)",
                _n(_get(w, "in_hand_ms", q)),
                _n(_get(w, "finish_ms", q)),
                "",
            )
        )
    table.append(
        (
            "what waiting adds to the finish (p50 / p99, ms)",
            f"{_n(_get(w, 'added_ms', 'p50'))} / {_n(_get(w, 'added_ms', 'p99'))}",
            "",
            "",
        )
    )
    ind = _get(d, "independent", "per_s")
    table.append(
        (
            f"fan-in graphs (1 -> {d.get('fan', '?')} -> 1) vs independent jobs (jobs/s)",
            _n(_get(d, "fanin", "per_s")),
            _n(ind),
            _x(_get(d, "fanin", "vs_independent")),
        )
    )
    table.append(
        (
            f"chains of {d.get('chain_length', '?')} vs independent jobs (jobs/s)",
            _n(_get(d, "chain", "per_s")),
            _n(ind),
            _x(_get(d, "chain", "vs_independent")),
        )
    )
    c = out.get("deps_cost") or {}
    for name, label in (("fanin", "fan-in graph's"), ("chain", "chain's")):
        table.append(
            (
                f"one process, no worker: a {label} job vs an independent one (µs to enqueue, claim "
                "and complete; ratio of rates)",
                _n(_get(c, name, "us_per_job")),
                _n(_get(c, "independent", "us_per_job")),
                _x(_get(c, name, "vs_independent")),
            )
        )
    table.append(
        (
            f"fair keyed claim + complete vs plain ({_n(f.get('pending'))} pending, "
            f"{_n(f.get('keys'))} keys; /s)",
            _n(_get(f, "fair", "per_s")),
            _n(_get(f, "plain", "per_s")),
            _x(f.get("vs_plain")),
        )
    )
    table.append(
        (
            "fair vs plain, one claim + complete p50 (ms)",
            _n(_get(f, "fair", "p50_ms"), 3),
            _n(_get(f, "plain", "p50_ms"), 3),
            "",
        )
    )
    table.append(
        (
            f"{_n(a.get('jobs'))} async sleeps of {_n(a.get('ms'))} ms on {a.get('workers', '?')} workers x "
            f"{a.get('concurrency', '?')}: drain vs ideal (s; ratio = drain / ideal)",
            _n(a.get("seconds"), 3),
            _n(a.get("ideal_seconds"), 3),
            _x(a.get("vs_ideal")),
        )
    )
    return table


def report(out: dict[str, Any]) -> str:
    """The figures as a markdown table, and the measurements that failed."""
    if isinstance(
        out.get("error"), str
    ):  # the whole workload failed (its supervisor, its database)
        return f"Features: FAILED {out['error']}"
    lines = [
        f"Features on {out.get('engine', '?')}, each beside its plain baseline in the same run:",
        "",
        "| measure | feature | baseline | ratio |",
        "|---|---|---|---|",
    ]
    lines += [f"| {m} | {v} | {b} | {r} |" for m, v, b, r in rows(out)]
    failed = [f"{k}: {v['error']}" for k, v in out.items() if isinstance(v, dict) and "error" in v]
    return "\n".join(lines + ([""] + [f"FAILED {x}" for x in failed] if failed else []))


def main(argv: list[str] | None = None) -> int:
    from . import features

    p = argparse.ArgumentParser(
        prog="python -m bench.features", description=features.__doc__.split("\n\n")[0]
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    size.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    p.add_argument("--database", help="postgresql://... (default: a SQLite file)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    sizes = features.SMOKE if args.smoke else features.QUICK if args.quick else features.FULL
    out = features.run(args.database, sizes, log=lambda m: print(m, file=sys.stderr, flush=True))
    out["loadavg"] = os.getloadavg()
    print(report(out))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0
