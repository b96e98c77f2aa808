"""The heartbeat thread's give-back after a claim whose answer may have been lost
(``Heartbeat.beat_soon``), against a store that records its calls."""

from __future__ import annotations

import os
from contextlib import contextmanager

from shared.runtime.clock import SystemClock
from shared.settings.config import Config
from tests.proc import wait_until
from worker.heartbeat import Heartbeat


class Beats:
    """A worker store that records each heartbeat's ``holding`` (None: renew all)."""

    def __init__(self) -> None:
        self.holding: list[list[str] | None] = []

    def heartbeat(self, owner, now, holding=None) -> int:
        self.holding.append(None if holding is None else list(holding))
        return 0

    def close(self) -> None:
        pass


def test_a_beat_while_a_claim_is_in_flight_does_not_end_the_look_for_strangers():
    """The cause of a rare failure of test_two_hosts' lost-claim case: after the lost claim the
    worker claims again at once; the beat beat_soon asked for ran while that claim was in
    flight, so it renewed every running job (the stranger too) and gave nothing back, and the
    look ended there. The idle worker's next beat came 15 s later: the stranger's lease (10 s)
    expired and it ran as attempt 2. Now the beats go on, every tick, until one gives back."""
    store, flights = Beats(), iter([True])  # the first beat finds a claim in flight, then none

    @contextmanager
    def held():
        yield None if next(flights, False) else ["held-1"]

    beat = Heartbeat(
        Config(),
        "owner-1",
        SystemClock(),
        os.getpid(),
        lambda: None,
        store=lambda: store,
        held=held,
    )
    beat.start()
    try:
        beat.beat_soon()
        wait_until(lambda: len(store.holding) >= 2, timeout=5, what="a second beat that gives back")
        assert store.holding[:2] == [None, ["held-1"]]
    finally:
        beat.stop()
    assert not beat.is_alive()
