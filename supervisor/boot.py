"""The supervisor's boot: fork the template, import the handler modules, reach the database,
start the workers, run the first recovery (``Arbiter.boot`` calls :func:`boot`).

    template    forked first (:func:`begin`), with logging set up and the signal handlers
                installed
    handlers    imported (a failure: BOOT_FAILED; async limits that do not fit: CONFIG_INVALID)
    database    opened (schema checked) and the supervisor registered; a failure that may heal
                by waiting (a server restarting or failing over, a dropped connection, a lock
                held) is logged and tried again with the running loop's back-off
                (``supervisor.database_unavailable``, ``retry_in``) until it succeeds or a
                SIGTERM or SIGINT ends the boot (exit 0); one that cannot
                (:class:`shared.errors.StoreRefused`: a malformed URL, refused authentication,
                a database that does not exist, a schema newer than this code, a missing folder
                or a file that is not a database) ends it: DATABASE_UNAVAILABLE, said once
    workers     started (waiting up to BOOT_WAIT for a starting template)
    recovery    dead owners' jobs re-queued; if the database fails here, the loop's first
                round does it after the back-off (the workers are running: never a reason to
                stop them)

The other signals that come while the database is out of reach are acted on once the workers
have started, in the order they came.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
from typing import TYPE_CHECKING

from shared.settings import config as config_mod
from shared.engines import location as database_mod
from shared.execution.asyncjobs import AsyncConfigError, async_limits, config_async
from shared.model.errors import StoreError, StoreRefused, StoreUnavailable
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import HandlerImportError, load_registry
from shared.runtime import logs
from shared.runtime.logs import event, get_logger
from shared.execution.policy import JobPolicy
from shared.runtime.processes import owner_token

from . import statedir
from .dispatch import dispatch
from .upkeep import Upkeep

if TYPE_CHECKING:
    from .arbiter import Arbiter

log = get_logger("supervisor")

BOOT_WAIT = 0.25  # seconds the boot waits for a starting template (see start_workers)
STOPS = (signal.SIGTERM, signal.SIGINT)


def boot(arb: "Arbiter") -> int:
    """Returns an exit code (OK to go on, unless ``arb.snapshot_dir`` is still empty: stopped
    while the database was out of reach, nothing started). On a failure, or that stop,
    everything begun is undone."""
    begin(arb)
    code = load(arb)
    if code != ExitCode.OK or not arb.snapshot_dir:
        arb.close_db()
        arb.signals.close()
        arb.spawner.stop()
        if arb.snapshot_dir:  # (a failure after the workers started)
            shutil.rmtree(arb.snapshot_dir, ignore_errors=True)
    if code == ExitCode.OK and not arb.snapshot_dir:
        event(log, "supervisor.stopped", code=ExitCode.describe(code), note="before it booted")
    return code


def begin(arb: "Arbiter") -> None:
    """Logging; the template, forked before the database is opened and before any thread starts
    (unless the spawner's was forked already: ``supervisor.launch``); the signal handlers, from
    the start: a SIGTERM during the boot stops it cleanly right after."""
    logs.setup(arb.config.log_level, arb.config.log_format)
    if not arb.spawner.begun:
        arb.spawner.begin(
            tuple(arb.config.handlers),
            arb.config.database,
            arb.config.path,
            async_types=config_async(arb.config),
        )
    arb.signals.install()


def load(arb: "Arbiter") -> int:
    """Handlers, database, workers, first recovery (see the module's docstring)."""
    code = import_handlers(arb)
    if code != ExitCode.OK:
        return code
    arb.policy = JobPolicy(arb.config, arb.registry)
    arb.token = owner_token(os.getpid(), arb.host)
    arb.upkeep = Upkeep(arb.upkeep_tasks(), arb.duties.election.lead)
    deferred: list[int] = []
    try:
        if not reach(arb, deferred):
            return ExitCode.OK
        start_workers(arb)
    except (StoreError, OSError) as exc:
        event(log, "supervisor.boot_failed", logging.CRITICAL, error=str(exc))
        if arb.live():  # (starting them failed halfway)
            arb.begin_halt("boot failed")
            arb.reap_blocking()
        return ExitCode.DATABASE_UNAVAILABLE
    first_recovery(arb)
    started(arb)
    dispatch(deferred, arb)
    return ExitCode.OK


def import_handlers(arb: "Arbiter") -> int:
    """The handler modules' registry, checked against the async limits: OK, BOOT_FAILED (a
    module failed to import) or CONFIG_INVALID (async_concurrency for no async handler)."""
    try:
        arb.registry = load_registry(arb.config.handlers, arb.config.path)
        arb.code.seen()  # the application's files as imported (a reload compares: codewatch)
        async_limits(arb.config, arb.registry)  # async_concurrency only for async handlers
    except HandlerImportError as exc:
        event(
            log,
            "supervisor.boot_failed",
            logging.CRITICAL,
            error=exc.summary,
            traceback=exc.traceback,
        )
        return ExitCode.BOOT_FAILED
    except AsyncConfigError as exc:
        event(log, "supervisor.boot_failed", logging.CRITICAL, error=str(exc))
        return ExitCode.CONFIG_INVALID
    return ExitCode.OK


def started(arb: "Arbiter") -> None:
    """The boot is done: ``supervisor.started``, with what it runs."""
    event(
        log,
        "supervisor.started",
        pid=os.getpid(),
        workers=arb.target,
        config=arb.config.path,
        database=database_mod.redacted(arb.config.database),
        types=len(arb.registry),
    )


def reach(arb: "Arbiter", deferred: list[int]) -> bool:
    """Open the database (schema checked) and register, trying again after each failure that
    may heal by waiting (StoreUnavailable). False: a stop signal came first (the state is then
    STOPPING). The other signals received meanwhile are added to ``deferred``. Raises
    StoreRefused, or any other StoreError (the database replaced between two tries)."""
    while True:
        try:
            store = arb.db()
            arb.dbref.watch(arb.config)
            store.register_process(arb.token, "supervisor", os.getpid(), arb.host, arb.clock.now())
            arb.db_backoff = 0.0
            return True
        except StoreRefused:
            raise
        except StoreUnavailable as exc:  # (any other StoreError ends the boot too)
            arb.close_db()  # the next try opens a fresh connection
            arb.unavailable(arb.clock.monotonic(), exc)
        if not wait_for_retry(arb, deferred):
            arb.begin_stop("signal during boot")
            return False


def wait_for_retry(arb: "Arbiter", deferred: list[int]) -> bool:
    """Sleep until ``arb.next_maintain`` (the back-off's end); False if SIGTERM or SIGINT came."""
    while True:
        left = arb.next_maintain - arb.clock.monotonic()
        if left <= 0:
            return True
        arb.signals.wait(left)
        got = arb.signals.drain()
        if any(s in STOPS for s in got):
            return False
        deferred.extend(s for s in got if s != signal.SIGCHLD)


def start_workers(arb: "Arbiter") -> None:
    """The state folder, the workers' snapshot, the workers (the first ones do not wait for the
    recovery: claims are guarded)."""
    for path in statedir.remove_leftovers():
        event(log, "supervisor.leftover_removed", path=path, note="its supervisor is gone")
    arb.snapshot_dir = statedir.create()
    config_mod.write_snapshot(arb.config, arb.snapshot)
    arb.spawner.after_boot(arb.snapshot)
    arb.slots.fill(arb.target)
    arb.respawn(ready=False, wait=BOOT_WAIT)


def first_recovery(arb: "Arbiter") -> None:
    """Expired leases and dead owners' jobs, at once. The first full upkeep round comes an
    interval later (at once, it took ~200 ms of CPU, ours and PostgreSQL's, from the first
    workers). A database failure here is the loop's to retry."""
    try:
        rnd = arb.round()
        arb.upkeep.elect(rnd)  # the upkeep lead, taken at once where free (or lapsed)
        for name in ("timeouts", "recovery", "foreign_recovery", "prune_here", "processes"):
            arb.upkeep.run_now(name, rnd)
        arb.upkeep.run_now("prune_processes", rnd)
    except StoreError as exc:
        arb.close_db()
        arb.unavailable(arb.clock.monotonic(), exc)
        return
    arb.next_maintain = rnd.monotonic + arb.config.supervisor.maintenance_interval
