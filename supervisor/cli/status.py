"""``jobq status``: the snapshot of :func:`supervisor.views.snapshot.collect`, as text or JSON;
``--watch`` prints it again every ``--interval`` seconds until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from shared.model.exitcodes import ExitCode
from shared.ops.keys import type_keys
from supervisor.views import render
from supervisor.views.context import Ctx
from supervisor.views.render import keys_text
from supervisor.views.snapshot import collect


def cmd_status(ctx: Ctx, args: argparse.Namespace) -> int:
    if args.interval <= 0:
        return ctx.fail(f"status: --interval must be > 0, got {args.interval:g}", ExitCode.USAGE)
    with ctx.store() as store:
        if not args.watch:
            _show(ctx, _snap(ctx, store, args), clear=False)
            return ExitCode.OK
        try:
            while True:
                _show(ctx, _snap(ctx, store, args), clear=True)
                time.sleep(args.interval)
        except KeyboardInterrupt:
            return ExitCode.OK


def _snap(ctx: Ctx, store: Any, args: argparse.Namespace) -> dict[str, Any]:
    snap = collect(store, ctx.clock.now(), config=ctx.config)
    if getattr(args, "types", False):  # --types: limits per type and per key (shared.ops.keys)
        snap["types"] = type_keys(store, ctx.config, ctx.clock.now())
    return snap


def _show(ctx: Ctx, snap: dict[str, Any], clear: bool) -> None:
    if ctx.json:
        # one object per line while watching, so a script can read it line by line
        print(
            json.dumps(snap, default=str) if clear else json.dumps(snap, indent=2, default=str),
            file=ctx.out,
            flush=True,
        )
        return
    prefix = "\x1b[H\x1b[2J" if clear else ""
    extra = "\n\n" + keys_text(snap["types"]) if "types" in snap else ""
    print(prefix + render.status_text(snap) + extra, file=ctx.out, flush=True)
