"""The engine's relay (``Engine.relay``: PostgreSQL's listening connection, one per host): the
database's news for this host's idle workers (this host's turns among the hosts) and controls
for this supervisor (``supervisor.controls``), as the supervisor's loop runs it: its descriptors
join the loop's wait, which also ends when a turn it owes falls due (``wait_for``); what they
bring is passed on after it. Made on the first wait
of a running supervisor (the database has been opened by then), at most once."""

from __future__ import annotations

from typing import Any

from shared import engines

from .controls import Controls


class Relay:
    """The loop's handle on the engine's relay (nothing, for an engine or a config without one),
    and on the controls it hears (:attr:`controls`)."""

    def __init__(self) -> None:
        self.relay: Any = None  # None: not made yet; False: there is none
        self.controls = Controls()

    def fds(self, config: Any, running: bool) -> list[int]:
        if self.relay is None and running:
            self.relay = engines.relay(config) or False
        return self.relay.fds() if self.relay else []

    def wait_for(self) -> float | None:
        """Seconds until the relay needs the loop again without a descriptor (None: never)."""
        return self.relay.wait_for() if self.relay else None

    def serve(self, ready: Any, folder: str) -> bool:
        """Pass on what came; whether a control came (the upkeep round is then due at once).
        ``folder``: the supervisor's, where its workers look for word of controls."""
        notified = bool(self.relay.serve(ready)) if self.relay else False
        self.controls.heard(bool(self.relay) and self.relay.live, notified, folder)
        return notified

    def close(self, folder: str = "") -> None:
        if self.relay:
            self.relay.close()
        self.controls.heard(False, False, folder)
