"""Command line: ``python -m supervisor [COMMAND] [--config PATH] [--json]`` (also ``jobq``).

``run`` (the default) runs the supervisor; the ops commands (``enqueue``, ``status``, ``top``,
``jobs``, ``show``, ``retry``, ``cancel``, ``purge``, ``pause``, ``resume``, ``stop``, ``reload``,
``scale``, ``config``, ``copy``, ``db``, ``web``) live in their own modules: this one only parses and dispatches.
``--config`` and ``--json`` may stand before or after the subcommand. Every ops command turns an
invalid config into exit 3 and an unusable database into exit 5, with a message naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from shared.settings import config as config_mod
from shared.settings.config import ConfigError
from shared.settings.durations import SECONDS_EXPECTED as DURATION_HELP
from shared.settings.durations import parse_seconds
from shared.model.exitcodes import ExitCode
from shared.model.job import STATUSES, TERMINAL
from shared.model.errors import StoreError, StoreQueryError
from supervisor.views.context import Ctx

from . import configcmd, control, copycmd, dbcmd, enqueuecmd, ops, schedulescmd, status, top, webcmd
from .args import arg_type


def _common(p: argparse.ArgumentParser, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    p.add_argument(
        "--config", default=default, help="config file (default: $JOBQ_CONFIG, else ./jobq.toml)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="machine-readable output",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobq", description="jobq: a job queue in one SQLite file.")
    _common(p, True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run the supervisor and its workers (the default)")
    _common(run, False)
    run.add_argument(
        "--workers", type=int, default=None, help="number of workers (overrides the file)"
    )
    run.add_argument(
        "--queues",
        default=None,
        metavar="A,B",
        help="serve only these named queues (overrides [supervisor] queues)",
    )
    run.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    _job_commands(sub)
    _view_commands(sub)
    _control_commands(sub)
    _config_commands(sub)
    copycmd.add_parser(sub, _common, _ops)
    dbcmd.add_parser(sub, _common, _ops)
    webcmd.add_parser(sub, _common, _ops)
    schedulescmd.add_parser(sub, _common, _ops)
    return p


def _add(
    sub: argparse._SubParsersAction,
    name: str,
    fn: Callable[[Ctx, argparse.Namespace], int],
    help: str,
) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=help)
    _common(p, False)
    p.set_defaults(func=_ops(fn))
    return p


def _job_commands(sub: argparse._SubParsersAction) -> None:
    duration = arg_type(parse_seconds)
    _enqueue_command(sub, duration)
    p = _add(sub, "jobs", ops.cmd_jobs, "list jobs (pending in claim order, finished newest first)")
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--type", default=None)
    p.add_argument("--limit", type=int, default=50)
    p = _add(
        sub, "show", ops.cmd_show, "one job: payload, result, error with traceback, attempt history"
    )
    p.add_argument("id", help="job id (or a unique prefix of it)")
    p = _add(
        sub, "retry", ops.cmd_retry, "put failed or cancelled jobs back to pending, attempts reset"
    )
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--failed", action="store_true", help="every failed job (of --type)")
    p.add_argument("--type", default=None)
    _bulk_commands(sub, duration)


def _enqueue_command(sub: argparse._SubParsersAction, duration: Callable[[str], float]) -> None:
    """``jobq enqueue``: one job from the arguments, or many from ``--file``."""
    p = _add(
        sub, "enqueue", enqueuecmd.cmd_enqueue, "add a job (prints its id), or many from JSON lines"
    )
    p.add_argument("type", nargs="?", help="job type, e.g. report:generate")
    p.add_argument("payload", nargs="?", help="payload as JSON (default null)")
    _enqueue_options(p, duration)
    _enqueue_links(p)
    p.add_argument(
        "--file",
        default=None,
        help='JSON lines, one job object each ({"type", "payload", '
        '"delay", ...}); - reads stdin; validated first, written in batches of 1000',
    )


def _enqueue_options(p: argparse.ArgumentParser, duration: Callable[[str], float]) -> None:
    """When and in what order the enqueued job runs, its attempts, idempotency key and queue."""
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", type=duration, help=f"run after {DURATION_HELP}")
    when.add_argument(
        "--run-at", help="run at this ISO-8601 time with a zone, e.g. 2026-01-01T08:00:00Z"
    )
    p.add_argument("--priority", type=int, default=0, help="higher runs first (default 0)")
    p.add_argument(
        "--max-attempts", type=int, default=None, help="attempts before the job fails for good"
    )
    p.add_argument(
        "--key", default=None, help="idempotency key: a kept job with this key is not duplicated"
    )
    p.add_argument(
        "--unique",
        default=None,
        help='how long the key dedupes: "kept" (default), "pending", "active" or a period (10m)',
    )
    p.add_argument(
        "--queue", default=None, help='the named queue (default: the type\'s, else "default")'
    )


def _enqueue_links(p: argparse.ArgumentParser) -> None:
    """What the enqueued job continues or waits for: a trace, parent jobs."""
    p.add_argument(
        "--traceparent",
        default=None,
        help="W3C trace context (00-<trace id>-<span id>-<flags>) "
        "the job's run continues, also each job of --file (docs/tracing.md)",
    )
    p.add_argument(
        "--after",
        action="append",
        default=None,
        metavar="ID",
        help="wait until job ID (or unique prefix) has ended (repeatable; docs/workflows.md)",
    )
    p.add_argument(
        "--after-failure",
        choices=("cancel", "run", "hold"),
        default=None,
        help="when a parent fails: cancel this job (default), run it anyway, or hold it",
    )


def _bulk_commands(sub: argparse._SubParsersAction, duration: Callable[[str], float]) -> None:
    p = _add(
        sub,
        "cancel",
        ops.cmd_cancel,
        "cancel jobs: pending or waiting ones end cancelled at "
        "once (with their waiting dependants); running ones are asked to stop (--wait: until "
        "they end)",
    )
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument(
        "--pending", action="store_true", help="every pending or waiting job (of --type)"
    )
    p.add_argument("--type", default=None)
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait until each running job asked to stop has ended, and say how (exit 1 on timeout)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds --wait waits at most (default: cancel_grace + kill_grace + 10)",
    )
    p = _add(
        sub,
        "purge",
        ops.cmd_purge,
        "delete finished jobs older than a duration (keeping those that waiting jobs still need)",
    )
    p.add_argument("--status", choices=TERMINAL, default="completed")
    p.add_argument("--older-than", type=duration, required=True, help=DURATION_HELP)
    p.add_argument("--dry-run", action="store_true", help="count, delete nothing")


def _view_commands(sub: argparse._SubParsersAction) -> None:
    p = _add(
        sub, "status", status.cmd_status, "queue counts, throughput, latency, workers, paused, WAL"
    )
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument(
        "--types",
        action="store_true",
        help="limits per type: busiest keys, jobs waiting on a limit",
    )
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between refreshes (default 2)"
    )
    p = _add(sub, "top", top.cmd_top, "full-screen live view (q or Ctrl-C quits)")
    p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between refreshes (default 1)"
    )


def _control_commands(sub: argparse._SubParsersAction) -> None:
    p = _add(
        sub, "pause", ops.cmd_pause, "workers finish the job in hand and claim nothing until resume"
    )
    p.add_argument("--queue", default=None, help="pause only this named queue")
    p = _add(sub, "resume", ops.cmd_resume, "workers claim jobs again")
    p.add_argument("--queue", default=None, help="resume only this named queue")
    p = _add(
        sub, "stop", control.cmd_stop, "stop the running supervisor gracefully (again: at once)"
    )
    p.add_argument("--no-wait", action="store_true", help="return after signalling")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait (default: shutdown_timeout + 15)",
    )
    p = _add(
        sub,
        "reload",
        control.cmd_reload,
        "make the running supervisor re-read its config file and roll workers onto changed code",
    )
    p.add_argument(
        "--code",
        action="store_true",
        help="roll the workers onto freshly imported code even if no file looks changed",
    )
    p = _add(sub, "scale", control.cmd_scale, "set the running supervisor's number of workers")
    p.add_argument("workers", type=int, metavar="N")


def _config_commands(sub: argparse._SubParsersAction) -> None:
    p = _add(sub, "config", configcmd.cmd_config, "show, create or edit jobq.toml")
    csub = p.add_subparsers(
        dest="config_command", metavar="show|init|set|check|reference", required=True
    )
    show = csub.add_parser("show", help="print the config file (--effective: with every default)")
    show.add_argument("--effective", action="store_true")
    init = csub.add_parser("init", help="write a commented jobq.toml with every default")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    cset = csub.add_parser("set", help="set one key (dotted: supervisor.workers), keeping comments")
    cset.add_argument("key", metavar="KEY")
    cset.add_argument("value", metavar="VALUE", help="TOML value; bare text is a string")
    check = csub.add_parser(
        "check", help="validate the file and import its handler modules (exit 3 or 4 if not)"
    )
    ref = csub.add_parser("reference", help="print the reference of every key (Markdown)")
    for c in (show, init, cset, check, ref):
        _common(c, False)


def _ops(fn: Callable[[Ctx, argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run an ops command with its context; map config and database errors to exit codes."""

    def run(args: argparse.Namespace) -> int:
        ctx = Ctx(config_mod.resolve_path(args.config), json=args.json)
        try:
            return fn(ctx, args)
        except ConfigError as exc:
            return ctx.fail(f"invalid config: {exc}", ExitCode.CONFIG_INVALID)
        except StoreError as exc:  # a statement that failed on a working connection is no outage
            what = "database error" if isinstance(exc, StoreQueryError) else "database unavailable"
            return ctx.fail(f"{what}: {exc}", ExitCode.DATABASE_UNAVAILABLE)
        except BrokenPipeError:  # `jobq jobs | head`: the reader left; not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return ExitCode.OK

    return run


def cmd_run(args: argparse.Namespace) -> int:
    from ..launch import run  # the same as `python -m supervisor run` without this parser

    return run(args.config, args.workers, args.queues, args.ready_fd)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    if argv in (["-h"], ["--help"]):  # the list of commands, not the help of the default `run`
        parser.print_help()
        return ExitCode.OK
    if not any(a in commands for a in argv if not a.startswith("-")) or (
        argv and argv[0].startswith("-") and _first_positional(argv) not in commands
    ):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    _printable_output()
    return int(args.func(args))


def _printable_output() -> None:
    """Text that is not valid Unicode (a lone surrogate from a file name, kept in a job's
    payload or result) is printed with backslash escapes, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass  # not a text file (a test's StringIO): it takes any str


def _first_positional(argv: list[str]) -> str | None:
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--config", "--workers", "--queues"):
            skip = True
            continue
        if not a.startswith("-"):
            return a
    return None
