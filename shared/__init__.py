"""jobq's shared core: the store (all SQL), schema, config, job model and retry policy.

Imports neither ``supervisor`` nor ``worker``.
"""
from .api import JobQueue
from .clock import FakeClock, SystemClock
from .config import Config, ConfigError
from .exitcodes import ExitCode
from .handlers import PermanentError, RetryAfter, handler
from .job import Job
from .store import SqliteStore, StoreError

__all__ = ["JobQueue", "Job", "Config", "ConfigError", "ExitCode", "FakeClock", "SystemClock",
           "SqliteStore", "StoreError", "PermanentError", "RetryAfter", "handler"]
