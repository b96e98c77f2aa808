"""Parsing of command-line values for argparse.

Durations (``--delay 1h30m``, ``--older-than 7d``) use the same grammar as ``jobq.toml``
(:mod:`shared.settings.durations`). A parser's ``ValueError`` message names the value; the argparse
``type=`` hook turns it into a usage error (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable


def arg_type(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser for argparse ``type=``: its ValueError message becomes the usage error."""

    def wrapped(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = fn.__name__
    return wrapped
