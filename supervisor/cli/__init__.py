"""The ops CLI (``jobq ...``, ``python -m jobq``, ``python -m supervisor ...``): one of the three
programs in ``supervisor/``, beside the supervisor process and the dashboard.

It reads and acts through the ops layer (:mod:`shared.ops`); it imports the supervisor process's
modules only inside ``run`` and the dashboard only inside ``web``, so ``jobq status`` loads
neither (``tests/unit/test_layering.py`` checks both).
"""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["build_parser", "main"]
