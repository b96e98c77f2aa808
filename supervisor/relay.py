"""The engine's relay of the database's news to this host's idle workers (``Engine.relay``:
PostgreSQL: one listening connection per host, which takes this host's turns among the hosts),
as the supervisor's loop runs it: its descriptors join the loop's wait, which also ends when a
turn it owes falls due (``wait_for``); what they bring is passed on after it. Made on the first wait
of a running supervisor (the database has been opened by then), at most once."""

from __future__ import annotations

from typing import Any

from shared import engines


class Relay:
    """The loop's handle on the engine's relay (nothing, for an engine or a config without one)."""

    def __init__(self) -> None:
        self.relay: Any = None  # None: not made yet; False: there is none

    def fds(self, config: Any, running: bool) -> list[int]:
        if self.relay is None and running:
            self.relay = engines.relay(config) or False
        return self.relay.fds() if self.relay else []

    def wait_for(self) -> float | None:
        """Seconds until the relay needs the loop again without a descriptor (None: never)."""
        return self.relay.wait_for() if self.relay else None

    def serve(self, ready: Any) -> None:
        if self.relay:
            self.relay.serve(ready)

    def close(self) -> None:
        if self.relay:
            self.relay.close()
