"""The template process (fork server): import jobq and the handler modules once, then fork each
worker on request, so a worker starts in a few milliseconds and shares the template's pages
copy-on-write (the pattern of multiprocessing's forkserver and gunicorn's preloading).

The supervisor drives it over two pipes, one JSON object per line (supervisor.forkserver):

    template -> supervisor, once:  {"ready": <job types>, "pid": <template pid>}
                                   | {"failed": <traceback>}    a handler module failed to import
                                   | {"unsafe": <reason>}       it cannot fork safely (see below)
    supervisor -> template:        {"id": <n>, "argv": [<python -m worker arguments>]}
    template -> supervisor:        {"id": <n>, "pid": <worker pid>} | {"id": <n>, "error": <text>}
                                   | {"id": <n>, "unsafe": <reason>}

Requests may come in a batch; replies carry their request's id and may come in any order.

Nothing crosses a fork: the template never opens the database and starts no thread, and it
checks both before every fork (a handler module could do either at import); it answers
``unsafe`` instead of forking, and the supervisor then starts workers with exec.

Each worker is forked twice (template -> go-between -> worker) and the go-between exits at once:
the worker is re-parented to the supervisor, a child subreaper, which reaps it and reads its
exit code as if it had forked it, and signals it by pid with no risk of pid reuse (an unreaped
child keeps its pid). The template exits when the supervisor closes its pipe or dies. What the
worker does once forked, until it starts as any worker does, is ``worker.forked``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import threading
import traceback
from typing import Any, NoReturn

from shared.settings import config as config_mod
from shared.runtime import logs
from shared.engines import Target, preload, target
from shared.execution.asyncjobs import config_async
from shared.engines.forkaware import open_connections
from shared.model.errors import StoreUnavailable
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import HandlerImportError, Registry, load_registry
from shared.runtime.processes import host_id, set_parent_death_signal, set_process_name

from .forked import (  # noqa: F401 - WORKER_NAME, REPARENT_WAIT, EARLY_SIGNALS: named here too
    EARLY_SIGNALS,
    REPARENT_WAIT,
    WORKER_NAME,
    Prepared,
    become_worker,
)

NAME = "jobq-template"  # what `ps -o comm` and psutil's name() show for the template


def serve(
    req_fd: int,
    resp_fd: int,
    handlers: tuple[str, ...],
    database: str,
    parent: int,
    source: str | None = None,
    async_types: bool | None = None,
) -> NoReturn:
    """The template's whole life: import ``handlers`` (from ``source``'s folder too, the config
    file naming them), say ready (or why not), then fork a worker for each request until the
    request pipe closes. ``database`` is resolved once, by the engine registry; ``async_types``:
    see :func:`_preload_async_runner`. Never returns."""
    code = 0
    try:
        _become_template(parent)
        where = _target(database)
        prepared = _prepare(resp_fd, handlers, source, where, async_types)
        gc.freeze()  # keep the imported objects' pages shared: the collector would touch them
        _announce(resp_fd, prepared.registry, where)
        _loop(req_fd, resp_fd, prepared, where)
    except BrokenPipeError:
        pass  # the supervisor closed our pipe (it stopped, e.g. at a failed boot): nothing to say
    except BaseException:  # noqa: BLE001 - a template bug: say so on stderr, exit 1
        traceback.print_exc()
        code = ExitCode.ERROR
    os._exit(code)


def _become_template(parent: int) -> None:
    """Take the template's name, die with the supervisor ``parent`` (exit ORPHANED if it is
    gone already), and leave Ctrl-C and SIGHUP to it."""
    set_process_name(NAME)
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the supervisor died before the line above took effect
        os._exit(ExitCode.ORPHANED)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _prepare(
    resp_fd: int,
    handlers: tuple[str, ...],
    source: str | None,
    where: Target | str,
    async_types: bool | None,
) -> Prepared:
    """Import, once for all the workers, the handler modules, the engine's modules and the
    worker's own, and fill the caches a worker would fill. A handler module that fails to
    import is reported (``failed``) and the template exits BOOT_FAILED."""
    try:
        registry = load_registry(handlers, source)
        preload(where)  # the engine's modules and driver too (some take ~0.3 s to import)
        # and the worker loop and its command line: once, not per worker
        command_line = importlib.import_module("worker.__main__").parser()
        _preload_async_runner(registry, async_types)
        _warm_caches(command_line)
    except HandlerImportError as exc:
        try:
            _send(resp_fd, {"failed": exc.summary, "traceback": exc.traceback})
        except BrokenPipeError:
            pass
        os._exit(ExitCode.BOOT_FAILED)
    return Prepared(registry, command_line)


def _announce(resp_fd: int, registry: Registry, where: Target | str) -> None:
    """Say ready, or why forking would let something cross the fork (``unsafe``): then exit
    WORKER_BOOT_FAILED, and the supervisor starts workers with exec."""
    problem = unsafe_reason(where)
    _send(
        resp_fd,
        {"unsafe": problem} if problem else {"ready": len(registry), "pid": os.getpid()},
    )
    if problem:
        os._exit(ExitCode.WORKER_BOOT_FAILED)


def _preload_async_runner(registry: Registry, async_types: bool | None) -> bool:
    """Import the async runner (and asyncio, half the worker loop's imports) if the workers will
    run async types (``shared.execution.asyncjobs.async_limits_of``); whether it did.
    ``async_types``: the config gives some type an ``async_concurrency``; None (not known): any
    ``async def`` handler may have one."""
    specs = [registry.get(t) for t in registry.types()]
    needed = (
        any(s.is_async for s in specs)
        if async_types is None
        else (async_types or any(s.async_concurrency for s in specs))
    )
    if needed:
        importlib.import_module("worker.aio")
    return needed


def _warm_caches(command_line: argparse.ArgumentParser) -> None:
    """Fill the per-process caches every forked worker would otherwise fill on its own, each a
    few hundred microseconds to milliseconds of its start: finding the temporary
    folder writes and removes a probe file there (12 ms measured once); the host's identity
    reads /proc files as ASCII, whose codec is imported on first use; argparse compiles its
    patterns on the first parse, and the config's checks theirs on the first snapshot read."""
    tempfile.gettempdir()
    host_id()
    command_line.parse_args(
        [
            "--slot",
            "0",
            "--parent-pid",
            "0",
            "--supervisor",
            "-",
            "--snapshot",
            "-",
            "--progress",
            "-",
        ]
    )
    config_mod.from_dict(config_mod.Config().to_dict())


def serve_exec(fds: str, snapshot: str | None) -> int:
    """``python -m worker --fork-server RFD,WFD --snapshot S``: a template started by exec
    (after a reload or a template death: fresh handler code, nothing inherited)."""
    try:
        req_fd, resp_fd = (int(x) for x in fds.split(","))
        cfg = config_mod.load_snapshot(snapshot) if snapshot else None
    except (ValueError, config_mod.ConfigError) as exc:
        print(f"jobq template: bad --fork-server arguments: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if cfg is None:
        print("jobq template: --fork-server needs --snapshot", file=sys.stderr)
        return ExitCode.USAGE
    logs.setup(cfg.log_level, cfg.log_format)
    serve(
        req_fd,
        resp_fd,
        tuple(cfg.handlers),
        cfg.database,
        os.getppid(),
        cfg.path or None,
        config_async(cfg),
    )


def _target(database: str) -> Target | str:
    """``database`` resolved once; a value no engine takes stays as it is (the worker says so)."""
    try:
        return target(database)
    except StoreUnavailable:
        return database


def unsafe_reason(database: str | Target) -> str | None:
    """Why forking now would let something cross the fork (a thread, an open database file, a
    socket to the database server), or None. ``database``: a value or its resolved target."""
    if threading.active_count() > 1:
        names = ", ".join(
            t.name for t in threading.enumerate() if t is not threading.current_thread()
        )
        return (
            f"the template has threads running ({names}); a handler module started them at import"
        )
    found = open_connections(database)
    if found:
        return (
            f"the template has the database open ({found[0]}); a handler module opened it at import"
        )
    return None


def _loop(req_fd: int, resp_fd: int, prepared: Prepared, database: str | Target) -> None:
    """Serve requests until EOF. Go-betweens are reaped without waiting for them, so a batch of
    requests forks its workers back to back."""
    buf = b""
    betweens: dict[int, Any] = {}  # go-between pid -> request id, until reaped
    while True:
        ready, _, _ = select.select([req_fd], [], [], 0.005 if betweens else None)
        _reap(betweens, resp_fd)
        if not ready:
            continue
        chunk = os.read(req_fd, 65536)
        if not chunk:
            while betweens:  # the supervisor closed the pipe (or died): finish, then go
                _reap(betweens, resp_fd, block=True)
            return
        buf += chunk
        gate = os.pipe()  # the batch's first worker starts at once, the rest once all are forked
        waits = False  # (see worker.forked)
        try:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                request = json.loads(line)
                problem = unsafe_reason(database)
                if problem:
                    _send(resp_fd, {"id": request.get("id"), "unsafe": problem})
                else:
                    betweens[_fork_worker(req_fd, resp_fd, request, prepared, gate, waits)] = (
                        request.get("id")
                    )
                    waits = True
        finally:
            os.close(gate[0])
            os.close(gate[1])


def _fork_worker(
    req_fd: int, resp_fd: int, request: dict, prepared: Prepared, gate: tuple[int, int], waits: bool
) -> int:
    """Fork the go-between, which forks the worker, reports its pid and exits; returns the
    go-between's pid. ``gate``, ``waits``: the batch's pipe, whether the worker waits at it
    (see :func:`worker.forked._pass_gate`)."""
    between = os.fork()
    if between == 0:
        try:
            me = os.getpid()  # not getppid() in the child: we may have exited by then
            worker = os.fork()
            if worker == 0:
                become_worker(req_fd, resp_fd, request["argv"], prepared, me, (gate, waits))
            os.close(gate[1])  # the worker is forked: the gate waits for it no more
            try:
                os.setpgid(worker, worker)  # also in the worker: no kill of the group races it
            except OSError:
                pass
            _send(resp_fd, {"id": request.get("id"), "pid": worker})
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(ExitCode.ERROR)
    return between


def _reap(betweens: dict[int, Any], resp_fd: int, block: bool = False) -> None:
    """Reap exited go-betweens; one that failed gets its request an error reply."""
    while betweens:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            betweens.clear()
            return
        if pid == 0:
            return
        rid = betweens.pop(pid, None)
        if status != 0:
            _send(resp_fd, {"id": rid, "error": f"go-between {pid} {_describe(status)}"})
        if block:
            return


def _send(fd: int, message: dict) -> None:
    """One line, written at once (a pipe write up to PIPE_BUF is atomic; a traceback may be
    longer, but only the template writes then)."""
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with {os.WEXITSTATUS(status)}"
