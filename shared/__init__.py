"""jobq's shared core: the store contract and its engines, config, job model and retry policy.

Imports neither ``supervisor`` nor ``worker``. The names below are imported on first use
(PEP 562): every ``shared`` import runs this file first, and the supervisor's and workers'
start-up must not pay for the producer API (``JobQueue`` pulls in asyncio and more).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api import JobQueue
    from .clock import FakeClock, SystemClock
    from .config import Config, ConfigError
    from .errors import StoreBusy, StoreError, StoreQueryError, StoreUnavailable
    from .exitcodes import ExitCode
    from .handlers import PermanentError, RetryAfter, handler
    from .job import Job

__all__ = ["JobQueue", "Job", "Config", "ConfigError", "ExitCode", "FakeClock", "SystemClock",
           "SqliteStore", "StoreError", "StoreBusy", "StoreUnavailable", "StoreQueryError",
           "PermanentError", "RetryAfter", "handler"]

_WHERE = {"JobQueue": "api", "FakeClock": "clock", "SystemClock": "clock", "Config": "config",
          "ConfigError": "config", "StoreBusy": "errors", "StoreError": "errors",
          "StoreUnavailable": "errors", "StoreQueryError": "errors", "ExitCode": "exitcodes",
          "PermanentError": "handlers",
          "RetryAfter": "handlers", "handler": "handlers", "Job": "job"}


def __getattr__(name: str) -> object:
    """The public names, from their modules on first use; ``shared.SqliteStore``: the SQLite
    engine's store class, through the engine factory."""
    if name == "SqliteStore":
        from .engines import store_class
        return store_class("sqlite")
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'shared' has no attribute {name!r}")
