"""The supervisor's store: opened when a step needs it, closed before every fork (nothing
crosses fork()) and after a failed round (the next one opens a fresh connection), and refused
for good once the engine's health check finds the database is no longer the one opened at
boot (reopening would use, or create, whatever the configured place holds now).
"""

from __future__ import annotations

from typing import Any

from shared.engines.contract import EngineStore
from shared.engines import health_check, open_store
from shared.engines.health import HealthCheck
from shared.model.errors import StoreError


class StoreRef:
    """``get`` the store (opened on demand), ``close`` it; ``replaced`` asks the health check."""

    def __init__(self) -> None:
        self.store: EngineStore | None = None
        self.health: HealthCheck | None = None  # made at boot, once the database is open
        self.problem: str | None = None  # why the database is refused (see replaced)

    def get(self, config: Any) -> EngineStore:
        """The open store on ``config.database``. Raises StoreError once the database was
        replaced, StoreUnavailable when it cannot be reached."""
        if self.problem is not None:
            raise StoreError(self.problem)
        if self.store is None:
            # Reopening (closed before a fork or after a failed round): never open, and so
            # create, whatever the place holds now; check_health() says so and stops.
            found = self.health.problem() if self.health is not None else None
            if found is not None:
                raise StoreError(found)
            self.store = open_store(config, upkeep=True)
        return self.store

    def watch(self, config: Any) -> None:
        """The database was just opened: from now on check it is still this one."""
        self.health = health_check(config)

    def replaced(self) -> str | None:
        """What the health check found, the first time it finds the database is no longer the
        one opened (the store is closed, and refused from then on); None otherwise."""
        if self.problem is not None or self.health is None:
            return None
        self.problem = self.health.problem()
        if self.problem is not None:
            self.close()
        return self.problem

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
