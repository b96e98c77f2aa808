"""Per-job settings resolved from the handler declaration and the config.

Order of precedence: the job's own value (set at enqueue) > the handler decorator > the config.
"""
from __future__ import annotations

import random

from .config import Config
from .handlers import Registry
from .job import Job
from .retry import RetryPolicy


class JobPolicy:
    def __init__(self, config: Config, registry: Registry, rng: random.Random | None = None) -> None:
        self.config = config
        self.registry = registry
        self.retry = RetryPolicy(config.retry.max_attempts, config.retry.backoff_base, config.retry.backoff_max)
        self._rng = rng

    def max_attempts(self, job: Job) -> int:
        if job.max_attempts is not None:
            return job.max_attempts
        spec = self.registry.get(job.type)
        if spec is not None and spec.max_attempts is not None:
            return spec.max_attempts
        return self.config.retry.max_attempts

    def timeout(self, job_type: str) -> float:
        spec = self.registry.get(job_type)
        if spec is not None and spec.timeout is not None:
            return spec.timeout
        return self.config.worker.job_timeout

    def backoff(self, attempts: int) -> float:
        return self.retry.delay(attempts, self._rng)
