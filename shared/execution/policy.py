"""Per-job settings resolved from the handler declaration and the config.

Order of precedence: the job's own value (set at enqueue) > the handler decorator >
``[types."<job type>"]`` > the global config (``[retry]``, ``[worker] job_timeout``); except
the back-off (:meth:`JobPolicy.backoff`), where a task's options in code are its defaults and
``[types."<job type>"]`` overrides them.
"""

from __future__ import annotations

import random
from typing import Any

from shared.settings.config import Config
from shared.execution.handlers import Registry
from shared.model.job import Job
from shared.model.retry import RetryPolicy
from shared.model.retryrules import rule_of_payload


class JobPolicy:
    def __init__(
        self, config: Config, registry: Registry, rng: random.Random | None = None
    ) -> None:
        self.config = config
        self.registry = registry
        self.retry = RetryPolicy(
            config.retry.max_attempts,
            config.retry.backoff_base,
            config.retry.backoff_max,
            config.retry.jitter,
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

    def backoff(self, attempts: int, job_type: str | None = None, payload: Any = None) -> float:
        """Delay after the ``attempts``-th failure. Each of its base, cap and jitter is the
        job's own (a task's job: its ``payload``'s rule, from ``.using()``), else ``[types."<job_type>"]``
        backoff_base/backoff_max/jitter, else the task's in code (``@task(backoff=...,
        max_delay=..., jitter=...)``), else ``[retry]``'s: the config file overrides a
        task's defaults, so an operator tunes a type without a deploy."""
        if job_type is None:
            return self.retry.delay(attempts, self._rng)
        typed = self.config.for_type(job_type)
        spec = self.registry.get(job_type)
        code = spec.retry if spec is not None else None
        task = spec is not None and spec.params is not None  # a handler's payload is the user's
        rule = rule_of_payload(payload) if task else None
        base = _first(rule, "backoff", typed, "backoff_base", code, self.retry.backoff_base)
        cap = _first(rule, "max_delay", typed, "backoff_max", code, self.retry.backoff_max)
        jitter = _first(rule, "jitter", typed, "jitter", code, self.retry.jitter)
        return RetryPolicy(self.retry.max_attempts, base, cap, jitter).delay(attempts, self._rng)


def _first(rule: Any, name: str, typed: Any, key: str, code: Any, default: float) -> float:
    """The first of the job's rule, the type's config, the task's rule and ``default`` that
    says something about ``name`` (``key`` in the config)."""
    for value in (
        getattr(rule, name, None),
        getattr(typed, key, None),
        getattr(code, name, None),
    ):
        if value is not None:
            return float(value)
    return default
