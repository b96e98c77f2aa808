"""``jobq web``: the command line of the dashboard (``supervisor/web``), which is a program of
its own: the CLI parses the arguments and loads the dashboard only when this command runs
(``jobq status`` and the other commands never import it, nor the ``web`` extra).
"""

from __future__ import annotations

import argparse
from typing import Any

from supervisor.views.context import Ctx


def add_parser(sub: argparse._SubParsersAction, common: Any, wrap: Any) -> None:
    """The ``web`` subcommand (``common`` adds ``--config``/``--json``; ``wrap`` turns a command
    into the dispatcher's function, mapping config and database errors to exit codes)."""
    p = sub.add_parser(
        "web",
        help='serve the web dashboard (pip install -e ".[web]")',
        description="serve the web dashboard for the configured database",
    )
    common(p, False)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any free port)")
    p.add_argument(
        "--token",
        default=None,
        help="access token every request must carry (default $JOBQ_WEB_TOKEN); required off loopback",
    )
    p.add_argument(
        "--read-only", action="store_true", help="show no action and refuse every change"
    )
    p.add_argument(
        "--root-path", default="", help="URL prefix when served behind a reverse proxy, e.g. /jobq"
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another host name the dashboard answers to (a reverse proxy's public name); "
        "repeatable. Default: only the --host address and localhost",
    )
    p.set_defaults(func=wrap(cmd_web))


def cmd_web(ctx: Ctx, args: argparse.Namespace) -> int:
    """Serve the dashboard until interrupted (its exit codes: 2 bad arguments or no web extra)."""
    from .. import web  # here: only this command loads the dashboard

    return web.cmd_web(ctx, args)
