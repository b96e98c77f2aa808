"""shared.execution.policy: a job's settings, its own > its handler's > its type's > global."""

from __future__ import annotations

import random
from types import SimpleNamespace

from shared.execution.handlers import HandlerSpec, Registry
from shared.execution.policy import JobPolicy
from shared.settings.config import from_dict


def fn(payload, job):
    return None


def policy(types=None, specs=(), rng=None):
    config = from_dict(
        {
            "retry": {"max_attempts": 4, "backoff_base": 2, "backoff_max": 100},
            "worker": {"job_timeout": 30},
            "types": types or {},
        }
    )
    return JobPolicy(config, Registry(specs), rng)


def job(jtype="t", max_attempts=None):
    return SimpleNamespace(type=jtype, max_attempts=max_attempts)


def test_max_attempts_precedence():
    p = policy({"t": {"max_attempts": 6}}, [HandlerSpec("h", fn, max_attempts=9)])
    assert p.max_attempts(job("t", max_attempts=2)) == 2
    assert p.max_attempts(job("h")) == 9
    assert p.max_attempts(job("t")) == 6
    assert p.max_attempts(job("other")) == 4


def test_timeout_precedence():
    p = policy({"t": {"timeout": 5}}, [HandlerSpec("h", fn, timeout=1.5), HandlerSpec("t", fn)])
    assert p.timeout("h") == 1.5
    assert p.timeout("t") == 5
    assert p.timeout("other") == 30


def test_async_concurrency_from_the_handler_then_the_type():
    p = policy({"t": {"async_concurrency": 3}}, [HandlerSpec("h", fn, async_concurrency=7)])
    assert p.async_concurrency("h") == 7
    assert p.async_concurrency("t") == 3
    assert p.async_concurrency("other") is None


class NoJitter(random.Random):
    def random(self) -> float:
        return 0.0


def test_backoff_uses_the_types_base_and_cap_over_retrys():
    p = policy(
        {"t": {"backoff_base": 10, "backoff_max": 15}, "b": {"backoff_base": 1}}, rng=NoJitter()
    )
    assert p.backoff(1) == 4.0  # [retry]: 2 * 2**1
    assert p.backoff(3, "t") == 15.0  # type's cap
    assert p.backoff(1, "t") == 15.0  # 10 * 2 = 20, capped at 15
    assert p.backoff(2, "b") == 4.0  # type's base, [retry]'s cap
    assert p.backoff(9, "b") == 100.0
    assert p.backoff(1, "other") == 4.0
