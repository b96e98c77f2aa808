"""``python -m worker --config jobq.toml``: run one worker process on its own.

The supervisor starts workers the same way, adding ``--slot`` and ``--parent-pid`` (so the
worker exits when the supervisor dies): forked from its template process (``--fork-server``,
see worker.forkserver), which calls :func:`main` with the handler registry it imported once,
or as a fresh ``python -m worker`` where there is no template.

Either way the process ends with ``os._exit`` once the worker has committed its last outcomes and
the logs are flushed (here, or in ``worker.forkserver``): a thread a handler started and never
ended (not a daemon) would otherwise keep the interpreter waiting for it for good, and a recycled
or retired worker would never be replaced. So ``atexit`` hooks of handler modules do
not run in a worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable

from shared.settings import config as config_mod
from shared.runtime import logs
from shared.settings.config import ConfigError
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import HandlerImportError, Registry, load_registry

from .loop import Worker


def parser() -> argparse.ArgumentParser:
    """The worker's command line. The template builds it once, before it forks workers: building
    one compiles argparse's patterns and looks its messages up in gettext's catalogues, a fifth
    of a forked worker's own start-up CPU."""
    p = argparse.ArgumentParser(prog="python -m worker", description="Run one jobq worker.")
    p.add_argument("--config", help="config file (default: $JOBQ_CONFIG, else ./jobq.toml)")
    p.add_argument("--slot", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--supervisor", default=None, help=argparse.SUPPRESS)
    p.add_argument("--snapshot", default=None, help=argparse.SUPPRESS)
    p.add_argument("--progress", default=None, help=argparse.SUPPRESS)
    p.add_argument("--fork-server", default=None, metavar="RFD,WFD", help=argparse.SUPPRESS)
    return p


def main(
    argv: list[str] | None = None,
    registry: Registry | None = None,
    command_line: argparse.ArgumentParser | None = None,
    settle: Callable[[], None] | None = None,
) -> int:
    """Run a worker; returns its exit code. ``registry``: the handlers already imported (by the
    template this worker was forked from); None imports the config's handler modules.
    ``command_line``: the template's :func:`parser` (None: a new one). ``settle``: called once
    the database is open, before the worker's threads start (see :class:`worker.loop.Worker`)."""
    args = (command_line or parser()).parse_args(argv)
    if args.fork_server:
        from .forkserver import serve_exec

        return serve_exec(args.fork_server, args.snapshot)
    try:
        if args.snapshot:
            cfg = config_mod.load_snapshot(args.snapshot)
        else:
            cfg = config_mod.load(config_mod.resolve_path(args.config))
    except ConfigError as exc:
        print(f"jobq worker: invalid config: {exc}", file=sys.stderr)
        return ExitCode.CONFIG_INVALID
    logs.setup(cfg.log_level, cfg.log_format)
    if registry is None:
        try:
            registry = load_registry(cfg.handlers, cfg.path)
        except HandlerImportError as exc:
            print(f"jobq worker: {exc}", file=sys.stderr)
            return ExitCode.WORKER_BOOT_FAILED
    return Worker(
        cfg,
        registry,
        slot=args.slot,
        parent_pid=args.parent_pid,
        supervisor=args.supervisor,
        snapshot=args.snapshot,
        progress=args.progress,
        settle=settle,
    ).run()


def exit_now(code: int) -> None:
    """Flush the logs and standard streams, then end the process whatever threads remain."""
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as exc:  # argparse: --help, bad arguments
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = ExitCode.ERROR
    exit_now(int(status))
