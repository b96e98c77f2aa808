"""Parsing of command-line values: durations (``30s``, ``7d``, ``1h30m``) and JSON arguments.

Each parser raises ``ValueError`` with a message naming the option and the value, which the
argparse ``type=`` hook turns into a usage error (exit 2).
"""
from __future__ import annotations

import argparse
import json
import re
from typing import Any, Callable

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
DURATION_HELP = "a duration: 30s, 5m, 1h30m, 7d, 2w (a bare number is seconds)"


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``"90"``, ``"30s"``, ``"1h30m"``, ``"7d"``. Raises ValueError."""
    s = text.strip().lower()
    try:
        value = float(s)
    except ValueError:
        pos, value = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            value += float(m.group(1)) * UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(f"{text!r} is not {DURATION_HELP}") from None
    if value != value or value < 0 or value == float("inf"):
        raise ValueError(f"{text!r} is not {DURATION_HELP}")
    return value


def parse_json(text: str, what: str) -> Any:
    """Decode a JSON argument; the error names ``what`` and where the JSON breaks."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc}): {text!r}") from None


def arg_type(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser for argparse ``type=``: its ValueError message becomes the usage error."""
    def wrapped(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    wrapped.__name__ = fn.__name__
    return wrapped
