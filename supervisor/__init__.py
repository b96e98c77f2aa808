"""The jobq supervisor: forks and watches worker processes (``python -m supervisor``).

This package holds three programs: the supervisor process (the modules here), the
ops CLI (``supervisor/cli``) and the dashboard (``supervisor/web``). :class:`Supervisor` is
imported on first use, so that the CLI's commands (``jobq status``) do not load the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Supervisor

__all__ = ["Supervisor"]


def __getattr__(name: str) -> Any:
    """``supervisor.Supervisor``, imported when first asked for (PEP 562)."""
    if name == "Supervisor":
        from .api import Supervisor

        return Supervisor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
