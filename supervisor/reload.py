"""Reloading ``jobq.toml`` in a running supervisor (SIGHUP, or the file changed on disk).

``reread`` reads and checks the file and says what the supervisor runs with next; ``apply`` (the
arbiter's reload) applies it (policy, logging, the workers' snapshot, a new template for new
handler modules, a SIGHUP to each worker). An invalid file, or handler modules that fail to import, are logged and
the running values kept. ``database`` never changes without a restart. ``ConfigWatch`` notices
edits of the file by its modification time and size.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.settings import config as config_mod
from shared.settings.config import Config, ConfigError
from shared.execution.handlers import HandlerImportError, Registry, load_registry
from shared.execution.policy import JobPolicy
from shared.runtime import logs
from shared.runtime.logs import event, get_logger

from .pools import describe as describe_pools, with_queues

if TYPE_CHECKING:
    from .arbiter import Arbiter

log = get_logger("supervisor")


@dataclass
class Reloaded:
    """The outcome of a re-read: the config to run (workers resolved), the file as read, the
    ``--workers``/scaling override still in force, a new handler registry (None: the modules
    did not change) and the keys that changed."""

    config: Config
    file_config: Config
    override: int | None
    registry: Registry | None
    changed: list[str]


def apply(arb: "Arbiter", why: str) -> None:
    """Re-read the file (:func:`reread`) and apply what it says: the config, the handlers' policy,
    logging, the workers' snapshot, a new template for new handler modules (workers roll onto it
    once it is ready: ``Arbiter.respawn``); then a SIGHUP to each worker."""
    arb.watch.seen()
    new = reread(arb.config, arb.file_config, arb.override, why)
    if new is None:
        return
    arb.config, arb.file_config, arb.override = (
        with_queues(new.config, arb.queues),
        new.file_config,
        new.override,
    )
    arb.registry = new.registry or arb.registry
    arb.policy = JobPolicy(arb.config, arb.registry)
    logs.setup(arb.config.log_level, arb.config.log_format)
    config_mod.write_snapshot(arb.config, arb.snapshot)
    if new.registry is not None:
        arb.spawner.renew()  # a new template; workers roll onto it once it is ready (respawn)
    arb.slots.signal_live(signal.SIGHUP)
    event(
        log,
        "config.reloaded",
        reason=why,
        changed=",".join(new.changed) or "nothing",
        workers=arb.target,
        pools=describe_pools(arb.config),
    )


def reread(running: Config, file_config: Config, override: int | None, why: str) -> Reloaded | None:
    """Read ``running.path`` again. None (logged ``config.rejected``) if the file is invalid.
    ``file_config``: the file as last read; ``override``: the worker count set by ``--workers``
    or scaling, kept while the file does not change ``workers`` itself."""
    new = read(running.path, why)
    if new is None:
        return None
    if new.database != running.database:
        event(log, "config.ignored", logging.WARNING, key="database", note="needs a restart")
        new = new.replace(database=running.database)
    new, registry = new_handlers(new, running, why)
    workers = new.supervisor.workers
    if override is not None and workers == file_config.supervisor.workers:
        workers = override  # the file did not touch workers: keep --workers / scaling
    else:
        override = None
    config = new.with_workers(workers)
    return Reloaded(config, new, override, registry, diff(running.to_dict(), config.to_dict()))


def read(path: str | None, why: str) -> Config | None:
    """The file at ``path``, or None (logged ``config.rejected``) if it is invalid."""
    try:
        return config_mod.load(path)
    except ConfigError as exc:
        event(
            log,
            "config.rejected",
            logging.ERROR,
            reason=why,
            error=str(exc),
            note="keeping the running config",
        )
        return None


def new_handlers(new: Config, running: Config, why: str) -> tuple[Config, Registry | None]:
    """The registry of ``new``'s handler modules when they differ from the running ones (None:
    the same modules). Modules that fail to import are logged (``config.rejected``) and the
    running ones kept: ``new`` comes back with them."""
    if new.handlers == running.handlers:
        return new, None
    try:
        return new, load_registry(new.handlers, new.path)
    except HandlerImportError as exc:
        event(
            log,
            "config.rejected",
            logging.ERROR,
            reason=why,
            key="handlers",
            error=exc.summary,
            note="keeping the running handler modules",
            traceback=exc.traceback,
        )
        return new.replace(handlers=running.handlers), None


class ConfigWatch:
    """Has the config file changed since it was last read? Polled every ``config_poll_interval``
    seconds (0: never) by :meth:`due`."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.stat = file_stat(path)
        self.next_check = 0.0

    def seen(self) -> None:
        """The file is being read now: changes are measured from here."""
        self.stat = file_stat(self.path)

    def changed(self) -> bool:
        return file_stat(self.path) != self.stat

    def due(self, now: float, interval: float) -> bool:
        """Time (monotonic ``now``) to look at the file, and it changed."""
        if interval <= 0 or now < self.next_check:
            return False
        self.next_check = now + interval
        return self.changed()


def file_stat(path: str | None) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return None
    return st.st_mtime_ns, st.st_size


def diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested dicts, sorted."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}")
    return out
