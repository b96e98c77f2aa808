"""jobq's shared core: the store contract and its engines, config, job model and retry policy.

Imports neither ``supervisor`` nor ``worker``. The names below are imported on first use
(PEP 562): every ``shared`` import runs this file first, and the supervisor's and workers'
start-up must not pay for the producer API (``JobQueue`` pulls in asyncio and more).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._moved import install

install()  # the old module paths (shared.api, shared.config, ...): see shared/_moved.py

if TYPE_CHECKING:
    from shared.producer.api import JobQueue
    from shared.runtime.clock import FakeClock, SystemClock
    from shared.settings.config import Config, ConfigError
    from shared.model.errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
    from shared.model.exitcodes import ExitCode
    from shared.execution.handlers import PermanentError, RetryAfter, handler
    from shared.model.job import Job

__all__ = [
    "JobQueue",
    "Job",
    "Config",
    "ConfigError",
    "ExitCode",
    "FakeClock",
    "SystemClock",
    "SqliteStore",
    "StoreError",
    "StoreBusy",
    "StoreUnavailable",
    "StoreQueryError",
    "PermanentError",
    "RetryAfter",
    "handler",
]

_WHERE = {
    "JobQueue": "producer.api",
    "FakeClock": "runtime.clock",
    "SystemClock": "runtime.clock",
    "Config": "settings.config",
    "ConfigError": "settings.config",
    "StoreBusy": "model.errors",
    "StoreError": "model.errors",
    "StoreUnavailable": "model.errors",
    "StoreQueryError": "model.errors",
    "ExitCode": "model.exitcodes",
    "PermanentError": "execution.handlers",
    "RetryAfter": "execution.handlers",
    "handler": "execution.handlers",
    "Job": "model.job",
}


def __getattr__(name: str) -> object:
    """The public names, from their modules on first use; ``shared.SqliteStore``: the SQLite
    engine's store class, through the engine factory."""
    if name == "SqliteStore":
        from shared.engines import store_class

        return store_class("sqlite")
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'shared' has no attribute {name!r}")
