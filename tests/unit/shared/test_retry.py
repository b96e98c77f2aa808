"""shared.model.retry: exponential backoff with downward jitter, and when attempts run out."""

from __future__ import annotations

import random

from shared.model.retry import JITTER, RetryPolicy


class Fixed(random.Random):
    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def test_delay_doubles_from_the_base_without_jitter():
    p = RetryPolicy(backoff_base=1.0, backoff_max=1000.0)
    assert [p.delay(n, Fixed(0.0)) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]


def test_jitter_only_shortens_and_the_cap_stays_an_upper_bound():
    p = RetryPolicy(backoff_base=1.0, backoff_max=5.0)
    assert p.delay(10, Fixed(0.0)) == 5.0
    assert p.delay(10, Fixed(0.999999)) >= 5.0 * (1 - JITTER)
    assert all(p.delay(n) <= 5.0 for n in range(1, 20))


def test_a_huge_attempt_count_does_not_overflow():
    p = RetryPolicy(backoff_base=0.5, backoff_max=60.0)
    assert p.delay(10_000, Fixed(0.0)) == 60.0


def test_exhausted_uses_the_jobs_own_max_when_given():
    p = RetryPolicy(max_attempts=3)
    assert not p.exhausted(2) and p.exhausted(3) and p.exhausted(4)
    assert not p.exhausted(3, max_attempts=5)
    assert p.exhausted(1, max_attempts=1)
    assert p.exhausted(0, max_attempts=0)
