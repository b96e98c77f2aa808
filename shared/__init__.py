"""jobq's shared core: the store contract and its engines, config, job model and retry policy.

Imports neither ``supervisor`` nor ``worker``.
"""
from .api import JobQueue
from .clock import FakeClock, SystemClock
from .config import Config, ConfigError
from .errors import StoreBusy, StoreError, StoreUnavailable
from .exitcodes import ExitCode
from .handlers import PermanentError, RetryAfter, handler
from .job import Job

__all__ = ["JobQueue", "Job", "Config", "ConfigError", "ExitCode", "FakeClock", "SystemClock",
           "SqliteStore", "StoreError", "StoreBusy", "StoreUnavailable", "PermanentError", "RetryAfter",
           "handler"]


def __getattr__(name: str) -> object:
    """``shared.SqliteStore``: the SQLite engine's store class, through the engine factory."""
    if name == "SqliteStore":
        from .engines import store_class
        return store_class("sqlite")
    raise AttributeError(f"module 'shared' has no attribute {name!r}")
