"""``python -m bench [--quick | --smoke] [--only burn,idle] [--systems jobq,huey,raw] [--database URL] ...``

Runs the throughput workloads on temporary databases, prints a markdown table (jobq beside Huey and
the raw SQLite ceiling, with ratios) and the targets met or missed, and writes the JSON to
``bench/results/<timestamp>.json`` (or ``--json PATH``). With ``--database postgresql://...``
the same workloads run on that server: jobq beside Huey's PostgresHuey,
Procrastinate and the raw SKIP LOCKED loop, each in a fresh schema dropped afterwards.

The PostgreSQL modules (psycopg, Procrastinate, PostgresHuey) are imported only for such a run:
on SQLite, ``pip install -e ".[test]"`` is enough (Huey, of the bench extra, is skipped if missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any

from . import huey_runs, pg_report, report, targets
from .procs import REPO
from .run import SYSTEMS, WORKLOADS, Ctx, run
from .scale import FULL, QUICK, SMOKE


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: a minute or two")
    size.add_argument(
        "--smoke", action="store_true", help="tiny sizes, a few seconds (for the smoke test)"
    )
    p.add_argument(
        "--only",
        default=",".join(WORKLOADS),
        help=f"workloads, comma-separated: {','.join(WORKLOADS)}",
    )
    p.add_argument(
        "--systems",
        help="jobq,huey,raw (Huey is skipped if not installed); "
        "PostgreSQL: jobq,huey,procrastinate,raw",
    )
    p.add_argument(
        "--database",
        help="postgresql://... : run on this PostgreSQL server (default: SQLite files)",
    )
    p.add_argument(
        "--sync", default="normal,full", help="jobq and raw synchronous modes: normal,full"
    )
    p.add_argument(
        "--workers", help="burn-down worker counts, e.g. 1,2,4,8 (the largest is used for latency)"
    )
    p.add_argument("--jobs", type=int, help="burn-down job count")
    p.add_argument(
        "--repeat", type=int, help="burn-down runs with the largest worker count (median kept)"
    )
    p.add_argument(
        "--idle-jobs", type=int, help="jobs trickled in the idle workload (and as many delayed)"
    )
    p.add_argument(
        "--huey-quiet", action="store_true", help="run Huey's consumer with -q (WARNING logging)"
    )
    p.add_argument(
        "--startup-json",
        help="bench.startup's JSON (--json): judge the start-up "
        "targets by it when this run has no startup workload",
    )
    p.add_argument(
        "--purge-json", help="bench.purge's JSON (its output): judge the purge targets by it"
    )
    p.add_argument(
        "--json", help="where to write the JSON (default bench/results/<timestamp>.json)"
    )
    p.add_argument("--tmp", help="folder for the temporary databases (default: the system's)")
    args = p.parse_args(argv)
    if args.database and not args.database.startswith(("postgresql:", "postgres:")):
        p.error(
            f"--database {args.database!r}: expected a postgresql:// URL (SQLite is the default)"
        )
    systems = _pg_run().SYSTEMS if args.database else SYSTEMS
    args.systems = args.systems or ",".join(systems)
    for name, allowed in (("only", WORKLOADS), ("systems", systems), ("sync", ("normal", "full"))):
        bad = set(_split(getattr(args, name))) - set(allowed)
        if bad:
            p.error(
                f"--{name}: unknown {', '.join(sorted(bad))} (choose from {', '.join(allowed)})"
            )
    try:  # read now: a bad file fails before the run, not after it
        args.startup, args.purge = (
            targets.read_json(args.startup_json),
            targets.read_json(args.purge_json),
        )
    except ValueError as exc:
        p.error(str(exc))
    return args


def _pg_run() -> Any:
    """The PostgreSQL runs (bench.pg_run), imported only when one is asked for: they need psycopg."""
    from . import pg_run

    return pg_run


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def make_scale(args: argparse.Namespace):
    scale = SMOKE if args.smoke else QUICK if args.quick else FULL
    if args.workers:
        scale = dataclasses.replace(scale, workers=tuple(int(w) for w in _split(args.workers)))
    if args.jobs:
        scale = dataclasses.replace(scale, burn_jobs=args.jobs)
    if args.repeat:
        scale = dataclasses.replace(scale, burn_repeats=args.repeat)
    if args.idle_jobs:
        scale = dataclasses.replace(scale, idle_jobs=args.idle_jobs, delayed_jobs=args.idle_jobs)
    return scale


def git(*cmd: str) -> str:
    try:
        return subprocess.run(
            ["git", *cmd], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def meta(args: argparse.Namespace, ctx: Ctx) -> dict[str, Any]:
    import shared

    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:],
        "commit": git("rev-parse", "HEAD"),
        "commit_subject": git("log", "-1", "--format=%s"),
        "uncommitted_changes": git(
            "status", "--porcelain", "--untracked-files=no", "--", "shared", "worker", "supervisor"
        ).splitlines(),
        "code": os.path.dirname(shared.__file__),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "machine": platform.platform(),
        "huey": _huey_version(),
        "scale": dataclasses.asdict(ctx.scale),
        "syncs": ctx.syncs,
        "systems": sorted(ctx.systems),
        "huey_variants": ctx.huey_variants,
        "huey_logging": "WARNING (-q)" if ctx.huey_quiet else "INFO (its default)",
    }


def _huey_version() -> str | None:
    try:
        import huey
    except ImportError:
        return None
    return huey.__version__


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every ``finally``: no process left behind


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    systems = set(_split(args.systems))
    if "huey" in systems and not huey_runs.available():
        print(
            "bench: huey is not installed (pip install -e '.[bench]'); skipping it", file=sys.stderr
        )
        systems.discard("huey")
    root = tempfile.mkdtemp(prefix="jobq-bench-", dir=args.tmp)
    pg_mode = bool(args.database)
    ctx = Ctx(
        root,
        make_scale(args),
        [] if pg_mode else _split(args.sync),
        systems,
        ["default", "off"] if "huey" in systems and not pg_mode else [],
        huey_quiet=args.huey_quiet,
        url=args.database,
        size="smoke" if args.smoke else "quick" if args.quick else "full",
    )
    data: dict[str, Any] = {"meta": meta(args, ctx), "results": {}}
    try:
        if pg_mode:
            from . import pg

            data["meta"]["postgres"] = pg.server_settings(args.database)
            data["meta"]["procrastinate"] = _version("procrastinate")
            _pg_run().run(ctx, data["results"], _split(args.only))
        else:
            run(ctx, data["results"], _split(args.only))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    data["meta"]["seconds"] = round(time.monotonic() - ctx.started, 1)
    data["meta"]["loadavg_end"] = os.getloadavg()
    return finish(args, ctx, data)


def waits_report(out: dict[str, Any]) -> str:
    from . import waits

    return "Tasks (their targets):\n" + waits.report(out)


def features_report(out: dict[str, Any]) -> str:
    from . import features_report as fr

    return fr.report(out)


def all_targets(args: argparse.Namespace, ctx: Ctx, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The performance targets and the feature targets, each met, missed or not measured."""
    return targets.judge(
        targets.Inputs(
            data["results"],
            "postgresql" if ctx.url else "sqlite",
            ctx.syncs,
            args.startup,
            args.startup_json or "",
            args.purge,
            args.purge_json or "",
        )
    )


PERFORMANCE_HEAD = "Performance targets, and the feature targets (bench.features):\n"


def headline(m: dict[str, Any]) -> str:
    """What was measured, on what, under which load."""
    dirty = len(m["uncommitted_changes"])
    return (
        f"jobq benchmark: commit {m['commit'][:10]} ({m['commit_subject']})"
        + (f", uncommitted changes in {dirty} file(s)" if dirty else "")
        + f"; Python {m['python']}, SQLite {m['sqlite']}, {m['cpus']} CPUs, Huey {m['huey']}; "
        f"{m['seconds']} s; load average {m['loadavg_start'][0]:.2f} at start, "
        f"{m['loadavg_end'][0]:.2f} at end"
    )


def finish(args: argparse.Namespace, ctx: Ctx, data: dict[str, Any]) -> int:
    if ctx.url:
        return finish_pg(args, ctx, data)
    rate = ctx.scale.rate if "steady" in data["results"] else None
    figs = report.figures(list(ctx.scale.workers), list(ctx.scale.depths), rate)
    data["table"] = report.table(data["results"], ctx.syncs, figs)
    data["targets"] = targets.check(data["results"], ctx.syncs, list(ctx.scale.depths))
    data["targets_performance"] = all_targets(args, ctx, data)
    path = args.json or os.path.join(
        REPO, "bench", "results", time.strftime("%Y%m%d-%H%M%S") + ".json"
    )
    report.write_json(path, data)
    print(headline(data["meta"]) + "\n")
    print(data["table"])
    print(
        "\nRatios: how many times better jobq is (rates: jobq / other; latencies and CPU: other / jobq).\n"
        f"Burn-down: median of the runs. Huey logs at {data['meta']['huey_logging']}; jobq at warning."
    )
    if "waits" in data["results"]:
        print("\n" + waits_report(data["results"]["waits"]))
    if "features" in data["results"]:
        print("\n" + features_report(data["results"]["features"]))
    if "otel" in data["results"]:
        from . import otel

        print("\n" + otel.report(data["results"]["otel"]))
    if data["targets"]:
        print(
            "\nThroughput targets (8 workers), and tracing's:\n" + targets.markdown(data["targets"])
        )
    print("\n" + PERFORMANCE_HEAD + targets.markdown(data["targets_performance"]))
    print(f"\nJSON: {path}")
    return 0


def finish_pg(args: argparse.Namespace, ctx: Ctx, data: dict[str, Any]) -> int:
    data["table"] = pg_report.table(
        data["results"], list(ctx.scale.workers), list(ctx.scale.depths)
    )
    data["targets"] = pg_report.check(data["results"], list(ctx.scale.depths))
    data["targets_performance"] = all_targets(args, ctx, data)
    path = args.json or os.path.join(
        REPO, "bench", "results", "pg-" + time.strftime("%Y%m%d-%H%M%S") + ".json"
    )
    report.write_json(path, data)
    m, s = data["meta"], data["meta"]["postgres"]
    print(
        headline(m)
        + f"; PostgreSQL {s['server_version']} (synchronous_commit={s['synchronous_commit']}, "
        f"fsync={s['fsync']}), Procrastinate {m['procrastinate']}\n"
    )
    print(data["table"])
    print(
        "\nRatios: how many times better jobq is (rates: jobq / other; latencies and CPU: other / jobq). "
        "Burn-down: median of the runs; Huey's consumer at "
        f"{'WARNING (-q)' if ctx.huey_quiet else 'INFO'}, jobq at warning, Procrastinate at WARNING."
    )
    if "waits" in data["results"]:
        print("\n" + waits_report(data["results"]["waits"]))
    if "features" in data["results"]:
        print("\n" + features_report(data["results"]["features"]))
    if data["targets"]:
        print("\nPostgreSQL targets:\n" + targets.markdown(data["targets"]))
    print("\n" + PERFORMANCE_HEAD + targets.markdown(data["targets_performance"]))
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
