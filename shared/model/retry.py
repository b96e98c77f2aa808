"""Retry policy: exponential backoff with jitter, and the decision retry-or-fail."""

from __future__ import annotations

import random
from dataclasses import dataclass

JITTER = 0.25  # a delay is drawn from [d * (1 - JITTER), d]: the cap stays an upper bound


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    jitter: float = JITTER  # the fraction a delay may be drawn down by

    def delay(self, attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt (1-based).

        ``min(backoff_base * 2**attempts, backoff_max)``, then jittered down by up to
        ``jitter`` (25% by default) so that jobs failing together do not retry together.
        """
        raw = min(self.backoff_base * (2 ** min(attempts, 62)), self.backoff_max)
        r = (rng or random).random()
        return raw * (1.0 - self.jitter * r)

    def exhausted(self, attempts: int, max_attempts: int | None = None) -> bool:
        return attempts >= (max_attempts if max_attempts is not None else self.max_attempts)
