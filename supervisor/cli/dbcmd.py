"""``jobq db upgrade [--batch N] [--finish]``: the schema changes too slow to make as a store
opens, made on a live database (PostgreSQL: its online steps, times and JSON to native types
then job ids to uuid, which a store opening a queue of more than 100,000 jobs refuses to run in
place, naming this command; one step per prepare and finish, each saying what is left).

Run it with the new jobq installed while the old workers keep running: it prepares the change
in short transactions (progress on stderr: a line per step, the backfill's at most every
``EVERY`` seconds) and can be killed and run again (it resumes). Then stop the workers, run it
with ``--finish`` (one short transaction; it says how long the tables were locked) and start the
new version. An engine with no such change says there is nothing to do.

Exit codes: 0 done (or nothing to do); 2 bad arguments; 3 invalid config; 5 the database cannot
be used or the schema cannot be upgraded so (one line naming the schema); 130 interrupted (run
the same command again to resume).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from shared import engines
from shared.model.exitcodes import ExitCode
from supervisor.views.context import Ctx

BATCH = 5_000
EVERY = 1.0  # seconds between two of the backfill's progress lines
DESCRIPTION = (
    "Run it with the new jobq installed while the old workers keep running: it prepares the "
    "change in short transactions, with progress on stderr, and resumes when run again after "
    "an interrupt. Then stop the workers, run it with --finish (one short transaction; it says "
    "how long the tables were locked) and start the new version."
)


def add_parser(sub: argparse._SubParsersAction, common: Any, wrap: Any) -> None:
    """``jobq db`` and its one command, ``upgrade``."""
    help = "database maintenance: upgrade the schema of a live queue"
    p = sub.add_parser("db", help=help, description=help)
    common(p, False)
    dsub = p.add_subparsers(dest="db_command", metavar="upgrade", required=True)
    up = dsub.add_parser(
        "upgrade",
        help="convert the schema while workers run; then, workers stopped, --finish",
        description=DESCRIPTION,
    )
    common(up, False)
    up.add_argument(
        "--batch",
        type=int,
        default=BATCH,
        metavar="N",
        help=f"rows converted per short transaction (default {BATCH})",
    )
    up.add_argument(
        "--finish",
        action="store_true",
        help="swap the prepared columns in (workers stopped): one short transaction",
    )
    up.set_defaults(func=wrap(cmd_upgrade))


def cmd_upgrade(ctx: Ctx, args: argparse.Namespace) -> int:
    if args.batch < 1:
        return ctx.fail("db upgrade: --batch must be >= 1", ExitCode.USAGE)
    said = [float("-inf")]  # when the last backfill line was shown

    def progress(text: str, batch_line: bool) -> None:
        now = time.monotonic()
        if ctx.json or (batch_line and now - said[0] < EVERY):
            return
        if batch_line:
            said[0] = now
        print(f"jobq db upgrade: {text}", file=ctx.err, flush=True)

    try:
        done = engines.upgrade(ctx.config, batch=args.batch, finish=args.finish, progress=progress)
    except KeyboardInterrupt:
        return ctx.fail(
            "db upgrade interrupted: run the same command again to resume (nothing is lost)", 130
        )
    ctx.emit({"done": True, "finish": args.finish, "result": done}, done)
    return ExitCode.OK
