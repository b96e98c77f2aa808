"""``stop``, ``reload`` and ``scale N``: steer the running supervisor(s) of a database.

A supervisor is found through its ``processes`` row (kind 'supervisor') and checked alive by pid
*and* process start time (``shared.runtime.processes.token_alive``), so a stale row or a reused pid
is never signalled. ``scale`` writes the wanted worker count into the ``control`` table, where the
supervisor takes it at its next maintenance round; stop and reload are signals (SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from shared import ops
from shared.model.exitcodes import ExitCode
from shared.engines.contract import OpsStore
from shared.runtime import supervisorfolder
from supervisor.views.context import Ctx
from supervisor.views.snapshot import supervisors
from shared.runtime.processes import send_signal, token_alive

POLL = 0.05  # seconds between checks while waiting for the supervisor to act


def running_here(ctx: Ctx, store: OpsStore) -> list[dict[str, Any]] | int:
    """The live supervisors on this host, or an exit code after a message saying why none."""
    found = [s for s in supervisors(store, ctx.clock.now()) if s["alive"]]
    local = [s for s in found if s["local"]]
    if local:
        return local
    if found:
        where = ", ".join(f"pid {s['pid']} on {s['host']}" for s in found)
        return ctx.fail(
            f"the supervisor of {store.location} runs on another host ({where}); "
            f"run this command there",
            ExitCode.NOT_RUNNING,
        )
    return ctx.fail(
        f"no supervisor is running on {store.location} (start one with: "
        f"jobq run --config {ctx.config_path})",
        ExitCode.NOT_RUNNING,
    )


def _signal_here(ctx: Ctx, sig: int) -> list[dict[str, Any]] | int:
    """Send ``sig`` to every live supervisor on this host: those supervisors, or an exit code."""
    with ctx.store() as store:
        found = running_here(ctx, store)
    if isinstance(found, int):
        return found
    for s in found:
        send_signal(s["pid"], sig)
    return found


def _wait_while(waiting: list[dict[str, Any]], still: Any, timeout: float) -> list[dict[str, Any]]:
    """Poll until ``still(s)`` is false for every supervisor or ``timeout`` passes; those left."""
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        waiting = [s for s in waiting if still(s)]
        if waiting:
            time.sleep(POLL)
    return waiting


def cmd_stop(ctx: Ctx, args: argparse.Namespace) -> int:
    """SIGTERM: graceful stop. Waits until the supervisor is gone unless ``--no-wait``."""
    found = _signal_here(ctx, signal.SIGTERM)
    if isinstance(found, int):
        return found
    if args.no_wait:
        ctx.emit(
            {"signalled": [s["pid"] for s in found]},
            "\n".join(f"asked supervisor pid {s['pid']} to stop (SIGTERM)" for s in found),
        )
        return ExitCode.OK
    sup = ctx.config.supervisor
    timeout = (
        args.timeout if args.timeout is not None else sup.shutdown_timeout + sup.kill_grace + 10
    )
    waiting = _wait_while(list(found), lambda s: token_alive(s["token"]), timeout)
    if waiting:
        return ctx.fail(
            f"supervisor pid {', '.join(str(s['pid']) for s in waiting)} still stopping after "
            f"{timeout:g} s (running jobs finish first; `jobq stop` again stops at once)",
            ExitCode.ERROR,
        )
    ctx.emit(
        {"stopped": [s["pid"] for s in found]},
        "\n".join(f"stopped supervisor pid {s['pid']}" for s in found),
    )
    return ExitCode.OK


def cmd_reload(ctx: Ctx, args: argparse.Namespace) -> int:
    """SIGHUP: the supervisor re-reads its config file (a rejected file is logged, not applied)
    and rolls its workers onto the handler modules' code if it changed on disk; ``--code``
    rolls them even if no file looks changed (a request file in the supervisor's folder)."""
    with ctx.store() as store:
        found = running_here(ctx, store)
    if isinstance(found, int):
        return found
    lines = []
    for s in found:
        asked = bool(getattr(args, "code", False)) and supervisorfolder.ask_code_reload(s["pid"])
        send_signal(s["pid"], signal.SIGHUP)
        lines.append(
            f"asked supervisor pid {s['pid']} to reload {ctx.config.path}"
            + (" and its workers' code" if asked else "")
            + " (SIGHUP); its log says what changed (config.reloaded, code.reloaded)"
        )
        if getattr(args, "code", False) and not asked:
            lines.append(f"  (no folder of pid {s['pid']} here: code changed on disk still rolls)")
    ctx.emit({"signalled": [s["pid"] for s in found]}, "\n".join(lines))
    return ExitCode.OK


def cmd_scale(ctx: Ctx, args: argparse.Namespace) -> int:
    """Ask each local supervisor to run ``N`` workers; returns once they took the request."""
    if not 0 <= args.workers <= 256:
        return ctx.fail(f"scale: N must be between 0 and 256, got {args.workers}", ExitCode.USAGE)
    interval = ctx.config.supervisor.maintenance_interval
    with ctx.store() as store:
        found = running_here(ctx, store)
        if isinstance(found, int):
            return found
        for s in found:
            ops.request_scale(store, s["token"], args.workers)
        waiting = _wait_while(
            list(found),
            lambda s: ops.pending_scale(store, s["token"]) is not None,
            max(5.0, 3 * interval + 2),
        )
        for s in waiting:
            ops.take_scale_request(
                store, s["token"]
            )  # withdraw it: never apply it by surprise later
    if waiting:
        return ctx.fail(
            f"supervisor pid {', '.join(str(s['pid']) for s in waiting)} did not take the scale "
            f"request; withdrawn (send SIGTTIN/SIGTTOU for one worker more/fewer)",
            ExitCode.ERROR,
        )
    ctx.emit(
        {"scaled": [s["pid"] for s in found], "workers": args.workers},
        "\n".join(
            f"supervisor pid {s['pid']}: scaling to {args.workers} workers (busy workers finish "
            f"their job first)"
            for s in found
        ),
    )
    return ExitCode.OK
