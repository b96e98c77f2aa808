"""``jobq web``: the dashboard, served by uvicorn from the ``web`` extra.

    jobq web [--host 127.0.0.1] [--port 8080] [--config PATH] [--token T] [--read-only] [--root-path /jobq]
             [--allow-host NAME ...]

It reads and acts on the configured database directly (no supervisor needed), like the ops
commands. Any address but loopback needs a token (``--token`` or ``JOBQ_WEB_TOKEN``). It answers
only to its bind address, ``localhost`` and each ``--allow-host`` name (see ``security``).
Exit codes: 2 bad arguments (or the ``web`` extra missing), 3 invalid config.

The dashboard is a program of its own: the CLI (``supervisor/cli/webcmd.py``) parses the
arguments and calls :func:`cmd_web`; the dashboard imports nothing from the CLI, only the ops
layer (:mod:`shared.ops`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from shared.engines.location import redacted
from shared.model.exitcodes import ExitCode
from supervisor.views.context import Ctx

TOKEN_ENV = "JOBQ_WEB_TOKEN"


def cmd_web(ctx: Ctx, args: argparse.Namespace) -> int:
    """Check the arguments and the web extra, then serve until interrupted."""
    try:
        import jinja2  # noqa: F401 - the web extra's libraries, checked before anything else
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return ctx.fail(
            f"web: the dashboard needs the web extra ({exc.name} is missing): "
            f'pip install -e ".[web]"',
            ExitCode.USAGE,
        )
    settings = _settings(ctx, args)
    if isinstance(settings, str):
        return ctx.fail(settings, ExitCode.USAGE)
    _serve(ctx, settings, args.port)
    return ExitCode.OK


def _settings(ctx: Ctx, args: argparse.Namespace) -> Any:
    """The dashboard's ``Settings`` from the arguments, or the error for the first that is not
    usable (an address other machines reach with no token among them)."""
    from .app import Settings
    from .security import is_loopback

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host) and not token:
        return (
            f"web: --host {args.host} is reachable from other machines: give --token TOKEN "
            f"(or set {TOKEN_ENV}); without one the dashboard binds 127.0.0.1 only"
        )
    if not 0 <= args.port <= 65535:
        return f"web: --port must be 0-65535, got {args.port}"
    root = args.root_path.rstrip("/")
    if root and not root.startswith("/"):
        return f"web: --root-path must start with /, got {args.root_path!r}"
    allowed = _allowed_hosts(args.allow_host)
    if isinstance(allowed, str):
        return allowed
    return Settings(
        ctx.config,
        ctx.config_path,
        token=token,
        read_only=args.read_only,
        root_path=root,
        host=args.host,
        allow_hosts=allowed,
    )


def _serve(ctx: Ctx, settings: Any, port: int) -> None:
    """Serve the dashboard on ``settings.host`` and ``port`` until interrupted, then close its
    database connection."""
    import uvicorn

    from .app import create_app

    root = settings.root_path
    app = create_app(settings, ctx.clock)
    print(
        f"jobq web: serving {redacted(ctx.config.database)} on http://{settings.host}:{port}{root}/"
        f"{' (read-only)' if settings.read_only else ''}{' (token required)' if settings.token else ''}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=port,
        root_path=root,
        log_level="warning",
        proxy_headers=bool(root),
        access_log=False,
    )
    app.state.backend.close()


def _allowed_hosts(names: list[str]) -> tuple[str, ...] | str:
    """The ``--allow-host`` names, normalised (lower case, no brackets or trailing dot); or
    the error for one that is not a bare host name or address."""
    out = []
    for name in names:
        bare = name.strip().strip("[]").rstrip(".").lower()
        if not bare or any(c in bare for c in "/@?# ") or (":" in bare and bare.count(":") < 2):
            return f"web: --allow-host {name!r} is not a host name (give the name alone: no scheme, port or path)"
        out.append(bare)
    return tuple(out)
