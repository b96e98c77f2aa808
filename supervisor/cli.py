"""Command line: ``python -m supervisor [run] [--config PATH] [--workers N]``.

``run`` is the default subcommand. ``--config`` and ``--json`` may stand before or after the
subcommand.
"""
from __future__ import annotations

import argparse
import sys

from shared import config as config_mod
from shared.config import ConfigError
from shared.exitcodes import ExitCode

from .arbiter import Arbiter

COMMANDS: dict[str, tuple[str, object]] = {}


def _common(p: argparse.ArgumentParser, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    p.add_argument("--config", default=default,
                   help="config file (default: $JOBQ_CONFIG, else ./jobq.toml)")
    p.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobq", description="jobq: a job queue in one SQLite file.")
    _common(p, True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run the supervisor and its workers (the default)")
    _common(run, False)
    run.add_argument("--workers", type=int, default=None, help="number of workers (overrides the file)")
    run.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    return p


def cmd_run(args: argparse.Namespace) -> int:
    try:
        cfg = config_mod.load(config_mod.resolve_path(args.config))
    except ConfigError as exc:
        print(f"jobq: invalid config: {exc}", file=sys.stderr)
        return ExitCode.CONFIG_INVALID
    if args.workers is not None and args.workers < 0:
        print(f"jobq: --workers must be >= 0, got {args.workers}", file=sys.stderr)
        return ExitCode.USAGE
    return Arbiter(cfg, workers=args.workers, ready_fd=args.ready_fd).run()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    if not any(a in commands for a in argv if not a.startswith("-")) or \
            (argv and argv[0].startswith("-") and _first_positional(argv) not in commands):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    return int(args.func(args))


def _first_positional(argv: list[str]) -> str | None:
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--config", "--workers"):
            skip = True
            continue
        if not a.startswith("-"):
            return a
    return None
