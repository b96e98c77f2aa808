"""The old module paths of ``shared``, kept working: ``import shared.api`` is
``shared.producer.api``, ``from shared.config import load`` is ``shared.settings.config.load``.

The modules of ``shared`` live in rooms (``producer``, ``execution``, ``model``, ``settings``,
``runtime``, ``telemetry``, ``engines``, ``ops``; docs/internals.md draws the map). :data:`MOVED`
maps each old dotted name to its module now, and :class:`Finder` (put first on ``sys.meta_path``
by ``shared/__init__.py``) answers an old name with the new module itself: the very same object,
registered under both names, so a monkeypatch through either name patches the one module.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import Sequence

MOVED = {
    "shared.api": "shared.producer.api",
    "shared.tasks": "shared.producer.tasks",
    "shared.taskargs": "shared.producer.taskargs",
    "shared.handles": "shared.producer.handles",
    "shared.waithub": "shared.producer.waithub",
    "shared.canvas": "shared.producer.canvas",
    "shared.inline": "shared.producer.inline",
    "shared.typecheck": "shared.producer.typecheck",
    "shared.cancels": "shared.producer.cancels",
    "shared.handlers": "shared.execution.handlers",
    "shared.runner": "shared.execution.runner",
    "shared.outcomes": "shared.execution.outcomes",
    "shared.stopping": "shared.execution.stopping",
    "shared.policy": "shared.execution.policy",
    "shared.asyncjobs": "shared.execution.asyncjobs",
    "shared.progress": "shared.execution.progress",
    "shared.builtin_jobs": "shared.execution.builtin_jobs",
    "shared.job": "shared.model.job",
    "shared.errors": "shared.model.errors",
    "shared.exitcodes": "shared.model.exitcodes",
    "shared.bounds": "shared.model.bounds",
    "shared.retry": "shared.model.retry",
    "shared.limits": "shared.model.limits",
    "shared.keys": "shared.model.keys",
    "shared.flows": "shared.model.flows",
    "shared.queues": "shared.model.queues",
    "shared.queuenames": "shared.model.queuenames",
    "shared.unserved": "shared.model.unserved",
    "shared.config": "shared.settings.config",
    "shared.configschema": "shared.settings.schema",
    "shared.durations": "shared.settings.durations",
    "shared.cron": "shared.settings.cron",
    "shared.schedule": "shared.settings.schedule",
    "shared.retention": "shared.settings.retention",
    "shared.clock": "shared.runtime.clock",
    "shared.procs": "shared.runtime.processes",
    "shared.signals": "shared.runtime.signals",
    "shared.files": "shared.runtime.files",
    "shared.fencing": "shared.runtime.fencing",
    "shared.logs": "shared.runtime.logs",
    "shared.tracing": "shared.telemetry.tracing",
    "shared.otelspans": "shared.telemetry.spans",
    "shared.otelmeters": "shared.telemetry.meters",
    "shared.contract": "shared.engines.contract",
    "shared.transfer": "shared.engines.transfer",
    "shared.database": "shared.engines.location",
    "shared.upkeeptasks": "shared.engines.upkeep",
    "shared.ops.viewstats": "shared.ops.stats",
}


# The finder and its loader are the import system's protocols without the ``importlib.abc``
# base classes: that module imports ``importlib.resources`` (and it ``tempfile``, ``zipfile``,
# ...), ~5 ms of every process's start, which every ``shared`` import would pay through here.


class _Alias:
    """Loads an old name as the module it moved to (imported, and run, under its own name)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran once, under its new name."""


class Finder:
    """Finds only the old names of :data:`MOVED`; every other import goes on to the next finder."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias())


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once per interpreter."""
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
