"""A worker forked by the template (``worker.forkserver``): how it leaves the template's ways
(its own process group, none of the template's pipes, the default signal handling, the worker's
name), waits at its batch's gate and for its re-parenting to the supervisor, and runs
``python -m worker``'s main on what the template prepared (``Prepared``). Everything here runs
in the forked worker, before its own start-up; the template and the go-between only create the
gate (a pipe) and close their ends of it.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import NoReturn

from shared.execution.handlers import Registry
from shared.model.exitcodes import ExitCode
from shared.runtime.processes import set_process_name

WORKER_NAME = "jobq-worker"  # what `ps -o comm` and psutil's name() show for a worker
REPARENT_WAIT = 2.0  # seconds a new worker waits for its go-between to exit
EARLY_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass(frozen=True)
class Prepared:
    """What the template made once for the workers it forks: the handler registry (its modules
    imported) and the worker's command-line parser."""

    registry: Registry
    command_line: argparse.ArgumentParser


def become_worker(
    req_fd: int,
    resp_fd: int,
    argv: list[str],
    prepared: Prepared,
    between: int,
    gate: tuple[tuple[int, int], bool],
) -> NoReturn:
    """The forked worker: leave the template's ways, wait at the batch's gate, then run
    ``python -m worker``'s main with ``argv`` on the template's registry and parser, and exit
    with its code."""
    code = ExitCode.WORKER_BOOT_FAILED
    try:
        _leave_template(req_fd, resp_fd)
        _pass_gate(*gate)
        sys.argv = [sys.executable, "-m", "worker", *argv]
        from .__main__ import main  # here: __main__ imports the fork server, and it this module

        code = main(
            argv,
            registry=prepared.registry,
            command_line=prepared.command_line,
            settle=lambda: _reparented(between),
        )
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else ExitCode.ERROR
    except BaseException:  # noqa: BLE001 - like an uncaught exception in `python -m worker`
        traceback.print_exc()
        code = ExitCode.ERROR
    finally:
        _flush_streams()
    os._exit(int(code))


def _leave_template(req_fd: int, resp_fd: int) -> None:
    """A process group of its own, none of the template's pipes, the default handling of
    signals the template ignores, and the worker's name."""
    os.setpgid(0, 0)
    os.close(req_fd)
    os.close(resp_fd)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A stop or reload sent before the worker's handlers are in place waits (blocked) for
    # them instead of killing it: the worker's SignalQueue.install unblocks them.
    signal.pthread_sigmask(signal.SIG_BLOCK, EARLY_SIGNALS)
    set_process_name(WORKER_NAME)


def _flush_streams() -> None:
    """Flush stdout and stderr before ``os._exit`` (which flushes nothing), ignoring errors."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


def _pass_gate(gate: tuple[int, int], waits: bool) -> None:
    """With ``waits``, wait (up to REPARENT_WAIT) until every worker of this one's batch is
    forked: the gate's write end is held by the template until it has forked the batch's last
    go-between, and by each go-between until it has forked its worker. The batch's first worker
    does not wait (the first job). Workers that all started at once took the CPU from the
    template and the go-betweens still to fork (2 cores): the eighth of a batch was forked
    160-230 ms after the first, and ran its first job 0.3-0.6 s after it."""
    read, write = gate
    os.close(write)
    if not waits:
        os.close(read)
        return
    try:
        select.select([read], [], [], REPARENT_WAIT)  # readable at EOF: all the batch forked
    finally:
        os.close(read)


def _reparented(between: int) -> None:
    """Wait (up to REPARENT_WAIT) until the go-between ``between`` has exited and this worker
    is the supervisor's child: the worker's orphan check compares its parent with the
    supervisor. Called by the worker once its database is open, just before its threads start
    (the first orphan check), so that the go-between's exit overlaps the worker's connecting
    instead of coming before it (2-17 ms of each worker's start, more on a loaded
    machine)."""
    deadline = time.monotonic() + REPARENT_WAIT
    while os.getppid() == between and time.monotonic() < deadline:
        time.sleep(0.0002)
