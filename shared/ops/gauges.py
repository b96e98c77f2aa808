"""The engine's own gauges (``OpsStore.stats()``), as ``status``, ``top``, the metrics and the
dashboard show them: each engine names and labels its own (``OpsStore.gauges``), so nothing
outside the engine knows what they measure.
"""

from __future__ import annotations

from typing import Any

from shared.engines.contract import OpsStore


def read(store: OpsStore) -> list[dict[str, Any]]:
    """``[{key, label, help, unit, value}]``: the engine's gauges that have a value now, in the
    engine's order (a gauge whose value is None is left out: nothing is shown for it)."""
    values = store.stats()
    return [
        {"key": g.key, "label": g.label, "help": g.help, "unit": g.unit, "value": values[g.key]}
        for g in store.gauges
        if values.get(g.key) is not None
    ]
