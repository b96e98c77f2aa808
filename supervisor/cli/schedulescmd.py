"""``jobq schedules``: every schedule the supervisor runs, the config file's ``[[schedule]]``
entries and the tasks' own (``@task(schedule=...)``), each with where it is declared, its next
run and the last tick it enqueued.

Unlike ``jobq status``, which reads only the file and the database, this command imports the
config's handler modules (as ``jobq config check`` does) to find the tasks' schedules; a
module that fails to import fails the command (exit 4), naming it.
"""

from __future__ import annotations

import argparse
from typing import Any

from shared.execution.handlers import HandlerImportError, load_registry
from shared.model.exitcodes import ExitCode
from shared.runtime.clock import iso
from shared.settings import schedule
from supervisor.views.cells import table
from supervisor.views.context import Ctx
from supervisor.views.snapshot import enqueued_tick


def add_parser(sub: argparse._SubParsersAction, common: Any, wrap: Any) -> None:
    """The ``schedules`` subcommand (``common`` adds ``--config``/``--json``; ``wrap`` turns a
    command into the dispatcher's function)."""
    help = "list the schedules: [[schedule]] entries and tasks' schedule=, next run, last tick"
    p = sub.add_parser("schedules", help=help, description=help)
    common(p, False)
    p.set_defaults(func=wrap(cmd_schedules))


def cmd_schedules(ctx: Ctx, args: argparse.Namespace) -> int:
    cfg = ctx.config
    try:
        registry = load_registry(cfg.handlers, cfg.path)
    except HandlerImportError as exc:
        code = ctx.fail(exc.summary, ExitCode.BOOT_FAILED)
        print(exc.traceback, end="", file=ctx.err)
        return code
    with ctx.store() as store:
        runs = schedule.next_runs(cfg, ctx.clock.now(), store, registry)
    rows = [
        {
            "name": r.name,
            "type": r.type,
            "cron": r.cron,
            "timezone": r.timezone,
            "source": r.source,
            "next_at": iso(r.next_at) if r.next_at is not None else None,
            "last_tick": _iso(enqueued_tick(r)),
        }
        for r in runs
    ]
    ctx.emit(rows, _text(rows))
    return ExitCode.OK


def _text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no schedules ([[schedule]] entries or tasks with schedule=)"
    return table(
        ["SCHEDULE", "TYPE", "CRON", "NEXT RUN", "LAST TICK", "FROM"],
        [
            [
                r["name"],
                r["type"],
                f"{r['cron']} ({r['timezone']})",
                r["next_at"] or "never",
                r["last_tick"] or "-",
                "jobq.toml" if r["source"] == "config" else "code",
            ]
            for r in rows
        ],
    )


def _iso(t: float | None) -> str | None:
    return iso(t) if t is not None else None
