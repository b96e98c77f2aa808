"""The database failing a running supervisor, and what the arbiter does about it.

    out of reach   a server restarting or failing over, a dropped connection, a lock held
                   (:func:`unavailable`): the round is skipped, never a crash, and the next try
                   comes after a back-off (``supervisor.database_unavailable``, ``retry_in``);
                   the workers keep their connections and leases
    replaced       the engine's health check (``supervisor.storeref``) finds the database is no
                   longer the one opened at boot, e.g. an SQLite file deleted or replaced
                   (:func:`check_health`): said loudly once, then the supervisor stops (workers
                   finish the job in hand) and exits DATABASE_UNAVAILABLE

The boot (``supervisor.boot``) waits out the first with the same back-off.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shared.engines import location as database_mod
from shared.model.errors import StoreError
from shared.model.exitcodes import ExitCode
from shared.runtime.logs import event, get_logger

if TYPE_CHECKING:
    from .arbiter import Arbiter

log = get_logger("supervisor")

DB_BACKOFF_MAX = 5.0  # seconds: the longest wait between tries to reach an unavailable database


def unavailable(arb: "Arbiter", now_m: float, exc: StoreError) -> None:
    """The server is restarting or out of reach: skip this round, never crash on it (the workers
    keep their connections and leases). A try to connect may block for connect_timeout: back
    off (up to DB_BACKOFF_MAX) to keep reaping in between."""
    arb.db_backoff = min(
        max(2 * arb.db_backoff, arb.config.supervisor.maintenance_interval), DB_BACKOFF_MAX
    )
    arb.next_maintain = now_m + arb.db_backoff
    event(
        log,
        "supervisor.database_unavailable",
        logging.WARNING,
        error=str(exc),
        retry_in=round(arb.db_backoff, 2),
    )


def check_health(arb: "Arbiter") -> bool:
    """The database is no longer the one opened at boot (SQLite: its file was deleted or
    replaced): say so loudly and stop (workers finish the job in hand), exiting
    DATABASE_UNAVAILABLE. True once that is under way."""
    problem = arb.dbref.replaced()  # (from now on db() refuses)
    if problem is not None:
        event(
            log,
            "supervisor.database_replaced",
            logging.CRITICAL,
            database=database_mod.redacted(arb.config.database),
            error=problem,
        )
        arb.exit_code = ExitCode.DATABASE_UNAVAILABLE
        if arb.running():
            arb.begin_stop("database replaced")
    return arb.dbref.problem is not None
