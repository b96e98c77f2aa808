"""Built-in job types: registered in every registry by ``shared.execution.handlers.load_registry``,
with no module to list in ``handlers``. A handler module may define the same type to replace one.

- ``cleanup:old-data`` ``{"retentionDays": N}`` (optional): deletes finished jobs older than the
  ``[retention]`` settings (``retentionDays`` overrides ``completed_after``), in batches. The
  shipped ``jobq.toml`` schedules it daily.
"""

from __future__ import annotations

from typing import Any

from shared.settings import retention
from shared.runtime.clock import SystemClock
from shared.execution.handlers import ATTR, HandlerSpec, PermanentError, handler
from shared.engines import open_store

CLEANUP = "cleanup:old-data"


@handler(CLEANUP, timeout=3600)
def cleanup_old_data(payload: Any, job: Any) -> dict[str, Any]:
    """Delete old finished jobs. Needs ``job.config`` (the worker's current config) for the
    database and the ``[retention]`` settings."""
    config = getattr(job, "config", None)
    if config is None:
        raise PermanentError(f"{CLEANUP} needs the worker's config on its job context (job.config)")
    days = retention_days(payload)
    cuts = retention.cutoffs(config.retention, SystemClock().now(), days)
    with open_store(config, migrate=False) as store:
        deleted = retention.purge(store, cuts)
    job.logger.info("deleted %s", ", ".join(f"{n} {s}" for s, n in deleted.items()))
    return {"deleted": deleted}


def retention_days(payload: Any) -> float | None:
    """``payload["retentionDays"]``: a number >= 0, or None when absent."""
    if payload is None:
        return None
    if not isinstance(payload, dict):
        raise PermanentError(
            f'{CLEANUP} payload must be an object like {{"retentionDays": 30}}, got {payload!r}'
        )
    days = payload.get("retentionDays")
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not 0 <= days < float("inf"):
        raise PermanentError(f"{CLEANUP} retentionDays must be a number >= 0, got {days!r}")
    return float(days)


def specs() -> list[HandlerSpec]:
    """The built-in handlers."""
    return [getattr(cleanup_old_data, ATTR)]
