"""The task suites' shared fixtures' bodies (tests/behaviour/test_tasks*.py): queues on the
engine under test serving a fixture module's tasks, and no default queue left from another test.
"""

from __future__ import annotations

from typing import Any, Iterator

import shared.producer.tasks
from jobq import JobQueue
from shared.settings.config import Config, RetryConfig

NO_BACKOFF = Config(retry=RetryConfig(backoff_base=0, backoff_max=0))


def queue_maker(engine: Any, handlers: str) -> Iterator[Any]:
    """Yields ``make(immediate=False, config=NO_BACKOFF)``: a JobQueue on ``engine`` serving
    the module ``handlers``; every queue it made is closed after."""
    made: list[JobQueue] = []

    def make(immediate: bool = False, config: Config = NO_BACKOFF) -> JobQueue:
        q = JobQueue(config=engine.config(config), handlers=[handlers], immediate=immediate)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


def forget_default_queue(monkeypatch: Any) -> None:
    """Start without a configured or opened default queue."""
    monkeypatch.setattr(shared.producer.tasks, "_configured", None)
    monkeypatch.setattr(shared.producer.tasks, "_opened", shared.producer.tasks._Default())
