"""Per-job settings resolved from the handler declaration and the config.

Order of precedence: the job's own value (set at enqueue) > the handler decorator >
``[types."<job type>"]`` > the global config (``[retry]``, ``[worker] job_timeout``).
"""

from __future__ import annotations

import random

from shared.settings.config import Config
from shared.execution.handlers import Registry
from shared.model.job import Job
from shared.model.retry import RetryPolicy


class JobPolicy:
    def __init__(
        self, config: Config, registry: Registry, rng: random.Random | None = None
    ) -> None:
        self.config = config
        self.registry = registry
        self.retry = RetryPolicy(
            config.retry.max_attempts, config.retry.backoff_base, config.retry.backoff_max
        )
        self._rng = rng

    def max_attempts(self, job: Job) -> int:
        if job.max_attempts is not None:
            return job.max_attempts
        spec = self.registry.get(job.type)
        if spec is not None and spec.max_attempts is not None:
            return spec.max_attempts
        typed = self.config.for_type(job.type).max_attempts
        return typed if typed is not None else self.config.retry.max_attempts

    def timeout(self, job_type: str) -> float:
        spec = self.registry.get(job_type)
        if spec is not None and spec.timeout is not None:
            return spec.timeout
        typed = self.config.for_type(job_type).timeout
        return typed if typed is not None else self.config.worker.job_timeout

    def async_concurrency(self, job_type: str) -> int | None:
        """How many jobs of ``job_type`` one worker runs at once on its event loop (None: one
        at a time); see :mod:`shared.execution.asyncjobs` (which also checks the handler is
        async)."""
        spec = self.registry.get(job_type)
        if spec is not None and spec.async_concurrency is not None:
            return spec.async_concurrency
        return self.config.for_type(job_type).async_concurrency

    def backoff(self, attempts: int, job_type: str | None = None) -> float:
        """Delay after the ``attempts``-th failure; ``[types."<job_type>"]`` backoff_base and
        backoff_max override ``[retry]``'s."""
        if job_type is None:
            return self.retry.delay(attempts, self._rng)
        typed = self.config.for_type(job_type)
        base = typed.backoff_base if typed.backoff_base is not None else self.retry.backoff_base
        cap = typed.backoff_max if typed.backoff_max is not None else self.retry.backoff_max
        return RetryPolicy(self.retry.max_attempts, base, cap).delay(attempts, self._rng)
